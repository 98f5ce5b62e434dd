// Small HTTP helpers for setup steps (not for load: autocannon does that).
import http from 'node:http';
import { pool } from './seed.js';

export interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** One request on a fresh TCP connection (agent: false), so that the kernel may hand it to any of the
 * service's processes (they share the port with SO_REUSEPORT). */
export function freshRequest(url: string, method: string, body?: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, agent: false, headers: { ...headers, connection: 'close' } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text, headers: response.headers }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * Makes credentials warm in every HTTP process of the service: the verified-credentials cache lives in each
 * process (secrets never go to Redis), so each body is sent `perBody` times over fresh connections.
 * With 2 processes and 10 tries, an agent stays cold in one process with probability 1/512; the warm-up load
 * that follows finishes the job. A 429/503 (argon2 queue full, a limit of a deployed service) is tried
 * again after its Retry-After, up to 10 times, so no agent is left cold by a refusal.
 * Returns the status counts of the first attempts and of the retries.
 */
export async function prewarm(url: string, bodies: string[], perBody: number, concurrency = 16): Promise<Record<number, number>> {
  const counts: Record<number, number> = {};
  await pool(bodies.length * perBody, concurrency, async (i) => {
    for (let attempt = 0; ; attempt++) {
      const reply = await freshRequest(url, 'POST', bodies[i % bodies.length], { 'content-type': 'application/json' });
      counts[reply.status] = (counts[reply.status] ?? 0) + 1;
      if ((reply.status !== 429 && reply.status !== 503) || attempt >= 10) return;
      const seconds = Number(reply.headers['retry-after'] ?? 1);
      await new Promise((resolve) => setTimeout(resolve, 1000 * Math.min(Number.isFinite(seconds) ? seconds : 1, 30)));
    }
  });
  return counts;
}

/** Decodes a JWT's header and payload without verifying (sanity checks only). */
export function decodeJwt(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [h, p] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(h, 'base64url').toString('utf8')),
    payload: JSON.parse(Buffer.from(p, 'base64url').toString('utf8')),
  };
}
