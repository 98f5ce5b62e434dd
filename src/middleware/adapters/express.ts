// Express adapter: `app.use(expressAgentAuth(verifier))`. Sets `req.agent` for authorized requests.
// Structural types only, so the package does not need express (or its types) at run time.
import type { AgentClaims, Verifier } from '../verifier.js';

export interface ExpressLikeRequest {
  method: string;
  /** Express keeps the full path here even inside a mounted router. */
  originalUrl?: string;
  url: string;
  headers: { authorization?: string | string[] | undefined };
  agent?: AgentClaims;
}

export interface ExpressLikeResponse {
  status(code: number): ExpressLikeResponse;
  set(headers: Record<string, string>): ExpressLikeResponse;
  send(body: string): unknown;
}

export type ExpressLikeNext = (error?: unknown) => void;

export function expressAgentAuth(verifier: Verifier) {
  return (req: ExpressLikeRequest, res: ExpressLikeResponse, next: ExpressLikeNext): void => {
    verifier
      .authorize({ method: req.method, path: req.originalUrl ?? req.url, authorization: req.headers.authorization })
      .then((result) => {
        if (!result.ok) {
          res
            .status(result.status)
            .set({ ...result.headers, 'content-type': 'application/json', 'cache-control': 'no-store' })
            .send(result.body);
          return;
        }
        req.agent = result.claims;
        next();
      }, next);
  };
}
