// Writes docs/openapi.json (public listener) and docs/openapi-internal.json (internal port) from the route
// declarations (run after `npm run build`):   npm run docs:openapi
// test/e2e/openapi-file.test.ts fails when either file is not the current rendering.
import { writeFileSync } from 'node:fs';
import { SETTINGS } from '../dist/src/config/settings.js';
import {
  documentText,
  internalApiDocument,
  internalRouteDeclarations,
  publicApiDocument,
  publicRouteDeclarations,
} from '../dist/src/adapters/http/openapi/api-documents.js';

// The file documents the default API_KEY_PREFIX; a deployment's /openapi.json carries its own.
const prefix = SETTINGS.find((s) => s.env === 'API_KEY_PREFIX').default;
const files = {
  'docs/openapi.json': publicApiDocument({ routes: publicRouteDeclarations(prefix) }),
  'docs/openapi-internal.json': internalApiDocument({ routes: internalRouteDeclarations() }),
};
for (const [file, document] of Object.entries(files)) {
  writeFileSync(new URL(`../${file}`, import.meta.url), documentText(document));
  console.log(`${file}: written`);
}
