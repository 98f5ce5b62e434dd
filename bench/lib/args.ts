// Command-line flags of `npm run bench` (node:util parseArgs; every flag optional).
import { parseArgs } from 'node:util';
import os from 'node:os';

export interface BenchOptions {
  /** Scenarios to run (names from scenarios/index.ts); empty = the default set. */
  only: string[];
  /** Rounds per comparison; figures are medians of rounds. */
  rounds: number;
  /** Seconds each measurement lasts (after its warm-up). */
  duration: number;
  /** Seconds of warm-up load before each measurement, discarded. */
  warmup: number;
  connections: number;
  /** Seconds per scale measurement. */
  scaleDuration: number;
  scaleSizes: number[];
  /** Agents of the token-warm and listing measurements. */
  warmAgents: number;
  /** Cap on agents seeded through the admin API for token-cold (deployed / embedded: bulk rows need SQL). */
  maxColdAgents: number;
  opensslSeconds: number;
  argon2Seconds: number;
  /** Agents started at once by the fleet-restart scenario. */
  fleetAgents: number;
  /** maxRetries given to each fleet agent's client (undefined: the client's defaults). */
  fleetRetries: number | undefined;
  /** Agents of the rolling-restart scenario, and the request rate its fleet keeps up. */
  rollingAgents: number;
  rollingRate: number;
  embedded: boolean;
  peer: boolean;
  /** WORKERS of the service in compare (undefined: the service's default). */
  workers: number | undefined;
  /** libuv thread pool of the service, the peer and the bare servers (one value for all). */
  uvThreads: number;
  /** Deployed-instance mode: the service's public URL (nothing is started locally). */
  target: string | undefined;
  adminUrl: string | undefined;
  adminToken: string | undefined;
  out: string | undefined;
  quick: boolean;
  cores: number;
}

const HELP = `usage: npm run bench -- [flags]
  --only <list>         scenarios to run, comma-separated: compare, scale, fleet, fanout, audit (the default set), topologies (~7 min, only when named), rolling (only when named), deployed (with --target)
  --rounds <n>          interleaved rounds per comparison; figures are medians (default 3; --quick: 1)
  --duration <s>        seconds per measurement (default 5; --quick: 2)
  --warmup <s>          warm-up seconds before each measurement (default 2; --quick: 1)
  --connections <n>     autocannon connections (default 64)
  --scale-duration <s>  seconds per scale measurement (default 4; --quick: 2)
  --scale-sizes <list>  agents rows for the scale table (default 10,100000,1000000; --quick: 10,20000)
  --warm-agents <n>     agents rotated by token-warm and listing (default 100; --quick: 30)
  --max-cold-agents <n> cap on agents seeded through the admin API for token-cold (default 1500)
  --openssl-seconds <s> openssl speed seconds (default 3; --quick: 1)
  --argon2-seconds <s>  raw argon2 rate seconds per round (default 3; --quick: 1)
  --fleet-agents <n>    agents of the fleet restart (default 5000; --quick: 300)
  --rolling-agents <n>  agents of the rolling restart (--only rolling; default 200)
  --rolling-rate <n>    token requests per second during the rolling restart (default 200)
  --fleet-retries <n>   maxRetries of each fleet agent's client (default: none, the client's wait budget alone)
  --workers <n>         WORKERS (HTTP processes) of the service in compare; the bare servers and the peer follow (default: the service's default)
  --uv-threads <n>      UV_THREADPOOL_SIZE of the service, the peer and the bare servers (default: max(2, cores))
  --embedded            run the service on its embedded default (PGlite, in-process cache) instead of Postgres+Redis
  --no-peer             skip the oidc-provider peer
  --quick               short run (smoke test of the bench itself; figures not for quoting)
  --out <file>          result file (default bench/results/latest.json)
deployed-instance mode (only the "deployed" scenario runs; seeds through the admin API, cleans up after):
  --target <url>        public URL of a running service
  --admin-url <url>     its admin URL (reachable from here)
  --admin-token <t>     its admin token (or env ACE_ADMIN_TOKEN)`;

export function parseOptions(argv = process.argv.slice(2)): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      only: { type: 'string' },
      rounds: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'scale-duration': { type: 'string' },
      'scale-sizes': { type: 'string' },
      'warm-agents': { type: 'string' },
      'max-cold-agents': { type: 'string' },
      'openssl-seconds': { type: 'string' },
      'argon2-seconds': { type: 'string' },
      'fleet-agents': { type: 'string' },
      'rolling-agents': { type: 'string' },
      'rolling-rate': { type: 'string' },
      'fleet-retries': { type: 'string' },
      'uv-threads': { type: 'string' },
      workers: { type: 'string' },
      embedded: { type: 'boolean', default: false },
      'no-peer': { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      target: { type: 'string' },
      'admin-url': { type: 'string' },
      'admin-token': { type: 'string' },
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
  const cores = Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
  const sizes = (values['scale-sizes'] ?? (quick ? '10,20000' : '10,100000,1000000')).split(',').map((s) => Math.floor(num('scale-sizes', s.trim(), 0, 1)));
  const target = values.target?.replace(/\/+$/, '');
  const options: BenchOptions = {
    only: (values.only ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    rounds: Math.floor(num('rounds', values.rounds, quick ? 1 : 3, 1)),
    duration: num('duration', values.duration, quick ? 2 : 5, 1),
    warmup: num('warmup', values.warmup, quick ? 1 : 2, 0),
    connections: Math.floor(num('connections', values.connections, 64, 1)),
    scaleDuration: num('scale-duration', values['scale-duration'], quick ? 2 : 4, 1),
    scaleSizes: sizes.sort((a, b) => a - b),
    warmAgents: Math.floor(num('warm-agents', values['warm-agents'], quick ? 30 : 100, 1)),
    maxColdAgents: Math.floor(num('max-cold-agents', values['max-cold-agents'], 1500, 10)),
    opensslSeconds: Math.floor(num('openssl-seconds', values['openssl-seconds'], quick ? 1 : 3, 1)),
    argon2Seconds: num('argon2-seconds', values['argon2-seconds'], quick ? 1 : 3, 1),
    fleetAgents: Math.floor(num('fleet-agents', values['fleet-agents'], quick ? 300 : 5000, 1)),
    rollingAgents: Math.floor(num('rolling-agents', values['rolling-agents'], 200, 1)),
    rollingRate: num('rolling-rate', values['rolling-rate'], 200, 1),
    fleetRetries: values['fleet-retries'] === undefined ? undefined : Math.floor(num('fleet-retries', values['fleet-retries'], 0, 0)),
    embedded: values.embedded === true,
    peer: values['no-peer'] !== true,
    workers: values.workers === undefined ? undefined : Math.floor(num('workers', values.workers, 1, 1)),
    uvThreads: Math.floor(num('uv-threads', values['uv-threads'], Math.max(2, cores), 1)),
    target,
    adminUrl: values['admin-url']?.replace(/\/+$/, ''),
    adminToken: values['admin-token'] ?? process.env.ACE_ADMIN_TOKEN,
    out: values.out,
    quick,
    cores,
  };
  if (target && (!options.adminUrl || !options.adminToken)) throw new Error('--target needs --admin-url and --admin-token (or ACE_ADMIN_TOKEN)');
  if (target) options.only = ['deployed'];
  return options;
}
