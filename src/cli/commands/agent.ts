// ace agent create | list | show | activate | deactivate | rotate-secret
import { listCommand, seg, str, type Command, type Context } from '../command.js';
import { UsageError } from '../errors.js';
import { fields, table } from '../output.js';
import { KEY_OPTIONS, NO_SECRET_OPTION, keySource } from './client-keys.js';

interface Agent {
  agent_id: string;
  name: string;
  status: string;
  api_key_id: string;
  created_at?: string;
  updated_at?: string;
}
interface Grant {
  agent_id: string;
  platform_id: string;
  scopes: string[];
  updated_at?: string;
}

function agentFields(agent: Agent) {
  return fields([
    ['agent_id', agent.agent_id],
    ['name', agent.name],
    ['status', agent.status],
    ['api_key_id', agent.api_key_id],
    ['created_at', agent.created_at],
    ['updated_at', agent.updated_at],
  ]);
}

function setStatus(status: 'active' | 'inactive', verb: string): Command {
  return {
    path: ['agent', verb],
    summary: status === 'active' ? 'Let an agent get tokens again' : 'Stop an agent from getting tokens (its secret stays)',
    usage: `agent ${verb} <agent_id>`,
    args: { min: 1, max: 1 },
    async run(ctx, _values, [agentId]) {
      const agent = await ctx.admin().json<Agent>('PATCH', `/admin/v1/agents/${seg(agentId)}`, { status });
      if (ctx.out.json) return ctx.out.printJson(agent);
      ctx.out.print(`Agent ${agent.agent_id} is now ${agent.status}.`);
    },
  };
}

/** The one place a secret is shown: stdout only, with the reminder on stderr. */
function printCredentials(ctx: Context, record: object, pairs: [string, string][]) {
  if (ctx.out.json) ctx.out.printJson(record);
  else ctx.out.print(fields(pairs));
  ctx.out.note('The secret is shown only this once; store it now.');
}

export const agentCommands: Command[] = [
  {
    path: ['agent', 'create'],
    summary: 'Create an agent and print its api_key_id and secret (shown once); with --key or --jwks-uri, an agent without a secret (private_key_jwt)',
    usage: 'agent create (--name NAME | NAME) [--key public.jwk|public.pem | --jwks-uri URL | --no-secret]',
    options: { name: { type: 'string', value: 'NAME', description: 'Agent name' }, ...KEY_OPTIONS, ...NO_SECRET_OPTION },
    args: { min: 0, max: 1 },
    async run(ctx, values, positionals) {
      const flag = str(values, 'name');
      if (flag !== undefined && positionals.length) throw new UsageError('agent create: give the name once, as --name or as an argument', ['agent', 'create']);
      const name = flag ?? positionals[0];
      if (name === undefined) throw new UsageError('agent create needs a name', ['agent', 'create']);
      if (values.key !== undefined || values['jwks-uri'] !== undefined || values['no-secret'] === true) {
        const created = await ctx.admin().json<Agent>('POST', '/admin/v1/agents', { name, token_endpoint_auth_method: 'private_key_jwt', ...keySource(values, ['agent', 'create']) });
        if (ctx.out.json) return ctx.out.printJson(created);
        return ctx.out.print(agentFields(created) + '\ntoken_endpoint_auth_method  private_key_jwt');
      }
      const agent = await ctx.admin().json<Agent & { secret: string }>('POST', '/admin/v1/agents', { name });
      printCredentials(ctx, agent, [
        ['agent_id', agent.agent_id],
        ['name', agent.name],
        ['status', agent.status],
        ['api_key_id', agent.api_key_id],
        ['secret', agent.secret],
      ]);
    },
  },
  listCommand<Agent>({
    group: 'agent',
    summary: 'List agents',
    route: '/admin/v1/agents',
    key: 'agents',
    columns: ['AGENT_ID', 'NAME', 'STATUS', 'API_KEY_ID', 'CREATED_AT'],
    row: (a) => [a.agent_id, a.name, a.status, a.api_key_id, a.created_at],
  }),
  {
    path: ['agent', 'show'],
    summary: 'Show an agent and its grants',
    usage: 'agent show <agent_id>',
    description: 'With --json: the agent record with a "grants" list added.',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [agentId]) {
      const admin = ctx.admin();
      const agent = await admin.json<Agent>('GET', `/admin/v1/agents/${seg(agentId)}`);
      const { grants } = await admin.json<{ grants: Grant[] }>('GET', `/admin/v1/agents/${seg(agentId)}/grants`);
      if (ctx.out.json) return ctx.out.printJson({ ...agent, grants });
      ctx.out.print(
        `${agentFields(agent)}\n\nGrants:\n${table(['PLATFORM_ID', 'SCOPES', 'UPDATED_AT'], grants.map((g) => [g.platform_id, g.scopes.join(' '), g.updated_at]))}`,
      );
    },
  },
  setStatus('inactive', 'deactivate'),
  setStatus('active', 'activate'),
  {
    path: ['agent', 'rotate-secret'],
    summary: 'Give an agent a new secret (shown once); the old one works for --grace seconds',
    usage: 'agent rotate-secret <agent_id> [--grace SECONDS]',
    options: { grace: { type: 'string', value: 'SECONDS', description: 'How long the old secret keeps working (default 0: stops at once)' } },
    args: { min: 1, max: 1 },
    async run(ctx, values, [agentId]) {
      const graceFlag = str(values, 'grace');
      let body: { grace_seconds?: number } = {};
      if (graceFlag !== undefined) {
        if (!/^\d+$/.test(graceFlag)) throw new UsageError(`--grace must be a whole number of seconds, got ${JSON.stringify(graceFlag)}`, ['agent', 'rotate-secret']);
        body = { grace_seconds: Number(graceFlag) };
      }
      const answer = await ctx.admin().json<{ api_key_id: string; secret: string }>('POST', `/admin/v1/agents/${seg(agentId)}/secret/rotate`, body);
      printCredentials(ctx, answer, [
        ['api_key_id', answer.api_key_id],
        ['secret', answer.secret],
      ]);
      const grace = body.grace_seconds ?? 0;
      ctx.out.note(grace > 0 ? `The old secret keeps working for ${grace} s.` : 'The old secret no longer works.');
    },
  },
];
