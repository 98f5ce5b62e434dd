// The shape every command has: its words, help text, options (node:util parseArgs style) and run().
import type { HttpClient } from './http.js';
import { table, type Cell, type Output } from './output.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** Placeholder shown in help, e.g. "FILE". */
  value?: string;
  description: string;
}

export type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

export interface Context {
  out: Output;
  /** Client of the admin port (needs the admin token; resolved on first use). */
  admin(): HttpClient;
  /** Client of the public port (no token). */
  public(): HttpClient;
}

export interface Command {
  /** Command words after `ace`, e.g. ["platform", "create"]. */
  path: string[];
  summary: string;
  /** Usage after "ace ", e.g. "platform show <platform_id>". */
  usage: string;
  /** More help lines (examples, rules). */
  description?: string;
  options?: Record<string, OptionSpec>;
  /** How many positional arguments are accepted. */
  args: { min: number; max: number };
  run(ctx: Context, values: Values, positionals: string[]): Promise<void>;
}

/** Global options, accepted anywhere on the command line. */
export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  'admin-url': { type: 'string', value: 'URL', description: 'Admin API base URL (env ACE_ADMIN_URL; default http://127.0.0.1:8081)' },
  'public-url': { type: 'string', value: 'URL', description: 'Public API base URL (env ACE_PUBLIC_URL; default http://127.0.0.1:8080)' },
  token: {
    type: 'string',
    value: 'TOKEN',
    description: 'Admin token (env ACE_ADMIN_TOKEN; else <DATA_DIR or ./data>/admin-token). Prefer the env: flags show in `ps`',
  },
  timeout: { type: 'string', value: 'SECONDS', description: 'Give up on a request after this long (default 30)' },
  json: { type: 'boolean', description: 'Print results as JSON (for scripts)' },
  help: { type: 'boolean', short: 'h', description: 'Show help' },
};

export function str(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

export function list(values: Values, name: string): string[] {
  const value = values[name];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** Path segment for an identifier typed by the user (so "../x" stays one segment). */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

/**
 * A `<group> list` command: GET an admin collection `{ [key]: Item[] }`, print it as a table, or as the
 * service's JSON with --json.
 */
export function listCommand<Item>(spec: {
  group: string;
  summary: string;
  route: string;
  key: string;
  columns: string[];
  row: (item: Item) => Cell[];
}): Command {
  return {
    path: [spec.group, 'list'],
    summary: spec.summary,
    usage: `${spec.group} list`,
    args: { min: 0, max: 0 },
    async run(ctx) {
      const answer = await ctx.admin().json<Record<string, Item[]>>('GET', spec.route);
      if (ctx.out.json) return ctx.out.printJson(answer);
      ctx.out.print(table(spec.columns, answer[spec.key].map(spec.row)));
    },
  };
}
