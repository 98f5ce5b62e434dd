// The readiness check's log line: said once per change, naming every store that is down and every other
// reason an instance is out of rotation (a harness that times out waiting for /readyz prints it).
import { describe, expect, it } from 'vitest';
import { DegradationLog } from '../../src/app/degradation-log.js';
import type { Logger } from '../../src/adapters/telemetry/logger.js';

function capture() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (fieldsOrMsg: unknown, msg?: string) =>
    lines.push(typeof fieldsOrMsg === 'string' ? { level, fields: {}, msg: fieldsOrMsg } : { level, fields: fieldsOrMsg as Record<string, unknown>, msg: msg ?? '' });
  const logger = { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') } as unknown as Logger;
  return { lines, log: new DegradationLog({ logger }) };
}

describe('DegradationLog', () => {
  it('says nothing while all is well, and once per change', () => {
    const { lines, log } = capture();
    log.report([], true);
    log.report([], true);
    expect(lines).toEqual([]);
    log.report(['redis'], true);
    log.report(['redis'], true);
    expect(lines.map((l) => [l.level, l.msg.split(':')[0]])).toEqual([['warn', 'degraded, still ready']]);
    log.report([], true);
    expect(lines.at(-1)).toMatchObject({ level: 'info', msg: 'no longer degraded: Redis answers again', fields: { recovered: ['redis'] } });
  });

  it('names what came back, stores or not', () => {
    const { lines, log } = capture();
    log.report(['postgres'], false, ['worker_pools']);
    log.report([], true);
    expect(lines.at(-1)).toMatchObject({ level: 'info', msg: 'no longer degraded: Postgres has a writable primary again; the worker pools answer again' });
    log.report([], false, ['signing_key']);
    log.report([], true);
    expect(lines.at(-1)!.msg).toBe('no longer degraded: a signing key is active again');
  });

  it('names the reasons an instance is not ready beside the stores: worker pools, signing key, Redis never reached', () => {
    const { lines, log } = capture();
    log.report([], false, ['worker_pools']);
    expect(lines.at(-1)).toMatchObject({ level: 'warn', fields: { because: ['worker_pools'], ready: false } });
    expect(lines.at(-1)!.msg).toMatch(/^not ready: the argon2 or signing worker pool did not answer/);
    log.report(['postgres'], false, ['signing_key', 'redis_never_reached']);
    expect(lines.at(-1)!.msg).toMatch(/^not ready: Postgres: no writable primary.*; no active signing key; the Redis it was told to use has not been reached/);
    expect(lines).toHaveLength(2);
  });
});
