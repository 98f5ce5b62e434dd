// ace grant <agent_id> <platform_id> scope... | ace revoke <agent_id> <platform_id>
import { seg, type Command } from '../command.js';
import { fields } from '../output.js';

export const grantCommands: Command[] = [
  {
    path: ['grant'],
    summary: "Set an agent's scopes on a platform (replaces its previous grant)",
    usage: 'grant <agent_id> <platform_id> <scope>...',
    description: 'Every scope must be defined on the platform. Example: ace grant <agent> <platform> orders:read orders:write',
    args: { min: 3, max: Infinity },
    async run(ctx, _values, [agentId, platformId, ...scopes]) {
      const grant = await ctx
        .admin()
        .json<{ agent_id: string; platform_id: string; scopes: string[]; updated_at?: string }>(
          'PUT',
          `/admin/v1/agents/${seg(agentId)}/grants/${seg(platformId)}`,
          { scopes },
        );
      if (ctx.out.json) return ctx.out.printJson(grant);
      ctx.out.print(
        fields([
          ['agent_id', grant.agent_id],
          ['platform_id', grant.platform_id],
          ['scopes', grant.scopes.join(' ')],
          ['updated_at', grant.updated_at],
        ]),
      );
    },
  },
  {
    path: ['revoke'],
    summary: "Remove an agent's access to a platform",
    usage: 'revoke <agent_id> <platform_id>',
    args: { min: 2, max: 2 },
    async run(ctx, _values, [agentId, platformId]) {
      await ctx.admin().send('DELETE', `/admin/v1/agents/${seg(agentId)}/grants/${seg(platformId)}`);
      if (ctx.out.json) return ctx.out.printJson({ agent_id: agentId, platform_id: platformId, revoked: true });
      ctx.out.print(`Revoked the access of agent ${agentId} to platform ${platformId}.`);
    },
  },
];
