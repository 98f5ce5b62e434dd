// The bench's one argument parser: the flags of every scenario (the former scripts' included), their
// defaults and --quick defaults, and refusals of what is not a flag or not a value.
import { describe, expect, it } from 'vitest';
import { parseOptions } from '../../bench/lib/args.js';
import { SCENARIOS } from '../../bench/scenarios/index.js';

describe('bench options', () => {
  it('give every scenario flag its default, and its shorter default under --quick', () => {
    const full = parseOptions([]);
    expect(full.soak).toMatchObject({ seconds: 150, connections: 16, rate: 300, redisPort: undefined, redisEverySeconds: 30, keyEverySeconds: 20 });
    expect([full.fanoutSizes, full.auditEvents, full.idleSeconds]).toEqual([[1000, 10_000], 1_000_000, 30]);
    const quick = parseOptions(['--quick']);
    expect(quick.soak).toMatchObject({ seconds: 45, redisEverySeconds: 15, keyEverySeconds: 10 });
    expect([quick.fanoutSizes, quick.auditEvents, quick.idleSeconds]).toEqual([[1000], 100_000, 5]);
  });

  it('read the scenario flags given', () => {
    const opts = parseOptions(['--only', 'profile,soak', '--cold', '--cpu-prof', '--env', 'AUDIT=false', '--env', 'NODE_OPTIONS=--a=b', '--soak-seconds', '20', '--redis-port', '6390', '--fanout-sizes', '10,20']);
    expect(opts.only).toEqual(['profile', 'soak']);
    expect([opts.cold, opts.cpuProf]).toEqual([true, true]);
    expect(opts.serviceEnv).toEqual({ AUDIT: 'false', NODE_OPTIONS: '--a=b' });
    expect([opts.soak.seconds, opts.soak.redisPort, opts.fanoutSizes]).toEqual([20, 6390, [10, 20]]);
  });

  it('refuse an unknown flag, a value that is not a number and an --env without a name', () => {
    expect(() => parseOptions(['--sizes', '10'])).toThrow();
    expect(() => parseOptions(['--soak-rate', 'fast'])).toThrow(/--soak-rate must be a number/);
    expect(() => parseOptions(['--env', '=x'])).toThrow(/--env must be NAME=value/);
  });

  it('serve scenarios registered once each under their own name', () => {
    const names = SCENARIOS.map((scenario) => scenario.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(['soak', 'profile', 'audit-size', 'embedded-memory', 'postgres-prepare', 'fanout', 'feedflood']));
  });
});
