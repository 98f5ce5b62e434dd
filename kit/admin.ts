// The admin API client of the tests and the bench (seeding, key and secret rotation).

/** Where a service's admin API is and the bearer token it wants. */
export interface AdminTarget {
  adminUrl: string;
  adminToken: string;
  /** How requests are sent (default: the global fetch; tests in process pass app.fetch). */
  fetch?: typeof fetch;
}

export interface Created<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface AgentCredentials {
  agent_id: string;
  name: string;
  status: string;
  api_key_id: string;
  secret: string;
}

export interface PlatformRecord {
  platform_id: string;
  name: string;
  domain: string | null;
  status: string;
  verification_status: string;
  scopes: { name: string; description: string }[];
  routes: { method: string; path: string; scopes: string[] }[];
  resources: string[];
}

export class AdminClient {
  constructor(private readonly service: AdminTarget) {}

  /** Any admin request; resolves with whatever status came back. */
  async request<T = any>(method: string, path: string, body?: unknown): Promise<Created<T>> {
    const response = await (this.service.fetch ?? fetch)(`${this.service.adminUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.service.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON (a proxy's HTML error page, a truncated body): keep the text for the caller to see.
      parsed = text;
    }
    return { status: response.status, body: parsed as T };
  }

  /** An admin request that must answer one of `expected`; throws with the status and body otherwise. */
  async call<T = any>(method: string, path: string, body?: unknown, expected: number | number[] = [200, 201, 204]): Promise<T> {
    const result = await this.request<T>(method, path, body);
    const wanted = Array.isArray(expected) ? expected : [expected];
    if (!wanted.includes(result.status)) {
      throw new Error(`${method} ${path}: expected ${wanted.join(' or ')}, got ${result.status} ${JSON.stringify(result.body)?.slice(0, 300)}`);
    }
    return result.body;
  }

  createPlatform(body: Record<string, unknown>): Promise<PlatformRecord> {
    return this.call('POST', '/admin/v1/platforms', body, 201);
  }

  patchPlatform(platformId: string, body: Record<string, unknown>): Promise<PlatformRecord> {
    return this.call('PATCH', `/admin/v1/platforms/${platformId}`, body, 200);
  }

  createAgent(name = 'agent'): Promise<AgentCredentials> {
    return this.call('POST', '/admin/v1/agents', { name }, 201);
  }

  patchAgent(agentId: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.call('PATCH', `/admin/v1/agents/${agentId}`, body, 200);
  }

  grant(agentId: string, platformId: string, scopes: string[]): Promise<Record<string, unknown>> {
    return this.call('PUT', `/admin/v1/agents/${agentId}/grants/${platformId}`, { scopes }, 200);
  }

  revoke(agentId: string, platformId: string): Promise<unknown> {
    return this.call('DELETE', `/admin/v1/agents/${agentId}/grants/${platformId}`, undefined, 204);
  }

  rotateSecret(agentId: string, graceSeconds?: number): Promise<{ api_key_id: string; secret: string }> {
    return this.call('POST', `/admin/v1/agents/${agentId}/secret/rotate`, graceSeconds === undefined ? {} : { grace_seconds: graceSeconds }, 200);
  }

  listKeys(): Promise<{ keys: { kid: string; state: string }[] }> {
    return this.call('GET', '/admin/v1/keys', undefined, 200);
  }

  rotateKey(): Promise<{ kid: string; state: string }> {
    return this.call('POST', '/admin/v1/keys/rotate', undefined, 200);
  }

  retireKey(kid: string): Promise<{ kid: string; state: string }> {
    return this.call('POST', `/admin/v1/keys/${kid}/retire`, undefined, 200);
  }

  /** A new credential of the platform's revocation feed: its id and its token (shown only in this answer). */
  createFeedCredential(platformId: string): Promise<{ feed_credential_id: string; feed_token: string; platform_id: string; created_at: string }> {
    return this.call('POST', `/admin/v1/platforms/${platformId}/feed-credentials`, undefined, 201);
  }

  /** A feed token of the platform (a new credential each call): what the middleware's `feedToken` wants. */
  async feedToken(platformId: string): Promise<string> {
    return (await this.createFeedCredential(platformId)).feed_token;
  }

  listFeedCredentials(platformId: string): Promise<{ feed_credentials: { feed_credential_id: string; created_at: string }[] }> {
    return this.call('GET', `/admin/v1/platforms/${platformId}/feed-credentials`, undefined, 200);
  }

  deleteFeedCredential(platformId: string, credentialId: string): Promise<unknown> {
    return this.call('DELETE', `/admin/v1/platforms/${platformId}/feed-credentials/${credentialId}`, undefined, 204);
  }

  /** A platform with `scopes`, and an agent granted `granted` (default: all) on it. */
  async seed(scopes = ['orders:read', 'orders:write'], granted = scopes) {
    const platform = await this.createPlatform({
      name: 'Shop',
      domain: 'shop.example.com',
      scopes: scopes.map((name) => ({ name, description: `${name} access` })),
      routes: [{ method: 'GET', path: '/orders/{id}', scopes: [scopes[0]] }],
    });
    const agent = await this.createAgent('seeded-agent');
    await this.grant(agent.agent_id, platform.platform_id, granted);
    return { platform, agent };
  }
}

/** POSTs `body` (JSON, or a string sent as is) and returns the status, headers, text and parsed JSON. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}, send: typeof fetch = fetch) {
  const response = await send(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: callers that expect JSON assert on `body`, those that do not read `text`.
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: json };
}
