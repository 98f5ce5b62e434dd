// The revocation feed's transmitter through the real HTTP interface (Postgres and Redis): the signed
// stream head's `live` ranges are exactly the sequences the poll serves, also while entries expire (token
// lifetime shortened here so they do), and a holder of a valid feed credential who floods the poll with
// varied ack / maxEvents is answered 429 + Retry-After beyond its budget while the service's memory stays
// bounded; deleting the credential releases what the service held for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type PlatformRecord } from '../../kit/admin.js';
import { waitFor } from '../../kit/wait.js';
import { metricSum } from '../../kit/metrics.js';
import { parseLiveRanges, type LiveRange } from '../../packages/protocol/src/feed-document.js';
import { startService, type ServiceHandle } from '../support/service.js';

const HEAD_EVENT = 'urn:agent-credential-exchange:secevent:stream-head';
/** Entries expire TOKEN_TTL_SECONDS after their iat_max (no clock skew, no slack here). */
const TTL_SECONDS = 4;

let service: ServiceHandle;
let admin: AdminClient;
let platform: PlatformRecord;
let agentId: string;

beforeAll(async () => {
  service = await startService({
    mode: 'real',
    env: { TOKEN_TTL_SECONDS: String(TTL_SECONDS), KEY_CLOCK_SKEW_SECONDS: '0', REVOCATION_ISSUED_SLACK_SECONDS: '0', RATE_LIMIT_TOKEN_POINTS: '1000000' },
  });
  admin = new AdminClient(service);
  platform = await admin.createPlatform({ name: 'Shop', scopes: [{ name: 'read', description: 'read' }] });
  const agent = await admin.createAgent('churn');
  agentId = agent.agent_id;
  await admin.grant(agentId, platform.platform_id, ['read']);
}, 120_000);

afterAll(async () => {
  await service?.dispose();
});

/** One revocation entry of the platform (the agent deactivated, then active again for the next). */
async function appendEntry(): Promise<void> {
  await admin.patchAgent(agentId, { status: 'inactive' });
  await admin.patchAgent(agentId, { status: 'active' });
}

const metrics = async () => (await fetch(`${service.adminUrl}/metrics`)).text();

async function poll(feedToken: string, request: Record<string, unknown>) {
  const response = await fetch(`${service.publicUrl}/api/v1/platforms/${platform.platform_id}/revocations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${feedToken}` },
    body: JSON.stringify({ returnImmediately: true, ...request }),
  });
  const text = await response.text();
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: text ? JSON.parse(text) : undefined };
}

/** The sequences one answer serves and its head's body (the SET's payload is read, its signature is another test's matter). */
async function served(feedToken: string) {
  const { status, body } = await poll(feedToken, { maxEvents: 1000 });
  expect(status).toBe(200);
  const sets = body.sets as Record<string, string>;
  const headJws = sets[`${platform.platform_id}:head`];
  const head = JSON.parse(Buffer.from(headJws.split('.')[1], 'base64url').toString()).events[HEAD_EVENT] as { seq: number; live: LiveRange[] };
  const seqs = Object.keys(sets).filter((jti) => !jti.endsWith(':head')).map((jti) => Number(jti.split(':')[1])).sort((a, b) => a - b);
  return { seqs, head };
}

const expand = (live: LiveRange[]) => live.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => from + i));

describe("the signed head's live ranges", () => {
  it('are exactly the sequences the poll serves, before and after entries expire', async () => {
    const { feed_token: feedToken } = await admin.createFeedCredential(platform.platform_id);
    const empty = await served(feedToken);
    expect(empty).toEqual({ seqs: [], head: { seq: 0, live: [] } });
    for (let i = 0; i < 3; i++) await appendEntry();
    // Every answer: the head well-formed, and its live sequences the ones served (whatever has expired by then).
    const consistent = async () => {
      const answer = await served(feedToken);
      expect(parseLiveRanges(answer.head.live, answer.head.seq), JSON.stringify(answer.head)).toBeDefined();
      expect(answer.seqs).toEqual(expand(answer.head.live));
      return answer;
    };
    await waitFor('the three entries served', async () => (await consistent()).head.seq === 3);
    // The three expire (TTL_SECONDS): the head still says 3, and nothing is live.
    await waitFor('the entries expired', async () => (await consistent()).head.live.length === 0, 20_000, 250);
    expect((await consistent()).head).toEqual({ seq: 3, live: [] });
    // Two more: live again, above the expired ones; and they expire too.
    await appendEntry();
    await appendEntry();
    const after = await consistent();
    expect(after.head.seq).toBe(5);
    expect(after.seqs.every((seq) => seq > 3)).toBe(true);
    await waitFor('the new entries expired', async () => (await consistent()).head.live.length === 0, 20_000, 250);
    expect((await consistent()).head).toEqual({ seq: 5, live: [] });
  });
});

describe('the WebSocket push', () => {
  it('signs the same live ranges in its catch-up and in each push', async () => {
    const { feed_token: feedToken } = await admin.createFeedCredential(platform.platform_id);
    const WebSocket = (await import('ws')).default;
    const url = `${service.publicUrl.replace(/^http/, 'ws')}/api/v1/platforms/${platform.platform_id}/revocations/ws?since=0`;
    const socket = new WebSocket(url, ['ace-feed'], { headers: { authorization: `Bearer ${feedToken}` } });
    const frames: Record<string, any>[] = [];
    socket.on('message', (data: Buffer) => frames.push(JSON.parse(Buffer.from(data.toString().split('.')[1], 'base64url').toString())));
    try {
      const heads = () => frames.filter((f) => String(f.jti).endsWith(':head'));
      await waitFor('the catch-up head', () => heads().length > 0);
      const catchUp = heads()[0].events[HEAD_EVENT] as { seq: number; live: LiveRange[] };
      const caughtUp = frames.slice(0, frames.indexOf(heads()[0])).map((f) => Number(String(f.jti).split(':')[1]));
      expect(parseLiveRanges(catchUp.live, catchUp.seq)).toBeDefined();
      expect(caughtUp).toEqual(expand(catchUp.live));
      await appendEntry();
      const seq = catchUp.seq + 1;
      await waitFor('the pushed SET and its head', () => heads().some((h) => h.events[HEAD_EVENT].seq === seq));
      const pushed = heads().find((h) => h.events[HEAD_EVENT].seq === seq)!.events[HEAD_EVENT] as { seq: number; live: LiveRange[] };
      expect(frames.some((f) => f.jti === `${platform.platform_id}:${seq}`)).toBe(true);
      expect(expand(pushed.live)).toContain(seq);
      expect(parseLiveRanges(pushed.live, pushed.seq)).toBeDefined();
    } finally {
      socket.close();
    }
  });
});

describe('a varied poll flood from one valid credential', () => {
  it('is answered 429 + Retry-After beyond the budget, keeps memory bounded, and deleting the credential releases it', async () => {
    for (let i = 0; i < 5; i++) await appendEntry();
    const { feed_token: feedToken, feed_credential_id: credentialId } = await admin.createFeedCredential(platform.platform_id);
    const rssBefore = metricSum(await metrics(), 'process_resident_memory_bytes');
    const statuses: Record<number, number> = {};
    let retryAfter: string | null = null;
    let next = 0;
    // 4000 polls, 16 at a time, each with another ack and maxEvents.
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < 4000) {
          const i = next++;
          const answer = await poll(feedToken, { ack: [`${platform.platform_id}:${(i * 7919) % 50}`], maxEvents: (i * 104_729) % 1001 });
          statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
          if (answer.status === 429) {
            retryAfter = answer.retryAfter;
            expect(answer.body).toMatchObject({ error_code: 'rate_limited' });
          } else expect(answer.status).toBe(200);
        }
      }),
    );
    expect(statuses[200]).toBeGreaterThan(0);
    expect(statuses[429]).toBeGreaterThan(0);
    expect(retryAfter).toBe('1');
    const text = await metrics();
    expect(metricSum(text, 'ace_revocation_feed_refused_total', { transport: 'poll', reason: 'budget' })).toBe(statuses[429]);
    // This credential's bucket, and the one of the credential the first test polled with (the socket's never polled).
    expect(metricSum(text, 'ace_revocation_poll_budgets')).toBe(2);
    // At most four kept answers of this stream (a few KB here); the whole cache is bounded at 16 MiB.
    expect(metricSum(text, 'ace_revocation_poll_answer_cache_bytes')).toBeLessThanOrEqual(64 * 1024);
    expect(metricSum(text, 'process_resident_memory_bytes') - rssBefore).toBeLessThan(64 * 1024 * 1024);
    // Deleting the platform's last credential releases its budget and its kept answers.
    const others = (await admin.listFeedCredentials(platform.platform_id)).feed_credentials;
    for (const other of others) if (other.feed_credential_id !== credentialId) await admin.deleteFeedCredential(platform.platform_id, other.feed_credential_id);
    await admin.deleteFeedCredential(platform.platform_id, credentialId);
    await waitFor('the budget and the kept answers released', async () => {
      const after = await metrics();
      return metricSum(after, 'ace_revocation_poll_budgets') === 0 && metricSum(after, 'ace_revocation_poll_answer_cache_bytes') === 0;
    });
    expect((await poll(feedToken, {})).status).toBe(401);
  });
});
