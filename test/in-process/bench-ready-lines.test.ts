// The bench waits for as many HTTP processes as the service's own ready lines state (WORKERS), not for
// one per core: a pure parse of the start-up log.
import { describe, expect, it } from 'vitest';
import { readyLines } from '../../bench/lib/service.js';

const ready = (workers: number) => JSON.stringify({ level: 30, msg: 'agent credential exchange ready', workers });

describe('readyLines', () => {
  it('reads the configured process count and counts the ready lines', () => {
    const log = [JSON.stringify({ msg: 'cluster primary started', workers: 3 }), ready(3), '{"msg":"other"}', ready(3)].join('\n');
    expect(readyLines(log)).toEqual({ expected: 3, ready: 2 });
  });
  it('knows nothing before the first ready line', () => {
    expect(readyLines('{"msg":"starting"}\n')).toEqual({ expected: undefined, ready: 0 });
  });
  it('one process: one line is enough', () => {
    expect(readyLines(ready(1) + '\n')).toEqual({ expected: 1, ready: 1 });
  });
});
