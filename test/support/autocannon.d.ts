// autocannon ships no type declarations; the tests that drive it type what they read at the call site
// (bench/lib/load.ts types its own subset).
declare module 'autocannon';
