// Before anything starts (and before a cluster forks): each listener's port must be free. uSockets would
// otherwise join a port another process holds with SO_REUSEPORT and share its traffic without a word
// (HttpServer.listen explains); this check names the setting, and fails in a second, not after the stores
// started. The exclusive listen remains the guard against a port taken in between.
import net from 'node:net';

export interface Listener {
  /** The settings that name it, for the message (e.g. "HOST/PORT"). */
  settings: string;
  host: string;
  port: number;
}

/** Resolves when every port can be bound now; rejects naming every one that cannot. */
export async function assertPortsFree(listeners: Listener[]): Promise<void> {
  const problems: string[] = [];
  for (const listener of listeners) {
    if (listener.port === 0) continue; // the kernel picks a free one
    const problem = await bindProblem(listener.host, listener.port);
    if (problem) problems.push(`${listener.settings} ${listener.host}:${listener.port}: ${problem}`);
  }
  if (problems.length > 0) throw new PortsUnavailableError(problems);
}

/** A plain bind (no SO_REUSEPORT) fails while any socket, ours or uWS's, holds the port. */
function bindProblem(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      resolve(error.code === 'EADDRINUSE' ? 'in use by another process' : `cannot listen (${error.code ?? error.message})`),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

export class PortsUnavailableError extends Error {
  readonly code = 'ERR_ACE_PORT_IN_USE';
  constructor(readonly problems: string[]) {
    super(`cannot listen: ${problems.join('; ')}`);
    this.name = 'PortsUnavailableError';
  }
}
