// node:http adapter: wraps a request listener; the listener runs only for authorized requests and finds
// the verified claims on `req.agent`. A plain listener routes however it likes, so the scope check works
// on the canonical path (canonical-path.ts) and the listener gets that same canonical target in `req.url`
// (the target as received stays in `req.originalUrl`): what it routes on is exactly what was checked.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AgentClaims, Verifier } from '../verifier.js';
import type { Refusal } from '../challenge.js';
import { mcpAuthInfo, type McpAuthInfo } from '../auth-info.js';

/** `auth`: the caller as the MCP SDK's AuthInfo, which its Node transport reads from `req.auth`. */
export type AgentIncomingMessage = IncomingMessage & { agent?: AgentClaims; auth?: McpAuthInfo; originalUrl?: string };
export type AuthorizedListener = (req: AgentIncomingMessage & { agent: AgentClaims }, res: ServerResponse) => unknown;

/** Writes a refusal (status, WWW-Authenticate, JSON body) on a node:http response. */
export function writeRefusal(res: ServerResponse, refusal: Refusal): void {
  res.writeHead(refusal.status, {
    ...refusal.headers,
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(refusal.body),
  });
  res.end(refusal.body);
}

export function protectNodeHandler(verifier: Verifier, listener: AuthorizedListener) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const received = req.url ?? '/';
    verifier
      .authorize({ method: req.method ?? 'GET', target: { kind: 'path', path: received }, authorization: req.headers.authorization })
      .then((result) => {
        if (!result.ok) return writeRefusal(res, result);
        const request = req as AgentIncomingMessage & { agent: AgentClaims };
        request.agent = result.claims;
        request.auth = mcpAuthInfo(result.claims);
        if (result.canonicalTarget !== undefined && result.canonicalTarget !== received) {
          request.originalUrl = received;
          request.url = result.canonicalTarget;
        }
        return listener(request, res);
      })
      .catch(() => {
        // Never leak internals; the listener's own errors are its own concern, this only covers ours.
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ detail: 'Internal error.', error_code: 'internal_error' }));
        } else res.destroy();
      });
  };
}
