// The composition root's public surface (what src/app.ts exported before the split): importers need not
// know which step module holds what.
export { startApp, type AppOptions, type RunningApp } from './start-app.js';
export { resolveAdminToken } from './admin-token.js';
export { startDatabase } from './stores.js';
export { MAX_BODY_BYTES } from '../adapters/http/types.js';
