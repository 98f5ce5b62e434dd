// Command-line flags of `npm run bench` (node:util parseArgs; every flag optional).
import { parseArgs } from 'node:util';
import os from 'node:os';

export interface BenchOptions {
  /** Seconds each measurement lasts (after its warm-up). */
  duration: number;
  /** Seconds of warm-up load before each measurement, discarded. */
  warmup: number;
  connections: number;
  /** Seconds per scale measurement (10 / 1,000 / 100,000 rows). */
  scaleDuration: number;
  scaleSizes: number[];
  /** Real agents used by the scale measurements (also the first table size). */
  scaleAgents: number;
  /** Agents of the token-warm and listing measurements. */
  warmAgents: number;
  /** Upper bound of agents seeded for the cold measurement. */
  maxColdAgents: number;
  opensslSeconds: number;
  argon2Seconds: number;
  embedded: boolean;
  peer: boolean;
  scale: boolean;
  /** HTTP processes of the peer and of the bare uWS server; 0 = as many as the service runs. */
  peerWorkers: number;
  out: string | undefined;
  cores: number;
  /** Audit trail on/off comparison of warm tokens (rounds of off then on; 0 = skip). */
  auditRounds: number;
  auditAgents: number;
  /** Only the audit comparison (no limits, no other measurements). */
  auditOnly: boolean;
}

const HELP = `usage: npm run bench -- [flags]
  --duration <s>        seconds per measurement (default 8; --quick: 3)
  --warmup <s>          warm-up seconds before each measurement (default 2; --quick: 1)
  --connections <n>     autocannon connections (default 64)
  --scale-duration <s>  seconds per scale measurement (default 5; --quick: 2)
  --scale-sizes <list>  agents rows for the scale check (default 10,1000,100000)
  --scale-agents <n>    real agents used by the scale check (default 10)
  --warm-agents <n>     agents rotated by token-warm and listing (default 100)
  --max-cold-agents <n> cap on agents seeded for token-cold (default 4000)
  --openssl-seconds <s> openssl speed seconds (default 5; --quick: 2)
  --argon2-seconds <s>  argon2 rate seconds (default 5; --quick: 2)
  --peer-workers <n>    processes of the oidc-provider peer and the bare uWS server (default: same as the service)
  --embedded            run the service on its embedded default (PGlite, in-process cache) instead of Postgres+Redis
  --no-peer             skip the oidc-provider peer
  --no-scale            skip the scale check
  --audit-rounds <n>    audit trail off/on comparison rounds of warm tokens (default 1; 0 skips it)
  --audit-agents <n>    agents of the audit comparison (default 50)
  --audit-only          only the audit off/on comparison (and bytes per event on disk)
  --quick               short run (smoke test of the bench itself)
  --out <file>          result file (default bench/results/latest.json)`;

export function parseOptions(argv = process.argv.slice(2)): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'scale-duration': { type: 'string' },
      'scale-sizes': { type: 'string' },
      'scale-agents': { type: 'string' },
      'warm-agents': { type: 'string' },
      'max-cold-agents': { type: 'string' },
      'openssl-seconds': { type: 'string' },
      'argon2-seconds': { type: 'string' },
      'peer-workers': { type: 'string' },
      embedded: { type: 'boolean', default: false },
      'no-peer': { type: 'boolean', default: false },
      'no-scale': { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      'audit-rounds': { type: 'string' },
      'audit-agents': { type: 'string' },
      'audit-only': { type: 'boolean', default: false },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    process.exit(0);
  }
  const quick = values.quick === true;
  const num = (name: string, raw: string | undefined, fallback: number, min = 0): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got "${raw}")`);
    return n;
  };
  const sizes = (values['scale-sizes'] ?? '10,1000,100000').split(',').map((s) => num('scale-sizes', s.trim(), 0, 1));
  const options: BenchOptions = {
    duration: num('duration', values.duration, quick ? 3 : 8, 1),
    warmup: num('warmup', values.warmup, quick ? 1 : 2, 0),
    connections: Math.floor(num('connections', values.connections, 64, 1)),
    scaleDuration: num('scale-duration', values['scale-duration'], quick ? 2 : 5, 1),
    scaleSizes: sizes.sort((a, b) => a - b),
    scaleAgents: Math.floor(num('scale-agents', values['scale-agents'], 10, 1)),
    warmAgents: Math.floor(num('warm-agents', values['warm-agents'], quick ? 50 : 100, 1)),
    maxColdAgents: Math.floor(num('max-cold-agents', values['max-cold-agents'], 4000, 10)),
    opensslSeconds: Math.floor(num('openssl-seconds', values['openssl-seconds'], quick ? 2 : 5, 1)),
    argon2Seconds: num('argon2-seconds', values['argon2-seconds'], quick ? 2 : 5, 1),
    embedded: values.embedded === true,
    peer: values['no-peer'] !== true,
    scale: values['no-scale'] !== true,
    peerWorkers: Math.floor(num('peer-workers', values['peer-workers'], 0, 0)),
    out: values.out,
    cores: Math.max(1, os.availableParallelism?.() ?? os.cpus().length),
    auditRounds: Math.floor(num('audit-rounds', values['audit-rounds'], 1, 0)),
    auditAgents: Math.floor(num('audit-agents', values['audit-agents'], 50, 1)),
    auditOnly: values['audit-only'] === true,
  };
  if (options.scaleSizes[0] < options.scaleAgents) {
    throw new Error(`--scale-sizes must start at or above --scale-agents (${options.scaleAgents})`);
  }
  return options;
}
