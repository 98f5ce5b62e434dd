// Copies non-TypeScript assets (SQL migrations) next to the compiled JavaScript.
import { cpSync } from 'node:fs';
cpSync('src/storage/postgres/migrations', 'dist/src/storage/postgres/migrations', { recursive: true });
