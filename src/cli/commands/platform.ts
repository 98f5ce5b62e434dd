// ace platform create | update | list | show | scopes-file | feed-token | feed-credentials | feed-credential-delete
import { writeFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { listCommand, list, seg, str, type Command, type Context, type OptionSpec, type Values } from '../command.js';
import { LocalFailure, UsageError } from '../errors.js';
import { fields, table } from '../output.js';
import { platformBody } from '../platform-input.js';

interface Platform {
  platform_id: string;
  name: string;
  domain: string | null;
  status: string;
  verification_status: string;
  scopes?: { name: string; description?: string }[];
  routes?: { method: string; path: string; scopes: string[] }[];
  resources?: string[];
  created_at?: string;
  updated_at?: string;
}

const BODY_OPTIONS: Record<string, OptionSpec> = {
  file: { type: 'string', short: 'f', value: 'FILE', description: 'Platform as YAML or JSON ("-" reads stdin); flags below override its fields' },
  name: { type: 'string', value: 'NAME', description: 'Platform name' },
  domain: { type: 'string', value: 'DOMAIN', description: 'DNS host name of the platform' },
  scope: {
    type: 'string',
    multiple: true,
    value: 'NAME[:DESC]',
    description: 'A scope; repeat for more. NAME=DESC is the unambiguous form for names with ":"',
  },
  route: { type: 'string', multiple: true, value: '"METHOD PATH [S1,S2]"', description: 'A route and its scopes; repeat for more' },
  resource: {
    type: 'string',
    multiple: true,
    value: 'URI',
    description: 'A resource identifier agents name as `resource` (RFC 8707), e.g. https://api.example.com/mcp; repeat for more',
  },
  status: { type: 'string', value: 'STATUS', description: 'active | suspended | disabled' },
  'verification-status': { type: 'string', value: 'STATUS', description: 'pending | verified | failed' },
};

const FILE_EXAMPLE = `Platform file (YAML or JSON):
  name: Shop
  domain: shop.example.com
  scopes:
    - name: orders:read
      description: Read orders
    - name: orders:write
      description: Create and change orders
  routes:
    - method: GET
      path: /orders/{id}
      scopes: [orders:read]
  resources:
    - https://shop.example.com/mcp`;

function bodyFrom(values: Values) {
  return platformBody({
    file: str(values, 'file'),
    name: str(values, 'name'),
    domain: str(values, 'domain'),
    status: str(values, 'status'),
    verificationStatus: str(values, 'verification-status'),
    scopes: list(values, 'scope'),
    routes: list(values, 'route'),
    resources: list(values, 'resource'),
  });
}

function printPlatform(ctx: Context, platform: Platform): void {
  if (ctx.out.json) return ctx.out.printJson(platform);
  const blocks = [
    fields([
      ['platform_id', platform.platform_id],
      ['name', platform.name],
      ['domain', platform.domain],
      ['status', platform.status],
      ['verification_status', platform.verification_status],
      ['resources', (platform.resources ?? []).join(' ')],
      ['created_at', platform.created_at],
      ['updated_at', platform.updated_at],
    ]),
    `\nScopes:\n${table(['NAME', 'DESCRIPTION'], (platform.scopes ?? []).map((s) => [s.name, s.description]))}`,
    `\nRoutes:\n${table(['METHOD', 'PATH', 'SCOPES'], (platform.routes ?? []).map((r) => [r.method, r.path, r.scopes.join(' ')]))}`,
  ];
  ctx.out.print(blocks.join('\n'));
}

export const platformCommands: Command[] = [
  {
    path: ['platform', 'create'],
    summary: 'Create a platform with its scopes and routes',
    usage: 'platform create (--file FILE | --name NAME [--domain DOMAIN] [--scope NAME[:DESC]]... [--route "METHOD PATH S1,S2"]... [--resource URI]...)',
    description: `Examples:
  ace platform create --file platform.yaml
  ace platform create --name Shop --domain shop.example.com \\
      --scope 'orders:read=Read orders' --scope orders:write --route 'GET /orders/{id} orders:read'

${FILE_EXAMPLE}`,
    options: BODY_OPTIONS,
    args: { min: 0, max: 0 },
    async run(ctx, values) {
      const body = bodyFrom(values);
      if (body.name === undefined) throw new UsageError('platform create needs --file or --name', ['platform', 'create']);
      body.scopes ??= [];
      printPlatform(ctx, await ctx.admin().json<Platform>('POST', '/admin/v1/platforms', body));
    },
  },
  {
    path: ['platform', 'update'],
    summary: 'Change fields of a platform (--scope/--route/--resource replace the whole list)',
    usage: 'platform update <platform_id> [--file FILE] [--name NAME] [--domain DOMAIN] [--scope ...]... [--route ...]... [--resource URI]... [--status S] [--verification-status S]',
    description: 'Replacing scopes removes the dropped scopes from every grant on the platform.',
    options: BODY_OPTIONS,
    args: { min: 1, max: 1 },
    async run(ctx, values, [platformId]) {
      const body = bodyFrom(values);
      if (Object.keys(body).length === 0) throw new UsageError('platform update: nothing to change', ['platform', 'update']);
      printPlatform(ctx, await ctx.admin().json<Platform>('PATCH', `/admin/v1/platforms/${seg(platformId)}`, body));
    },
  },
  listCommand<Platform>({
    group: 'platform',
    summary: 'List platforms',
    route: '/admin/v1/platforms',
    key: 'platforms',
    columns: ['PLATFORM_ID', 'NAME', 'DOMAIN', 'STATUS', 'VERIFICATION', 'SCOPES', 'ROUTES', 'RESOURCES'],
    row: (p) => [p.platform_id, p.name, p.domain, p.status, p.verification_status, p.scopes?.length ?? 0, p.routes?.length ?? 0, (p.resources ?? []).join(' ')],
  }),
  {
    path: ['platform', 'show'],
    summary: 'Show a platform with its scopes and routes',
    usage: 'platform show <platform_id>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [platformId]) {
      printPlatform(ctx, await ctx.admin().json<Platform>('GET', `/admin/v1/platforms/${seg(platformId)}`));
    },
  },
  {
    path: ['platform', 'feed-token'],
    summary: "Create a credential for the platform's revocation feed and print its token (shown once)",
    usage: 'platform feed-token <platform_id>',
    description:
      'The token goes to stdout (the middleware option feedToken); its id to stderr. Several may be live: to rotate, ' +
      'create a new one, deploy it, then delete the old one (platform feed-credential-delete).',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [platformId]) {
      const created = await ctx
        .admin()
        .json<{ feed_credential_id: string; feed_token: string; created_at: string }>('POST', `/admin/v1/platforms/${seg(platformId)}/feed-credentials`);
      if (ctx.out.json) return ctx.out.printJson(created);
      ctx.out.note(`Feed credential ${created.feed_credential_id} of platform ${platformId}: the token is shown only this once.`);
      ctx.out.print(created.feed_token);
    },
  },
  {
    path: ['platform', 'feed-credentials'],
    summary: "List the platform's feed credentials (ids and creation times, never a token)",
    usage: 'platform feed-credentials <platform_id>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [platformId]) {
      const answer = await ctx
        .admin()
        .json<{ feed_credentials: { feed_credential_id: string; created_at: string }[] }>('GET', `/admin/v1/platforms/${seg(platformId)}/feed-credentials`);
      if (ctx.out.json) return ctx.out.printJson(answer);
      ctx.out.print(table(['FEED_CREDENTIAL_ID', 'CREATED_AT'], answer.feed_credentials.map((c) => [c.feed_credential_id, c.created_at])));
    },
  },
  {
    path: ['platform', 'feed-credential-delete'],
    summary: 'Delete a feed credential (polls with it are refused and its sockets closed, on every instance)',
    usage: 'platform feed-credential-delete <platform_id> <feed_credential_id>',
    args: { min: 2, max: 2 },
    async run(ctx, _values, [platformId, credentialId]) {
      await ctx.admin().send('DELETE', `/admin/v1/platforms/${seg(platformId)}/feed-credentials/${seg(credentialId)}`);
      if (ctx.out.json) return ctx.out.printJson({ platform_id: platformId, feed_credential_id: credentialId, deleted: true });
      ctx.out.print(`Deleted feed credential ${credentialId} of platform ${platformId}.`);
    },
  },
  {
    path: ['platform', 'scopes-file'],
    summary: "Fetch a platform's scope file (scopes.yaml) from the public port",
    usage: 'platform scopes-file <platform_id> [-o FILE]',
    description: 'Prints the YAML to stdout, or writes it to FILE. With --json, prints it as JSON instead.',
    options: { output: { type: 'string', short: 'o', value: 'FILE', description: 'Write the scope file here instead of stdout' } },
    args: { min: 1, max: 1 },
    async run(ctx, values, [platformId]) {
      const path = `/api/v1/platforms/${seg(platformId)}/scopes.yaml`;
      const answer = await ctx.public().send('GET', path, undefined, 'text/yaml, application/json;q=0.5');
      const output = str(values, 'output');
      if (output !== undefined) {
        try {
          writeFileSync(output, answer.text);
        } catch (error) {
          throw new LocalFailure(`cannot write ${output}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
        }
        if (ctx.out.json) return ctx.out.printJson({ platform_id: platformId, file: output });
        return ctx.out.note(`Wrote the scope file of platform ${platformId} to ${output}`);
      }
      if (ctx.out.json) return ctx.out.printJson(parseYaml(answer.text));
      ctx.out.print(answer.text);
    },
  },
];
