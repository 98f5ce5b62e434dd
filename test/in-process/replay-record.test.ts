// The rule over two records of used jtis: seen in either is a replay; one answer is enough for a first use;
// neither answering is the durable record's StoreUnavailableError.
import { describe, expect, it } from 'vitest';
import { EitherRecordReplayGuard } from '../../src/core/credentials/replay-record.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { MemoryReplayGuard } from '../../src/adapters/cache/replay-guard.js';
import type { ReplayGuard } from '../../src/core/ports/assertions.js';

const down = (store: string): ReplayGuard => ({ firstUse: async () => { throw new StoreUnavailableError(store, new Error('down')); } });
const later = () => Date.now() + 60_000;

describe('EitherRecordReplayGuard', () => {
  it('refuses a jti either record has seen, also after the other lost it', async () => {
    const durable = new MemoryReplayGuard();
    const guard = new EitherRecordReplayGuard({ durable, fast: new MemoryReplayGuard() });
    expect(await guard.firstUse('iss\njti-1', later())).toBe(true);
    expect(await guard.firstUse('iss\njti-1', later())).toBe(false);
    // The fast record emptied (a Redis flush): the durable one still refuses.
    expect(await new EitherRecordReplayGuard({ durable, fast: new MemoryReplayGuard() }).firstUse('iss\njti-1', later())).toBe(false);
  });

  it('answers with one record down, and refuses a replay then too', async () => {
    for (const guard of [new EitherRecordReplayGuard({ durable: down('postgres'), fast: new MemoryReplayGuard() }), new EitherRecordReplayGuard({ durable: new MemoryReplayGuard(), fast: down('redis') })]) {
      expect(await guard.firstUse('iss\njti-2', later())).toBe(true);
      expect(await guard.firstUse('iss\njti-2', later())).toBe(false);
    }
  });

  it('is unavailable when neither answers', async () => {
    await expect(new EitherRecordReplayGuard({ durable: down('postgres'), fast: down('redis') }).firstUse('iss\njti-3', later())).rejects.toMatchObject({ code: 'store_unavailable' });
  });
});
