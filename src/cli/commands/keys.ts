// ace keys list | rotate | retire <kid>
import { listCommand, seg, type Command, type Context } from '../command.js';
import { fields } from '../output.js';

interface Key {
  kid: string;
  state: string;
  created_at?: string | null;
  activates_at?: string | null;
  deactivated_at?: string | null;
  retires_at?: string | null;
  retired_at?: string | null;
}

function printKey(ctx: Context, key: Key) {
  if (ctx.out.json) return ctx.out.printJson(key);
  ctx.out.print(
    fields([
      ['kid', key.kid],
      ['state', key.state],
      ['created_at', key.created_at],
      ['activates_at', key.activates_at],
      ['deactivated_at', key.deactivated_at],
      ['retires_at', key.retires_at],
      ['retired_at', key.retired_at],
    ]),
  );
}

export const keyCommands: Command[] = [
  listCommand<Key>({
    group: 'keys',
    summary: 'List signing keys and their states (next, active, retiring, retired)',
    route: '/admin/v1/keys',
    key: 'keys',
    columns: ['KID', 'STATE', 'CREATED_AT', 'ACTIVATES_AT', 'DEACTIVATED_AT', 'RETIRES_AT', 'RETIRED_AT'],
    row: (k) => [k.kid, k.state, k.created_at, k.activates_at, k.deactivated_at, k.retires_at, k.retired_at],
  }),
  {
    path: ['keys', 'rotate'],
    summary: 'Publish a new signing key; it becomes active after the propagation window',
    usage: 'keys rotate',
    args: { min: 0, max: 0 },
    async run(ctx) {
      printKey(ctx, await ctx.admin().json<Key>('POST', '/admin/v1/keys/rotate'));
    },
  },
  {
    path: ['keys', 'retire'],
    summary: 'Remove a non-active key from the JWKS',
    usage: 'keys retire <kid>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [kid]) {
      printKey(ctx, await ctx.admin().json<Key>('POST', `/admin/v1/keys/${seg(kid)}/retire`));
    },
  },
];
