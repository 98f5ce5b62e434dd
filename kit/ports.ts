// Loopback ports for the processes the tests and the bench start.
import net from 'node:net';

/** A port free on 127.0.0.1 right now (the kernel picks it; it may be taken again before use). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
