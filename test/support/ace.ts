// The `ace` CLI as the operator runs it: the built dist/src/cli/main.js as a child process, with only the
// environment given (a developer's ACE_* cannot leak in), stdin closed.
import { spawn } from 'node:child_process';
import path from 'node:path';

export const CLI = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

export interface AceRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runAce(args: string[], env: Record<string, string> = {}, cwd?: string): Promise<AceRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, ...(cwd ? { cwd } : {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
