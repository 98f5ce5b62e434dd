// The shared test kit (kit/) that test/ and bench/ both import, and the TypeScript projects that keep it,
// the bench and the test helpers out of the production build.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, postJson } from '../../kit/admin.js';
import { metricSamples, metricSum } from '../../kit/metrics.js';
import { freePort } from '../../kit/ports.js';
import { childrenOf, hasExited, memoryBytes, processTree, stopProcess } from '../../kit/proc.js';
import { REPO_ROOT, SERVICE_MAIN } from '../../kit/service.js';
import { waitFor } from '../../kit/wait.js';

describe('waitFor', () => {
  it('polls until the probe holds, counting a throwing probe as "not yet"', async () => {
    let calls = 0;
    await waitFor('the third call', () => {
      calls++;
      if (calls === 1) throw new Error('not listening yet');
      return calls === 3;
    }, 5000, 1);
    expect(calls).toBe(3);
  });

  it('names what it waited for and the last error when it gives up', async () => {
    await expect(waitFor('the server', () => Promise.reject(new Error('connect ECONNREFUSED')), 20, 5)).rejects.toThrow(
      /timed out after 20 ms waiting for the server \(last error: connect ECONNREFUSED\)/,
    );
  });

  it('ends early with the reason of its abort signal', async () => {
    const gone = new AbortController();
    let calls = 0;
    const waiting = waitFor('readiness', () => {
      if (++calls === 2) gone.abort(new Error('the process exited'));
      return false;
    }, 60_000, 1, gone.signal);
    await expect(waiting).rejects.toThrow('the process exited');
    expect(calls).toBe(2);
  });
});

describe('freePort', () => {
  it('gives a loopback port that can be listened on', async () => {
    const port = await freePort();
    const server = net.createServer();
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    expect((server.address() as net.AddressInfo).port).toBe(port);
    server.close();
  });

  it('stays below the ephemeral range, never hands out a port twice, and skips one that is held', async () => {
    const held = net.createServer();
    const ports: number[] = [];
    for (let i = 0; i < 20; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) expect(port).toBeGreaterThanOrEqual(10_000), expect(port).toBeLessThan(32_768);
    // Hold the port just after the last one: the walk must step over it.
    const blocked = ports.at(-1)! + 1;
    held.listen(blocked, '127.0.0.1');
    await once(held, 'listening');
    try {
      expect(await freePort()).not.toBe(blocked);
    } finally {
      held.close();
    }
  });
});

describe('process helpers', () => {
  it('find a process tree and its memory in /proc, and read nothing once it is gone', async () => {
    // A parent that starts one child and reports its pid.
    const parent = spawn(process.execPath, ['-e', `
      const child = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
      console.log(child.pid);
      setInterval(() => {}, 1000);
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = await once(parent.stdout!, 'data');
    const childPid = Number(String(line).trim());
    try {
      expect(childrenOf(parent.pid!)).toEqual([childPid]);
      expect(processTree(parent.pid!)).toEqual([parent.pid, childPid]);
      expect(memoryBytes(parent.pid!)).toBeGreaterThan(1024 * 1024);
      // RSS first: the peak read after it cannot be below it (read the other way round, a process still
      // growing made the RSS read later exceed the earlier peak).
      const rss = memoryBytes(parent.pid!);
      expect(memoryBytes(parent.pid!, 'VmHWM')).toBeGreaterThanOrEqual(rss);
    } finally {
      process.kill(childPid, 'SIGKILL');
      await stopProcess(parent, { signal: 'SIGKILL' });
    }
    expect(hasExited(parent)).toBe(true);
    expect(memoryBytes(parent.pid!)).toBe(0);
    expect(childrenOf(parent.pid!)).toEqual([]);
  });

  it('stopProcess sends SIGKILL when the process ignores SIGTERM', async () => {
    const stubborn = spawn(process.execPath, ['-e', `process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000);`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await once(stubborn.stdout!, 'data'); // its SIGTERM handler is installed
    await stopProcess(stubborn, { signal: 'SIGTERM', killAfterMs: 50 });
    expect(stubborn.signalCode).toBe('SIGKILL');
  });
});

describe('metrics', () => {
  const text = [
    '# HELP ace_worker_task_duration_seconds_count tasks',
    'ace_worker_task_duration_seconds_count{pool="argon2",worker="1"} 2',
    'ace_worker_task_duration_seconds_count{pool="argon2",worker="2"} 3',
    'ace_worker_task_duration_seconds_count{pool="argon2x"} 50',
    'ace_worker_task_duration_seconds_count{pool="sign"} 7',
    'ace_worker_task_duration_seconds_count_total{pool="argon2"} 100',
    'ace_ready 1',
  ].join('\n');

  it('sums the samples whose labels match exactly, not by substring or name prefix', () => {
    expect(metricSum(text, 'ace_worker_task_duration_seconds_count', { pool: 'argon2' })).toBe(5);
    expect(metricSum(text, 'ace_worker_task_duration_seconds_count')).toBe(62);
    expect(metricSum(text, 'ace_ready')).toBe(1);
  });

  it('tells "no such series" (no samples) from a zero', () => {
    expect(metricSamples(text, 'ace_missing')).toEqual([]);
    expect(metricSamples(text, 'ace_worker_task_duration_seconds_count', { pool: 'none' })).toEqual([]);
  });
});

describe('admin client', () => {
  const seen: { method: string; url: string; authorization?: string; body: string }[] = [];
  let server: http.Server;
  let adminUrl: string;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        seen.push({ method: request.method!, url: request.url!, authorization: request.headers.authorization, body });
        if (request.url === '/admin/v1/agents') return void response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ agent_id: 'a1', secret: 's' }));
        if (request.url === '/admin/v1/keys') return void response.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
        response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error_code: 'not_found' }));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    adminUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });
  afterAll(() => void server.close());

  it('sends the bearer token and JSON, and returns the parsed answer', async () => {
    const admin = new AdminClient({ adminUrl, adminToken: 'tok' });
    expect(await admin.createAgent('x')).toEqual({ agent_id: 'a1', secret: 's' });
    expect(seen.at(-1)).toEqual({ method: 'POST', url: '/admin/v1/agents', authorization: 'Bearer tok', body: '{"name":"x"}' });
  });

  it('throws with method, path, status and body on an unexpected status, also for a body that is not JSON', async () => {
    const admin = new AdminClient({ adminUrl, adminToken: 'tok' });
    await expect(admin.patchAgent('a1', {})).rejects.toThrow('PATCH /admin/v1/agents/a1: expected 200, got 404 {"error_code":"not_found"}');
    await expect(admin.listKeys()).rejects.toThrow('GET /admin/v1/keys: expected 200, got 502 "<html>bad gateway</html>"');
    expect(await admin.request('GET', '/admin/v1/keys')).toEqual({ status: 502, body: '<html>bad gateway</html>' });
  });

  it('postJson keeps the text when the answer is not JSON', async () => {
    const reply = await postJson(`${adminUrl}/admin/v1/keys`, { a: 1 });
    expect(reply).toMatchObject({ status: 502, text: '<html>bad gateway</html>', body: undefined });
  });
});

describe('one kit, no copies', () => {
  const files = (dir: string): string[] =>
    readdirSync(path.join(REPO_ROOT, dir)).flatMap((name) => {
      const rel = path.posix.join(dir, name);
      if (statSync(path.join(REPO_ROOT, rel)).isDirectory()) return rel.endsWith('/results') ? [] : files(rel);
      return /\.(ts|mts|mjs)$/.test(rel) ? [rel] : [];
    });

  it('test/, bench/ and scripts/ define none of the kit helpers themselves', () => {
    const copy = /^\s*(export\s+)?(async\s+)?(function\s+(freePort|sleep|waitFor|childrenOf)\b|const\s+sleep\s*=|class\s+AdminClient\b)/m;
    const copies = [...files('test'), ...files('bench'), ...files('scripts')].filter((file) => copy.test(readFileSync(path.join(REPO_ROOT, file), 'utf8')));
    expect(copies).toEqual([]);
  });

  it('the service the kit starts is the production build output', () => {
    expect(SERVICE_MAIN).toBe(path.join(REPO_ROOT, 'dist/src/main.js'));
    expect(JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')).scripts.start).toBe('node dist/src/main.js');
  });
});

describe('TypeScript projects', () => {
  /**
   * Every project file a tsconfig compiles, repo-relative: its root files and, transitively, the files they
   * import by relative path (tsc emits those too). Packages are not compiled. Parsed, not type-checked: fast.
   */
  const compiled = (config: string): string[] => {
    const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d: ts.Diagnostic) => { throw new Error(String(d.messageText)); } };
    const parsed = ts.getParsedCommandLineOfConfigFile(path.join(REPO_ROOT, config), {}, host)!;
    const seen = new Set<string>();
    const queue = parsed.fileNames.map((f) => path.relative(REPO_ROOT, f));
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (seen.has(file) || file.endsWith('.d.ts')) continue;
      seen.add(file);
      for (const { fileName } of ts.preProcessFile(readFileSync(path.join(REPO_ROOT, file), 'utf8'), true, true).importedFiles) {
        if (!fileName.startsWith('.')) continue;
        const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
        const found = [joined.replace(/\.js$/, '.ts'), joined, `${joined}.ts`, `${joined}/index.ts`].find((c) => existsSync(path.join(REPO_ROOT, c)));
        if (found) queue.push(found);
      }
    }
    return [...seen];
  };

  it('the production build (tsconfig.json) compiles src/ and workers/ only, into dist/src and dist/workers', () => {
    const files = compiled('tsconfig.json');
    expect(files).toContain('src/main.ts');
    expect(files.filter((f) => !/^(src|workers)\//.test(f))).toEqual([]);
  });

  it('the test build emits the fault helpers and the clock shift the service loads from dist/test/support, and nothing else of test/', () => {
    const files = compiled('tsconfig.test.json').filter((f) => !/^(src|workers)\//.test(f));
    expect(files.sort()).toEqual(['test/support/clock-offset.ts', 'test/support/fault-hooks.ts', 'test/support/fault-loader.ts', 'test/support/fault-worker.ts']);
  });

  it('the bench build compiles bench/ and the kit, and no test/ file', () => {
    const files = compiled('tsconfig.bench.json');
    expect(files).toContain('bench/run.ts');
    expect(files).toContain('kit/service.ts');
    expect(files.filter((f) => !/^(bench|kit|src|workers)\//.test(f))).toEqual([]);
  });
});
