// ajv-formats for an Ajv instance, in one place for this package and the service (which imports it as
// `@agent-credential-exchange/middleware/ajv-formats`). ajv-formats is CommonJS with `exports.default`;
// under NodeNext the plugin function sits on `.default`.
import type { Ajv } from 'ajv';
import * as ajvFormats from 'ajv-formats';

export const addFormats = ajvFormats.default as unknown as (ajv: Ajv, formats: string[]) => Ajv;
