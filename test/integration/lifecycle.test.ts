// Signing-key and secret lifecycle across three instances sharing one Postgres and one Redis:
// rotation never signs with an unpublished key, revocations reach every instance through invalidation (not
// cache expiry), keys survive restarts, and a wrong key-encryption key refuses to start. No assertion here
// rests on a tight clock: on two shared cores that would only measure the machine's load.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { AdminClient, postJson, type AgentCredentials, type PlatformRecord } from '../../kit/admin.js';
import { createDatabase, runToExit, startService, type ServiceHandle, type TestDatabase } from '../support/service.js';
import { sleep } from '../../kit/wait.js';

const env = {
  TOKEN_TTL_SECONDS: '3',
  KEY_CLOCK_SKEW_SECONDS: '1',
  KEY_PROPAGATION_SECONDS: '2',
  KEY_REFRESH_SECONDS: '1',
  RATE_LIMIT_TOKEN_POINTS: '1000000',
  RATE_LIMIT_AUTH_FAIL_POINTS: '1000000',
  // Caches that would hold a revoked view or secret far longer than any wait below: a refusal within the
  // wait can only come from invalidation reaching every instance.
  CACHE_TTL_SECONDS: '3600',
  LOCAL_CACHE_TTL_MS: '3600000',
  VERIFIED_CACHE_TTL_SECONDS: '3600',
};
/** How long a revocation may take to show everywhere here: generous for a loaded machine, far below the TTLs. */
const PROPAGATION_LIMIT_MS = 10_000;

describe('lifecycle across instances', () => {
  let database: TestDatabase;
  let instances: ServiceHandle[] = [];
  let admin: AdminClient;
  const redisKeyPrefix = `ace-lifecycle-${randomBytes(4).toString('hex')}:`;

  beforeAll(async () => {
    database = await createDatabase();
    // Started together on an empty database: migrations and the first key must not race.
    instances = await Promise.all([0, 1, 2].map(() => startService({ mode: 'real', database, redisKeyPrefix, env })));
    admin = new AdminClient(instances[0]);
  });
  afterAll(async () => {
    await Promise.all(instances.map((i) => i.dispose()));
    await database?.drop();
  });

  const token = (instance: ServiceHandle, agent: { api_key_id: string; secret: string }, platformId: string) =>
    postJson(`${instance.publicUrl}/api/v1/auth/token`, { api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platformId });
  const jwksOf = async (instance: ServiceHandle) => (await (await fetch(`${instance.publicUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };

  /** Polls until every instance answers `status`; returns the slowest instance's delay in ms. */
  async function timeUntilEverywhere(check: (instance: ServiceHandle) => Promise<boolean>, limitMs = PROPAGATION_LIMIT_MS): Promise<number> {
    const started = Date.now();
    const delays = await Promise.all(
      instances.map(async (instance) => {
        while (Date.now() - started < limitMs) {
          if (await check(instance)) return Date.now() - started;
          await sleep(25);
        }
        return Infinity;
      }),
    );
    return Math.max(...delays);
  }

  it('starts three instances on one fresh database with one migration run and one first key', async () => {
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const migrations = await sql`SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version`;
      expect(migrations.every((m) => m.n === 1)).toBe(true);
      const keys = await sql`SELECT kid FROM signing_keys`;
      expect(keys).toHaveLength(1);
      const kids = await Promise.all(instances.map(async (i) => (await jwksOf(i)).keys.map((k) => k.kid)));
      expect(kids).toEqual([[keys[0].kid], [keys[0].kid], [keys[0].kid]]);
    } finally {
      await sql.end();
    }
  });

  describe('with a platform and agents', () => {
    let platform: PlatformRecord;
    const agents: AgentCredentials[] = [];

    beforeAll(async () => {
      platform = await admin.createPlatform({ name: 'Lifecycle', scopes: [{ name: 'read' }] });
      for (let i = 0; i < 6; i++) {
        const agent = await admin.createAgent(`lifecycle-${i}`);
        await admin.grant(agent.agent_id, platform.platform_id, ['read']);
        agents.push(agent);
      }
    });

    /**
     * Makes every instance remember the agent (verified credentials, cached view) and hold a lease of its
     * token limit (RATE_LIMIT_TOKEN_LEASE points, most of them unspent): the refusals below come while
     * each instance could still spend points from memory, so they show that neither a lease nor a memory
     * lets a disabled agent, a removed grant or a rotated secret through.
     */
    async function warm(agent: AgentCredentials) {
      for (const instance of instances) expect((await token(instance, agent, platform.platform_id)).status).toBe(200);
    }

    it('publishes a rotated key on every instance before any token carries it, through repeated rotations', async () => {
      const issuedKids = new Set<string>();
      const failures: string[] = [];
      let running = true;
      // Every instance keeps issuing; each token is verified against another instance's JWKS fetched right after.
      const loops = instances.map(async (instance, index) => {
        const verifier = instances[(index + 1) % instances.length];
        let count = 0;
        while (running) {
          const response = await token(instance, agents[0], platform.platform_id);
          if (response.status !== 200) {
            failures.push(`status ${response.status}`);
            continue;
          }
          const jwks = createLocalJWKSet(await jwksOf(verifier));
          try {
            await jwtVerify(response.body.access_token, jwks, { audience: platform.platform_id });
            issuedKids.add(decodeProtectedHeader(response.body.access_token).kid!);
          } catch (error) {
            failures.push(`verify: ${(error as Error).message}`);
          }
          count++;
        }
        return count;
      });

      const rotated: string[] = [];
      for (let round = 0; round < 3; round++) {
        const key = await admin.rotateKey();
        expect(key.state).toBe('next');
        rotated.push(key.kid);
        // Published everywhere (the loop above checks that no token carries it before that), then active.
        const published = await timeUntilEverywhere(async (i) => (await jwksOf(i)).keys.some((k) => k.kid === key.kid));
        expect(published).toBeLessThan(PROPAGATION_LIMIT_MS);
        while ((await admin.listKeys()).keys.find((k) => k.kid === key.kid)?.state !== 'active') await sleep(100);
      }
      running = false;
      const counts = await Promise.all(loops);
      expect(failures).toEqual([]);
      expect(counts.every((c) => c > 10)).toBe(true);
      // The rotations really happened: tokens were signed with the rotated keys.
      expect(rotated.filter((kid) => issuedKids.has(kid)).length).toBeGreaterThanOrEqual(2);
    });

    it('lets a replaced key leave the key set by itself after token lifetime plus skew', async () => {
      // Start from a settled key set: no key of an earlier rotation still waiting to activate.
      while ((await admin.listKeys()).keys.some((k) => k.state === 'next')) await sleep(100);
      const { keys } = await admin.listKeys();
      const active = keys.find((k) => k.state === 'active')!;
      await admin.rotateKey();
      const gone = await timeUntilEverywhere(async (i) => !(await jwksOf(i)).keys.some((k) => k.kid === active.kid), 30_000);
      // Propagation 2 s + TTL 3 s + skew 1 s: never earlier than TTL + skew after the successor activates.
      expect(gone).toBeGreaterThanOrEqual(5000);
      expect(gone).toBeLessThan(30_000);
      expect((await admin.listKeys()).keys.find((k) => k.kid === active.kid)!.state).toBe('retired');
    });

    it('retires a non-active key on every instance at once, and refuses to retire the active key', async () => {
      const next = await admin.rotateKey();
      const retired = await admin.retireKey(next.kid);
      expect(retired.state).toBe('retired');
      const delay = await timeUntilEverywhere(async (i) => !(await jwksOf(i)).keys.some((k) => k.kid === next.kid));
      expect(delay).toBeLessThan(PROPAGATION_LIMIT_MS);
      const active = (await admin.listKeys()).keys.find((k) => k.state === 'active')!;
      const refused = await admin.request('POST', `/admin/v1/keys/${active.kid}/retire`);
      expect(refused.status).toBe(409);
      expect(refused.body.error_code).toBe('conflict');
      expect((await admin.request('POST', '/admin/v1/keys/no-such-kid/retire')).status).toBe(404);
    });

    it('stops a deactivated agent on every instance through invalidation, long before any cache expires', async () => {
      const agent = agents[1];
      await warm(agent);
      await new AdminClient(instances[1]).patchAgent(agent.agent_id, { status: 'inactive' });
      const delay = await timeUntilEverywhere(async (i) => (await token(i, agent, platform.platform_id)).status === 403);
      expect(delay).toBeLessThan(PROPAGATION_LIMIT_MS);
    });

    it('stops a removed grant and a suspended platform on every instance through invalidation', async () => {
      const agent = agents[2];
      await warm(agent);
      await new AdminClient(instances[2]).revoke(agent.agent_id, platform.platform_id);
      expect(await timeUntilEverywhere(async (i) => (await token(i, agent, platform.platform_id)).status === 403)).toBeLessThan(PROPAGATION_LIMIT_MS);

      const other = await admin.createPlatform({ name: 'Suspendable', scopes: [{ name: 'read' }] });
      await admin.grant(agents[3].agent_id, other.platform_id, ['read']);
      for (const instance of instances) expect((await token(instance, agents[3], other.platform_id)).status).toBe(200);
      await new AdminClient(instances[1]).patchPlatform(other.platform_id, { status: 'suspended' });
      expect(await timeUntilEverywhere(async (i) => (await token(i, agents[3], other.platform_id)).status === 403)).toBeLessThan(PROPAGATION_LIMIT_MS);
    });

    it('revokes the old secret everywhere at once when rotated without grace', async () => {
      const agent = agents[4];
      await warm(agent);
      const rotated = await new AdminClient(instances[1]).rotateSecret(agent.agent_id);
      expect(rotated.api_key_id).toBe(agent.api_key_id);
      expect(rotated.secret).not.toBe(agent.secret);
      const delay = await timeUntilEverywhere(async (i) => (await token(i, agent, platform.platform_id)).status === 401);
      expect(delay).toBeLessThan(PROPAGATION_LIMIT_MS);
      for (const instance of instances) {
        expect((await token(instance, { api_key_id: agent.api_key_id, secret: rotated.secret }, platform.platform_id)).status).toBe(200);
      }
    });

    it('keeps the old secret working during the grace period, then never again', async () => {
      const agent = agents[5];
      await warm(agent);
      const rotated = await new AdminClient(instances[2]).rotateSecret(agent.agent_id, 3);
      const fresh = { api_key_id: agent.api_key_id, secret: rotated.secret };
      for (const instance of instances) {
        expect((await token(instance, agent, platform.platform_id)).status).toBe(200);
        expect((await token(instance, fresh, platform.platform_id)).status).toBe(200);
      }
      // The grace ends by itself (3 s): then the old secret is refused everywhere, the new one still works.
      expect(await timeUntilEverywhere(async (i) => (await token(i, agent, platform.platform_id)).status === 401)).toBeLessThan(PROPAGATION_LIMIT_MS);
      for (const instance of instances) {
        expect((await token(instance, agent, platform.platform_id)).status).toBe(401);
        expect((await token(instance, fresh, platform.platform_id)).status).toBe(200);
      }
    });
  });

  it('keeps its keys across a restart of every instance, and refuses to start with a wrong KEY_ENCRYPTION_KEY', async () => {
    const before = (await admin.listKeys()).keys.map((k) => `${k.kid}:${k.state}`).sort();
    const published = (await jwksOf(instances[0])).keys.map((k) => k.kid);
    await Promise.all(instances.map((i) => i.stop('SIGTERM')));
    instances = [await startService({ mode: 'real', database, redisKeyPrefix, env })];
    admin = new AdminClient(instances[0]);
    const after = (await admin.listKeys()).keys.map((k) => `${k.kid}:${k.state}`).sort();
    expect(after.map((k) => k.split(':')[0])).toEqual(before.map((k) => k.split(':')[0]));
    expect((await jwksOf(instances[0])).keys.map((k) => k.kid)).toEqual(published);

    const refused = await runToExit({
      ...instances[0].env,
      PORT: '0',
      ADMIN_PORT: '0',
      KEY_ENCRYPTION_KEY: '22'.repeat(32),
    });
    expect(refused.code).not.toBe(0);
    expect(refused.output).toContain('KEY_ENCRYPTION_KEY cannot decrypt signing key');
    expect(refused.output).not.toContain('22'.repeat(32));
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      expect((await sql`SELECT count(*)::int AS n FROM signing_keys`)[0].n).toBe(before.length); // nothing minted
    } finally {
      await sql.end();
    }
  });
});

describe('scheduled rotation', () => {
  it('rotates on schedule with one actor, whatever the number of replicas', async () => {
    const database = await createDatabase();
    const redisKeyPrefix = `ace-sched-${randomBytes(4).toString('hex')}:`;
    const scheduleEnv = { ...env, KEY_ROTATION_INTERVAL_SECONDS: '3' };
    const pair = await Promise.all([0, 1].map(() => startService({ mode: 'real', database, redisKeyPrefix, env: scheduleEnv })));
    try {
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      let rows: { created_at: Date }[] = [];
      // Wait for the first key and two scheduled rotations (about 6 s).
      for (let i = 0; i < 600 && rows.length < 3; i++) {
        rows = await sql`SELECT created_at FROM signing_keys ORDER BY created_at`;
        if (rows.length < 3) await sleep(100);
      }
      await sql.end();
      // One key per interval from one actor: never two from two replicas inside one interval.
      expect(rows.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < rows.length; i++) {
        const gap = new Date(rows[i].created_at).getTime() - new Date(rows[i - 1].created_at).getTime();
        expect(gap).toBeGreaterThanOrEqual(2900);
      }
    } finally {
      await Promise.all(pair.map((i) => i.dispose()));
      await database.drop();
    }
  });
});
