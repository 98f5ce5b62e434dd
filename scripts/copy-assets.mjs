// Copies non-TypeScript assets (SQL migrations) next to the compiled JavaScript.
import { cpSync } from 'node:fs';
cpSync('src/adapters/postgres/migrations', 'dist/src/adapters/postgres/migrations', { recursive: true });
// The CLI is a bin: make it directly executable.
import { chmodSync } from 'node:fs';
chmodSync('dist/src/cli/main.js', 0o755);
