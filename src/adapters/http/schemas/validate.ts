// Ajv compiled once at start: one validator per schema, no compilation on the request path.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import * as ajvFormats from 'ajv-formats';
import type { TSchema, Static } from '@sinclair/typebox';
import { ServiceError } from '../../../core/errors.js';
import { PRINTABLE_NAME } from './admin.js';
import { UNSAFE_NAME_CHARACTERS_TEXT } from '../../../support/unsafe-text.js';

// ajv-formats is CommonJS with `exports.default`: under NodeNext the plugin function sits on `.default`.
const addFormats = ajvFormats.default as unknown as (ajv: Ajv, formats: string[]) => Ajv;
const ajv = new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, strict: true, allowUnionTypes: true });
addFormats(ajv, ['uuid', 'date-time']);

export type Validator<T> = (value: unknown) => T;

/** Compiles `schema` now; the returned function validates (filling defaults) or throws 422 naming the field. */
export function compileValidator<S extends TSchema>(schema: S): Validator<Static<S>> {
  const validate: ValidateFunction = ajv.compile(schema);
  return (value: unknown) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ServiceError('validation_error', 'Request body must be a JSON object.');
    }
    if (!validate(value)) throw new ServiceError('validation_error', describe(validate.errors?.[0]));
    return value as Static<S>;
  };
}

function fieldName(instancePath: string): string {
  // "/scopes/0" -> "scopes[0]"
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
}

function describe(error: ErrorObject | undefined): string {
  if (!error) return 'Request validation failed.';
  const base = fieldName(error.instancePath);
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return `${base ? `${base}.` : ''}${missing} is required.`;
  }
  if (error.keyword === 'additionalProperties') {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return `${base ? `${base}.` : ''}${extra} is not an accepted field.`;
  }
  const field = base || 'body';
  if (error.keyword === 'format' && (error.params as { format: string }).format === 'uuid') return `${field} must be a UUID.`;
  if (error.keyword === 'pattern' && (error.params as { pattern: string }).pattern === PRINTABLE_NAME) {
    return `${field} must not contain ${UNSAFE_NAME_CHARACTERS_TEXT}.`;
  }
  if (error.keyword === 'pattern' && field === 'api_key_id') {
    return 'api_key_id must be the 9-character key prefix followed by 32 lowercase hexadecimal characters.';
  }
  return `${field} ${error.message ?? 'is invalid'}.`;
}
