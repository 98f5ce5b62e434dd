// The public endpoints' workload against one service (started by the bench or deployed): a platform and
// agents seeded through the admin API (or bulk rows in Postgres for agents used once), and the request
// lists autocannon sends for token (warm / cold), listing, JWKS and scope file.
import { randomBytes } from 'node:crypto';
import { Admin, credentialsBody, tokenBody, type Agent } from './seed.js';
import type { RequestSpec } from './load.js';
import { decodeJwt, freshRequest, prewarm } from './http.js';
import type { ServiceTarget } from './service.js';
import type { BenchContext } from './context.js';

export const JSON_HEADERS = { 'content-type': 'application/json' };
export const TOKEN_PATH = '/api/v1/auth/token';
export const LISTING_PATH = '/api/v1/auth/agents/me/platforms';
export const JWKS_PATH = '/.well-known/jwks.json';
/** The secret every bulk agent shares (bulk.ts): public on purpose, these rows live in a bench database. */
export const BULK_SECRET = randomBytes(32).toString('base64url');

export const post = (path: string, bodies: string[]): RequestSpec[] => bodies.map((body) => ({ method: 'POST', path, headers: JSON_HEADERS, body }));

export class Workload {
  readonly admin: Admin;
  platformId = '';
  warm: Agent[] = [];
  /** Agent rows and other things the bench created on a deployed service, undone by retire(). */
  private readonly createdAgents: string[] = [];

  constructor(readonly ctx: BenchContext, readonly target: ServiceTarget) {
    this.admin = new Admin(target);
  }

  get scopesPath(): string {
    return `/api/v1/platforms/${this.platformId}/scopes.yaml`;
  }

  async seed(warmAgents: number): Promise<void> {
    const platform = await this.admin.createPlatform();
    this.platformId = platform.platform_id;
    const started = Date.now();
    const { agents } = await this.admin.createAgents(warmAgents, this.platformId, 'warm', this.ctx.machine.cores * 4);
    this.warm = agents;
    this.createdAgents.push(...agents.map((a) => a.agent_id));
    this.ctx.log(`  seeded ${agents.length} agents through the admin API in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    await this.sanityCheck(agents[0]);
  }

  /** More agents through the admin API (each costs the service one argon2 hash). */
  async createAgents(count: number, label: string): Promise<Agent[]> {
    const { agents } = await this.admin.createAgents(count, this.platformId, label, this.ctx.machine.cores * 4);
    this.createdAgents.push(...agents.map((a) => a.agent_id));
    return agents;
  }

  tokenBodies(agents: Agent[] = this.warm): string[] {
    return agents.map((a) => tokenBody(a, this.platformId));
  }

  listingBodies(agents: Agent[] = this.warm): string[] {
    return agents.map(credentialsBody);
  }

  /** Each warm agent verified in every HTTP process (the verified-credentials cache is per process). */
  async prewarm(httpProcesses: number): Promise<void> {
    const counts = await prewarm(`${this.target.publicUrl}${TOKEN_PATH}`, this.tokenBodies(), 4 * httpProcesses + 2);
    if (Object.keys(counts).some((s) => s !== '200')) this.ctx.log(`  pre-warm statuses: ${JSON.stringify(counts)}`);
  }

  async sanityCheck(agent: Agent): Promise<void> {
    const reply = await freshRequest(`${this.target.publicUrl}${TOKEN_PATH}`, 'POST', tokenBody(agent, this.platformId), JSON_HEADERS);
    if (reply.status !== 200) throw new Error(`token sanity check: ${reply.status} ${reply.body.slice(0, 300)}`);
    const { header, payload } = decodeJwt(JSON.parse(reply.body).access_token);
    if (header.alg !== 'RS256' || payload.aud !== this.platformId) throw new Error(`token sanity check: unexpected JWT ${JSON.stringify({ header, payload })}`);
    for (const path of [JWKS_PATH, this.scopesPath]) {
      const r = await freshRequest(`${this.target.publicUrl}${path}`, 'GET');
      if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.body.slice(0, 200)}`);
    }
  }

  /** On a deployed service: deactivate the bench's agents and disable its platform. */
  async retire(): Promise<void> {
    for (const id of this.createdAgents) await this.admin.call('PATCH', `/admin/v1/agents/${id}`, { status: 'inactive' }).catch(() => {});
    if (this.platformId) await this.admin.call('PATCH', `/admin/v1/platforms/${this.platformId}`, { status: 'disabled' }).catch(() => {});
  }
}

/**
 * Never-used agents handed out one per request. When the pool runs dry the run is stopped (a reused agent
 * would be warm and flatter the figure) and `exhausted` says so.
 */
export class ColdPool {
  private next = 0;
  exhausted = false;
  private stop: (() => void) | undefined;

  constructor(private readonly bodies: string[]) {}

  get used(): number {
    return this.next;
  }

  get remaining(): number {
    return this.bodies.length - this.next;
  }

  /** One request spec whose body is a fresh agent each time. */
  requests(): RequestSpec[] {
    return [
      {
        method: 'POST',
        path: TOKEN_PATH,
        headers: JSON_HEADERS,
        setupRequest: (req) => {
          if (this.next >= this.bodies.length) {
            this.exhausted = true;
            this.stop?.();
            return { ...req, body: this.bodies[this.bodies.length - 1] };
          }
          return { ...req, body: this.bodies[this.next++] };
        },
      },
    ];
  }

  onStart = (stop: () => void): void => {
    this.stop = stop;
  };
}
