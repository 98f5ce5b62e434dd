// Child processes of the bench (bare uWS server, oidc-provider peer): spawned with node, considered up
// when they print a line starting with "ready" on stdout.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopProcess } from '../../kit/proc.js';

export interface Child {
  process: ChildProcess;
  readyLine: string;
  output(): string;
  stop(): Promise<void>;
}

export async function spawnReady(scriptUrl: URL, env: Record<string, string>, timeoutMs = 30_000): Promise<Child> {
  const child = spawn(process.execPath, [fileURLToPath(scriptUrl)], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${scriptUrl.pathname} not ready in ${timeoutMs} ms:\n${output}`)), timeoutMs);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      output += chunk;
      const line = output.split('\n').find((l) => l.startsWith('ready'));
      if (line) {
        clearTimeout(timer);
        resolve(line);
      }
    });
    child.stderr!.on('data', (chunk) => (output += chunk));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${scriptUrl.pathname} exited (${code}) before it was ready:\n${output}`));
    });
  });
  return {
    process: child,
    readyLine,
    output: () => output,
    stop: () => stopProcess(child, { signal: 'SIGTERM', killAfterMs: 5000 }),
  };
}
