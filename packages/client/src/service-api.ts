// Calls to the credential exchange service (contract v1, endpoints 1 and 2; for agents without secrets the
// OAuth token endpoint with a client assertion, RFC 7523). The secret lives only in this closure: it is put
// into request bodies and nowhere else (no field, no log, no error message).
import { AgentClientError, ERR_BAD_RESPONSE, RetriesExhaustedError } from './errors.js';
import { parseRetryAfter, RetrySchedule, sleep, type RetryPolicy } from './backoff.js';
import type { AssertionSource } from './client-assertion.js';

/** How the agent proves who it is: its secret, or client assertions (private_key_jwt, a workload token). */
export type ClientCredential = { secret: string } | { assertions: AssertionSource };

const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** One platform of the agent's listing (contract v1, endpoint 1). */
export interface PlatformEntry {
  platform_id: string;
  granted_scopes: string[];
  status: 'active' | 'suspended' | 'disabled';
  /** Best-effort enrichment. */
  name?: string;
  /** Verified domain, else null. Best-effort. */
  hostname: string | null;
  verification_status?: 'pending' | 'verified' | 'failed';
}

/** The agent's platform listing (contract v1, endpoint 1). */
export interface PlatformListing {
  agent_id: string;
  platforms: PlatformEntry[];
}

export interface IssuedToken {
  accessToken: string;
  expiresInSeconds: number;
}

export interface ServiceApi {
  listPlatforms(): Promise<PlatformListing>;
  requestToken(platformId: string, scopes?: string[]): Promise<IssuedToken>;
}

export interface ServiceApiOptions {
  serviceUrl: string;
  /** May be '' for a workload token (the service finds the agent by the token's binding). */
  apiKeyId: string;
  credential: ClientCredential;
  fetch: typeof fetch;
  /** Retries after 429, 502, 503, 504 or a network failure: bounded in time, optionally in number. */
  retry: RetryPolicy;
  timeoutMs: number;
}

/**
 * Answers worth another attempt: the service (or the ingress in front of it) is restarting or shedding
 * load. 502 and 504 are what an ingress answers while no instance is ready; 503 is the service's own
 * "busy, come back after Retry-After"; 429 is the per-key limit (with its Retry-After). Any other 5xx is a
 * fault that the same request would meet again, and a 4xx is about the request itself.
 */
const RETRYABLE = new Set([429, 502, 503, 504]);

export function createServiceApi(options: ServiceApiOptions): ServiceApi {
  // Copy what is needed; the options object (which holds the secret) is not retained.
  const { apiKeyId, credential, retry, timeoutMs } = options;
  const fetchImpl = options.fetch;
  const base = options.serviceUrl.replace(/\/+$/, '');
  const tokenEndpoint = `${base}/oauth2/token`;

  /** A JSON body of the contract's endpoints (with the secret). */
  const contractBody = (extra: Record<string, unknown>) => async () => ({
    type: 'application/json',
    text: JSON.stringify({ api_key_id: apiKeyId, secret: 'secret' in credential ? credential.secret : undefined, ...extra }),
  });

  /** The RFC 6749 form with a fresh client assertion (each attempt: an assertion's jti is used once). */
  const assertionForm = (assertions: AssertionSource, platformId: string, scopes: string[] | undefined) => async () => ({
    type: 'application/x-www-form-urlencoded',
    text: new URLSearchParams({
      grant_type: 'client_credentials',
      client_assertion_type: JWT_BEARER,
      client_assertion: await assertions(tokenEndpoint),
      ...(apiKeyId ? { client_id: apiKeyId } : {}),
      audience: platformId,
      ...(scopes?.length ? { scope: scopes.join(' ') } : {}),
    }).toString(),
  });

  async function post(path: string, body: () => Promise<{ type: string; text: string }>, what: string): Promise<unknown> {
    const schedule = new RetrySchedule(retry);
    for (;;) {
      let failure: { status?: number; code?: string; detail?: string; retryAfterMs?: number; cause?: unknown; summary: string };
      let type: string;
      let text: string;
      try {
        ({ type, text } = await body());
      } catch (error) {
        // The agent's own side (a key that cannot sign, a workload token file missing): not worth a retry.
        throw new AgentClientError(`${what}: the client assertion could not be made (${(error as Error).message})`, undefined, undefined, undefined, { cause: error });
      }
      try {
        const response = await fetchImpl(`${base}${path}`, {
          method: 'POST',
          headers: { 'content-type': type, accept: 'application/json' },
          body: text,
          signal: AbortSignal.timeout(timeoutMs),
        });
        if (response.ok) {
          try {
            return await response.json();
          } catch (error) {
            throw new AgentClientError(`${what}: HTTP ${response.status} with a body that is not JSON`, response.status, undefined, undefined, { cause: error });
          }
        }
        const { detail, code } = await readError(response);
        const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
        failure = { status: response.status, code, detail, retryAfterMs, summary: `HTTP ${response.status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}` };
        if (!RETRYABLE.has(response.status)) throw toError(what, failure);
      } catch (error) {
        if (error instanceof AgentClientError) throw error;
        // No answer (refused, reset, timed out): the service may be restarting.
        failure = { cause: error, summary: `the service could not be reached (${(error as Error).name})` };
      }
      const plan = schedule.next(failure.retryAfterMs);
      if ('giveUp' in plan) {
        const attempts = schedule.retries + 1;
        const elapsedMs = Date.now() - schedule.startedAt;
        const why = {
          maxWaitMs: `wait budget of ${retry.maxWaitMs} ms ${failure.retryAfterMs !== undefined ? 'shorter than its Retry-After' : 'spent'}`,
          maxRetries: `maxRetries ${retry.maxRetries} reached`,
          maxRetryDelaySeconds: `Retry-After longer than ${retry.maxDelayMs / 1000} s`,
        }[plan.giveUp];
        throw new RetriesExhaustedError(
          `${what}: ${failure.summary} (gave up after ${attempts} attempt${attempts === 1 ? '' : 's'} in ${Math.round(elapsedMs / 1000)} s: ${why})`,
          failure.status,
          failure.code,
          failure.retryAfterMs === undefined ? undefined : Math.ceil(failure.retryAfterMs / 1000),
          plan.giveUp,
          attempts,
          elapsedMs,
          failure.cause === undefined ? undefined : { cause: failure.cause },
        );
      }
      await sleep(plan.wait);
    }
  }

  return {
    async listPlatforms() {
      if (!('secret' in credential)) throw new AgentClientError('listing the platforms needs the secret (contract v1): agents without secrets name their platforms with the platforms option');
      const body = (await post('/api/v1/auth/agents/me/platforms', contractBody({}), 'listing the platforms')) as PlatformListing;
      if (!body || !Array.isArray(body.platforms)) throw new AgentClientError('listing the platforms: unexpected response shape', undefined, ERR_BAD_RESPONSE);
      return body;
    },
    async requestToken(platformId, scopes) {
      const what = `token for platform ${platformId}`;
      const body = (
        'secret' in credential
          ? await post('/api/v1/auth/token', contractBody({ platform_id: platformId, ...(scopes?.length ? { scopes } : {}) }), what)
          : await post('/oauth2/token', assertionForm(credential.assertions, platformId, scopes), what)
      ) as {
        access_token?: unknown;
        expires_in?: unknown;
      };
      if (typeof body?.access_token !== 'string' || typeof body.expires_in !== 'number' || body.expires_in <= 0) {
        throw new AgentClientError(`${what}: unexpected response shape`, undefined, ERR_BAD_RESPONSE);
      }
      return { accessToken: body.access_token, expiresInSeconds: body.expires_in };
    },
  };
}

function toError(what: string, failure: { status?: number; code?: string; retryAfterMs?: number; summary: string }): AgentClientError {
  const retryAfterSeconds = failure.retryAfterMs === undefined ? undefined : Math.ceil(failure.retryAfterMs / 1000);
  return new AgentClientError(`${what}: ${failure.summary}`, failure.status, failure.code, retryAfterSeconds);
}

/** detail and error_code of the contract's Error shape, when the body is one (an ingress's 502 page is not). */
async function readError(response: Response): Promise<{ detail?: string; code?: string }> {
  try {
    const body = (await response.json()) as { detail?: unknown; error_code?: unknown };
    return {
      detail: typeof body?.detail === 'string' ? body.detail : undefined,
      code: typeof body?.error_code === 'string' ? body.error_code : undefined,
    };
  } catch {
    // Not JSON (an ingress's HTML page, an empty body): the status alone describes the failure.
    return {};
  }
}
