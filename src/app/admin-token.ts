// The admin bearer token: ADMIN_TOKEN, or the one kept in DATA_DIR/admin-token (made on first start).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/config.js';

/** ADMIN_TOKEN, or the one in DATA_DIR/admin-token, or a new one written there with mode 0600. */
export function resolveAdminToken(config: Config): { token: string; path?: string } {
  if (config.adminToken) return { token: config.adminToken };
  const file = path.join(config.dataDir, 'admin-token');
  if (existsSync(file)) return { token: readFileSync(file, 'utf8').trim(), path: file };
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error; // another process won the race
  }
  return { token: readFileSync(file, 'utf8').trim(), path: file };
}
