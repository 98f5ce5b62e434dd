// Calls to the credential exchange service (contract v1, endpoints 1 and 2). The secret lives only in
// this closure: it is put into request bodies and nowhere else (no field, no log, no error message).
import { AgentClientError } from './errors.js';
import { parseRetryAfter, retryDelayMs, sleep, type BackoffPolicy } from './backoff.js';

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
  apiKeyId: string;
  secret: string;
  fetch: typeof fetch;
  /** Retries after 429, 503 or a network failure. */
  maxRetries: number;
  backoff: BackoffPolicy;
  timeoutMs: number;
}

export function createServiceApi(options: ServiceApiOptions): ServiceApi {
  // Copy what is needed; the options object (which holds the secret) is not retained.
  const { apiKeyId, secret, maxRetries, backoff, timeoutMs } = options;
  const fetchImpl = options.fetch;
  const base = options.serviceUrl.replace(/\/+$/, '');

  async function post(path: string, extra: Record<string, unknown>, what: string): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await fetchImpl(`${base}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ api_key_id: apiKeyId, secret, ...extra }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        if (attempt < maxRetries) {
          await sleep(retryDelayMs(attempt, undefined, backoff)!);
          continue;
        }
        throw new AgentClientError(`${what}: the service could not be reached (${(error as Error).name})`, undefined, undefined, undefined, {
          cause: error,
        });
      }
      if (response.ok) return response.json();

      const { detail, code } = await readError(response);
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
      if ((response.status === 429 || response.status === 503) && attempt < maxRetries) {
        const delay = retryDelayMs(attempt, retryAfterMs, backoff);
        if (delay !== undefined) {
          await sleep(delay);
          continue;
        }
      }
      throw new AgentClientError(
        `${what}: HTTP ${response.status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`,
        response.status,
        code,
        retryAfterMs === undefined ? undefined : Math.ceil(retryAfterMs / 1000),
      );
    }
  }

  return {
    async listPlatforms() {
      const body = (await post('/api/v1/auth/agents/me/platforms', {}, 'listing the platforms')) as PlatformListing;
      if (!body || !Array.isArray(body.platforms)) throw new AgentClientError('listing the platforms: unexpected response shape');
      return body;
    },
    async requestToken(platformId, scopes) {
      const what = `token for platform ${platformId}`;
      const body = (await post('/api/v1/auth/token', { platform_id: platformId, ...(scopes?.length ? { scopes } : {}) }, what)) as {
        access_token?: unknown;
        expires_in?: unknown;
      };
      if (typeof body?.access_token !== 'string' || typeof body.expires_in !== 'number' || body.expires_in <= 0) {
        throw new AgentClientError(`${what}: unexpected response shape`);
      }
      return { accessToken: body.access_token, expiresInSeconds: body.expires_in };
    },
  };
}

async function readError(response: Response): Promise<{ detail?: string; code?: string }> {
  try {
    const body = (await response.json()) as { detail?: unknown; error_code?: unknown };
    return {
      detail: typeof body?.detail === 'string' ? body.detail : undefined,
      code: typeof body?.error_code === 'string' ? body.error_code : undefined,
    };
  } catch {
    return {};
  }
}
