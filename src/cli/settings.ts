// Where the CLI talks to and with which admin token. Flags win over environment, environment over
// defaults; the token falls back to the file the service writes when ADMIN_TOKEN is unset.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from './errors.js';

export const DEFAULT_ADMIN_URL = 'http://127.0.0.1:8081';
export const DEFAULT_PUBLIC_URL = 'http://127.0.0.1:8080';
export const DEFAULT_TIMEOUT_SECONDS = 30;

export interface GlobalFlags {
  'admin-url'?: string;
  'public-url'?: string;
  token?: string;
  timeout?: string;
}

export interface Settings {
  adminUrl: URL;
  publicUrl: URL;
  timeoutMs: number;
  /** Resolved lazily: commands that only use the public port need no token. */
  adminToken(): string;
}

type Env = Record<string, string | undefined>;

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function baseUrl(value: string, flag: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${flag} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${flag} must be an http:// or https:// URL`);
  }
  // Not echoed: whatever sits in user:password is a credential.
  if (url.username || url.password) throw new UsageError(`${flag} must not contain user:password; use --token / ACE_ADMIN_TOKEN`);
  // Keep any path prefix (a reverse proxy may mount the service under one) but drop the trailing slash.
  url.pathname = url.pathname.replace(/\/+$/, '');
  return url;
}

/** The admin token file the service writes: <DATA_DIR or ./data>/admin-token. */
export function adminTokenFile(env: Env): string {
  return path.resolve(nonEmpty(env.DATA_DIR) ?? './data', 'admin-token');
}

export function resolveSettings(flags: GlobalFlags, env: Env): Settings {
  const adminUrl = baseUrl(nonEmpty(flags['admin-url']) ?? nonEmpty(env.ACE_ADMIN_URL) ?? DEFAULT_ADMIN_URL, '--admin-url / ACE_ADMIN_URL');
  const publicUrl = baseUrl(nonEmpty(flags['public-url']) ?? nonEmpty(env.ACE_PUBLIC_URL) ?? DEFAULT_PUBLIC_URL, '--public-url / ACE_PUBLIC_URL');

  let timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
  if (flags.timeout !== undefined) {
    timeoutSeconds = Number(flags.timeout);
    if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) {
      throw new UsageError(`--timeout must be a positive number of seconds, got ${JSON.stringify(flags.timeout)}`);
    }
  }

  let token: string | undefined;
  return {
    adminUrl,
    publicUrl,
    timeoutMs: Math.round(timeoutSeconds * 1000),
    adminToken() {
      token ??= nonEmpty(flags.token) ?? nonEmpty(env.ACE_ADMIN_TOKEN) ?? readTokenFile(adminTokenFile(env));
      return token;
    },
  };
}

function readTokenFile(file: string): string {
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new UsageError(
      `no admin token: pass --token, set ACE_ADMIN_TOKEN, or make ${file} readable (${reason}; set DATA_DIR to the service's data directory)`,
    );
  }
  const token = content.trim();
  // Never echo the file's content: it is the token.
  if (!token) throw new UsageError(`no admin token: ${file} is empty`);
  return token;
}
