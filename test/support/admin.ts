// A small client of the admin API for tests and benchmarks' seeding.
import type { ServiceHandle } from './service.js';

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
}

export class AdminClient {
  constructor(private readonly service: Pick<ServiceHandle, 'adminUrl' | 'adminToken'>) {}

  async request<T = any>(method: string, path: string, body?: unknown): Promise<Created<T>> {
    const response = await fetch(`${this.service.adminUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.service.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  private async expect<T>(status: number, method: string, path: string, body?: unknown): Promise<T> {
    const result = await this.request<T>(method, path, body);
    if (result.status !== status) {
      throw new Error(`${method} ${path}: expected ${status}, got ${result.status} ${JSON.stringify(result.body)}`);
    }
    return result.body;
  }

  createPlatform(body: Record<string, unknown>): Promise<PlatformRecord> {
    return this.expect(201, 'POST', '/admin/v1/platforms', body);
  }

  patchPlatform(platformId: string, body: Record<string, unknown>): Promise<PlatformRecord> {
    return this.expect(200, 'PATCH', `/admin/v1/platforms/${platformId}`, body);
  }

  createAgent(name = 'agent'): Promise<AgentCredentials> {
    return this.expect(201, 'POST', '/admin/v1/agents', { name });
  }

  patchAgent(agentId: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.expect(200, 'PATCH', `/admin/v1/agents/${agentId}`, body);
  }

  grant(agentId: string, platformId: string, scopes: string[]): Promise<Record<string, unknown>> {
    return this.expect(200, 'PUT', `/admin/v1/agents/${agentId}/grants/${platformId}`, { scopes });
  }

  revoke(agentId: string, platformId: string): Promise<unknown> {
    return this.expect(204, 'DELETE', `/admin/v1/agents/${agentId}/grants/${platformId}`);
  }

  rotateSecret(agentId: string, graceSeconds?: number): Promise<{ api_key_id: string; secret: string }> {
    return this.expect(200, 'POST', `/admin/v1/agents/${agentId}/secret/rotate`, graceSeconds === undefined ? {} : { grace_seconds: graceSeconds });
  }

  listKeys(): Promise<{ keys: { kid: string; state: string }[] }> {
    return this.expect(200, 'GET', '/admin/v1/keys');
  }

  rotateKey(): Promise<{ kid: string; state: string }> {
    return this.expect(200, 'POST', '/admin/v1/keys/rotate');
  }

  retireKey(kid: string): Promise<{ kid: string; state: string }> {
    return this.expect(200, 'POST', `/admin/v1/keys/${kid}/retire`);
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

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: json };
}
