// Test-only: `node --import dist/test/support/clock-offset.js` shifts this process's wall clock (Date.now
// and new Date()) by ACE_TEST_CLOCK_OFFSET_MS, as a machine whose clock is off would. Never shipped: the
// production build does not compile test/. Worker threads inherit --import, so they are shifted too.
const offset = Number(process.env.ACE_TEST_CLOCK_OFFSET_MS ?? '0');

if (Number.isFinite(offset) && offset !== 0) {
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
