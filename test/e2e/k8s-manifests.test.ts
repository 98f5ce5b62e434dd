// Deployment artefacts checked offline against the service's real configuration: the kustomize base
// and production overlay (rendered by test/support/k8s.ts, cross-checked with `kubectl kustomize` when
// kubectl is installed), the Kubernetes schemas (kubernetes-models), the alert rules and the Grafana
// dashboard (only metrics the service exports), and the Dockerfile. No cluster, no Docker, no service.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type Config } from '../../src/config/config.js';
import { ERRORS } from '../../src/core/errors.js';
import {
  ROOT,
  SERVICE_METRICS,
  configEnvNames,
  exportedMetricFor,
  loadYamlObjects,
  parseDockerfile,
  podSpecs,
  promqlProblems,
  renderKustomization,
  scanPromql,
  unknownFields,
  validateWithModel,
  type Json,
  type K8sObject,
} from '../support/k8s.js';
import { missingOutsideCi } from '../support/tools.js';

const DIRS = { base: path.join(ROOT, 'k8s/base'), production: path.join(ROOT, 'k8s/overlays/production') };
type Variant = keyof typeof DIRS;
const VARIANTS = Object.keys(DIRS) as Variant[];
const CRD_KINDS = new Set(['ServiceMonitor', 'PrometheusRule']);
const SECRET_TEMPLATE = path.join(ROOT, 'k8s/base/secret.template.yaml');
const DASHBOARD = path.join(ROOT, 'k8s/grafana/ace-dashboard.json');
const DEFAULTS = loadConfig({});

/** Values the Secret would hold, valid for loadConfig (the template itself only has placeholders). */
const SECRET_SAMPLES: Record<string, string> = {
  ADMIN_TOKEN: 'a'.repeat(32),
  KEY_ENCRYPTION_KEY: '11'.repeat(32),
  DATABASE_URL: 'postgres://ace:pw@postgres.invalid:5432/ace',
  REDIS_URL: 'redis://redis.invalid:6379',
};

const cache = new Map<Variant, K8sObject[]>();
function render(variant: Variant): K8sObject[] {
  if (!cache.has(variant)) cache.set(variant, renderKustomization(DIRS[variant]));
  return cache.get(variant)!;
}
function only(variant: Variant, kind: string, name?: string): K8sObject {
  const found = render(variant).filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found, `${variant}: exactly one ${kind}${name ? ` ${name}` : ''}`).toHaveLength(1);
  return found[0]!;
}
function deployment(variant: Variant): K8sObject {
  return only(variant, 'Deployment');
}
function container(variant: Variant): Json {
  const containers = deployment(variant).spec.template.spec.containers;
  expect(containers).toHaveLength(1);
  return containers[0];
}
function secretTemplate(): K8sObject {
  const [secret, ...rest] = loadYamlObjects(SECRET_TEMPLATE);
  expect(rest).toHaveLength(0);
  return secret!;
}

/** The environment the container gets: ConfigMap (envFrom), literal env, Secret refs filled with samples. */
function podEnv(variant: Variant): Record<string, string> {
  const c = container(variant);
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    const cm = only(variant, 'ConfigMap', from.configMapRef.name);
    Object.assign(env, cm.data);
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) env[e.name] = SECRET_SAMPLES[e.valueFrom.secretKeyRef.key] ?? 'unknown-secret';
    else throw new Error(`env ${e.name}: unexpected source`);
  }
  return env;
}
function podConfig(variant: Variant): Config {
  return loadConfig(podEnv(variant));
}

function containerPort(variant: Variant, port: string | number): number {
  if (typeof port === 'number') return port;
  const found = (container(variant).ports ?? []).find((p: Json) => p.name === port);
  expect(found, `container port named ${port}`).toBeDefined();
  return found.containerPort;
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  return !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

function quantity(value: string | number): number {
  const m = /^([0-9.]+)(m|Ki|Mi|Gi)?$/.exec(String(value));
  if (!m) throw new Error(`cannot read quantity ${value}`);
  const scale: Record<string, number> = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };
  return Number(m[1]) * (m[2] ? scale[m[2]]! : 1);
}

/** Pause of the preStop hook in seconds (node -e "setTimeout(..., ms)" or a sleep action). */
function preStopSeconds(c: Json): number {
  const preStop = c.lifecycle?.preStop;
  if (preStop?.sleep) return preStop.sleep.seconds;
  const command: string[] = preStop?.exec?.command ?? [];
  expect(command[0], 'preStop runs node (no shell utilities in the image)').toBe('node');
  const ms = /setTimeout\([^,]+,\s*(\d+)\s*\)/.exec(command.join(' '))?.[1];
  expect(ms, `preStop command ${command.join(' ')}`).toBeDefined();
  return Number(ms) / 1000;
}

function alertRules(variant: Variant): Json[] {
  return only(variant, 'PrometheusRule').spec.groups.flatMap((g: Json) => g.rules);
}

// ---------------------------------------------------------------------------------------------------

describe.each(VARIANTS)('k8s %s', (variant) => {
  it('renders the expected objects', () => {
    const ids = render(variant).map((o) => `${o.kind}/${o.metadata.name.replace(/-[a-z0-9]{10}$/, '-<hash>')}`).sort();
    expect(ids).toEqual(
      [
        'ConfigMap/ace-config-<hash>',
        'ConfigMap/ace-grafana-dashboard',
        'Deployment/ace',
        'HorizontalPodAutoscaler/ace',
        'NetworkPolicy/ace',
        'PodDisruptionBudget/ace',
        'PrometheusRule/ace',
        'Service/ace',
        'Service/ace-internal',
        'ServiceMonitor/ace',
        ...(variant === 'production' ? ['Ingress/ace'] : []),
      ].sort(),
    );
    // The Secret is a template outside the kustomization: applying must never overwrite real values.
    expect(render(variant).some((o) => o.kind === 'Secret')).toBe(false);
  });

  it('every built-in object passes the Kubernetes schema and has no unknown fields', async () => {
    for (const obj of render(variant).filter((o) => !CRD_KINDS.has(o.kind))) {
      await expect(validateWithModel(obj), `${obj.kind}/${obj.metadata.name}`).resolves.toBeUndefined();
      expect(unknownFields(obj), `${obj.kind}/${obj.metadata.name}`).toEqual([]);
    }
  });

  it('the ServiceMonitor and PrometheusRule have the fields the Prometheus Operator requires', () => {
    const monitor = only(variant, 'ServiceMonitor');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(Object.keys(monitor.spec).sort()).toEqual(['endpoints', 'selector']);
    expect(monitor.spec.endpoints.length).toBeGreaterThan(0);
    for (const endpoint of monitor.spec.endpoints) {
      expect(Object.keys(endpoint).every((k) => ['port', 'path', 'scheme', 'interval', 'scrapeTimeout'].includes(k)), JSON.stringify(endpoint)).toBe(true);
      expect(endpoint.interval).toMatch(/^\d+[smh]$/);
      expect(quantityDuration(endpoint.scrapeTimeout)).toBeLessThanOrEqual(quantityDuration(endpoint.interval));
    }

    const rule = only(variant, 'PrometheusRule');
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(Object.keys(rule.spec)).toEqual(['groups']);
    const groupNames = rule.spec.groups.map((g: Json) => g.name);
    expect(new Set(groupNames).size).toBe(groupNames.length);
    for (const group of rule.spec.groups) {
      expect(typeof group.name).toBe('string');
      expect(group.rules.length).toBeGreaterThan(0);
      for (const r of group.rules) {
        expect(Object.keys(r).every((k) => ['alert', 'expr', 'for', 'labels', 'annotations'].includes(k)), r.alert).toBe(true);
        expect(r.alert).toMatch(/^Ace[A-Za-z0-9]+$/);
        expect(typeof r.expr).toBe('string');
        // State rules bound a duration the service exports and fire without a `for`.
        if (r.for !== undefined) expect(r.for).toMatch(/^\d+[smh]$/);
        expect(['critical', 'warning', 'info']).toContain(r.labels?.severity);
        for (const v of [...Object.values(r.labels ?? {}), ...Object.values(r.annotations ?? {})]) expect(typeof v).toBe('string');
        expect(r.annotations?.summary, r.alert).toBeTruthy();
        expect(r.annotations?.description, r.alert).toBeTruthy();
      }
    }
    const alerts = alertRules(variant).map((r) => r.alert);
    expect(new Set(alerts).size).toBe(alerts.length);
  });

  it('container ports, probes and Service ports are the ports the service listens on', () => {
    const config = podConfig(variant);
    // The manifests rely on the defaults and on their own ConfigMap agreeing.
    expect([config.port, config.adminPort]).toEqual([DEFAULTS.port, DEFAULTS.adminPort]);
    const c = container(variant);
    expect(c.ports.map((p: Json) => [p.name, p.containerPort, p.protocol])).toEqual([
      ['http', config.port, 'TCP'],
      ['admin', config.adminPort, 'TCP'],
    ]);
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(containerPort(variant, c.readinessProbe.httpGet.port)).toBe(config.adminPort);
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    expect(containerPort(variant, c.livenessProbe.httpGet.port)).toBe(config.adminPort);
    if (c.startupProbe) {
      expect(c.startupProbe.httpGet.path).toBe('/healthz');
      expect(containerPort(variant, c.startupProbe.httpGet.port)).toBe(config.adminPort);
    }

    const publicService = only(variant, 'Service', 'ace');
    expect(publicService.spec.ports.map((p: Json) => containerPort(variant, p.targetPort))).toEqual([config.port]);
    const internal = only(variant, 'Service', 'ace-internal');
    expect(internal.spec.ports.map((p: Json) => containerPort(variant, p.targetPort))).toEqual([config.adminPort]);
  });

  it('both ports listen on the pod IP (probes and Prometheus connect there)', () => {
    const config = podConfig(variant);
    expect(config.host).toBe('0.0.0.0');
    expect(config.adminHost).toBe('0.0.0.0');
  });

  it('every setting in the ConfigMap is one the service reads, with a valid value', () => {
    const known = configEnvNames();
    expect(known.size).toBeGreaterThan(30);
    const cm = only(variant, 'ConfigMap', container(variant).envFrom[0].configMapRef.name);
    const unknown = Object.keys(cm.data).filter((name) => !known.has(name));
    expect(unknown, 'settings src/config/settings.ts does not declare').toEqual([]);
    expect(() => podConfig(variant)).not.toThrow();
    for (const e of container(variant).env ?? []) expect(known.has(e.name), e.name).toBe(true);
  });

  it('secrets come from the Secret template, which holds only placeholders the service refuses', async () => {
    const secret = secretTemplate();
    expect(secret.kind).toBe('Secret');
    await expect(validateWithModel(secret)).resolves.toBeUndefined();
    expect(unknownFields(secret)).toEqual([]);
    const keys = Object.keys(secret.stringData);
    expect(keys.sort()).toEqual(['ADMIN_TOKEN', 'DATABASE_URL', 'KEY_ENCRYPTION_KEY', 'REDIS_URL']);
    for (const key of keys) expect(configEnvNames().has(key), key).toBe(true);
    expect(Object.values(secret.stringData).every((v) => v === 'REPLACE_ME')).toBe(true);
    expect(secret.data).toBeUndefined();

    const refs = (container(variant).env ?? []).filter((e: Json) => e.valueFrom?.secretKeyRef);
    expect(refs.length).toBeGreaterThan(0);
    for (const e of refs) {
      expect(e.valueFrom.secretKeyRef.name).toBe(secret.metadata.name);
      expect(keys).toContain(e.valueFrom.secretKeyRef.key);
      expect(e.name).toBe(e.valueFrom.secretKeyRef.key);
    }
    // Secret values never sit in the ConfigMap.
    const cmNames = Object.keys(only(variant, 'ConfigMap', container(variant).envFrom[0].configMapRef.name).data);
    expect(cmNames.filter((n) => keys.includes(n))).toEqual([]);

    // Applied unfilled, the pod fails at start instead of running with a guessable token or key.
    const env = podEnv(variant);
    for (const e of refs) env[e.name] = secret.stringData[e.valueFrom.secretKeyRef.key];
    expect(() => loadConfig(env)).toThrow(ConfigError);
  });

  it('runs as non-root with a read-only root filesystem and no privileges', () => {
    const pod = deployment(variant).spec.template.spec;
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(pod.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.hostNetwork ?? false).toBe(false);
    const sc = container(variant).securityContext;
    expect(sc.runAsNonRoot).toBe(true);
    expect(sc.allowPrivilegeEscalation).toBe(false);
    expect(sc.readOnlyRootFilesystem).toBe(true);
    expect(sc.privileged ?? false).toBe(false);
    expect(sc.capabilities).toEqual({ drop: ['ALL'] });
    expect(sc.seccompProfile).toEqual({ type: 'RuntimeDefault' });
  });

  it('every path the service writes is a mounted volume', () => {
    const c = container(variant);
    const pod = deployment(variant).spec.template.spec;
    const mounts = new Map<string, string>(c.volumeMounts.map((m: Json) => [m.mountPath, m.name]));
    for (const dir of [podConfig(variant).dataDir, '/tmp']) {
      expect(mounts.has(dir), `${dir} is mounted`).toBe(true);
      const volume = pod.volumes.find((v: Json) => v.name === mounts.get(dir));
      expect(volume?.emptyDir ?? volume?.persistentVolumeClaim, `${dir} volume`).toBeDefined();
    }
  });

  it('the audit spool stays inside the DATA_DIR volume with headroom: AUDIT_SPOOL_MAX_BYTES at most half its sizeLimit', () => {
    const c = container(variant);
    const pod = deployment(variant).spec.template.spec;
    const config = podConfig(variant);
    const mount = c.volumeMounts.find((m: Json) => m.mountPath === config.dataDir);
    const sizeLimit = pod.volumes.find((v: Json) => v.name === mount?.name)?.emptyDir?.sizeLimit;
    expect(sizeLimit, 'the DATA_DIR emptyDir has a sizeLimit').toBeDefined();
    // Past the sizeLimit the kubelet evicts the pod, spool and all: the spool must be refused well before.
    expect(config.audit.spoolMaxBytes).toBeGreaterThan(0);
    expect(config.audit.spoolMaxBytes).toBeLessThanOrEqual(quantity(sizeLimit) / 2);
  });

  it('drains before the kubelet kills: grace period > preStop pause + SHUTDOWN_DRAIN_SECONDS + SHUTDOWN_TIMEOUT_MS', () => {
    const pod = deployment(variant).spec.template.spec;
    const preStop = preStopSeconds(container(variant));
    const config = podConfig(variant);
    expect(preStop).toBeGreaterThanOrEqual(3);
    // Balancers that poll /readyz (every 1-5 s) see the 503 and move off before the port closes.
    expect(config.shutdownDrainSeconds).toBeGreaterThanOrEqual(3);
    // 5 s margin: a cluster primary gives its workers the drain + SHUTDOWN_TIMEOUT_MS + 4 s before it exits.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + config.shutdownDrainSeconds + config.shutdownTimeoutMs / 1000 + 5);
  });

  it('requests and limits: 2 CPUs; 256Mi/384Mi on external stores, room for PGlite when embedded', () => {
    const { requests, limits } = container(variant).resources;
    const config = podConfig(variant);
    expect(quantity(limits.cpu)).toBe(2);
    if (config.databaseUrl) {
      expect(quantity(requests.memory)).toBe(256 * 2 ** 20);
      expect(quantity(limits.memory)).toBe(384 * 2 ** 20);
    } else {
      // The embedded default peaks ~250 MiB and stays under 300 MiB under load (test/integration/embedded-memory.test.ts).
      expect(quantity(limits.memory)).toBeGreaterThanOrEqual(512 * 2 ** 20);
    }
    expect(quantity(requests.memory)).toBeLessThanOrEqual(quantity(limits.memory));
    expect(quantity(requests.cpu)).toBeGreaterThan(0);
    expect(quantity(requests.cpu)).toBeLessThanOrEqual(quantity(limits.cpu));
    // Thread pools (per process) sized to the pod, not to the node's core count.
    expect(config.workers).toBeLessThanOrEqual(quantity(limits.cpu));
    expect(config.workers * config.argon2Threads).toBeLessThanOrEqual(quantity(limits.cpu));
    expect(podEnv(variant)).toHaveProperty('ARGON2_THREADS');
    // libuv's pool too: its default counts the node's cores (availableParallelism ignores the CPU quota).
    expect(podEnv(variant)).toHaveProperty('UV_THREADPOOL_SIZE');
    expect(config.uvThreadpoolSize).toBeGreaterThan(0);
    expect(config.uvThreadpoolSize).toBeLessThanOrEqual(quantity(limits.cpu));
    expect(podEnv(variant)).toHaveProperty('SIGN_THREADS');
    expect(podEnv(variant)).toHaveProperty('WORKERS');
  });

  it('Services, HPA, PDB, NetworkPolicy and spread constraints all point at the Deployment pods', () => {
    const d = deployment(variant);
    const podLabels = d.spec.template.metadata.labels;
    expect(selects(d.spec.selector.matchLabels, podLabels)).toBe(true);
    for (const name of ['ace', 'ace-internal']) expect(selects(only(variant, 'Service', name).spec.selector, podLabels), name).toBe(true);
    expect(selects(only(variant, 'PodDisruptionBudget').spec.selector.matchLabels, podLabels)).toBe(true);
    expect(selects(only(variant, 'NetworkPolicy').spec.podSelector.matchLabels, podLabels)).toBe(true);
    const spread = d.spec.template.spec.topologySpreadConstraints;
    expect(spread.map((t: Json) => t.topologyKey).sort()).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    for (const t of spread) expect(selects(t.labelSelector.matchLabels, podLabels)).toBe(true);

    const hpa = only(variant, 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name });
    expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } } }]);
    expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
    expect(d.spec.replicas).toBeGreaterThanOrEqual(hpa.spec.minReplicas);
    expect(d.spec.replicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
    // A PDB that allows no eviction would block every node drain.
    const pdb = only(variant, 'PodDisruptionBudget').spec;
    expect(pdb.maxUnavailable ?? d.spec.replicas - pdb.minAvailable).toBeGreaterThanOrEqual(1);
  });

  it('NetworkPolicy: public port from anywhere, admin port only from this namespace and Prometheus', () => {
    const policy = only(variant, 'NetworkPolicy');
    const config = podConfig(variant);
    expect(policy.spec.policyTypes).toContain('Ingress');
    const rules = policy.spec.ingress.map((r: Json) => ({ ports: r.ports.map((p: Json) => containerPort(variant, p.port)), from: r.from }));
    // Every rule names its ports: a rule without ports would open every port.
    expect(policy.spec.ingress.every((r: Json) => r.ports?.length > 0)).toBe(true);
    expect(rules.some((r: Json) => r.ports.includes(config.port) && r.from === undefined)).toBe(true);
    const adminRules = rules.filter((r: Json) => r.ports.includes(config.adminPort));
    expect(adminRules.length).toBeGreaterThan(0);
    for (const rule of adminRules) {
      expect(rule.from?.length, 'admin port rule must name its peers').toBeGreaterThan(0);
      for (const peer of rule.from) {
        expect(peer.ipBlock).toBeUndefined();
        if (peer.namespaceSelector === undefined) {
          expect(peer.podSelector, 'same-namespace peer').toBeDefined(); // podSelector alone = this namespace
        } else {
          // Only one other namespace, named exactly, and only its Prometheus pods.
          expect(Object.keys(peer.namespaceSelector)).toEqual(['matchLabels']);
          expect(Object.keys(peer.namespaceSelector.matchLabels)).toEqual(['kubernetes.io/metadata.name']);
          expect(Object.keys(peer.podSelector?.matchLabels ?? {}).length).toBeGreaterThan(0);
        }
      }
    }
  });

  it('Prometheus in the monitoring namespace may reach the port the ServiceMonitor scrapes', () => {
    const policy = only(variant, 'NetworkPolicy');
    const internal = only(variant, 'Service', 'ace-internal');
    const prometheus = { namespace: { 'kubernetes.io/metadata.name': 'monitoring' }, pod: { 'app.kubernetes.io/name': 'prometheus' } };
    for (const endpoint of only(variant, 'ServiceMonitor').spec.endpoints) {
      const scraped = containerPort(variant, internal.spec.ports.find((p: Json) => p.name === endpoint.port).targetPort);
      const admitted = policy.spec.ingress.some(
        (rule: Json) =>
          rule.ports.some((p: Json) => containerPort(variant, p.port) === scraped) &&
          rule.from?.some((peer: Json) => selects(peer.namespaceSelector?.matchLabels, prometheus.namespace) && selects(peer.podSelector?.matchLabels, prometheus.pod)),
      );
      expect(admitted, `port ${scraped} from monitoring/prometheus`).toBe(true);
    }
  });

  it('alert texts name only error codes the service sends (the store-down alert: service_unavailable)', () => {
    const texts = alertRules(variant).map((r) => ({ alert: r.alert, text: Object.values<string>(r.annotations ?? {}).join(' ') }));
    for (const { alert, text } of texts) {
      for (const m of text.matchAll(/error_code\s+([a-z_]+)/g)) expect(Object.keys(ERRORS), `${alert}: ${m[0]}`).toContain(m[1]);
    }
    expect(texts.find((t) => t.alert === 'AceStoreDown')?.text).toContain('error_code service_unavailable');
  });

  it('the ServiceMonitor scrapes /metrics on the admin port through the internal Service only', () => {
    const monitor = only(variant, 'ServiceMonitor');
    const internal = only(variant, 'Service', 'ace-internal');
    expect(selects(monitor.spec.selector.matchLabels, internal.metadata.labels)).toBe(true);
    expect(selects(monitor.spec.selector.matchLabels, only(variant, 'Service', 'ace').metadata.labels)).toBe(false);
    for (const endpoint of monitor.spec.endpoints) {
      expect(endpoint.path).toBe('/metrics');
      const port = internal.spec.ports.find((p: Json) => p.name === endpoint.port);
      expect(port, `internal Service port ${endpoint.port}`).toBeDefined();
      expect(containerPort(variant, port.targetPort)).toBe(podConfig(variant).adminPort);
    }
  });

  it('alerts reference only metrics, labels and label values the service exports', () => {
    for (const rule of alertRules(variant)) expect(promqlProblems(rule.expr), rule.alert).toEqual([]);
    // `up` is keyed by job = the scraped Service's name (ServiceMonitor default).
    for (const rule of alertRules(variant)) {
      for (const sel of scanPromql(rule.expr).selectors.filter((s) => s.metric === 'up')) {
        expect(sel.matchers).toContainEqual({ label: 'job', op: '=', value: 'ace-internal' });
      }
    }
  });

  it('alerts cover 5xx ratio, p99 latency, 429 ratio, queue saturation, key age, stores and readiness', () => {
    const rules = alertRules(variant);
    const uses = (metric: string, matcher?: { label: string; op: string; value: string }) =>
      rules.filter((r) =>
        scanPromql(r.expr).selectors.some((s) => exportedMetricFor(s.metric) === metric && (!matcher || s.matchers.some((m) => m.label === matcher.label && m.op === matcher.op && m.value === matcher.value))),
      );
    expect(uses('ace_http_requests_total', { label: 'status', op: '=~', value: '5..' }).length).toBeGreaterThan(0);
    expect(uses('ace_http_requests_total', { label: 'status', op: '=', value: '429' }).length).toBeGreaterThan(0);
    expect(uses('ace_http_request_duration_seconds').some((r) => r.expr.includes('histogram_quantile(0.99'))).toBe(true);
    expect(uses('ace_worker_queue_depth').length).toBeGreaterThan(0);
    expect(uses('ace_worker_tasks_rejected_total').length).toBeGreaterThan(0);
    const keyRules = uses('ace_signing_key_active_age_seconds');
    expect(keyRules.length).toBeGreaterThan(0);
    for (const r of keyRules) expect(scanPromql(r.expr).selectors.map((s) => s.metric)).toContain('ace_signing_key_rotation_interval_seconds');
    expect(uses('ace_store_unavailable_seconds').some((r) => />=\s*\d+\b/.test(r.expr))).toBe(true);
    expect(uses('ace_ready').some((r) => /==\s*0\b/.test(r.expr))).toBe(true);
  });

  it('queue saturation fires at 75% of the configured queue limits', () => {
    const config = podConfig(variant);
    const rule = alertRules(variant).find((r) => r.alert === 'AceWorkerQueueSaturated');
    expect(rule).toBeDefined();
    const limits: Record<string, number> = { argon2: config.argon2MaxQueue, sign: config.signMaxQueue };
    const found = [...rule.expr.matchAll(/ace_worker_queue_depth\{pool="(\w+)"\}\)\s*>\s*(\d+)/g)].map((m) => [m[1], Number(m[2])]);
    expect(found.map(([pool]) => pool).sort()).toEqual(Object.keys(limits).sort());
    for (const [pool, threshold] of found) expect(threshold, String(pool)).toBe(Math.floor(limits[pool as string]! * 0.75));
  });

  it('the generated ConfigMap name carries its content hash and the Deployment uses it', () => {
    const ref = container(variant).envFrom[0].configMapRef.name;
    expect(ref).toMatch(/^ace-config-[a-z0-9]{10}$/);
    expect(only(variant, 'ConfigMap', ref).data).toBeDefined();
  });

  it('ships the Grafana dashboard unchanged as a ConfigMap for the sidecar', () => {
    const cm = only(variant, 'ConfigMap', 'ace-grafana-dashboard');
    expect(cm.metadata.labels?.grafana_dashboard).toBe('1');
    expect(cm.data['ace-dashboard.json']).toBe(readFileSync(DASHBOARD, 'utf8'));
  });

  it.skipIf(missingOutsideCi(!kubectlKustomizeAvailable(), 'kubectl (.ci/run fetches it), in CI a failure'))('renders exactly like `kubectl kustomize`', () => {
    const reference = loadYamlText(execFileSync('kubectl', ['kustomize', DIRS[variant]], { encoding: 'utf8' }));
    const key = (o: K8sObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    const ours = new Map(render(variant).map((o) => [key(o), normalise(o)]));
    const theirs = new Map(reference.map((o) => [key(o), normalise(o)]));
    expect([...ours.keys()].sort()).toEqual([...theirs.keys()].sort());
    for (const [k, obj] of ours) expect(obj, k).toEqual(theirs.get(k));
  });
});

// ---------------------------------------------------------------------------------------------------

describe('k8s production overlay versus base', () => {
  it('scales out on shared stores: more replicas, a higher HPA ceiling, stores from the Secret', () => {
    const base = { d: deployment('base'), hpa: only('base', 'HorizontalPodAutoscaler'), config: podConfig('base') };
    const prod = { d: deployment('production'), hpa: only('production', 'HorizontalPodAutoscaler'), config: podConfig('production') };
    expect(prod.d.spec.replicas).toBeGreaterThan(base.d.spec.replicas);
    expect(prod.hpa.spec.maxReplicas).toBeGreaterThan(base.hpa.spec.maxReplicas);
    expect(prod.hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    // One HTTP process per 2-CPU pod: the measured best (README, Performance).
    expect(prod.config.workers).toBe(1);
    expect(prod.config.argon2Threads).toBe(2);

    // The base runs on the embedded store, which cannot be shared: one process, one pod.
    expect(base.config.databaseUrl).toBeUndefined();
    expect(base.config.redisUrl).toBeUndefined();
    expect(base.config.workers).toBe(1);
    expect(base.hpa.spec.maxReplicas).toBe(1);

    const fromSecret = (name: string) => container('production').env.find((e: Json) => e.name === name)?.valueFrom?.secretKeyRef;
    expect(fromSecret('DATABASE_URL')).toEqual({ name: 'ace-secrets', key: 'DATABASE_URL' });
    expect(fromSecret('REDIS_URL')).toEqual({ name: 'ace-secrets', key: 'REDIS_URL' });
    expect(prod.config.databaseUrl).toBe(SECRET_SAMPLES.DATABASE_URL);
    expect(prod.config.redisUrl).toBe(SECRET_SAMPLES.REDIS_URL);
  });

  it('Postgres connections at full scale, every pool counted, fit the default max_connections (100)', () => {
    const config = podConfig('production');
    const hpa = only('production', 'HorizontalPodAutoscaler');
    const surge = Number(deployment('production').spec.strategy.rollingUpdate.maxSurge);
    // Each process holds two pools: the store's (DATABASE_POOL_SIZE) and the audit trail's (AUDIT_POOL_SIZE).
    const perProcess = config.databasePoolSize + config.audit.poolSize;
    const connections = (hpa.spec.maxReplicas + surge) * config.workers * perProcess;
    expect(connections).toBeLessThanOrEqual(100 - 3 - 5); // superuser_reserved_connections, operators
    // The comment beside the setting states the same sum.
    const comment = readFileSync(path.join(DIRS.production, 'config.env'), 'utf8');
    expect(comment).toContain(`x (${config.databasePoolSize} + ${config.audit.poolSize}) = ${connections}`);
  });

  it('pins a release image and a namespace', () => {
    const image: string = container('production').image;
    expect(image).toMatch(/^[\w.\-/]+\/agent-credential-exchange(:\d+\.\d+\.\d+|@sha256:[0-9a-f]{64})$/);
    for (const obj of render('production')) expect(obj.metadata.namespace, `${obj.kind}/${obj.metadata.name}`).toBe('ace-production');
  });

  it('its comments count the HTTP processes WORKERS configures', () => {
    const words: Record<string, number> = { one: 1, two: 2, three: 3, four: 4 };
    const workers = podConfig('production').workers;
    const dir = DIRS.production;
    for (const file of readdirSync(dir)) {
      const comments = readFileSync(path.join(dir, file), 'utf8').split('\n').filter((l) => l.trim().startsWith('#')).join(' ');
      for (const m of comments.matchAll(/\b(one|two|three|four)\s+HTTP process/gi)) expect(words[m[1]!.toLowerCase()], `${file}: ${m[0]}`).toBe(workers);
    }
  });

  it('ingress-nginx in front normalises framing: HTTP/1.1 upstream, buffered bodies, public Service only', () => {
    const ingress = only('production', 'Ingress', 'ace');
    const annotations = ingress.metadata.annotations ?? {};
    expect(ingress.spec.ingressClassName).toBe('nginx');
    // uWS answers HTTP/1.0 with 505, and refuses split request lines (#1776): nginx writes HTTP/1.1 heads whole.
    expect(annotations['nginx.ingress.kubernetes.io/proxy-http-version']).toBe('1.1');
    // Bodies reach the pods whole, with a Content-Length: no chunked or dripping bodies.
    expect(annotations['nginx.ingress.kubernetes.io/proxy-request-buffering']).toBe('on');
    // The body bound lets the service's own 413 (over 16 KiB, contract shape) answer first.
    const size = /^(\d+)([km])$/.exec(annotations['nginx.ingress.kubernetes.io/proxy-body-size'] ?? '');
    expect(size, 'proxy-body-size').not.toBeNull();
    const bytes = Number(size![1]) * (size![2] === 'k' ? 1024 : 1024 * 1024);
    expect(bytes).toBeGreaterThan(16 * 1024);
    expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    // Every path goes to the public Service's http port, never to the admin port.
    const backends = ingress.spec.rules.flatMap((r: Json) => r.http.paths.map((p: Json) => p.backend.service));
    expect(backends.length).toBeGreaterThan(0);
    for (const backend of backends) expect(backend).toEqual({ name: 'ace', port: { name: 'http' } });
    const publicService = only('production', 'Service', 'ace');
    expect(publicService.spec.ports.map((p: Json) => p.name)).toContain('http');
    // The host is the one PUBLIC_BASE_URL names.
    const host = new URL(podConfig('production').publicBaseUrl).hostname;
    expect(ingress.spec.rules.map((r: Json) => r.host)).toEqual([host]);
    expect(ingress.spec.tls.flatMap((t: Json) => t.hosts)).toEqual([host]);
  });

  it('the settings differ, so the ConfigMap hash (and the pods) change', () => {
    const name = (v: Variant) => container(v).envFrom[0].configMapRef.name;
    expect(name('base')).not.toBe(name('production'));
  });
});

describe('Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const panels: Json[] = dashboard.panels;

  it('is a dashboard with unique panel ids and a data source variable', () => {
    expect(dashboard.uid).toMatch(/^[\w-]{1,40}$/);
    expect(dashboard.title).toBeTruthy();
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const vars = dashboard.templating.list.map((v: Json) => v.name);
    expect(vars).toEqual(expect.arrayContaining(['datasource', 'namespace']));
    for (const p of panels.filter((p) => p.type !== 'row')) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    }
  });

  it('queries only metrics, labels and label values the service exports, filtered by namespace', () => {
    const exprs = panels.flatMap((p) => (p.targets ?? []).map((t: Json) => ({ title: p.title, expr: t.expr as string })));
    expect(exprs.length).toBeGreaterThan(10);
    for (const { title, expr } of exprs) {
      expect(promqlProblems(expr), `${title}: ${expr}`).toEqual([]);
      for (const sel of scanPromql(expr).selectors) {
        expect(sel.matchers, `${title}: ${sel.metric}`).toContainEqual({ label: 'namespace', op: '=', value: '$namespace' });
      }
    }
    const namespaceVar = dashboard.templating.list.find((v: Json) => v.name === 'namespace');
    const [, metric] = /^label_values\((\w+),\s*namespace\)$/.exec(namespaceVar.definition) ?? [];
    expect(metric && exportedMetricFor(metric), namespaceVar.definition).toBeTruthy();
  });

  it('charts every metric the service exports', () => {
    const used = new Set(panels.flatMap((p) => (p.targets ?? []).flatMap((t: Json) => scanPromql(t.expr).selectors.map((s) => exportedMetricFor(s.metric)))));
    const missing = Object.keys(SERVICE_METRICS).filter((m) => !used.has(m));
    expect(missing).toEqual([]);
  });
});

describe('Dockerfile', () => {
  const lines = parseDockerfile();
  const inStage = (stage: string) => lines.filter((l) => l.stage === stage);
  const runtime = lines[lines.length - 1]!.stage;
  const last = (instruction: string) => inStage(runtime).filter((l) => l.instruction === instruction).at(-1);

  it('builds in three stages on Debian 12 (bookworm) with Node 22 LTS', () => {
    const froms = lines.filter((l) => l.instruction === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const arg = lines.find((l) => l.instruction === 'ARG' && l.args.startsWith('NODE_IMAGE='));
    const images = froms.map((f) => f.args.split(' ')[0]!.replace('${NODE_IMAGE}', arg?.args.slice('NODE_IMAGE='.length) ?? ''));
    expect(froms).toHaveLength(3);
    for (const image of images) expect(image).toMatch(/^node:22(\.\d+)*-bookworm(-slim)?(@sha256:[0-9a-f]{64})?$/);
    // The Node line the image runs must load the uWS binary that the prune step keeps (ABI 127).
    expect(existsSync(path.join(ROOT, 'node_modules/uWebSockets.js/dist/bin/uws_linux_x64_127.node'))).toBe(true);
    // Production dependencies without dev packages; the compiler runs in a separate stage.
    expect(lines.some((l) => l.instruction === 'RUN' && /npm ci\b.*--omit=dev/.test(l.args) && l.stage !== runtime)).toBe(true);
    const build = lines.find((l) => l.instruction === 'RUN' && l.args.includes('npm run build'));
    expect(build && build.stage !== runtime).toBe(true);
    expect(inStage(runtime).some((l) => l.instruction === 'RUN' && /\bnpm\s+(ci|install|run)\b/.test(l.args))).toBe(false);
    const copies = inStage(runtime).filter((l) => l.instruction === 'COPY').map((l) => l.args);
    expect(copies.some((a) => /--from=\S+ \/app\/dist /.test(a))).toBe(true);
    expect(copies.some((a) => /--from=\S+ \/app\/node_modules /.test(a))).toBe(true);
    // Only compiled JavaScript: no TypeScript sources in the runtime image.
    expect(copies.some((a) => /^(\.|src|\.\/src)\s/.test(a.replace(/--\S+\s/g, '')))).toBe(false);
  });

  it('keeps only the uWebSockets.js binary this platform loads, and checks that it loads', () => {
    const prune = lines.find((l) => l.instruction === 'RUN' && l.args.includes('uWebSockets.js'));
    expect(prune).toBeDefined();
    expect(prune!.args).toContain('process.versions.modules');
    expect(prune!.args).toContain('[native code]');
  });

  it('exposes the service ports and runs node dist/src/main.js as a non-root user', () => {
    const exposed = lines.filter((l) => l.instruction === 'EXPOSE').flatMap((l) => l.args.split(' ').map((p) => Number(p.replace('/tcp', ''))));
    expect(exposed.sort()).toEqual([DEFAULTS.port, DEFAULTS.adminPort].sort());
    const cmd = JSON.parse(last('CMD')!.args);
    expect(cmd).toEqual(['node', 'dist/src/main.js']);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toBe(cmd.join(' '));
    expect(existsSync(path.join(ROOT, 'src/main.ts')), 'src/main.ts compiles to dist/src/main.js').toBe(true);

    const user = last('USER')!.args;
    expect(user).toMatch(/^\d+(:\d+)?$/); // numeric, so runAsNonRoot can verify it
    expect(Number(user.split(':')[0])).toBeGreaterThan(0);
    for (const v of VARIANTS) expect(deployment(v).spec.template.spec.securityContext.runAsUser).toBe(Number(user.split(':')[0]));
    expect(last('STOPSIGNAL')!.args).toBe('SIGTERM');
  });

  it('its environment is valid for the service, with DATA_DIR on a volume', () => {
    const env: Record<string, string> = {};
    for (const l of inStage(runtime).filter((l) => l.instruction === 'ENV')) {
      for (const m of l.args.matchAll(/(\w+)=(\S+)/g)) env[m[1]!] = m[2]!;
    }
    const known = configEnvNames();
    expect(Object.keys(env).filter((k) => k !== 'NODE_ENV' && !known.has(k))).toEqual([]);
    const config = loadConfig(env);
    expect([config.port, config.adminPort]).toEqual([DEFAULTS.port, DEFAULTS.adminPort]);
    expect(JSON.parse(last('VOLUME')!.args)).toEqual([config.dataDir]);
    for (const v of VARIANTS) expect(podConfig(v).dataDir).toBe(config.dataDir);
  });

  it('health-checks /healthz on the admin port with node (no curl in the image)', () => {
    const check = last('HEALTHCHECK')!.args;
    const cmd: string[] = JSON.parse(check.slice(check.indexOf('CMD ') + 4));
    expect(cmd[0]).toBe('node');
    const script = cmd.slice(1).join(' ');
    expect(script).toContain('/healthz');
    expect(script).toContain(`process.env.ADMIN_PORT || ${DEFAULTS.adminPort}`);
    expect(script).toContain('127.0.0.1');
  });

  it('installs every workspace and ships the compiled workspaces the server depends on', () => {
    // npm ci links a workspace only when its package.json is there: each stage that installs copies them
    // all first; the runtime image holds the manifest and dist of every workspace the server depends on
    // (node_modules links to packages/<name>), so that it imports them (the protocol package, for one).
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { workspaces: string[]; dependencies: Record<string, string> };
    expect(pkg.workspaces).toContain('packages/protocol');
    for (const stage of new Set(lines.filter((l) => l.instruction === 'RUN' && /\bnpm ci\b/.test(l.args)).map((l) => l.stage))) {
      const firstCi = lines.findIndex((l) => l.stage === stage && l.instruction === 'RUN' && /\bnpm ci\b/.test(l.args));
      const copied = lines.slice(0, firstCi).filter((l) => l.stage === stage && l.instruction === 'COPY').map((l) => l.args);
      for (const workspace of pkg.workspaces) expect([stage, copied]).toEqual([stage, expect.arrayContaining([`${workspace}/package.json ${workspace}/`])]);
    }
    const shipped = inStage(runtime).filter((l) => l.instruction === 'COPY').map((l) => l.args.replace(/^--from=\S+ \/app\//, ''));
    for (const workspace of pkg.workspaces) {
      const name = (JSON.parse(readFileSync(path.join(ROOT, workspace, 'package.json'), 'utf8')) as { name: string }).name;
      if (!(name in pkg.dependencies)) continue;
      expect(shipped).toEqual(expect.arrayContaining([`${workspace}/package.json ./${workspace}/`, `${workspace}/dist ./${workspace}/dist`]));
    }
  });

  it('.dockerignore keeps node_modules, dist, data and .git out of the build context', () => {
    const patterns = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(patterns[0]).toBe('*'); // allowlist: everything is out unless named
    const included = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1).replace(/\/$/, ''));
    for (const p of ['node_modules', 'dist', 'data', '.git', 'test']) expect(included).not.toContain(p);
    for (const p of ['package.json', 'package-lock.json', 'tsconfig.json', 'src', 'scripts']) expect(included).toContain(p);
  });
});

describe('test helpers catch what they are for', () => {
  it('the unknown-field check finds a misspelt field that kubernetes-models validate() accepts', async () => {
    const broken = structuredClone(deployment('base'));
    broken.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true;
    await expect(validateWithModel(broken)).resolves.toBeUndefined();
    expect(unknownFields(broken)).toEqual(['Deployment.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem']);
  });

  it('the PromQL check finds unknown metrics, labels, label values and functions', () => {
    expect(promqlProblems('sum(rate(ace_http_requests_total[5m]))')).toEqual([]);
    expect(promqlProblems('rate(ace_http_request_total[5m])')).toEqual(['metric ace_http_request_total is not exported by the service']);
    expect(promqlProblems('ace_worker_queue_depth{pool="argon"}')).toHaveLength(1);
    expect(promqlProblems('ace_store_up{stor="redis"}')).toHaveLength(1);
    expect(promqlProblems('sum by (route) (ace_ready)')).toEqual(['grouping by unknown label "route"']);
    expect(promqlProblems('rates(ace_ready[5m])')).toEqual(['unknown function rates()']);
    expect(promqlProblems('sum(ace_ready')).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------------

function kubectlKustomizeAvailable(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function loadYamlText(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS())
    .filter(Boolean);
}

/** Order-insensitive for lists of named items (kustomize puts patched-in env entries first). */
function normalise(value: Json): Json {
  if (Array.isArray(value)) {
    const items = value.map(normalise);
    return items.every((i) => i && typeof i === 'object' && typeof i.name === 'string') ? items.sort((a, b) => a.name.localeCompare(b.name)) : items;
  }
  if (value && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((k) => [k, normalise(value[k])]));
  return value;
}

function quantityDuration(value: string): number {
  const m = /^(\d+)([smh])$/.exec(value);
  if (!m) throw new Error(`cannot read duration ${value}`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] as 's' | 'm' | 'h'];
}
