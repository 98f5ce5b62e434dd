// A rolling stop behind a load balancer that polls /readyz once a second and routes only to instances that
// answered 200 at their last poll (how cloud balancers and Kubernetes endpoints behave). On SIGTERM the
// instance says 503 at once and keeps serving for SHUTDOWN_DRAIN_SECONDS, so the balancer moves off before
// the port closes: not one request fails. Without the drain, the port closed within the balancer's poll
// interval and requests already routed there failed (55 × 502 in an SRE's run).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { redisKeyPrefix } from '../../kit/stores.js';
import { sleep, waitFor } from '../../kit/wait.js';

const DRAIN_SECONDS = 3;
const POLL_MS = 1000;

/** The balancer: one /readyz poll per instance per second; requests go round-robin to the ready ones. */
class Balancer {
  private readonly ready = new Map<ServiceHandle, boolean>();
  private polling = true;
  private turn = 0;
  private readonly pollers: Promise<void>[];
  constructor(readonly backends: ServiceHandle[]) {
    for (const backend of backends) this.ready.set(backend, true);
    this.pollers = backends.map((backend) => this.poll(backend));
  }

  private async poll(backend: ServiceHandle): Promise<void> {
    while (this.polling) {
      try {
        const response = await fetch(`${backend.adminUrl}/readyz`, { signal: AbortSignal.timeout(POLL_MS) });
        await response.arrayBuffer();
        this.ready.set(backend, response.status === 200);
      } catch {
        this.ready.set(backend, false); // refused or no answer: out of rotation
      }
      await sleep(POLL_MS);
    }
  }

  pick(): ServiceHandle | undefined {
    const candidates = this.backends.filter((b) => this.ready.get(b));
    return candidates.length === 0 ? undefined : candidates[this.turn++ % candidates.length];
  }

  isReady(backend: ServiceHandle): boolean {
    return this.ready.get(backend) === true;
  }

  async stop(): Promise<void> {
    this.polling = false;
    await Promise.all(this.pollers);
  }
}

describe('SIGTERM behind a load balancer polling /readyz each second', () => {
  let database: TestDatabase;
  const services: ServiceHandle[] = [];
  let platform: PlatformRecord;
  let agent: AgentCredentials;

  beforeAll(async () => {
    database = await createDatabase();
    const prefix = redisKeyPrefix('ace-drain');
    for (let i = 0; i < 2; i++) {
      services.push(await startService({ mode: 'real', database, redisKeyPrefix: prefix, env: { SHUTDOWN_DRAIN_SECONDS: String(DRAIN_SECONDS), RATE_LIMIT_TOKEN_POINTS: '100000' } }));
    }
    const admin = new AdminClient(services[0]);
    platform = await admin.createPlatform({ name: 'Shop', domain: 'shop.example', verification_status: 'verified', scopes: [{ name: 'orders:read' }] });
    agent = await admin.createAgent('drained');
    await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
  });

  afterAll(async () => {
    await Promise.all(services.map((s) => s.dispose()));
    await database?.drop();
  });

  it('not one failed request: /readyz is 503 at once, the listeners stay open for the drain, then the process exits 0', async () => {
    const balancer = new Balancer(services);
    const [leaving, staying] = services;
    const failures: string[] = [];
    const served = new Map<ServiceHandle, number>(services.map((s) => [s, 0]));
    let running = true;
    const client = async () => {
      while (running) {
        const backend = balancer.pick();
        if (!backend) {
          failures.push('no ready backend');
          await sleep(50);
          continue;
        }
        try {
          const response = await fetch(`${backend.publicUrl}/api/v1/auth/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }),
          });
          await response.arrayBuffer();
          if (response.status !== 200) failures.push(`${response.status} from ${backend === leaving ? 'the leaving' : 'the staying'} instance`);
          else served.set(backend, served.get(backend)! + 1);
        } catch (error) {
          const cause = (error as { cause?: { code?: string } }).cause;
          failures.push(`${cause?.code ?? (error as Error).message} from ${backend === leaving ? 'the leaving' : 'the staying'} instance`); // a balancer's 502
        }
      }
    };
    const clients = Array.from({ length: 4 }, client);
    try {
      await waitFor('both instances serving', () => served.get(leaving)! > 20 && served.get(staying)! > 20, 15_000, 50);
      const signalled = Date.now();
      const exited = leaving.stop('SIGTERM');
      // Readiness off at once (before the drain ends), while the listeners still answer.
      await waitFor('the balancer to see the leaving instance not ready', () => !balancer.isReady(leaving), 5_000, 20);
      const outOfRotationAfterMs = Date.now() - signalled;
      expect(outOfRotationAfterMs).toBeLessThan(DRAIN_SECONDS * 1000);
      const exit = await exited;
      expect(exit.code, leaving.output().slice(-2000)).toBe(0);
      expect(Date.now() - signalled).toBeGreaterThanOrEqual(DRAIN_SECONDS * 1000);
      // Keep the load on a little past the exit: the balancer still holds the old instance's last state.
      const servedAtExit = served.get(staying)!;
      await waitFor('the staying instance to carry the load', () => served.get(staying)! > servedAtExit + 20, 10_000, 50);
    } finally {
      running = false;
      await Promise.all(clients);
      await balancer.stop();
    }
    expect(failures, `failures: ${failures.slice(0, 10).join('; ')}`).toEqual([]);
    expect(leaving.output()).toMatch(/not ready; serving on while load balancers move off/);
  });
});
