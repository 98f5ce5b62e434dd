// Agents without secrets: ace agent keys | add-key | remove-key, ace issuer add | list | remove,
// ace binding add | list | remove.
import { listCommand, seg, str, type Command, type Context } from '../command.js';
import { UsageError } from '../errors.js';
import { fields, table } from '../output.js';
import { readPublicKeys } from '../public-key-file.js';

interface ClientKeys {
  agent_id: string;
  token_endpoint_auth_method: string;
  jwks?: { keys: { kid: string; kty: string; alg?: string; crv?: string }[] };
  jwks_uri?: string;
}
interface Issuer {
  issuer_id: string;
  issuer: string;
  audience: string;
  jwks?: { keys: unknown[] };
  jwks_uri?: string;
  created_at?: string;
}
interface Binding {
  issuer_id: string;
  subject: string;
  agent_id: string;
  created_at?: string;
}

function printKeys(ctx: Context, keys: ClientKeys) {
  if (ctx.out.json) return ctx.out.printJson(keys);
  if (keys.jwks_uri !== undefined) return ctx.out.print(fields([['agent_id', keys.agent_id], ['jwks_uri', keys.jwks_uri]]));
  ctx.out.print(table(['KID', 'KTY', 'ALG/CRV'], (keys.jwks?.keys ?? []).map((k) => [k.kid, k.kty, k.alg ?? k.crv])));
}

/** `--key FILE` (one or more keys) or `--jwks-uri URL`, exactly one: RFC 7591's jwks / jwks_uri. */
function keySource(values: Record<string, unknown>, command: string[]): { jwks: { keys: unknown[] } } | { jwks_uri: string } {
  if (values['no-secret'] === true) {
    if (values.key !== undefined || values['jwks-uri'] !== undefined) throw new UsageError('--no-secret goes without --key and --jwks-uri', command);
    return { jwks: { keys: [] } };
  }
  const file = typeof values.key === 'string' ? values.key : undefined;
  const uri = typeof values['jwks-uri'] === 'string' ? (values['jwks-uri'] as string) : undefined;
  if ((file === undefined) === (uri === undefined)) throw new UsageError('give exactly one of --key FILE and --jwks-uri URL', command);
  return uri !== undefined ? { jwks_uri: uri } : { jwks: { keys: readPublicKeys(file!) } };
}

const KEY_OPTIONS = {
  key: { type: 'string', value: 'FILE', description: 'Public key(s): a JWK, a JWK Set or a PEM public key (kid: its RFC 7638 thumbprint when absent)' },
  'jwks-uri': { type: 'string', value: 'URL', description: 'https URL of a JWK Set, instead of --key' },
} as const;

/** agent create only: an agent with neither secret nor keys (a workload binding is its only way in). */
const NO_SECRET_OPTION = { 'no-secret': { type: 'boolean', description: 'No secret and no key: the agent authenticates only as a bound workload (ace binding add)' } } as const;

export const clientKeyCommands: Command[] = [
  {
    path: ['agent', 'keys'],
    summary: "List a private_key_jwt agent's public keys (or its jwks_uri)",
    usage: 'agent keys <agent_id>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [agentId]) {
      printKeys(ctx, await ctx.admin().json<ClientKeys>('GET', `/admin/v1/agents/${seg(agentId)}/keys`));
    },
  },
  {
    path: ['agent', 'add-key'],
    summary: 'Add a public key to a private_key_jwt agent (rotation: add the new key, deploy it, remove the old one)',
    usage: 'agent add-key <agent_id> <public.jwk|public.pem>',
    args: { min: 2, max: 2 },
    async run(ctx, _values, [agentId, file]) {
      const keys = readPublicKeys(file);
      if (keys.length !== 1) throw new UsageError(`${file} holds ${keys.length} keys: add one at a time`, ['agent', 'add-key']);
      printKeys(ctx, await ctx.admin().json<ClientKeys>('POST', `/admin/v1/agents/${seg(agentId)}/keys`, keys[0]));
    },
  },
  {
    path: ['agent', 'remove-key'],
    summary: "Remove an agent's key: assertions it signs are refused and the agent's tokens are taken back",
    usage: 'agent remove-key <agent_id> [--] <kid>',
    description: "A kid may begin with '-' (an RFC 7638 thumbprint does, one time in 64): put `--` before it.",
    args: { min: 2, max: 2 },
    async run(ctx, _values, [agentId, kid]) {
      await ctx.admin().json('DELETE', `/admin/v1/agents/${seg(agentId)}/keys/${seg(kid)}`);
      if (ctx.out.json) return ctx.out.printJson({ agent_id: agentId, removed: kid });
      ctx.out.print(`Key ${kid} removed; the agent's tokens are being taken back.`);
    },
  },
  {
    path: ['issuer', 'add'],
    summary: 'Trust a workload identity issuer (a Kubernetes cluster, a SPIFFE trust domain, a CI OIDC issuer)',
    usage: 'issuer add --issuer ISS --audience AUD (--key FILE | --jwks-uri URL)',
    description: `Example (Kubernetes, projected service-account tokens with audience = this service's issuer):
  ace issuer add --issuer https://kubernetes.default.svc.cluster.local --audience https://ace.example.com \\
    --jwks-uri https://<the cluster's OIDC discovery host>/openid/v1/jwks`,
    options: {
      issuer: { type: 'string', value: 'ISS', description: 'The iss of its tokens, exactly' },
      audience: { type: 'string', value: 'AUD', description: 'The aud its tokens must carry for this service' },
      ...KEY_OPTIONS,
    },
    args: { min: 0, max: 0 },
    async run(ctx, values) {
      const issuer = str(values, 'issuer');
      const audience = str(values, 'audience');
      if (!issuer || !audience) throw new UsageError('issuer add needs --issuer and --audience', ['issuer', 'add']);
      const created = await ctx.admin().json<Issuer>('POST', '/admin/v1/workload-issuers', { issuer, audience, ...keySource(values, ['issuer', 'add']) });
      if (ctx.out.json) return ctx.out.printJson(created);
      ctx.out.print(fields([['issuer_id', created.issuer_id], ['issuer', created.issuer], ['audience', created.audience], ['jwks_uri', created.jwks_uri]]));
    },
  },
  listCommand<Issuer>({
    group: 'issuer',
    summary: 'List trusted workload identity issuers',
    route: '/admin/v1/workload-issuers',
    key: 'workload_issuers',
    columns: ['ISSUER_ID', 'ISSUER', 'AUDIENCE', 'KEYS'],
    row: (i) => [i.issuer_id, i.issuer, i.audience, i.jwks_uri ?? `${i.jwks?.keys.length ?? 0} inline`],
  }),
  {
    path: ['issuer', 'remove'],
    summary: "Stop trusting an issuer: its bindings go and the bound agents' tokens are taken back",
    usage: 'issuer remove <issuer_id>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [issuerId]) {
      await ctx.admin().json('DELETE', `/admin/v1/workload-issuers/${seg(issuerId)}`);
      if (ctx.out.json) return ctx.out.printJson({ issuer_id: issuerId, removed: true });
      ctx.out.print(`Issuer ${issuerId} removed.`);
    },
  },
  {
    path: ['binding', 'add'],
    summary: "Let a workload (an issuer's subject) act as an agent",
    usage: 'binding add <issuer_id> <subject> <agent_id>',
    description: 'Subjects: system:serviceaccount:<namespace>:<name> (Kubernetes), spiffe://<trust domain>/<path> (SPIFFE).',
    args: { min: 3, max: 3 },
    async run(ctx, _values, [issuerId, subject, agentId]) {
      const binding = await ctx.admin().json<Binding>('POST', `/admin/v1/workload-issuers/${seg(issuerId)}/bindings`, { subject, agent_id: agentId });
      if (ctx.out.json) return ctx.out.printJson(binding);
      ctx.out.print(fields([['issuer_id', binding.issuer_id], ['subject', binding.subject], ['agent_id', binding.agent_id]]));
    },
  },
  {
    path: ['binding', 'list'],
    summary: "List an issuer's bindings",
    usage: 'binding list <issuer_id>',
    args: { min: 1, max: 1 },
    async run(ctx, _values, [issuerId]) {
      const answer = await ctx.admin().json<{ bindings: Binding[] }>('GET', `/admin/v1/workload-issuers/${seg(issuerId)}/bindings`);
      if (ctx.out.json) return ctx.out.printJson(answer);
      ctx.out.print(table(['SUBJECT', 'AGENT_ID', 'CREATED_AT'], answer.bindings.map((b) => [b.subject, b.agent_id, b.created_at])));
    },
  },
  {
    path: ['binding', 'remove'],
    summary: "Unbind a workload: its agent's tokens are taken back",
    usage: 'binding remove <issuer_id> <subject>',
    args: { min: 2, max: 2 },
    async run(ctx, _values, [issuerId, subject]) {
      await ctx.admin().json('DELETE', `/admin/v1/workload-issuers/${seg(issuerId)}/bindings?subject=${encodeURIComponent(subject)}`);
      if (ctx.out.json) return ctx.out.printJson({ issuer_id: issuerId, subject, removed: true });
      ctx.out.print(`Unbound ${subject}.`);
    },
  },
];

export { KEY_OPTIONS, NO_SECRET_OPTION, keySource };
