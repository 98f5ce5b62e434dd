// `@agent-credential-exchange/middleware/express`: the Express adapters (also on the main entry).
// Importing the package brings the declaration merging below, so `req.agent` is typed in handlers.
export { expressAgentAuth, expressRouteGuard } from './adapters/express.js';
export type { ExpressLikeRequest, ExpressLikeResponse, ExpressLikeNext, ExpressRouteGuardOptions } from './adapters/express.js';
