// ace events [--type T] [--agent ID] [--platform ID] [--since T] [--until T] [--limit N] [--cursor C] [--follow]
// Reads the audit trail (GET /admin/v1/events): a table by default, JSON lines with --json, and with
// --follow keeps polling and prints new events as they arrive (the way to feed a SIEM).
import { list, str, type Command, type Context, type Values } from '../command.js';
import { UsageError } from '../errors.js';
import { table, type Cell } from '../output.js';

interface Event {
  id: string;
  type: string;
  at: string;
  agent_id?: string;
  platform_id?: string;
  kid?: string;
  jti?: string;
  actor?: string;
  client_address?: string;
  [field: string]: unknown;
}

interface Page {
  events: Event[];
  next_cursor: string | null;
}

const COLUMNS = ['AT', 'TYPE', 'AGENT_ID', 'PLATFORM_ID', 'DETAIL'];
const SHOWN = new Set(['id', 'type', 'at', 'agent_id', 'platform_id']);
/** --follow re-reads this much of the recent past on every poll: an event committed a little late
 * (another replica's batch, a spool drained after an outage) still shows, once (ids are remembered). */
const FOLLOW_OVERLAP_MS = 10_000;
const FOLLOW_POLL_MS = 250;

function detail(event: Event): string {
  return Object.entries(event)
    .filter(([key]) => !SHOWN.has(key))
    .map(([key, value]) => `${key}=${render(value)}`)
    .join(' ');
}

// Arrays as a,b; objects (error_codes of token.refusals_aggregated) as k:v,k:v.
function render(value: unknown): string {
  if (Array.isArray(value)) return value.join(',');
  if (value && typeof value === 'object') return Object.entries(value).map(([k, v]) => `${k}:${String(v)}`).join(',');
  return String(value);
}

const row = (e: Event): Cell[] => [e.at, e.type, e.agent_id, e.platform_id, detail(e)];

function query(values: Values, overrides: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams();
  const types = list(values, 'type').flatMap((t) => t.split(',')).filter(Boolean);
  if (types.length) params.set('type', types.join(','));
  const set = (name: string, value: string | undefined) => value !== undefined && params.set(name, value);
  set('agent_id', str(values, 'agent'));
  set('platform_id', str(values, 'platform'));
  set('since', str(values, 'since'));
  set('until', str(values, 'until'));
  set('limit', str(values, 'limit'));
  set('cursor', str(values, 'cursor'));
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) params.delete(name);
    else params.set(name, value);
  }
  const text = params.toString();
  return `/admin/v1/events${text ? `?${text}` : ''}`;
}

async function follow(ctx: Context, values: Values): Promise<void> {
  if (str(values, 'cursor') || str(values, 'until')) throw new UsageError('--follow reads from --since onwards: --cursor and --until do not apply', ['events']);
  const seen = new Map<string, number>();
  const startedAt = str(values, 'since') ? Date.parse(str(values, 'since')!) : Date.now();
  let newest = startedAt;
  let stop = false;
  process.once('SIGINT', () => (stop = true));
  process.once('SIGTERM', () => (stop = true));
  while (!stop) {
    const since = new Date(Math.max(startedAt, newest - FOLLOW_OVERLAP_MS)).toISOString();
    let cursor: string | undefined;
    do {
      const page = await ctx.admin().json<Page>('GET', query(values, { since, cursor, limit: '1000' }));
      for (const event of page.events) {
        if (seen.has(event.id)) continue;
        const at = Date.parse(event.at);
        seen.set(event.id, at);
        newest = Math.max(newest, at);
        ctx.out.print(ctx.out.json ? JSON.stringify(event) : table(COLUMNS, [row(event)]).split('\n')[1]);
      }
      cursor = page.next_cursor ?? undefined;
    } while (cursor && !stop);
    for (const [id, at] of seen) if (at < newest - 2 * FOLLOW_OVERLAP_MS) seen.delete(id);
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
  }
}

export const eventCommands: Command[] = [
  {
    path: ['events'],
    summary: 'Read the audit trail: who got which token, when, from where, and who changed what',
    usage: 'events [--type T[,T]] [--agent ID] [--platform ID] [--since TIME] [--until TIME] [--limit N] [--cursor C] [--follow]',
    description: [
      'Oldest first. TIME is RFC 3339 (2026-01-31T12:00:00Z). With --json, one JSON object per line.',
      'Without --follow, one page is printed; when more exist, the cursor of the next page goes to stderr.',
      '--follow prints the events from --since (default: now) and then every new one as it arrives, until',
      'interrupted: e.g. `ace events --follow --json | your-siem-forwarder`.',
    ].join('\n'),
    options: {
      type: { type: 'string', multiple: true, value: 'TYPE', description: 'Only these event types (comma-separated or repeated)' },
      agent: { type: 'string', value: 'AGENT_ID', description: 'Only events of this agent' },
      platform: { type: 'string', value: 'PLATFORM_ID', description: 'Only events of this platform' },
      since: { type: 'string', value: 'TIME', description: 'From this time (inclusive)' },
      until: { type: 'string', value: 'TIME', description: 'Up to this time (exclusive)' },
      limit: { type: 'string', value: 'N', description: 'Events per page, 1-1000 (default 100)' },
      cursor: { type: 'string', value: 'CURSOR', description: 'Continue after a previous page' },
      follow: { type: 'boolean', short: 'f', description: 'Keep printing new events as they arrive' },
    },
    args: { min: 0, max: 0 },
    async run(ctx, values) {
      if (values.follow) {
        if (!ctx.out.json) ctx.out.print(table(COLUMNS, []));
        return follow(ctx, values);
      }
      const page = await ctx.admin().json<Page>('GET', query(values));
      if (ctx.out.json) {
        for (const event of page.events) ctx.out.print(JSON.stringify(event));
      } else {
        ctx.out.print(table(COLUMNS, page.events.map(row)));
      }
      if (page.next_cursor) ctx.out.note(`more events: --cursor ${page.next_cursor}`);
    },
  },
];
