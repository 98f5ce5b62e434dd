// The fault matrix: a TCP fault proxy (kit/fault-proxy.ts) between the service and each store — Postgres,
// Postgres behind PgBouncer (the proxy between the pooler and its server, so the pooler's own FATALs reach
// the service), Redis — switched in turn to refuse, reset, blackhole, slow and truncate, under a steady
// trickle of requests; and the server-side classes: for Postgres admin shutdown (57P01), read-only (25006),
// authentication failing after start (28000); for Redis NOAUTH after start and READONLY (a demoted primary). For every fault: the process stays up, every answer is a 200
// or a 503 with Retry-After (never a 500), no client connection is reset, and within 15 s of the fault
// ending a request that needs the store succeeds again. One service process per store, faults in sequence.
// Redis Sentinel and Cluster: fault-matrix-redis-topologies.test.ts.
import { afterAll, beforeAll, describe, it } from 'vitest';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { FaultProxy, FAULT_MODES } from '../../kit/fault-proxy.js';
import { startPgBouncer, stopAll } from '../../kit/topology/index.js';
import { metricSum } from '../../kit/metrics.js';
import { createDatabase, PG_ADMIN_URL, startService, type TestDatabase } from '../support/service.js';
import { startRedisServer, type RedisServer } from '../support/faults.js';
import { postgresBitten, proxied, Rig, serviceEnv, some503, type Answer } from '../support/fault-matrix.js';
import { freePort } from '../../kit/ports.js';

describe('fault matrix: Postgres', () => {
  let database: TestDatabase;
  let proxy: FaultProxy;
  let rig: Rig;
  let adminSql: postgres.Sql;
  const role = `ace_fault_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    adminSql = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
    // Its own login role owning its own database: authentication can fail after start without touching anyone else.
    await adminSql.unsafe(`CREATE ROLE ${role} LOGIN`);
    database = await createDatabase();
    await adminSql.unsafe(`ALTER DATABASE ${database.name} OWNER TO ${role}`);
    proxy = await FaultProxy.start({ target: { port: Number(new URL(database.url).port) } });
    const url = new URL(proxied(database.url, proxy));
    url.username = role;
    rig = new Rig(await startService({ mode: 'real', database: { ...database, url: url.toString() }, env: serviceEnv }));
    await rig.seed();
  });

  afterAll(async () => {
    await rig?.service.dispose();
    await proxy?.close();
    await database?.drop();
    await adminSql?.unsafe(`DROP ROLE IF EXISTS ${role}`);
    await adminSql?.end();
  });

  const terminateBackends = () => adminSql.unsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database.name}' AND pid <> pg_backend_pid()`);

  it.each(FAULT_MODES)('network fault %s: up, no 500, no reset client, recovered within 15 s', async (mode) => {
    await rig.sweep(mode, () => proxy.set(mode), () => proxy.heal(), postgresBitten(mode));
  });

  it('admin shutdown of every connection (57P01), repeatedly', async () => {
    let terminating: NodeJS.Timeout | undefined;
    await rig.sweep(
      'admin shutdown',
      async () => {
        terminating = setInterval(() => void terminateBackends().catch((error) => console.error('terminate', error)), 150);
      },
      async () => clearInterval(terminating),
      (answers) => answers.length >= 12,
    );
  });

  it('read-only database (25006): writes are 503, reads and tokens go on', async () => {
    await rig.sweep(
      'read-only',
      async () => {
        await adminSql.unsafe(`ALTER DATABASE ${database.name} SET default_transaction_read_only = on`);
        await terminateBackends();
      },
      async () => {
        await adminSql.unsafe(`ALTER DATABASE ${database.name} RESET default_transaction_read_only`);
        await terminateBackends();
      },
      some503('admin write'),
    );
  });

  it('authentication failing after start (28000): 503, then recovers once the role can log in again', async () => {
    await rig.sweep(
      'auth failure',
      async () => {
        await adminSql.unsafe(`ALTER ROLE ${role} NOLOGIN`);
        await terminateBackends();
      },
      async () => {
        await adminSql.unsafe(`ALTER ROLE ${role} LOGIN`);
      },
      some503('admin read'),
    );
    await rig.noServerErrors();
  });
});

describe('fault matrix: Postgres behind PgBouncer (faults between the pooler and its server)', () => {
  let database: TestDatabase;
  let proxy: FaultProxy;
  let rig: Rig;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = await FaultProxy.start({ target: { port: Number(new URL(database.url).port) } });
    const bouncer = await startPgBouncer({ upstream: { port: proxy.port }, settings: { server_login_retry: 1 } });
    rig = new Rig(await startService({ mode: 'real', database: { ...database, url: bouncer.url(database.name) }, env: serviceEnv }));
    await rig.seed();
  });

  afterAll(async () => {
    await rig?.service.dispose();
    await stopAll();
    await proxy?.close();
    await database?.drop();
  });

  // `refuse` here is the production incident: Postgres stopped behind PgBouncer, which answers every client
  // with FATAL server_login_retry (08P01) on a connection the driver dropped: the process exited within 1.6 s.
  it.each(FAULT_MODES)('fault %s behind the pooler: up, no 500, no reset client, recovered within 15 s', async (mode) => {
    await rig.sweep(mode, () => proxy.set(mode), () => proxy.heal(), postgresBitten(mode));
    if (mode === 'truncate') await rig.noServerErrors();
  });
});

describe('fault matrix: Redis', () => {
  let redis: RedisServer;
  let proxy: FaultProxy;
  let rig: Rig;
  /** The server's password while the auth fault is on. */
  let password: string | undefined;

  beforeAll(async () => {
    // A private server: the server-side faults below reconfigure it.
    redis = await startRedisServer();
    proxy = await FaultProxy.start({ target: { port: redis.port } });
    rig = new Rig(await startService({ mode: 'real', env: { ...serviceEnv, REDIS_URL: proxied(redis.url, proxy) } }));
    await rig.seed();
  });

  afterAll(async () => {
    await rig?.service.dispose();
    await proxy?.close();
    await redis?.kill();
  });

  const command = async (...args: [string, ...(string | number)[]]) => {
    const client = new Redis(redis.port, '127.0.0.1', { password, maxRetriesPerRequest: 1, lazyConnect: true });
    await client.connect();
    try {
      await client.call(...args);
    } finally {
      client.disconnect();
    }
  };

  it('authentication failing after start (NOAUTH): tokens from Postgres, recovered once the password is gone again', async () => {
    await rig.sweep(
      'redis auth failure',
      async () => {
        await command('CONFIG', 'SET', 'requirepass', 'rotated-under-the-service');
        password = 'rotated-under-the-service';
        await command('CLIENT', 'KILL', 'TYPE', 'normal'); // the service reconnects and is refused
      },
      async () => {
        await command('CONFIG', 'SET', 'requirepass', '');
        password = undefined;
      },
      async () => (await rig.storeUp('redis')) === 0,
    );
  });

  it('a primary demoted to a replica (READONLY): up, no 500, recovered once it is a primary again', async () => {
    // Replica of a port nothing listens on: it refuses writes (READONLY) and serves its data read-only.
    // The fault showed once a cache write or delete failed.
    const failures = async () => metricSum(await (await fetch(`${rig.service.adminUrl}/metrics`)).text(), 'ace_redis_failures_total');
    const before = await failures();
    await rig.sweep(
      'redis read-only',
      async () => command('REPLICAOF', '127.0.0.1', String(await freePort())),
      async () => command('REPLICAOF', 'NO', 'ONE'),
      async () => (await failures()) > before,
    );
  });

  // Redis is a cache and a bus: tokens fall back to Postgres. The fault showed once the service saw Redis down
  // (slow: once a dozen answers went through it).
  it.each(FAULT_MODES)('fault %s: up, no 500, no reset client, recovered within 15 s', async (mode) => {
    const bitten = mode === 'slow' ? (answers: Answer[]) => answers.length >= 12 : async () => (await rig.storeUp('redis')) === 0;
    await rig.sweep(mode, () => proxy.set(mode), () => proxy.heal(), bitten);
    if (mode === 'truncate') await rig.noServerErrors();
  });
});
