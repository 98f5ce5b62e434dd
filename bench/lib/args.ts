// Command-line flags of `npm run bench` and `npm run soak` (node:util parseArgs; every flag optional): the
// bench's one parser, scenario flags included.
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
  /** WebSocket subscriber counts of the fanout scenario. */
  fanoutSizes: number[];
  /** token.issued events loaded by the audit-size scenario. */
  auditEvents: number;
  /** Idle seconds after ready in the embedded-memory scenario. */
  idleSeconds: number;
  /** profile: fresh agents (one argon2 verification each) instead of warm ones. */
  cold: boolean;
  /** profile: V8 CPU profiles of the service's threads, summarised. */
  cpuProf: boolean;
  /** profile: extra environment of the service (--env NAME=value, repeatable). */
  serviceEnv: Record<string, string>;
  soak: SoakOptions;
}

export interface SoakOptions {
  seconds: number;
  connections: number;
  /** Token requests per second. */
  rate: number;
  agents: number;
  /** Redis restarted by the soak (undefined: a private redis-server it starts on a free port). */
  redisPort: number | undefined;
  redisEverySeconds: number;
  redisDownSeconds: number;
  keyEverySeconds: number;
  secretEverySeconds: number;
  /** Seconds a rotated secret's old value may still be accepted. */
  graceSeconds: number;
}

const HELP = `usage: npm run bench -- [flags]
  --only <list>         scenarios to run, comma-separated (the list below; without --only, those marked "default")
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
scenario flags:
  --fanout-sizes <list> fanout: WebSocket subscriber counts (default 1000,10000; --quick: 1000)
  --audit-events <n>    audit-size: token.issued events loaded (default 1000000; --quick: 100000)
  --idle-seconds <s>    embedded-memory: idle seconds after ready (default 30; --quick: 5)
  --cold                profile: fresh agents (one argon2 verification each) instead of warm ones
  --cpu-prof            profile: V8 CPU profiles of the service's threads, top self time printed
  --env <NAME=value>    profile: extra environment of the service (repeatable)
  --soak-seconds <s>    soak: seconds of traffic (default 150; --quick: 45)
  --soak-connections <n> soak: connections (default 16)
  --soak-rate <n>       soak: token requests per second (default 300)
  --soak-agents <n>     soak: agents (default 20)
  --redis-port <port>   soak: restart the Redis on this port (default: a private redis-server on a free port)
  --redis-every <s>     soak: seconds between Redis restarts (default 30; --quick: 15)
  --redis-down <s>      soak: seconds Redis stays down (default 2)
  --key-every <s>       soak: seconds between signing-key rotations (default 20; --quick: 10)
  --secret-every <s>    soak: seconds between secret rotations (default 3)
  --grace <s>           soak: seconds an old secret may still be accepted after its rotation (default 10)
deployed-instance mode (only the "deployed" scenario runs; seeds through the admin API, cleans up after):
  --target <url>        public URL of a running service
  --admin-url <url>     its admin URL (reachable from here)
  --admin-token <t>     its admin token (or env ACE_ADMIN_TOKEN)`;

/** `scenarioList`: one line per scenario for --help (the registry's, given by the runner). */
export function parseOptions(argv = process.argv.slice(2), scenarioList = ''): BenchOptions {
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
      'fanout-sizes': { type: 'string' },
      'audit-events': { type: 'string' },
      'idle-seconds': { type: 'string' },
      cold: { type: 'boolean', default: false },
      'cpu-prof': { type: 'boolean', default: false },
      env: { type: 'string', multiple: true, default: [] },
      'soak-seconds': { type: 'string' },
      'soak-connections': { type: 'string' },
      'soak-rate': { type: 'string' },
      'soak-agents': { type: 'string' },
      'redis-port': { type: 'string' },
      'redis-every': { type: 'string' },
      'redis-down': { type: 'string' },
      'key-every': { type: 'string' },
      'secret-every': { type: 'string' },
      grace: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(`${HELP}\nscenarios:\n${scenarioList}`);
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
  const list = (name: string, raw: string) => raw.split(',').map((s) => Math.floor(num(name, s.trim(), 0, 1)));
  const sizes = list('scale-sizes', values['scale-sizes'] ?? (quick ? '10,20000' : '10,100000,1000000'));
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
    fanoutSizes: list('fanout-sizes', values['fanout-sizes'] ?? (quick ? '1000' : '1000,10000')),
    auditEvents: Math.floor(num('audit-events', values['audit-events'], quick ? 100_000 : 1_000_000, 1)),
    idleSeconds: num('idle-seconds', values['idle-seconds'], quick ? 5 : 30, 0),
    cold: values.cold === true,
    cpuProf: values['cpu-prof'] === true,
    serviceEnv: Object.fromEntries(
      (values.env ?? []).map((pair) => {
        const at = pair.indexOf('=');
        if (at < 1) throw new Error(`--env must be NAME=value (got "${pair}")`);
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
    ),
    soak: {
      seconds: num('soak-seconds', values['soak-seconds'], quick ? 45 : 150, 1),
      connections: Math.floor(num('soak-connections', values['soak-connections'], 16, 1)),
      rate: num('soak-rate', values['soak-rate'], 300, 1),
      agents: Math.floor(num('soak-agents', values['soak-agents'], 20, 1)),
      redisPort: values['redis-port'] === undefined ? undefined : Math.floor(num('redis-port', values['redis-port'], 0, 1)),
      redisEverySeconds: num('redis-every', values['redis-every'], quick ? 15 : 30, 1),
      redisDownSeconds: num('redis-down', values['redis-down'], 2, 0),
      keyEverySeconds: num('key-every', values['key-every'], quick ? 10 : 20, 1),
      secretEverySeconds: num('secret-every', values['secret-every'], 3, 1),
      graceSeconds: num('grace', values.grace, 10, 0),
    },
  };
  if (target && (!options.adminUrl || !options.adminToken)) throw new Error('--target needs --admin-url and --admin-token (or ACE_ADMIN_TOKEN)');
  if (target) options.only = ['deployed'];
  return options;
}
