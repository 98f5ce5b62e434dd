// Loopback ports for the processes the tests and the bench start.
import net from 'node:net';

// Below the kernel's ephemeral range (32768+), where outgoing connections take their local ports, and
// below the topology kit's 20000-32000. Each process starts at its own random place and walks the range,
// so concurrent test files rarely try the same port; the bind probe skips a port someone holds, and a
// service that still loses a race refuses to start (it listens exclusively) and is started again
// (test/support/service.ts).
const MIN = 10_000;
const SPAN = 10_000;
let next = Math.floor(Math.random() * SPAN);
const handedOut = new Set<number>();

/** A port free on 127.0.0.1 right now, not handed out before by this process (it may be taken before use). */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < SPAN; tried++) {
    const port = MIN + (next++ % SPAN);
    if (handedOut.has(port)) continue;
    if (await canBind(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${MIN}-${MIN + SPAN - 1} on 127.0.0.1`);
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}
