// The credential exchange: authenticated agent + platform → RS256 JWT bound to the platform.
// Order of checks (docs/decisions.md): authenticate, rate-limit the key, agent status, platform access,
// scopes, sign.
import { randomUUID } from 'node:crypto';
import { ServiceError, unavailable } from '../errors.js';
import type { CryptoPools } from '../../adapters/crypto/pools.js';
import type { Limiters } from '../../adapters/ratelimit/limiters.js';
import { TOKEN_PROFILE, type TokenRequest } from '../../adapters/http/schemas/public.js';
import type { AgentView } from '../model.js';
import type { Authenticator } from '../credentials/authenticator.js';
import type { KeyManager } from '../keys/key-manager.js';
import { auditEvents, withAgent, type AuditSink } from '../audit/events.js';

export interface TokenServiceOptions {
  issuer: string;
  tokenTtlSeconds: number;
}

export interface TokenResult {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

export class TokenService {
  constructor(
    private readonly authenticator: Authenticator,
    private readonly limiters: Limiters,
    private readonly keys: KeyManager,
    private readonly pools: CryptoPools,
    private readonly options: TokenServiceOptions,
    private readonly audit: AuditSink,
  ) {}

  async exchange(request: TokenRequest, address: string, signal?: AbortSignal): Promise<TokenResult> {
    // The profile is part of request validation (docs/decisions.md): refused before any credential work.
    const profile = request.profile ?? TOKEN_PROFILE;
    if (profile !== TOKEN_PROFILE) {
      throw new ServiceError('unsupported_profile', `Unsupported token profile "${profile.slice(0, 64)}": only "${TOKEN_PROFILE}" is accepted.`);
    }
    const view = await this.authenticator.authenticate({ apiKeyId: request.api_key_id, secret: request.secret, address, signal });
    try {
      return await this.issue(view, request, profile, address, signal);
    } catch (error) {
      // The refusal's audit event names the agent (see public-routes).
      throw withAgent(error as Error, view.agentId);
    }
  }

  private async issue(view: AgentView, request: TokenRequest, profile: string, address: string, signal?: AbortSignal): Promise<TokenResult> {
    await this.limiters.consumeToken(request.api_key_id);
    if (view.status !== 'active') throw new ServiceError('agent_inactive');

    const platformId = request.platform_id.toLowerCase();
    const grant = view.grants[platformId];
    if (!grant || grant.platformStatus !== 'active') throw new ServiceError('platform_access_denied');
    const scopes = resolveScopes(request.scopes ?? [], grant.scopes);

    const key = this.keys.activeKey();
    const iat = Math.floor(Date.now() / 1000);
    const jti = randomUUID();
    const scope = scopes.join(' ');
    const payload = JSON.stringify({
      iss: this.options.issuer,
      sub: view.agentId,
      aud: platformId,
      iat,
      nbf: iat,
      exp: iat + this.options.tokenTtlSeconds,
      jti,
      scope,
      svc_token_profile: profile,
      client_id: request.api_key_id,
    });
    // The token leaves only once the trail holds it durably (Postgres or the local spool): a crash never
    // leaves a token in a client's hands that the trail does not show. Everything the event says is known
    // before the signature, so the batch commit runs while the token is signed instead of after it. If
    // signing then fails, the trail shows a token that never left (followed by its token.refused): it
    // errs on the side of showing too much, never too little.
    const recorded = this.audit
      .record(auditEvents.tokenIssued({ jti, agentId: view.agentId, platformId, scope, kid: key.kid, clientAddress: address }))
      .then(
        () => true,
        () => false,
      );
    const accessToken = await this.pools.signToken(key.kid, key.privateKeyPem, payload, signal);
    if (!(await recorded)) throw unavailable(1, 'The audit trail cannot record the token now; retry shortly.');
    return { access_token: accessToken, token_type: 'Bearer', expires_in: this.options.tokenTtlSeconds };
  }
}

/** Empty request → every granted scope; else each requested scope must be granted. Sorted, no duplicates. */
export function resolveScopes(requested: string[], granted: string[]): string[] {
  const grantedSet = new Set(granted);
  const chosen = requested.length === 0 ? grantedSet : new Set(requested);
  for (const scope of chosen) {
    if (!grantedSet.has(scope)) throw new ServiceError('invalid_scope', `Scope "${scope.slice(0, 128)}" is not granted to the agent on this platform.`);
  }
  if (chosen.size === 0) throw new ServiceError('invalid_scope', 'The agent holds no scope on this platform.');
  return [...chosen].sort();
}
