// The RSA ceiling: `openssl speed -multi <cores> -seconds <s> rsa2048`, all cores, nothing else running.
// A warm token costs one RS256 signature, so this is the most the token endpoint could reach on this box.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface OpensslSpeed {
  version: string;
  signPerSecond: number;
  verifyPerSecond: number;
}

export async function opensslRsa2048(cores: number, seconds: number): Promise<OpensslSpeed> {
  const { stdout, stderr } = await run('openssl', ['speed', '-multi', String(cores), '-seconds', String(seconds), 'rsa2048'], {
    maxBuffer: 1 << 20,
  });
  return parseOpensslSpeed(stdout + '\n' + stderr);
}

/** Parses the summary line `rsa 2048 bits 0.000138s 0.000009s   7268.8 108940.0` (sign/s, verify/s). */
export function parseOpensslSpeed(text: string): OpensslSpeed {
  const line = /^rsa\s+2048\s+bits\s+[\d.]+s\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)/m.exec(text);
  if (!line) throw new Error(`could not parse openssl speed output:\n${text.slice(-1500)}`);
  const version = /^version:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? 'unknown';
  return { version, signPerSecond: Number(line[1]), verifyPerSecond: Number(line[2]) };
}
