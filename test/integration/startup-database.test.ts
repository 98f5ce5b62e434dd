// Start-up against a database it cannot use: each failed attempt to reach a writable primary is logged
// with its cause, one line per attempt (never the URL or its password), for each cause an operator meets:
// nothing listening (refused), a host that never answers (unreachable), a wrong password, a database that
// does not exist, and a URL that reaches only a standby. A database that stays away is never silent for
// the start-up bound (60 s). Each service is stopped once it has logged two attempts.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../kit/ports.js';
import { spawnService, serviceAddresses, type ServiceProcess } from '../../kit/service.js';
import { waitFor } from '../../kit/wait.js';
import { startPostgres, startStandby, stopAll, type PostgresNode } from '../../kit/topology/index.js';
import { PG_ADMIN_URL } from '../support/service.js';

const PASSWORD = 'pa55-w0rd-never-logged';

/** A Postgres look-alike that answers every start-up message with a FATAL (SQLSTATE `code`). */
function refusingServer(code: string, message: string): Promise<net.Server> {
  const field = (type: string, text: string) => Buffer.concat([Buffer.from(type), Buffer.from(`${text}\0`)]);
  const body = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', code), field('M', message), Buffer.from([0])]);
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length + 4);
  const errorResponse = Buffer.concat([Buffer.from('E'), length, body]);
  const server = net.createServer((socket) => {
    socket.once('data', () => socket.end(errorResponse));
    socket.on('error', () => socket.destroy()); // the client hung up first: nothing to answer
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Accepts connections and never says a word (a firewall that drops the answers looks the same). */
function silentServer(): Promise<{ server: net.Server; sockets: Set<net.Socket> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy()); // the client gave up: expected
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, sockets })));
}

const portOf = (server: net.Server) => (server.address() as net.AddressInfo).port;

describe('start-up logs each failed attempt to reach the database, with its cause', () => {
  const dirs: string[] = [];
  const services: ServiceProcess[] = [];
  const servers: net.Server[] = [];
  let silent: Awaited<ReturnType<typeof silentServer>>;
  let standby: PostgresNode;

  beforeAll(async () => {
    const primary = await startPostgres();
    standby = await startStandby(primary);
    silent = await silentServer();
    servers.push(silent.server, await refusingServer('28P01', 'password authentication failed for user "ace"'));
  }, 60_000);

  afterAll(async () => {
    for (const service of services) {
      if (service.child.exitCode === null && service.child.signalCode === null) {
        service.child.kill('SIGKILL');
        await service.exited;
      }
    }
    for (const socket of silent?.sockets ?? []) socket.destroy();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    await stopAll();
    dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  });

  /** Starts the service on `databaseUrl`; returns its output once it has logged two failed attempts. */
  const twoAttempts = async (databaseUrl: string): Promise<string> => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ace-startup-db-'));
    dirs.push(dataDir);
    const addresses = await serviceAddresses();
    const service = spawnService({
      env: { ...addresses.env, DATA_DIR: dataDir, DATABASE_URL: databaseUrl, KEY_ENCRYPTION_KEY: '11'.repeat(32), STORE_TIMEOUT_MS: '1000', LOG_LEVEL: 'info', ARGON2_THREADS: '1', SIGN_THREADS: '1' },
    });
    services.push(service);
    const attempts = () => service.output().split('\n').filter((line) => line.includes('no writable primary yet'));
    await waitFor(`two logged attempts on ${databaseUrl.replace(PASSWORD, '***')}`, async () => {
      if (service.child.exitCode !== null) throw new Error(`exited ${service.child.exitCode}:\n${service.output()}`);
      return attempts().length >= 2;
    }, 20_000, 100);
    service.child.kill('SIGKILL');
    await service.exited;
    return attempts().join('\n');
  };

  const url = (port: number, database = 'ace') => `postgres://ace:${PASSWORD}@127.0.0.1:${port}/${database}`;

  const causes: [string, () => Promise<string>, RegExp, string | undefined][] = [
    ['refused', async () => url(await freePort()), /connection refused/, 'ECONNREFUSED'],
    ['unreachable', async () => url(portOf(silent.server)), /no answer within 1 s/, undefined],
    ['authentication', async () => url(portOf(servers[1]!)), /authentication failed/, '28P01'],
    ['missing database', async () => PG_ADMIN_URL.replace(/\/[^/]*$/, `/ace_missing_${process.pid}`), /the database does not exist/, '3D000'],
    ['standby only', async () => standby.url(), /standby only/, 'in recovery'],
  ];
  // The five start at once: each waits on its own service's log.
  it.concurrent.for(causes)('%s: each attempt is logged with its cause, never the password', { timeout: 40_000 }, async ([, makeUrl, cause, code], { expect }) => {
    const lines = await twoAttempts(await makeUrl());
    const logged = lines.split('\n').map((line) => JSON.parse(line));
    expect(logged.map((l) => l.attempt)).toEqual(expect.arrayContaining([1, 2]));
    for (const line of logged) {
      expect(line.level, lines).toBe(40); // warn
      expect(line.cause, lines).toMatch(cause);
      if (code) expect(line.code, lines).toBe(code);
    }
    expect(lines).not.toContain(PASSWORD);
  });
});
