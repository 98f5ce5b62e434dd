// The scope file's validator: the SvcScopesYaml schema (scopes-file.ts) compiled ahead of time into plain
// JavaScript (scripts/generate-validators.mjs), so that no runtime needs Ajv or evaluates generated code.
// One validator for the service (every file it serves) and the middleware (every file it reads).
import { validate as generatedValidate } from './generated/validate-scopes-file.js';

interface ValidationProblem {
  instancePath: string;
  message?: string;
}
const validateScopesFile = generatedValidate as unknown as ((data: unknown) => boolean) & { errors?: ValidationProblem[] | null };

/** Every way the document departs from the SvcScopesYaml schema (`/routes/0/method must be equal to one of ...`), none when it follows it. */
export function scopeFileProblems(document: unknown): string[] {
  if (validateScopesFile(document)) return [];
  return (validateScopesFile.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
}
