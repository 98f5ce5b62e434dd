// The credential exchange: authenticated agent + platform → RS256 JWT bound to the platform.
// Order of checks (docs/decisions.md): authenticate, rate-limit the key, agent status, platform access,
// scopes, sign.
import { randomUUID } from 'node:crypto';
import { ServiceError } from '../../errors/catalog.js';
import type { CryptoPools } from '../../crypto/pools.js';
import type { Limiters } from '../../ratelimit/limiters.js';
import { TOKEN_PROFILE, type TokenRequest } from '../../schemas/public.js';
import type { Authenticator } from '../credentials/authenticator.js';
import type { KeyManager } from '../keys/key-manager.js';

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
  ) {}

  async exchange(request: TokenRequest, address: string, signal?: AbortSignal): Promise<TokenResult> {
    // The profile is part of request validation (docs/decisions.md): refused before any credential work.
    const profile = request.profile ?? TOKEN_PROFILE;
    if (profile !== TOKEN_PROFILE) {
      throw new ServiceError('unsupported_profile', `Unsupported token profile "${profile.slice(0, 64)}": only "${TOKEN_PROFILE}" is accepted.`);
    }
    const view = await this.authenticator.authenticate({ apiKeyId: request.api_key_id, secret: request.secret, address, signal });
    await this.limiters.consumeToken(request.api_key_id);
    if (view.status !== 'active') throw new ServiceError('agent_inactive');

    const grant = view.grants[request.platform_id.toLowerCase()];
    if (!grant || grant.platformStatus !== 'active') throw new ServiceError('platform_access_denied');
    const scopes = resolveScopes(request.scopes ?? [], grant.scopes);

    const key = this.keys.activeKey();
    const iat = Math.floor(Date.now() / 1000);
    const payload = JSON.stringify({
      iss: this.options.issuer,
      sub: view.agentId,
      aud: request.platform_id.toLowerCase(),
      iat,
      nbf: iat,
      exp: iat + this.options.tokenTtlSeconds,
      jti: randomUUID(),
      scope: scopes.join(' '),
      svc_token_profile: profile,
      client_id: request.api_key_id,
    });
    const accessToken = await this.pools.signToken(key.kid, key.privateKeyPem, payload, signal);
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
