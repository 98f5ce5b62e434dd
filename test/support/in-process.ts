// The whole service in process, without a listener: the routes and guards of src/app/servers.ts built on the
// memory ports (test/support/memory), requests served by HttpServer.inject through the same handlers uWS
// calls (framing checks, body limit, guards, hooks, metrics). Tokens are real RS256 JWTs (jose in this
// thread, no worker pool), secrets are hashed by MemoryHasher (SHA-256, not argon2). What needs a process
// stays process-level: signals, clusters, crashes, Postgres/Redis faults, framing over real sockets.
import { ANY_CLOCK } from '../../src/core/ports/clock.js';
import { randomBytes } from 'node:crypto';
import { CompactSign, importPKCS8 } from 'jose';
import { AdminClient } from '../../kit/admin.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { createLogger, type Logger } from '../../src/adapters/telemetry/logger.js';
import { declareKeyMetrics } from '../../src/adapters/telemetry/key-metrics.js';
import { RsaKeyMaterial } from '../../src/adapters/crypto/key-material.js';
import { ScopeFiles } from '../../src/adapters/http/scope-file.js';
import type { InjectRequest, InjectResponse } from '../../src/adapters/http/inject.js';
import type { HttpServer } from '../../src/adapters/http/server.js';
import { Cleanups } from '../../src/app/cleanups.js';
import { createServers, type ServedDomain } from '../../src/app/servers.js';
import { createMetrics, localMetricsText, type AppMetrics } from '../../src/app/metrics.js';
import type { AuditEvent } from '../../src/core/audit/events.js';
import type { AuditStore, EventQuery } from '../../src/core/ports/audit-store.js';
import type { TokenSigner, TokenType } from '../../src/core/ports/crypto.js';
import { memoryCore, type MemoryCore } from './memory/core.js';
import type { MemoryAuditSink } from './memory/memory-store.js';

export const IN_PROCESS_ADMIN_TOKEN = 'in-process-admin-token-0123456789abcdef';
/** The origins app.fetch answers for (nothing listens there). */
export const PUBLIC_URL = 'https://public.in-process';
export const ADMIN_URL = 'http://admin.in-process';

export interface InProcessOptions {
  /** Settings as the service reads them from its environment (e.g. TRUST_PROXY_HOPS, RATE_LIMIT_*). */
  env?: Record<string, string>;
  /** Log lines go here (default: nowhere). */
  logger?: Logger;
}

export interface InProcessApp {
  config: Config;
  /** The memory ports and the core's services behind the routes (to seed, fault or inspect). */
  core: MemoryCore;
  metrics: AppMetrics;
  publicServer: HttpServer;
  adminServer: HttpServer;
  /** A request to the public listener. */
  inject(request: InjectRequest): Promise<InjectResponse>;
  /** A request to the internal listener (admin API, /readyz, /metrics); add the bearer yourself. */
  injectAdmin(request: InjectRequest): Promise<InjectResponse>;
  /** fetch() for PUBLIC_URL and ADMIN_URL, answered by inject: suites written against fetch run unchanged. */
  fetch: typeof fetch;
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
  /** The admin client of the process-level suites, on app.fetch. */
  admin: AdminClient;
  close(): Promise<void>;
}

/** RS256 in this thread with jose (the worker pool's signer does the same off the event loop). */
class InThreadSigner implements TokenSigner {
  private readonly keys = new Map<string, ReturnType<typeof importPKCS8>>();
  private readonly encoder = new TextEncoder();

  async signToken(kid: string, privateKeyPem: string, payload: string, _signal?: AbortSignal, typ: TokenType = 'JWT'): Promise<string> {
    let key = this.keys.get(kid);
    if (!key) this.keys.set(kid, (key = importPKCS8(privateKeyPem, 'RS256')));
    return new CompactSign(this.encoder.encode(payload)).setProtectedHeader({ alg: 'RS256', typ, kid }).sign(await key);
  }
}

/** The audit trail read back from the memory sink (GET /admin/v1/events). */
class MemoryAuditStore implements AuditStore {
  constructor(private readonly sink: MemoryAuditSink) {}

  async insert(events: AuditEvent[]): Promise<number> {
    for (const event of events) this.sink.emit(event);
    return events.length;
  }

  async list(query: EventQuery): Promise<AuditEvent[]> {
    const after = query.after;
    return this.sink.events
      .filter((e) => query.types.length === 0 || query.types.includes(e.type))
      .filter((e) => query.agentId === undefined || e.agentId === query.agentId)
      .filter((e) => query.platformId === undefined || e.platformId === query.platformId)
      .filter((e) => (query.since === undefined || e.at >= query.since) && (query.until === undefined || e.at < query.until))
      .filter((e) => !after || e.at > after.at || (e.at === after.at && e.id > after.id))
      .sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .slice(0, query.limit);
  }

  async maintain(): Promise<undefined> {
    return undefined;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}

export async function inProcessApp(options: InProcessOptions = {}): Promise<InProcessApp> {
  const config = loadConfig({ ADMIN_TOKEN: IN_PROCESS_ADMIN_TOKEN, PUBLIC_BASE_URL: PUBLIC_URL, DATA_DIR: '/nonexistent-in-process', ...options.env });
  const logger = options.logger ?? createLogger('silent');
  const metrics = createMetrics({ logger });
  const cleanups = new Cleanups();
  // Tokens and the revocation feed's SETs alike (servers.ts makes the feed's transmitter with it).
  const signer = new InThreadSigner();
  const core = await memoryCore({
    material: new RsaKeyMaterial({ kek: randomBytes(32) }),
    signer,
    issuer: config.issuer,
    apiKeyPrefix: config.apiKeyPrefix,
    tokenTtlSeconds: config.tokenTtlSeconds,
    tokenPoints: config.rateLimitTokenPoints,
    authFailPoints: config.rateLimitAuthFailPoints,
    tokenWindowSeconds: config.rateLimitTokenWindowSeconds,
    authFailWindowSeconds: config.rateLimitAuthFailWindowSeconds,
    argon2MaxPerAddress: config.argon2MaxPerAddress,
    propagationSeconds: config.keyPropagationSeconds,
    telemetry: metrics.telemetry,
  });
  cleanups.add(() => core.stop());
  declareKeyMetrics(metrics.registry, () => core.keys.keyInfo());
  const domain: ServedDomain = {
    pools: { ping: async () => true, signToken: (...args) => signer.signToken(...args) },
    keys: core.keys,
    authenticator: core.authenticator,
    audit: { sink: core.audit, store: new MemoryAuditStore(core.audit), trail: undefined, close: async () => {} },
    tokens: core.tokens,
    revocationLog: core.log,
    backgroundFailure: (what, error) => logger.error({ what, err: { message: (error as Error).message } }, 'background failure'),
    feedCredentials: core.feedCredentials,
    platforms: core.platforms,
    scopeFiles: new ScopeFiles({ platforms: core.platforms }),
    agents: core.agents,
    clientKeys: core.clientKeys,
    clock: ANY_CLOCK,
  };
  const servers = createServers(
    {
      config,
      logger,
      metrics,
      stores: {
        redis: undefined,
        redisStatus: undefined,
        store: { redisCacheTrusted: false },
        bus: core.bus,
        primary: { check: async () => ({ writable: !core.memory.down, server: 'memory' }) },
      },
      domain,
      adminToken: IN_PROCESS_ADMIN_TOKEN,
      metricsText: localMetricsText(metrics.registry),
      shuttingDown: () => false,
    },
    cleanups,
  );

  const injectFetch = (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const server = url.origin === PUBLIC_URL ? servers.public : url.origin === ADMIN_URL ? servers.admin : undefined;
    if (!server) throw new TypeError(`in-process fetch: ${url.origin} is neither ${PUBLIC_URL} nor ${ADMIN_URL}`);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const headers: [string, string][] = [...request.headers];
    const answer = await server.inject({ method: request.method, url: `${url.pathname}${url.search}`, headers, body });
    const bodiless = answer.status === 204 || answer.status === 304 || request.method === 'HEAD';
    return new Response(bodiless ? null : answer.body, { status: answer.status, headers: answer.headers });
  }) as typeof fetch;

  const target = { adminUrl: ADMIN_URL, adminToken: IN_PROCESS_ADMIN_TOKEN, fetch: injectFetch };
  return {
    config,
    core,
    metrics,
    publicServer: servers.public,
    adminServer: servers.admin,
    inject: (request) => servers.public.inject(request),
    injectAdmin: (request) => servers.admin.inject(request),
    fetch: injectFetch,
    publicUrl: PUBLIC_URL,
    adminUrl: ADMIN_URL,
    adminToken: IN_PROCESS_ADMIN_TOKEN,
    admin: new AdminClient(target),
    close: async () => {
      servers.public.closeAll();
      servers.admin.closeAll();
      await cleanups.run(logger);
    },
  };
}
