// The example in examples/ works as its README says: setup, then the platform, then the agent, whose
// three calls end 200, 201 and 403. Runs the scripts as separate processes against the real service.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, startService, type ServiceHandle } from './support/service.js';

const ROOT = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '..');

let service: ServiceHandle;
let platform: ChildProcess | undefined;

function run(script: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'examples', script)], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}

beforeAll(async () => {
  service = await startService({ mode: 'real' });
}, 120_000);

afterAll(async () => {
  platform?.kill('SIGKILL');
  await service?.dispose();
});

it('runs setup, platform and agent end to end', async () => {
  const env = {
    ADMIN_URL: service.adminUrl,
    ADMIN_TOKEN: service.adminToken,
    SERVICE_URL: service.publicUrl,
    EXAMPLE_DIR: mkdtempSync(path.join(os.tmpdir(), 'ace-example-')),
  };
  const setup = await run('setup.mjs', env);
  expect(setup.code, setup.output).toBe(0);

  const port = await freePort();
  platform = spawn(process.execPath, [path.join(ROOT, 'examples', 'platform.mjs')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port) },
  });
  let platformOutput = '';
  platform.stderr!.on('data', (c) => (platformOutput += c));
  await new Promise<void>((resolve, reject) => {
    platform!.stdout!.on('data', (c) => (String(c).includes('listening') ? resolve() : undefined));
    platform!.once('exit', () => reject(new Error(`platform exited: ${platformOutput}`)));
  });

  const agent = await run('agent.mjs', { ...env, PLATFORM_URL: `http://127.0.0.1:${port}` });
  expect(agent.code, agent.output).toBe(0);
  expect(agent.output).toContain('GET /orders/42 -> 200');
  expect(agent.output).toContain('POST /orders -> 201');
  expect(agent.output).toContain('DELETE /orders/42 -> 403');
  expect(agent.output).toContain('insufficient_scope');
});
