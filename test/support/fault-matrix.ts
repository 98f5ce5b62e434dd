// The fault matrix's rig (test/fault-matrix*.test.ts): a service with a platform and a warm agent, three
// request loops (a token, an admin read, an admin write) kept going while a fault is on, and the checks the
// matrix promises: the process stays up, every answer is a 200 or a 503 with Retry-After (never a 500), no
// client connection is reset, and within 15 s of the fault ending every kind of request succeeds again.
import { expect } from 'vitest';
import { randomBytes } from 'node:crypto';
import { AdminClient, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import type { FaultMode, FaultProxy } from '../../kit/fault-proxy.js';
import { metricSum } from '../../kit/metrics.js';
import { waitFor } from '../../kit/wait.js';
import type { ServiceHandle } from './service.js';
import { serverErrorsIn } from './faults.js';

export const STORE_TIMEOUT_MS = 800;
/** A request that outlives this is a hang, not an answer. */
const REQUEST_BOUND_MS = 6000;
export const RECOVERY_MS = 15_000;

export interface Answer {
  what: string;
  status: number;
  retryAfter: string | null;
  error?: string;
}

/** A service, a platform and a warm agent, with the two requests the load sends. */
export class Rig {
  admin: AdminClient;
  platform!: PlatformRecord;
  agent!: AgentCredentials;
  constructor(readonly service: ServiceHandle) {
    this.admin = new AdminClient(service);
  }

  async seed(): Promise<void> {
    this.platform = await this.admin.createPlatform({ name: 'Shop', domain: 'shop.example', verification_status: 'verified', scopes: [{ name: 'orders:read' }] });
    this.agent = await this.admin.createAgent('warm');
    await this.admin.grant(this.agent.agent_id, this.platform.platform_id, ['orders:read']);
    await waitFor('a first token', async () => (await this.token()).status === 200, 10_000);
  }

  private async send(what: string, url: string, init: RequestInit): Promise<Answer> {
    try {
      const response = await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
      await response.arrayBuffer();
      return { what, status: response.status, retryAfter: response.headers.get('retry-after') };
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { what, status: 0, retryAfter: null, error: `${(error as Error).name}: ${cause?.code ?? cause?.message ?? (error as Error).message}` };
    }
  }

  /** A token for the warm agent: answered from the caches when they can. */
  token(): Promise<Answer> {
    return this.send('token', `${this.service.publicUrl}/api/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key_id: this.agent.api_key_id, secret: this.agent.secret, platform_id: this.platform.platform_id }),
    });
  }

  /** An admin read: always Postgres. */
  adminRead(): Promise<Answer> {
    return this.send('admin read', `${this.service.adminUrl}/admin/v1/agents/${this.agent.agent_id}`, { headers: { authorization: `Bearer ${this.service.adminToken}` } });
  }

  /** An admin write: Postgres, and a Redis publish after the commit. */
  adminWrite(): Promise<Answer> {
    return this.send('admin write', `${this.service.adminUrl}/admin/v1/agents/${this.agent.agent_id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${this.service.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `warm-${randomBytes(3).toString('hex')}` }),
    });
  }

  /**
   * Runs `fault` (which switches the fault on), keeps three request loops going until `bitten` says the fault
   * showed (or 1.5 s of load at least), ends it with `heal`, and checks what the matrix promises.
   */
  async sweep(
    name: string,
    fault: () => Promise<void>,
    heal: () => Promise<void>,
    bitten: (answers: Answer[]) => boolean | Promise<boolean>,
    /** Also part of the recovery (e.g. the store in use again, not only bypassed). */
    recovered: () => Promise<boolean> = async () => true,
  ): Promise<void> {
    const answers: Answer[] = [];
    let running = true;
    const loop = async (request: () => Promise<Answer>) => {
      while (running) answers.push(await request());
    };
    await fault();
    const loops = [loop(() => this.token()), loop(() => this.adminRead()), loop(() => this.adminWrite())];
    const started = Date.now();
    // A process that died fails the sweep at once, with its last words.
    const exited = new AbortController();
    const onExit = () => exited.abort(new Error(`${name}: the service exited (${this.service.process.exitCode}):\n${this.service.output().slice(-1500)}`));
    this.service.process.once('exit', onExit);
    try {
      await waitFor(`${name}: the fault to show`, async () => Date.now() - started >= 1500 && (await bitten(answers)), 12_000, 50, exited.signal);
    } finally {
      this.service.process.off('exit', onExit);
      running = false;
      await Promise.all(loops);
      await heal();
    }
    const healed = Date.now();
    const label = `${name}: ${summary(answers)}\n${this.recentWarnings()}`;
    expect(this.service.process.exitCode, label).toBeNull();
    expect(answers.filter((a) => a.status === 0), label).toEqual([]);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503), label).toEqual([]);
    expect(answers.filter((a) => a.status === 503 && !/^[1-9]\d*$/.test(a.retryAfter ?? '')), label).toEqual([]);
    // Recovery: every kind of request succeeds again within 15 s of the fault ending.
    await waitFor(
      `${name}: 200s again after the fault ended`,
      async () => (await Promise.all([this.token(), this.adminRead(), this.adminWrite()])).every((a) => a.status === 200) && (await recovered()),
      RECOVERY_MS,
      100,
    );
    expect(Date.now() - healed).toBeLessThan(RECOVERY_MS);
    expect(this.service.process.exitCode, label).toBeNull();
  }

  async storeUp(store: 'postgres' | 'redis'): Promise<number> {
    return metricSum(await (await fetch(`${this.service.adminUrl}/metrics`)).text(), 'ace_store_up', { store });
  }

  async noServerErrors(): Promise<void> {
    expect(serverErrorsIn(await (await fetch(`${this.service.adminUrl}/metrics`)).text())).toEqual([]);
    expect(this.service.output()).not.toMatch(/"status":500|internal_error|Unhandled|uncaught/i);
  }

  private recentWarnings(): string {
    return this.service.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-8).join('\n');
  }
}

export function summary(answers: Answer[]): string {
  const counts = new Map<string, number>();
  for (const a of answers) {
    const key = `${a.what} ${a.status || a.error}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${k} x${n}`).join(', ');
}

export const some503 = (what: string) => (answers: Answer[]) => answers.some((a) => a.what === what && a.status === 503);
/** The fault showed: Postgres requests were refused, or (slow) at least answered late. */
export const postgresBitten = (mode: FaultMode) => (mode === 'slow' ? (answers: Answer[]) => answers.filter((a) => a.what === 'admin read').length >= 2 : some503('admin read'));

export const proxied = (url: string, proxy: FaultProxy) => {
  const parsed = new URL(url);
  parsed.host = proxy.address;
  return parsed.toString();
};
export const serviceEnv = { STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS), RATE_LIMIT_AUTH_FAIL_POINTS: '100000', RATE_LIMIT_TOKEN_POINTS: '100000', LOG_LEVEL: 'warn' };

