// Test-only: `node --import dist/test/support/clock-offset.js` shifts this process's wall clock (Date.now
// and new Date()) by ACE_TEST_CLOCK_OFFSET_MS, as a machine whose clock is off would. With
// ACE_TEST_CLOCK_OFFSET_FILE the offset is read from that file instead, and again every 100 ms, so a test
// can set a clock right while the process runs. Never shipped: the production build does not compile
// test/. Worker threads inherit --import, so they are shifted too.
import { readFileSync } from 'node:fs';

const file = process.env.ACE_TEST_CLOCK_OFFSET_FILE;
const readOffset = (): number => {
  const text = file ? readFileSync(file, 'utf8') : (process.env.ACE_TEST_CLOCK_OFFSET_MS ?? '0');
  const value = Number(text.trim());
  return Number.isFinite(value) ? value : 0;
};
let offset = readOffset();

if (file || offset !== 0) {
  if (file) {
    setInterval(() => {
      offset = readOffset();
    }, 100).unref();
  }
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class ShiftedDate extends RealDate {
    constructor(...args: ConstructorParameters<DateConstructor> | []) {
      if (args.length === 0) super(realNow() + offset);
      else super(...(args as ConstructorParameters<DateConstructor>));
    }

    static override now(): number {
      return realNow() + offset;
    }
  }
  globalThis.Date = ShiftedDate as DateConstructor;
}
