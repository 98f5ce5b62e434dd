// The README tour's platform block, run as written (extracted by its marker): the files the tour's `ace`
// steps write (scopes.yaml, feed-token) from a live service, the block as platform.mjs beside them, and an
// agent's token answered "hello <agent>". Only the service URL and the port are put in; a missing import or
// a value the tour never creates fails here.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AdminClient } from '../../kit/admin.js';
import { freePort } from '../../kit/ports.js';
import { stopProcess } from '../../kit/proc.js';
import { waitFor } from '../../kit/wait.js';
import { startService, type ServiceHandle } from '../support/service.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside the repository so that the workspace's packages resolve as an app's would (.scratch is ignored).
const dir = path.join(ROOT, '.scratch', `readme-tour-${randomBytes(4).toString('hex')}`);

export function tourPlatformBlock(readme: string): string {
  const block = /<!-- tour: platform[^>]*-->\n```js\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README.md: no ```js block after <!-- tour: platform --> ');
  return block;
}

let service: ServiceHandle;
let platformProcess: ChildProcess | undefined;
let output = '';

beforeAll(async () => {
  service = await startService({ mode: 'real' });
});
afterAll(async () => {
  if (platformProcess) await stopProcess(platformProcess, { killAfterMs: 5000 });
  await service?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

it('the tour\'s platform block runs as written and answers an agent\'s token', async () => {
  const block = tourPlatformBlock(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
  expect(block).toContain("'http://localhost:8080'");
  expect(block).toContain('.listen(3000)');
  const admin = new AdminClient(service);
  // The tour's `ace` steps: a platform with one route, an agent granted its scope, the scope file, the feed token.
  const platform = await admin.createPlatform({
    name: 'Shop',
    domain: `shop-${randomBytes(4).toString('hex')}.example.com`,
    scopes: [{ name: 'orders:read' }],
    routes: [{ method: 'GET', path: '/orders/{id}', scopes: ['orders:read'] }],
  });
  const agent = await admin.createAgent('bot');
  await admin.grant(agent.agent_id, platform.platform_id, ['orders:read']);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'scopes.yaml'), await (await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/scopes.yaml`)).text());
  const { feed_token } = await admin.call<{ feed_token: string }>('POST', `/admin/v1/platforms/${platform.platform_id}/feed-credentials`, {}, [200, 201]);
  writeFileSync(path.join(dir, 'feed-token'), `${feed_token}\n`);

  const port = await freePort();
  writeFileSync(path.join(dir, 'platform.mjs'), block.replace("'http://localhost:8080'", JSON.stringify(service.publicUrl)).replace('.listen(3000)', `.listen(${port}, () => console.log('listening'))`));
  platformProcess = spawn(process.execPath, ['platform.mjs'], { cwd: dir });
  platformProcess.stdout!.on('data', (d) => (output += d));
  platformProcess.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => platformProcess!.on('exit', resolve));
  await Promise.race([
    waitFor('the tour platform to listen', () => output.includes('listening'), 30_000),
    exited.then((code) => {
      throw new Error(`the tour's platform block exited (${code}): ${output}`);
    }),
  ]);

  const tokenAnswer = await fetch(`${service.publicUrl}/api/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key_id: agent.api_key_id, secret: agent.secret, platform_id: platform.platform_id }),
  });
  const { access_token } = (await tokenAnswer.json()) as { access_token: string };
  expect(tokenAnswer.status).toBe(200);
  const hello = await fetch(`http://127.0.0.1:${port}/orders/42`, { headers: { authorization: `Bearer ${access_token}` } });
  expect(hello.status, output).toBe(200);
  expect(await hello.text()).toBe(`hello ${agent.agent_id}`);
  expect((await fetch(`http://127.0.0.1:${port}/orders/42`)).status).toBe(401);
});
