// Seeding through the admin API (Authorization: Bearer ADMIN_TOKEN), with bounded parallelism.
// Creating an agent hashes its argon2id secret in the service (~20-50 ms of CPU), so seeding speed is
// about the service's argon2 hash rate; the count is chosen from the measured rate (see run.ts).
import { AdminClient, type AdminTarget } from '../../kit/admin.js';

export interface Agent {
  agent_id: string;
  api_key_id: string;
  secret: string;
}

export const SCOPES = ['orders:read', 'orders:write'];

/** The bench's seeding on top of the kit's admin client (kit/admin.ts). */
export class Admin {
  readonly client: AdminClient;

  constructor(service: AdminTarget) {
    this.client = new AdminClient(service);
  }

  /** An admin request that must answer one of `expected`; throws with the status and body otherwise. */
  call<T = any>(method: string, path: string, body?: unknown, expected = [200, 201, 204]): Promise<T> {
    return this.client.call<T>(method, path, body, expected);
  }

  createPlatform(): Promise<{ platform_id: string }> {
    return this.client.createPlatform({
      name: 'Bench Shop',
      domain: 'shop.example.com',
      verification_status: 'verified',
      scopes: SCOPES.map((name) => ({ name, description: `${name} access` })),
      routes: [
        { method: 'GET', path: '/orders', scopes: ['orders:read'] },
        { method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] },
        { method: 'POST', path: '/orders', scopes: ['orders:write'] },
      ],
    });
  }

  /** Creates one agent and grants it every scope on the platform. */
  async createAgent(name: string, platformId: string): Promise<Agent> {
    const created = await this.client.createAgent(name);
    await this.client.grant(created.agent_id, platformId, SCOPES);
    return { agent_id: created.agent_id, api_key_id: created.api_key_id, secret: created.secret };
  }

  /** `count` agents, `concurrency` requests in flight; reports progress on stderr. */
  async createAgents(count: number, platformId: string, label: string, concurrency: number): Promise<{ agents: Agent[]; perSecond: number }> {
    const started = performance.now();
    const agents = await pool(count, concurrency, (i) => this.createAgent(`${label}-${i}`, platformId), (done) => {
      if (done % 250 === 0) process.stderr.write(`  seeded ${done}/${count} ${label} agents\n`);
    });
    const seconds = (performance.now() - started) / 1000;
    return { agents, perSecond: count / seconds };
  }
}

/** Runs task(0..count-1) with at most `concurrency` in flight; results in index order. */
export async function pool<T>(count: number, concurrency: number, task: (i: number) => Promise<T>, progress?: (done: number) => void): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  let done = 0;
  const runners = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
      progress?.(++done);
    }
  });
  await Promise.all(runners);
  return results;
}

export function tokenBody(agent: Agent, platformId: string): string {
  return JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId });
}

export function credentialsBody(agent: Agent): string {
  return JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret });
}
