// `ws` (a dependency of the service) ships no type declarations and @types/ws is not installed: the
// tests that drive a WebSocket client type what they use at the call site.
declare module 'ws';
