// Body rules shared by every JSON endpoint: media type (415), then syntax (400). Size (413) is enforced
// while reading, in the server.
import { ServiceError } from '../../core/errors.js';
import type { HttpRequest } from './types.js';

const JSON_MEDIA_TYPE = /^application\/json\s*(;.*)?$/i;

export function parseJsonBody(request: HttpRequest): unknown {
  if (!JSON_MEDIA_TYPE.test(request.headers.contentType.trim())) throw new ServiceError('unsupported_media_type');
  try {
    return JSON.parse((request.body ?? Buffer.alloc(0)).toString('utf8'));
  } catch {
    throw new ServiceError('invalid_json');
  }
}
