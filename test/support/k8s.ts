// Offline helpers for test/e2e/k8s-manifests.test.ts: a tiny kustomize renderer, Kubernetes schema checks
// (kubernetes-models), a PromQL selector scanner and the catalogue of metrics the service exports.
//
// The renderer implements only what k8s/ uses and throws on anything else, so a new kustomize feature
// in k8s/ fails the tests loudly instead of rendering wrongly:
//   - kustomization keys: resources (files and directories), namespace, labels (includeSelectors: false
//     only), images (name -> newName/newTag/digest), configMapGenerator (envs, literals, files;
//     behavior create/merge/replace; options and generatorOptions: labels, annotations,
//     disableNameSuffixHash), patches (strategic merge by file, or JSON 6902 with a target).
//   - strategic merge: maps merge; null deletes; lists of objects merge by `name` (containers, env,
//     volumes, ...) or `mountPath` (volumeMounts); lists of scalars are replaced; no $patch directives.
//   - JSON 6902: add, replace, remove.
//   - The generated ConfigMap's name gets kustomize's content hash (same algorithm, checked against
//     `kubectl kustomize` when kubectl is installed) and pod-spec references to it are rewritten.
//   - Not implemented: commonLabels, namePrefix/Suffix, replicas, components, secretGenerator, vars,
//     replacements, helmCharts, cluster-scoped kinds in namespace handling, output ordering (objects come
//     in resource order; kustomize sorts by kind).
import { SETTINGS } from '../../src/config/settings.js';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export type Json = any;
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: Json;
}

// ---------------------------------------------------------------- kustomize

const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'labels', 'images', 'configMapGenerator', 'generatorOptions', 'patches']);
const GENERATED = Symbol('generated'); // original name + whether to hash, on generated ConfigMaps

interface GeneratedInfo {
  name: string;
  hash: boolean;
}

/** Renders a kustomization directory the way `kubectl kustomize` would (within the limits above). */
export function renderKustomization(dir: string): K8sObject[] {
  const objects = build(path.resolve(dir));
  const renamed = new Map<string, string>();
  for (const obj of objects) {
    const info: GeneratedInfo | undefined = (obj as Json)[GENERATED];
    if (info?.hash) {
      obj.metadata.name = `${info.name}-${configMapHash(obj)}`;
      renamed.set(info.name, obj.metadata.name);
    }
  }
  for (const obj of objects) for (const spec of podSpecs(obj)) rewriteConfigMapRefs(spec, renamed);
  return objects;
}

function build(dir: string): K8sObject[] {
  const file = path.join(dir, 'kustomization.yaml');
  const k = parseYaml(readFileSync(file, 'utf8')) ?? {};
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${file}: "${key}" is not supported by the test renderer`);
  }

  let objects: K8sObject[] = [];
  for (const entry of k.resources ?? []) {
    const target = path.resolve(dir, entry);
    if (statSync(target).isDirectory()) objects.push(...build(target));
    else objects.push(...loadYamlObjects(target));
  }

  for (const gen of k.configMapGenerator ?? []) objects = applyGenerator(dir, gen, k.generatorOptions ?? {}, objects);

  for (const patch of k.patches ?? []) {
    if (!patch.path || patch.patch) throw new Error(`${file}: only file patches ("path") are supported`);
    const body = parseYaml(readFileSync(path.resolve(dir, patch.path), 'utf8'));
    if (Array.isArray(body)) {
      const matches = objects.filter((o) => matchesTarget(o, patch.target ?? {}));
      if (matches.length === 0) throw new Error(`${patch.path}: no object matches the target`);
      for (const obj of matches) applyJson6902(obj, body);
    } else {
      if (patch.target) throw new Error(`${patch.path}: strategic-merge patches with a target are not supported`);
      const obj = objects.find((o) => o.kind === body.kind && o.metadata.name === body.metadata?.name);
      if (!obj) throw new Error(`${patch.path}: no ${body.kind} named ${body.metadata?.name}`);
      const merged = strategicMerge(obj, body);
      for (const key of Object.keys(obj)) if (!(key in merged)) delete obj[key];
      Object.assign(obj, merged);
    }
  }

  if (k.namespace) for (const obj of objects) obj.metadata.namespace = k.namespace;

  for (const entry of k.labels ?? []) {
    if (entry.includeSelectors) throw new Error(`${file}: labels with includeSelectors are not supported`);
    for (const obj of objects) {
      obj.metadata.labels = { ...obj.metadata.labels, ...entry.pairs };
      if (entry.includeTemplates && obj.spec?.template && ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'].includes(obj.kind)) {
        const meta = (obj.spec.template.metadata ??= {});
        meta.labels = { ...meta.labels, ...entry.pairs };
      }
    }
  }

  for (const image of k.images ?? []) {
    for (const obj of objects) {
      for (const spec of podSpecs(obj)) {
        for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
          if (imageName(c.image) !== image.name) continue;
          const name = image.newName ?? image.name;
          c.image = image.digest ? `${name}@${image.digest}` : `${name}:${image.newTag ?? imageTag(c.image) ?? 'latest'}`;
        }
      }
    }
  }
  return objects;
}

export function loadYamlObjects(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      return doc.toJS();
    })
    .filter((obj) => obj !== null && obj !== undefined);
}

function applyGenerator(dir: string, gen: Json, global: Json, objects: K8sObject[]): K8sObject[] {
  const data: Record<string, string> = {};
  for (const envFile of gen.envs ?? []) Object.assign(data, parseEnvFile(readFileSync(path.resolve(dir, envFile), 'utf8')));
  for (const literal of gen.literals ?? []) {
    const at = literal.indexOf('=');
    data[literal.slice(0, at)] = literal.slice(at + 1);
  }
  for (const entry of gen.files ?? []) {
    const [key, file] = entry.includes('=') ? entry.split('=', 2) : [path.basename(entry), entry];
    data[key] = readFileSync(path.resolve(dir, file), 'utf8');
  }
  const options = { ...global, ...gen.options };
  const behavior = gen.behavior ?? 'create';
  const existing = objects.find((o) => o.kind === 'ConfigMap' && (o as Json)[GENERATED]?.name === gen.name);
  if (behavior === 'create' && existing) throw new Error(`configMapGenerator ${gen.name} exists already (use behavior: merge)`);
  if (behavior !== 'create' && !existing) throw new Error(`configMapGenerator ${gen.name}: nothing to ${behavior}`);

  const cm: K8sObject = existing ?? { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: gen.name } };
  cm.data = behavior === 'merge' ? { ...cm.data, ...data } : data;
  if (options.labels) cm.metadata.labels = { ...cm.metadata.labels, ...options.labels };
  if (options.annotations) cm.metadata.annotations = { ...cm.metadata.annotations, ...options.annotations };
  const previous: GeneratedInfo | undefined = (cm as Json)[GENERATED];
  Object.defineProperty(cm, GENERATED, {
    value: { name: gen.name, hash: options.disableNameSuffixHash === true ? false : previous?.hash ?? true } satisfies GeneratedInfo,
    enumerable: false,
    configurable: true,
  });
  return existing ? objects : [...objects, cm];
}

/** kustomize env-file syntax: KEY=VALUE lines; blank lines and lines starting with # are skipped. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trimStart();
    if (line === '' || line.startsWith('#')) continue;
    const at = line.indexOf('=');
    if (at <= 0) throw new Error(`env file line without KEY=: "${raw}"`);
    out[line.slice(0, at)] = line.slice(at + 1);
  }
  return out;
}

/**
 * kustomize's ConfigMap name hash (api/hasher): sha256 of Go-style JSON {data, kind, name}, first 10 hex
 * characters with 0,1,3,a,e swapped for consonants. kustomize v5's kyaml hasher reads `name` from the
 * object's top level, where there is none, so the encoded name is always "" (checked against
 * `kubectl kustomize`, kustomize v5.5.0).
 */
export function configMapHash(cm: K8sObject): string {
  const encoded: Json = { data: cm.data ?? {}, kind: 'ConfigMap', name: '' };
  if (cm.binaryData && Object.keys(cm.binaryData).length > 0) encoded.binaryData = cm.binaryData;
  const json = goJson(encoded);
  const hex = createHash('sha256').update(json).digest('hex');
  const swap: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return [...hex.slice(0, 10)].map((ch) => swap[ch] ?? ch).join('');
}

/** encoding/json.Marshal: map keys sorted, <, >, & and U+2028/2029 escaped. */
function goJson(value: Json): string {
  const sorted = (v: Json): Json =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((key) => [key, sorted(v[key])])) : v;
  return JSON.stringify(sorted(value)).replace(/[<>&\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function matchesTarget(obj: K8sObject, target: Json): boolean {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  return (
    (target.kind === undefined || target.kind === obj.kind) &&
    (target.name === undefined || target.name === obj.metadata.name) &&
    (target.group === undefined || target.group === group) &&
    (target.version === undefined || target.version === version)
  );
}

const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  imagePullSecrets: 'name',
};

export function strategicMerge(base: Json, patch: Json, field = ''): Json {
  if (patch === null) return undefined;
  if (Array.isArray(patch)) {
    if (patch.every((item) => typeof item !== 'object' || item === null)) return structuredClone(patch);
    const key = MERGE_KEYS[field];
    if (!key) throw new Error(`strategic merge of list "${field}" is not supported by the test renderer`);
    const out = Array.isArray(base) ? structuredClone(base) : [];
    for (const item of patch) {
      if ('$patch' in item) throw new Error('$patch directives are not supported');
      const at = out.findIndex((existing: Json) => existing[key] === item[key]);
      if (at >= 0) out[at] = strategicMerge(out[at], item, field);
      else out.push(structuredClone(item));
    }
    return out;
  }
  if (typeof patch === 'object') {
    if ('$patch' in patch) throw new Error('$patch directives are not supported');
    const out: Json = base && typeof base === 'object' && !Array.isArray(base) ? { ...base } : {};
    for (const [key, value] of Object.entries(patch)) {
      const merged = strategicMerge(out[key], value, key);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    }
    return out;
  }
  return patch;
}

export function applyJson6902(obj: Json, ops: Json[]): void {
  for (const op of ops) {
    const parts = String(op.path).split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop()!;
    let parent = obj;
    for (const part of parts) {
      parent = parent?.[Array.isArray(parent) ? Number(part) : part];
      if (parent === undefined) throw new Error(`JSON patch path ${op.path} does not exist`);
    }
    if (op.op === 'add') {
      if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : Number(last), 0, structuredClone(op.value));
      else parent[last] = structuredClone(op.value);
    } else if (op.op === 'replace' || op.op === 'remove') {
      const key = Array.isArray(parent) ? Number(last) : last;
      if (!(key in parent)) throw new Error(`JSON patch path ${op.path} does not exist`);
      if (op.op === 'remove') {
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key];
      } else parent[key] = structuredClone(op.value);
    } else {
      throw new Error(`JSON patch op "${op.op}" is not supported by the test renderer`);
    }
  }
}

/** The pod specs inside a workload object (none for other kinds). */
export function podSpecs(obj: K8sObject): Json[] {
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'].includes(obj.kind)) return obj.spec?.template?.spec ? [obj.spec.template.spec] : [];
  if (obj.kind === 'CronJob') return obj.spec?.jobTemplate?.spec?.template?.spec ? [obj.spec.jobTemplate.spec.template.spec] : [];
  if (obj.kind === 'Pod') return obj.spec ? [obj.spec] : [];
  return [];
}

function rewriteConfigMapRefs(spec: Json, renamed: Map<string, string>): void {
  const swap = (ref: Json) => {
    if (ref?.name && renamed.has(ref.name)) ref.name = renamed.get(ref.name);
  };
  for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
    for (const from of c.envFrom ?? []) swap(from.configMapRef);
    for (const env of c.env ?? []) swap(env.valueFrom?.configMapKeyRef);
  }
  for (const v of spec.volumes ?? []) {
    swap(v.configMap);
    for (const source of v.projected?.sources ?? []) swap(source.configMap);
  }
}

function imageName(image: string): string {
  const noDigest = image.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

function imageTag(image: string): string | undefined {
  const noDigest = image.split('@')[0]!;
  return noDigest.length > imageName(image).length ? noDigest.slice(imageName(image).length + 1) : undefined;
}

// ---------------------------------------------------------------- Kubernetes schemas

const require = createRequire(import.meta.url);
const MODELS_ROOT = path.dirname(require.resolve('kubernetes-models/package.json'));
const APIMACHINERY_ROOT = path.dirname(require.resolve('@kubernetes-models/apimachinery/package.json'));

/** kubernetes-models module path for an apiVersion + kind, e.g. apps/v1 + Deployment -> "apps/v1/Deployment". */
export function modelPath(obj: Pick<K8sObject, 'apiVersion' | 'kind'>): string {
  return `${obj.apiVersion}/${obj.kind}`;
}

/** Validates against the Kubernetes OpenAPI schema (types, required fields, enums) via kubernetes-models. */
export async function validateWithModel(obj: K8sObject): Promise<void> {
  const mod = await import(`kubernetes-models/${modelPath(obj)}`);
  const Model = mod[obj.kind];
  if (typeof Model !== 'function') throw new Error(`kubernetes-models has no ${modelPath(obj)}`);
  new Model(obj).validate();
}

/**
 * Field names the schema does not know. kubernetes-models' validate() allows unknown fields, but the API
 * server (kubectl apply, strict field validation) rejects them, so a misspelt `readOnlyRootFileSystem`
 * would pass validate() and fail the deploy. Reads the property names from the package's .d.ts files.
 */
export function unknownFields(obj: K8sObject): string[] {
  const problems: string[] = [];
  walkType(obj, path.join(MODELS_ROOT, `${modelPath(obj)}.d.ts`), `I${obj.kind}`, obj.kind, problems);
  return problems;
}

interface TypeInfo {
  props: Map<string, string>; // property -> type text
  imports: Map<string, string>; // type name -> .d.ts file
}
const typeCache = new Map<string, TypeInfo | null>();

function readInterface(file: string, iface: string): TypeInfo | null {
  const cacheKey = `${file}#${iface}`;
  if (typeCache.has(cacheKey)) return typeCache.get(cacheKey)!;
  const text = readFileSync(file, 'utf8');
  const imports = new Map<string, string>();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    const spec = m[2]!;
    const resolved = spec.startsWith('.')
      ? path.resolve(path.dirname(file), `${spec}.d.ts`)
      : spec.startsWith('@kubernetes-models/apimachinery/')
        ? path.join(APIMACHINERY_ROOT, `${spec.slice('@kubernetes-models/apimachinery/'.length)}.d.ts`)
        : '';
    if (resolved) imports.set(m[1]!, resolved);
  }
  const start = text.indexOf(`export interface ${iface} `);
  if (start < 0) {
    typeCache.set(cacheKey, null); // a type alias (Quantity, IntOrString, ...): nothing to check inside
    return null;
  }
  const body = text.slice(start, text.indexOf('\n}', start));
  const props = new Map<string, string>();
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) props.set(m[1]!, m[2]!);
  const info = { props, imports };
  typeCache.set(cacheKey, info);
  return info;
}

function walkType(value: Json, file: string, iface: string, at: string, problems: string[]): void {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return;
  const info = readInterface(file, iface);
  if (!info) return;
  for (const [key, child] of Object.entries(value)) {
    const type = info.props.get(key);
    if (type === undefined) {
      problems.push(`${at}.${key}`);
      continue;
    }
    const ref = /^(?:Array<)?(I\w+)>?;?$/.exec(type.trim())?.[1];
    const refFile = ref && info.imports.get(ref);
    if (!ref || !refFile) continue; // scalar, enum, inline map
    const refIface = `I${path.basename(refFile, '.d.ts')}`;
    if (Array.isArray(child)) child.forEach((item, i) => walkType(item, refFile, refIface, `${at}.${key}[${i}]`, problems));
    else walkType(child, refFile, refIface, `${at}.${key}`, problems);
  }
}

// ---------------------------------------------------------------- metrics the service exports

/** Metric name -> labels, from .helpers/COMMON.md (the lead's /metrics contract). */
export const SERVICE_METRICS: Record<string, { type: 'counter' | 'gauge' | 'histogram'; labels: string[] }> = {
  ace_http_requests_total: { type: 'counter', labels: ['route', 'method', 'status'] },
  ace_http_request_duration_seconds: { type: 'histogram', labels: ['route', 'method', 'status'] },
  ace_tokens_issued_total: { type: 'counter', labels: ['outcome'] },
  ace_worker_queue_depth: { type: 'gauge', labels: ['pool'] },
  ace_argon2_warming_up: { type: 'gauge', labels: [] },
  ace_worker_task_duration_seconds: { type: 'histogram', labels: ['pool'] },
  ace_worker_tasks_rejected_total: { type: 'counter', labels: ['pool'] },
  ace_worker_threads_replaced_total: { type: 'counter', labels: ['pool'] },
  ace_cache_requests_total: { type: 'counter', labels: ['cache', 'result'] },
  ace_rate_limit_refusals_total: { type: 'counter', labels: ['limiter'] },
  ace_credential_checks_total: { type: 'counter', labels: [] },
  ace_admin_auth_failures_total: { type: 'counter', labels: [] },
  ace_background_failures_total: { type: 'counter', labels: ['task'] },
  ace_store_up: { type: 'gauge', labels: ['store'] },
  ace_ready: { type: 'gauge', labels: [] },
  ace_signing_key_active_age_seconds: { type: 'gauge', labels: [] },
  ace_signing_key_rotation_interval_seconds: { type: 'gauge', labels: [] },
  ace_signing_keys: { type: 'gauge', labels: ['state'] },
  ace_audit_events_written_total: { type: 'counter', labels: ['sink'] },
  ace_audit_batch_size: { type: 'histogram', labels: [] },
  ace_audit_spool_events: { type: 'gauge', labels: [] },
  ace_audit_write_failures_total: { type: 'counter', labels: [] },
  // How long each state the ace.state alerts watch has lasted (state-duration.ts), and the newest process's start.
  ace_store_unavailable_seconds: { type: 'gauge', labels: ['store'] },
  ace_redis_cache_bypassed_seconds: { type: 'gauge', labels: [] },
  ace_audit_spooling_seconds: { type: 'gauge', labels: [] },
  ace_audit_refusing_seconds: { type: 'gauge', labels: [] },
  ace_process_start_time_seconds: { type: 'gauge', labels: [] },
  // Readiness that means "can serve" (1 while the pod serves without that component) and the pod's
  // clock against Postgres' (this pod's minus Postgres'): the names the readiness and clock work exports.
  ace_degraded: { type: 'gauge', labels: ['component'] },
  ace_clock_skew_seconds: { type: 'gauge', labels: [] },
  // prom-client default metrics used by the dashboard
  process_cpu_seconds_total: { type: 'counter', labels: [] },
  process_resident_memory_bytes: { type: 'gauge', labels: [] },
  nodejs_eventloop_lag_p99_seconds: { type: 'gauge', labels: [] },
};

/** Label values the service emits for enumerated labels. */
export const LABEL_VALUES: Record<string, string[]> = {
  outcome: ['issued', 'invalid_credentials', 'agent_inactive', 'platform_access_denied', 'invalid_scope', 'rate_limited', 'unsupported_profile', 'validation_error', 'unavailable'],
  pool: ['argon2', 'sign'],
  cache: ['local', 'redis', 'verified'],
  result: ['hit', 'miss'],
  limiter: ['token_per_key', 'auth_fail_per_address', 'auth_pending_per_address', 'argon2_share_per_address', 'admin_auth_fail_per_address'],
  store: ['postgres', 'redis'],
  state: ['next', 'active', 'retiring', 'retired'],
  sink: ['postgres', 'spool'],
  task: ['key_refresh', 'key_rotation', 'revocation_push', 'revocation_purge'],
};

/** Series Prometheus writes itself for every target (not on /metrics). */
export const PROMETHEUS_SYNTHETIC_METRICS = ['up'];
/** Labels the Prometheus Operator attaches to every scraped series. */
export const TARGET_LABELS = ['namespace', 'pod', 'job', 'instance', 'service', 'container', 'endpoint'];

/** The series name -> exported metric (histogram series end in _bucket, _sum, _count). */
export function exportedMetricFor(series: string): string | undefined {
  if (SERVICE_METRICS[series]) return series;
  const m = /^(.*)_(bucket|sum|count)$/.exec(series);
  return m && SERVICE_METRICS[m[1]!]?.type === 'histogram' ? m[1] : undefined;
}

// ---------------------------------------------------------------- PromQL scanning

export interface Selector {
  metric: string;
  matchers: { label: string; op: string; value: string }[];
}
export interface PromqlScan {
  selectors: Selector[];
  functions: string[];
  groupingLabels: string[];
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'atan2']);
export const PROMQL_FUNCTIONS = new Set([
  'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
  'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'histogram_quantile', 'abs', 'absent', 'absent_over_time',
  'clamp', 'clamp_min', 'clamp_max', 'ceil', 'floor', 'round', 'time', 'timestamp', 'vector', 'scalar', 'label_replace',
  'avg_over_time', 'max_over_time', 'min_over_time', 'sum_over_time', 'count_over_time', 'last_over_time',
  'quantile_over_time', 'changes', 'resets', 'sort', 'sort_desc', 'predict_linear', 'label_values',
]);

/** Metric selectors, function names and grouping labels of a PromQL expression (a scanner, not a parser). */
export function scanPromql(expr: string): PromqlScan {
  const out: PromqlScan = { selectors: [], functions: [], groupingLabels: [] };
  let depth = 0;
  for (const ch of expr) {
    depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
    if (depth < 0) break;
  }
  if (depth !== 0) throw new Error(`unbalanced parentheses in: ${expr}`);
  const token =
    /\[[^\]]*\]|\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)|(\d+(?:\.\d+)?(?:e[+-]?\d+)?)|([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?(\s*\()?|(\{[^}]*\})|"(?:[^"\\]|\\.)*"/g;
  for (const m of expr.matchAll(token)) {
    const [, grouping, groupLabels, , ident, matchers, call, bareMatchers] = m;
    if (grouping) {
      out.groupingLabels.push(...groupLabels!.split(',').map((s) => s.trim()).filter(Boolean));
    } else if (bareMatchers) {
      throw new Error(`selector without a metric name in: ${expr}`);
    } else if (ident) {
      // An aggregation may put its grouping first: `sum by (pool) (...)`.
      const aggregation = /^\s*(by|without)\s*\(/.test(expr.slice(m.index! + m[0].length));
      if (call !== undefined || aggregation) out.functions.push(ident);
      else if (!KEYWORDS.has(ident)) out.selectors.push({ metric: ident, matchers: parseMatchers(matchers ?? '{}') });
    }
  }
  return out;
}

function parseMatchers(block: string): Selector['matchers'] {
  const inner = block.slice(1, -1).trim();
  if (inner === '') return [];
  const matchers: Selector['matchers'] = [];
  const re = /\s*(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)/gy;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while (consumed < inner.length && (m = re.exec(inner)) !== null) {
    matchers.push({ label: m[1]!, op: m[2]!, value: m[3]! });
    consumed = re.lastIndex;
  }
  if (consumed !== inner.length) throw new Error(`cannot read label matchers ${block}`);
  return matchers;
}

/**
 * Problems with the metrics an expression references: names the service does not export, labels
 * those metrics do not have, enumerated label values it never emits, unknown functions.
 */
export function promqlProblems(expr: string): string[] {
  const problems: string[] = [];
  let scan: PromqlScan;
  try {
    scan = scanPromql(expr);
  } catch (error) {
    return [(error as Error).message];
  }
  const known = new Set<string>([...TARGET_LABELS]);
  for (const f of scan.functions) if (!PROMQL_FUNCTIONS.has(f)) problems.push(`unknown function ${f}()`);
  if (scan.selectors.length === 0) problems.push(`no metric in: ${expr}`);
  for (const sel of scan.selectors) {
    const metric = exportedMetricFor(sel.metric);
    if (!metric && !PROMETHEUS_SYNTHETIC_METRICS.includes(sel.metric)) {
      problems.push(`metric ${sel.metric} is not exported by the service`);
      continue;
    }
    const labels = new Set([...TARGET_LABELS, ...(metric ? SERVICE_METRICS[metric]!.labels : [])]);
    if (sel.metric.endsWith('_bucket')) labels.add('le');
    for (const l of labels) known.add(l);
    for (const { label, op, value } of sel.matchers) {
      if (!labels.has(label)) problems.push(`${sel.metric} has no label "${label}"`);
      else if (op === '=' && LABEL_VALUES[label] && !LABEL_VALUES[label]!.includes(value)) {
        problems.push(`${sel.metric}{${label}="${value}"}: the service never emits that value`);
      }
    }
  }
  for (const l of scan.groupingLabels) if (!known.has(l)) problems.push(`grouping by unknown label "${l}"`);
  return problems;
}

// ---------------------------------------------------------------- the service's settings and Dockerfile

/** Every environment variable the service reads: the settings table declares them all. */
export function configEnvNames(): Set<string> {
  return new Set(SETTINGS.map((s) => s.env));
}

export interface DockerInstruction {
  instruction: string;
  args: string;
  stage: string;
}

/** Dockerfile instructions (continuations joined, comments dropped), each tagged with its stage name. */
export function parseDockerfile(file = path.join(ROOT, 'Dockerfile')): DockerInstruction[] {
  if (!existsSync(file)) throw new Error(`${file} is missing`);
  const logical: string[] = [];
  let current = '';
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*#/.test(line)) continue;
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' ';
      continue;
    }
    current += line;
    if (current.trim()) logical.push(current.trim());
    current = '';
  }
  let stage = '';
  return logical.map((line) => {
    const [, instruction, args] = /^(\w+)\s+([\s\S]*)$/.exec(line) ?? [];
    if (!instruction) throw new Error(`cannot read Dockerfile line: ${line}`);
    if (instruction.toUpperCase() === 'FROM') stage = /\bAS\s+(\S+)/i.exec(args!)?.[1] ?? '';
    return { instruction: instruction.toUpperCase(), args: args!.replace(/\s+/g, ' ').trim(), stage };
  });
}
