// Prometheus metrics. Label values are always from closed sets (route patterns, status codes, outcome
// names): never an id, a key or a secret.
import client from 'prom-client';
import { RequestSeries } from './request-series.js';
import { PendingCounts } from './pending-counts.js';
import { StateDuration } from './state-duration.js';
import { ERRORS } from '../../core/errors.js';
import type { BackgroundTask } from '../../core/ports/telemetry.js';

// Label values of ace_http_*{method}: what server.ts passes (knownMethod), nothing else.
const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other']);


/** What a failed Redis command was doing (ace_redis_failures_total's `operation`). */
export type RedisOperation = 'cache_get' | 'cache_set' | 'cache_delete' | 'cache_sweep' | 'publish' | 'rate_limit_refund' | 'admin_limit_read' | 'reconnect';
export type CacheName = 'local' | 'redis' | 'verified';
export type StoreName = 'postgres' | 'redis';
/** What an instance that is still ready can be serving without (ace_degraded's `component`). */
export type DegradedComponent = 'postgres' | 'redis';

export class Metrics {
  readonly registry = new client.Registry();
  /** ace_http_requests_total and ace_http_request_duration_seconds (request-series.ts: no label hashing per request). */
  private readonly http: RequestSeries;
  private readonly tokens: client.Counter<'outcome'>;
  private readonly workerTask: client.Histogram<'pool'>;
  private readonly workerRejected: client.Counter<'pool'>;
  private readonly workerReplaced: client.Counter<'pool'>;
  private readonly cacheRequests: client.Counter<'cache' | 'result'>;
  private readonly rateLimitRefusals: client.Counter<'limiter'>;
  private readonly credentialChecks: client.Counter;
  private readonly clientAssertions: client.Counter;
  private readonly backgroundFailures: client.Counter;
  private readonly adminAuthFailures: client.Counter;
  private readonly forwardedIgnored: client.Counter;
  private readonly storeUp: client.Gauge<'store'>;
  private readonly redisTopology: client.Gauge<'topology' | 'primary'>;
  private readonly redisCacheTrusted: client.Gauge;
  private readonly redisFailures: client.Counter<'operation'>;
  private readonly ready: client.Gauge;
  private readonly degraded: client.Gauge<'component'>;
  private readonly auditWritten: client.Counter<'sink'>;
  private readonly auditBatch: client.Histogram;
  private readonly auditFailed: client.Counter;
  private readonly auditSpool: client.Gauge;
  private readonly storeUnavailable: StateDuration<'store'>;
  private readonly redisCacheBypassed: StateDuration;
  private readonly auditSpooling: StateDuration;
  private readonly auditRefusing: StateDuration;
  // The cache layer is bypassed while Redis fails its checks (every read would fail) as well as while
  // the layer is distrusted (cached-store.ts), which begins only at the next cache call or reconnect.
  private redisUp = true;
  private redisCacheIsTrusted = true;

  constructor() {
    const registers = [this.registry];
    client.collectDefaultMetrics({ register: this.registry });
    // promtool check metrics: a gauge must not end in _total. prom-client's defaults export the totals
    // of active handles/requests/resources under such names; each is sum() of the per-type gauge
    // without the suffix (nodejs_active_handles{type}), so drop them.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(name);
    }
    this.http = new RequestSeries(this.registry, {
      counterName: 'ace_http_requests_total',
      counterHelp: 'HTTP requests answered, by route pattern, method and status.',
      histogramName: 'ace_http_request_duration_seconds',
      histogramHelp: 'Time from request to the last byte of the answer.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56],
    });
    this.tokens = new client.Counter({
      name: 'ace_tokens_issued_total',
      help: 'Token requests by outcome (issued, or the refusal code).',
      labelNames: ['outcome'],
      registers,
      collect: () => this.tokenCounts.flushInto(this.tokens),
    });
    this.workerTask = new client.Histogram({
      name: 'ace_worker_task_duration_seconds',
      help: 'Crypto task time on a thread (dispatch to answer; the wait in line is not included), per pool.',
      labelNames: ['pool'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2.5],
      registers,
    });
    this.workerRejected = new client.Counter({
      name: 'ace_worker_tasks_rejected_total',
      help: 'Crypto tasks refused (queue full) or failed (worker crashed or hung), per pool.',
      labelNames: ['pool'],
      registers,
    });
    this.workerReplaced = new client.Counter({
      name: 'ace_worker_threads_replaced_total',
      help: 'Crypto worker threads stopped and replaced because a task crashed or overran its deadline, per pool.',
      labelNames: ['pool'],
      registers,
    });
    this.cacheRequests = new client.Counter({
      name: 'ace_cache_requests_total',
      help: 'Cache look-ups by cache and result (hit ratio = hit / (hit + miss)).',
      labelNames: ['cache', 'result'],
      registers,
      collect: () => this.cacheCounts.flushInto(this.cacheRequests),
    });
    this.rateLimitRefusals = new client.Counter({
      name: 'ace_rate_limit_refusals_total',
      help: 'Requests refused with 429, by limiter.',
      labelNames: ['limiter'],
      registers,
    });
    this.credentialChecks = new client.Counter({
      name: 'ace_credential_checks_total',
      help: 'Credential checks run in the argon2 pool (each verifies one hash; two only for hashes older than the secret hint), successful or not.',
      registers,
    });
    this.clientAssertions = new client.Counter({
      name: 'ace_client_assertions_total',
      help: 'Client assertions checked (private_key_jwt, workload identity tokens), by method and outcome: accepted, or the reason of a refusal (the client is only ever told invalid_client).',
      labelNames: ['method', 'outcome'],
      registers,
    });
    this.backgroundFailures = new client.Counter({
      name: 'ace_background_failures_total',
      help: 'Work that failed without failing a request and is retried on its next turn (signing-key refresh and rotation, revocation push and purge, invalidation after a commit, listing enrichment), by task.',
      labelNames: ['task'],
      registers,
    });
    this.adminAuthFailures = new client.Counter({
      name: 'ace_admin_auth_failures_total',
      help: 'Admin API requests with a missing or wrong bearer token (refusals past the limit count under ace_rate_limit_refusals_total).',
      registers,
    });
    this.forwardedIgnored = new client.Counter({
      name: 'ace_forwarded_for_ignored_total',
      help: 'Requests whose X-Forwarded-For was ignored, by reason: untrusted_peer (the direct peer is not a trusted proxy, TRUST_PROXY_PEERS / TRUST_PROXY_CIDRS: clients reach the service without the proxy), trust_proxy_off (TRUST_PROXY_HOPS=0 and no TRUST_PROXY_CIDRS: a proxy in front is unannounced, every client behind it counts as one address).',
      labelNames: ['reason'],
      registers,
    });
    this.storeUp = new client.Gauge({
      name: 'ace_store_up',
      help: '1 when the store answered its last check, else 0.',
      labelNames: ['store'],
      registers,
      aggregator: 'min', // down in any process counts as down
    });
    this.redisTopology = new client.Gauge({
      name: 'ace_redis_topology_info',
      help: 'The Redis topology in use (standalone, sentinel, cluster) and its master(s) host:port, 1 per master; absent without Redis.',
      labelNames: ['topology', 'primary'],
      registers,
      aggregator: 'max',
    });
    this.redisCacheTrusted = new client.Gauge({
      name: 'ace_redis_cache_trusted',
      help: '1 while the Redis cache layer is read; 0 while it is bypassed after a failed Redis write or a reconnect, until it has been swept.',
      registers,
      aggregator: 'min',
    });
    this.redisFailures = new client.Counter({
      name: 'ace_redis_failures_total',
      help: 'Redis commands that failed, by operation (cache_get, cache_set, cache_delete, cache_sweep, publish, rate_limit_refund, admin_limit_read, reconnect); none is ignored.',
      labelNames: ['operation'],
      registers,
    });
    this.ready = new client.Gauge({ name: 'ace_ready', help: '1 when the instance is ready for traffic.', registers, aggregator: 'min' });
    this.degraded = new client.Gauge({
      name: 'ace_degraded',
      help: '1 while the instance is ready but serves without this component (postgres: no writable primary, tokens come from the caches and the audit spool; redis: configured but not answering, limits are per process).',
      labelNames: ['component'],
      registers,
      aggregator: 'max', // degraded in any process counts
    });
    for (const component of ['postgres', 'redis'] satisfies DegradedComponent[]) this.degraded.set({ component }, 0);
    this.auditWritten = new client.Counter({
      name: 'ace_audit_events_written_total',
      help: 'Audit events made durable, by where: postgres, or the local spool while Postgres is unreachable.',
      labelNames: ['sink'],
      registers,
    });
    this.auditBatch = new client.Histogram({
      name: 'ace_audit_batch_size',
      help: 'Audit events per group-commit batch (one INSERT statement or one spool write).',
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
      registers,
    });
    this.auditFailed = new client.Counter({
      name: 'ace_audit_write_failures_total',
      help: 'Audit events neither Postgres nor the spool could take (their token requests got 503).',
      registers,
    });
    this.auditSpool = new client.Gauge({
      name: 'ace_audit_spool_events',
      help: 'Audit events waiting in the local spool for Postgres.',
      registers,
    });
    // The states the state-based alert rules watch, each as how long it has lasted (state-duration.ts).
    this.storeUnavailable = new StateDuration({
      name: 'ace_store_unavailable_seconds',
      help: 'How long the store has failed its checks (ace_store_up 0), in seconds; 0 while it answers.',
      labelNames: ['store'],
      registers,
    });
    this.redisCacheBypassed = new StateDuration({
      name: 'ace_redis_cache_bypassed_seconds',
      help: 'How long the Redis cache layer has been bypassed (Redis fails its checks, or ace_redis_cache_trusted 0), in seconds; 0 while it is read, and without Redis.',
      registers,
    });
    this.auditSpooling = new StateDuration({
      name: 'ace_audit_spooling_seconds',
      help: 'How long audit events have gone to the local spool instead of Postgres, or waited there to be drained, in seconds; 0 when not.',
      registers,
    });
    this.auditRefusing = new StateDuration({
      name: 'ace_audit_refusing_seconds',
      help: 'How long neither Postgres nor the spool has taken an audit batch, in seconds (token requests answer 503 until one is written); 0 when not.',
      registers,
    });
    this.redisCacheBypassed.set(false);
    this.auditSpooling.set(false);
    this.auditRefusing.set(false);
    // prom-client's process_start_time_seconds is left out of the cluster aggregate; this one reports the
    // newest process, so the restart of any process of the pod changes it.
    new client.Gauge({ name: 'ace_process_start_time_seconds', help: 'Start time of the (newest) service process, Unix seconds.', registers, aggregator: 'max' }).set(
      Math.floor((Date.now() - process.uptime() * 1000) / 1000),
    );
    for (const sink of ['postgres', 'spool']) this.auditWritten.inc({ sink }, 0);
    // Pre-create series so dashboards and ratios see zeros instead of gaps.
    for (const cache of ['local', 'redis', 'verified'] as const) for (const result of ['hit', 'miss']) this.cacheRequests.inc({ cache, result }, 0);
    for (const limiter of ['token_per_key', 'auth_fail_per_address', 'argon2_share_per_address', 'admin_auth_fail_per_address']) this.rateLimitRefusals.inc({ limiter }, 0);
    for (const reason of ['untrusted_peer', 'trust_proxy_off']) this.forwardedIgnored.inc({ reason }, 0);
    for (const pool of ['argon2', 'sign']) {
      this.workerRejected.inc({ pool }, 0);
      this.workerReplaced.inc({ pool }, 0);
    }
  }

  // Label sets are few and fixed: keep their bound children instead of hashing labels per request.
  // Counted on every token request: plain numbers, added to the counters when scraped (pending-counts.ts).
  private readonly tokenCounts = new PendingCounts(['outcome']);
  private readonly cacheCounts = new PendingCounts(['cache', 'result']);

  /** `method` is one of the known methods or `other` (server.ts knownMethod); checked again here. */
  observeHttp(route: string, method: string, status: number, seconds: number): void {
    if (!HTTP_METHODS.has(method)) method = 'other';
    this.http.record(route, method, status, seconds);
  }

  /** `outcome` is `issued`, `unavailable` (not a ServiceError) or a catalog code; anything else is counted as `other`. */
  tokenOutcome(outcome: string): void {
    if (outcome !== 'issued' && outcome !== 'unavailable' && !Object.hasOwn(ERRORS, outcome)) outcome = 'other';
    this.tokenCounts.increment(outcome);
  }

  observeWorkerTask(pool: string, seconds: number): void {
    this.workerTask.observe({ pool }, seconds);
  }

  workerTaskRejected(pool: string): void {
    this.workerRejected.inc({ pool });
  }

  workerThreadReplaced(pool: string): void {
    this.workerReplaced.inc({ pool });
  }

  cache(cache: CacheName, hit: boolean): void {
    this.cacheCounts.increment(cache, hit ? 'hit' : 'miss');
  }

  rateLimited(limiter: 'token_per_key' | 'auth_fail_per_address' | 'argon2_share_per_address' | 'admin_auth_fail_per_address'): void {
    this.rateLimitRefusals.inc({ limiter });
  }

  adminAuthFailed(): void {
    this.adminAuthFailures.inc();
  }

  forwardedForIgnored(reason: 'untrusted_peer' | 'trust_proxy_off'): void {
    this.forwardedIgnored.inc({ reason });
  }

  credentialChecked(): void {
    this.credentialChecks.inc();
  }

  clientAssertion(method: string, outcome: string): void {
    this.clientAssertions.inc({ method, outcome });
  }

  backgroundFailure(task: BackgroundTask): void {
    this.backgroundFailures.inc({ task });
  }

  setStoreUp(store: StoreName, up: boolean): void {
    this.storeUp.set({ store }, up ? 1 : 0);
    this.storeUnavailable.set(!up, { store });
    if (store === 'redis') {
      this.redisUp = up;
      this.redisCacheBypassed.set(!this.redisUp || !this.redisCacheIsTrusted);
    }
  }

  /** The Redis topology and its current master(s); replaces what was reported before. */
  setRedisTopology(topology: string, primaries: string[]): void {
    this.redisTopology.reset();
    for (const primary of primaries.length > 0 ? primaries : ['unknown']) this.redisTopology.set({ topology, primary }, 1);
  }

  /** No Redis configured: the cache layer is absent, not bypassed (nothing to alert on). */
  noRedisCache(): void {
    this.redisCacheTrusted.set(0);
  }

  setRedisCacheTrusted(trusted: boolean): void {
    this.redisCacheTrusted.set(trusted ? 1 : 0);
    this.redisCacheIsTrusted = trusted;
    this.redisCacheBypassed.set(!this.redisUp || !this.redisCacheIsTrusted);
  }

  redisFailed(operation: RedisOperation): void {
    this.redisFailures.inc({ operation });
  }

  setReady(ready: boolean): void {
    this.ready.set(ready ? 1 : 0);
  }

  setDegraded(component: DegradedComponent, degraded: boolean): void {
    this.degraded.set({ component }, degraded ? 1 : 0);
  }

  auditWrittenTo(sink: 'postgres' | 'spool', events: number): void {
    this.auditWritten.inc({ sink }, events);
  }

  auditBatchSize(size: number): void {
    this.auditBatch.observe(size);
  }

  auditWriteFailed(events: number): void {
    this.auditFailed.inc(events);
  }

  auditSpoolDepth(depth: number): void {
    this.auditSpool.set(depth);
  }

  /** The trail sends batches to the spool, or the spool still holds events to drain. */
  setAuditSpooling(spooling: boolean): void {
    this.auditSpooling.set(spooling);
  }

  /** The last audit batch was taken by neither Postgres nor the spool (its requests were refused). */
  setAuditRefusing(refusing: boolean): void {
    this.auditRefusing.set(refusing);
  }
}
