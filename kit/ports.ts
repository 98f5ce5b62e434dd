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
    if (await portIsFree(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${MIN}-${MIN + SPAN - 1} on 127.0.0.1`);
}

/** Whether 127.0.0.1:port can be bound right now (exclusively). */
export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** TOPOLOGY_PORTS=<min>-<max> narrows every draw: a machine shared by several test runs gives each its own range. */
const PORT_RANGE = /^(\d+)-(\d+)$/.exec(process.env.TOPOLOGY_PORTS ?? '');

/**
 * A port in [min, max] that is free on 127.0.0.1 now (and, with `alsoFree`, so are port + each offset),
 * never handed out before by this process. The OS's own free-port choice lands in the ephemeral range
 * (32768+), which this kit must stay below, hence the random draw.
 */

export async function pickPort({ min = 20_000, max = 32_000, count = 1, alsoFree = [] as number[] } = {}): Promise<number> {
  if (PORT_RANGE) {
    min = Math.max(min, Number(PORT_RANGE[1]));
    max = Math.min(max, Number(PORT_RANGE[2]));
  }
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = min + Math.floor(Math.random() * (max - min - count + 2));
    const ports: number[] = [];
    for (let i = 0; i < count; i++) ports.push(base + i, ...alsoFree.map((o) => base + i + o));
    if (ports.some((p) => handedOut.has(p) || p >= 32_768)) continue;
    let ok = true;
    for (const p of ports) if (!(await portIsFree(p))) { ok = false; break; }
    if (!ok) continue;
    for (const p of ports) handedOut.add(p);
    return base;
  }
  throw new Error(`no free block of ${count} port(s) in ${min}-${max}`);
}
