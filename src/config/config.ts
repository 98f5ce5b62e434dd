// Configuration from environment variables, validated once at start. The settings themselves are declared
// in settings.ts; this file reads them and checks the rules between them. Every bad value is reported (all
// at once) with the variable's name and what it expects.
import { cores, SETTINGS, type DefaultContext, type Setting } from './settings.js';
import { parseProxyList } from '../support/client-address.js';
import { redisSettingProblems, redisTopologyKind } from './redis-settings.js';

export { defaultBaseUrl } from './settings.js';

export type { AuditConfig, Config } from './types.js';
import type { AuditConfig, Config } from './types.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = new EnvReader({ env, problems });
  const context: DefaultContext = { values: {}, cores: cores() };
  const values = context.values as Record<string, unknown>;
  values.audit = {};
  for (const setting of SETTINGS) {
    const value = readSetting(read, setting, context);
    if (!setting.key) continue;
    // "audit.retentionDays" fills config.audit.retentionDays.
    const [outer, inner] = setting.key.split('.');
    if (inner) (values[outer] as Record<string, unknown>)[inner] = value;
    else values[outer] = value;
  }
  const config = context.values as Config;

  // Rules between settings.
  if (config.port !== 0 && config.port === config.adminPort) problems.push('PORT and ADMIN_PORT must differ (the admin API never shares the public port)');
  if (!/^[a-z0-9]{4}_kid_$/.test(config.apiKeyPrefix)) {
    problems.push(`API_KEY_PREFIX must be exactly 4 lowercase letters or digits followed by "_kid_" (got "${config.apiKeyPrefix}")`);
  }
  problems.push(...redisSettingProblems(config));
  if (config.workers > 1 && !redisTopologyKind(config)) {
    problems.push('WORKERS > 1 needs REDIS_URL (or REDIS_SENTINELS, REDIS_CLUSTER_NODES): separate processes cannot share the in-process cache, rate limiter and invalidation bus');
  }
  if (config.argon2MaxPerAddress > Math.max(1, config.argon2MaxQueue)) {
    problems.push(`ARGON2_MAX_PER_ADDRESS must not exceed ARGON2_MAX_QUEUE (${config.argon2MaxQueue}): one address must not be able to fill the queue`);
  }
  if (config.keyPropagationSeconds < config.keyRefreshSeconds * 2) {
    problems.push('KEY_PROPAGATION_SECONDS must be at least twice KEY_REFRESH_SECONDS, so every instance publishes a new key before any signs with it');
  }
  const invalidProxies = parseProxyList(config.trustProxyCidrs).invalid;
  if (invalidProxies.length > 0) {
    problems.push(`TRUST_PROXY_CIDRS must list IP addresses or ranges such as 10.0.0.0/8 or fd00::/8 (not: ${invalidProxies.map((e) => `"${e.slice(0, 64)}"`).join(', ')})`);
  }
  const invalidPeers = parseProxyList(config.trustProxyPeers).invalid;
  if (invalidPeers.length > 0) {
    problems.push(`TRUST_PROXY_PEERS must list IP addresses or ranges such as 10.0.0.0/8 or fd00::/8 (not: ${invalidPeers.map((e) => `"${e.slice(0, 64)}"`).join(', ')})`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function readSetting(read: EnvReader, setting: Setting, context: DefaultContext): unknown {
  const fallback = <T>(d: T | ((c: DefaultContext) => T)): T => (typeof d === 'function' ? (d as (c: DefaultContext) => T)(context) : d);
  switch (setting.type) {
    case 'string': {
      const value = read.string(setting.env, fallback(setting.default));
      return setting.normalise ? setting.normalise(value) : value;
    }
    case 'int':
      return read.int(setting.env, fallback(setting.default), setting.min, setting.max);
    case 'bool':
      return read.bool(setting.env, setting.default);
    case 'oneOf':
      return read.oneOf(setting.env, setting.default, setting.allowed);
    case 'url': {
      const value = read.optionalUrl(setting.env, setting.protocols, setting.validate) ?? (setting.default ? fallback(setting.default) : undefined);
      return value !== undefined && setting.normalise ? setting.normalise(value) : value;
    }
    case 'key32':
      return read.key32(setting.env);
    case 'secret':
      return read.secret(setting.env, setting.minLength);
  }
}

interface EnvReaderOptions {
  readonly env: Env;
  /** Each setting that cannot be read adds its problem here; the caller reports them all at once. */
  readonly problems: string[];
}

class EnvReader {
  private readonly env: Env;
  private readonly problems: string[];

  constructor({ env, problems }: EnvReaderOptions) {
    this.env = env;
    this.problems = problems;
  }

  private raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!/^-?\d+$/.test(value)) {
      this.problems.push(`${name} must be a whole number (got "${value}")`);
      return fallback;
    }
    const n = Number(value);
    if (n < min || n > max) {
      this.problems.push(`${name} must be between ${min} and ${max} (got ${n})`);
      return fallback;
    }
    return n;
  }

  port(name: string, fallback: number): number {
    return this.int(name, fallback, 0, 65_535);
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    this.problems.push(`${name} must be true or false (got "${value}")`);
    return fallback;
  }

  oneOf(name: string, fallback: string, allowed: string[]): string {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!allowed.includes(value)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
      return fallback;
    }
    return value;
  }

  optionalUrl(name: string, protocols: string[], validate?: (value: string, env: string) => string[]): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (validate) {
      this.problems.push(...validate(value, name));
      return value;
    }
    try {
      const url = new URL(value);
      if (!protocols.includes(url.protocol)) {
        this.problems.push(`${name} must be a ${protocols.join(' or ')} URL (got protocol "${url.protocol}")`);
      }
    } catch {
      // Never echo the value: it may carry a password.
      this.problems.push(`${name} is not a valid URL`);
    }
    return value;
  }

  /** Unset when empty; never echoed. */
  secret(name: string, minLength: number): string | undefined {
    const value = this.env[name] || undefined;
    if (value !== undefined && value.length < minLength) this.problems.push(`${name} must be at least ${minLength} characters`);
    return value;
  }

  /** 32 bytes, given as 64 hex characters or base64/base64url. Never echoed. */
  key32(name: string): Buffer | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
    if (bytes.length !== 32) {
      this.problems.push(`${name} must be 32 bytes, as 64 hex characters or base64 (got ${bytes.length} bytes)`);
      return undefined;
    }
    return bytes;
  }
}
