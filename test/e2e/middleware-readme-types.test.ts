// Every ```ts block of the middleware's README compiles with `tsc --noEmit` under strict,
// exactOptionalPropertyTypes and noUncheckedIndexedAccess, against the built package as an app resolves
// it (package exports, dist/*.d.ts) with the real @types/express and fastify of the repository. The
// Express route-guard pattern failed here before (TS2345 on res.json), and `req.agent` without a cast.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
// Inside the repository so that the workspace's node_modules resolve; removed afterwards (.scratch is ignored).
const dir = path.join(ROOT, '.scratch', `readme-types-${randomBytes(4).toString('hex')}`);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('the README TypeScript examples type-check under strict options', { timeout: 120_000 }, async () => {
  const readme = readFileSync(path.join(ROOT, 'packages/middleware/README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  expect(blocks.length).toBeGreaterThanOrEqual(3);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  blocks.forEach((code, i) => writeFileSync(path.join(dir, `example-${i + 1}.ts`), code));
  // `req.agent` is optional, as at run time (a route the middleware does not cover has none): reading it
  // unguarded must not compile, in Express and in Fastify.
  writeFileSync(
    path.join(dir, 'unguarded.ts'),
    `import express from 'express';
import Fastify from 'fastify';
import '@agent-credential-exchange/middleware/fastify';
express().get('/x', (req, res) => void res.json({ agent: req.agent.agentId }));
Fastify().get('/x', async (request) => ({ agent: request.agent.agentId }));
`,
  );
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2022', 'DOM'],
        types: ['node'],
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: false,
        noEmit: true,
      },
      include: ['*.ts'],
    }),
  );
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const result = await exec(process.execPath, [tsc, '-p', dir]).then(
    () => ({ code: 0, output: '' }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, output: `${error.stdout}${error.stderr}` }),
  );
  const errors = result.output.split('\n').filter((line) => / error TS/.test(line));
  expect(errors.filter((line) => !line.includes('unguarded.ts('))).toEqual([]);
  expect(errors.map((line) => /unguarded\.ts\((\d+),\d+\): error (TS\d+)/.exec(line)?.slice(1))).toEqual([
    ['4', 'TS18048'],
    ['5', 'TS18049'],
  ]);
});
