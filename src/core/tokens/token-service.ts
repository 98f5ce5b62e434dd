// The credential exchange: authenticated agent + platform → RS256 JWT bound to the platform, as named
// steps in the order docs/decisions.md fixes: profile, authenticate, rate-limit the key, agent status,
// platform access, scopes, record, sign.
import { randomUUID } from 'node:crypto';
import { CredentialRefusal, ServiceError, StoreUnavailableError, toServiceError, unavailable } from '../errors.js';
import type { Authenticated } from '../credentials/client-authentication.js';
import type { TokenSigner, TokenType } from '../ports/crypto.js';
import type { AttemptLimits } from '../ports/limits.js';
import type { Authenticator } from '../credentials/authenticator.js';
import type { AssertionAuthenticator } from '../credentials/assertion-authenticator.js';
import type { KeyManager } from '../keys/key-manager.js';
import { auditEvents, type AuditSink } from '../audit/events.js';
import type { IssuingClock } from '../ports/clock.js';

/** The contract's default token profile (header typ JWT). */
export const TOKEN_PROFILE = 'svc-native-jwt';
/** RFC 9068 JWT access tokens: the same claims, header typ `at+jwt` (what strict OAuth resource servers require). */
export const OAUTH_PROFILE = 'oauth-at-jwt';
/** Every profile this version issues, the default first. */
export const TOKEN_PROFILES = [TOKEN_PROFILE, OAUTH_PROFILE] as const;
export type TokenProfile = (typeof TOKEN_PROFILES)[number];

/** The JWS `typ` header of each profile (the middleware checks the pair: a token of one cannot pass as the other). */
export const PROFILE_TYP: Record<TokenProfile, TokenType> = { 'svc-native-jwt': 'JWT', 'oauth-at-jwt': 'at+jwt' };

export interface TokenRequest {
  /** The api_key_id (client_id); with an assertion it may be empty (a workload token names its agent by binding). */
  apiKeyId: string;
  /** The agent's secret, or, for agents without secrets, `assertion`. */
  secret?: string;
  /** A client assertion (RFC 7523 §2.2): a private_key_jwt or a workload identity token. */
  assertion?: string;
  /**
   * How the assertion came: as client authentication (RFC 7523 §2.2, the default) or as the authorization
   * grant itself (§2.1, grant_type jwt-bearer: a workload's token, MCP's workload identity federation), which
   * only a trusted issuer's token can be.
   */
  assertionAs?: 'client_assertion' | 'authorization_grant';
  /**
   * Undefined when the OAuth door's `resource` names no platform: refused like a platform the agent holds
   * no grant on, after the credential check, so that the answer says nothing about which resources exist.
   */
  platformId: string | undefined;
  /**
   * The resource identifier (RFC 8707) the token is for, in normal form: an `oauth-at-jwt` token names it
   * in `aud` beside the platform id (RFC 9068 §3: validators compare `aud` with their own identifier).
   */
  resource?: string;
  /** Empty or absent: every scope the grant holds. */
  scopes?: string[];
  profile?: string;
}

export interface IssuedToken {
  accessToken: string;
  expiresIn: number;
  /** The granted scopes of the token, space-delimited (the OAuth answer repeats them, RFC 6749 §5.1). */
  scope: string;
}

/**
 * What an exchange ends with: a token (its `token.issued` recorded), or a refusal. `checked`: a credential
 * check ran (a wrong secret or assertion, an unknown key id, or a refusal naming the agent): its
 * `token.refused` is recorded here (bounded by the sink). An earlier refusal is the caller's to count.
 */
export type ExchangeOutcome = { issued: IssuedToken } | { refused: ServiceError | StoreUnavailableError; checked: boolean };

export interface TokenServicePorts {
  authenticator: Authenticator;
  assertions: AssertionAuthenticator;
  limits: AttemptLimits;
  keys: KeyManager;
  signer: TokenSigner;
  /**
   * Where token.issued and token.refused go: the one entrance of the token path into the audit trail (the
   * app's sink bounds the refusals per address and agent: adapters/audit-trail/refusals.ts).
   */
  audit: AuditSink;
  issuer: string;
  tokenTtlSeconds: number;
  /** Refuses while this instance's clock is too far from the database's (iat/exp come from it). */
  clock: IssuingClock;
}

/** Retry-After of a refusal for clock skew: another instance (or this one, once its clock is fixed) answers. */
const CLOCK_RETRY_AFTER_SECONDS = 5;

export class TokenService {
  constructor(private readonly ports: TokenServicePorts) {}

  /**
   * Refusals (ServiceError, store outages) come back as a result, those of a credential check recorded;
   * anything else thrown is a defect.
   */
  async exchange(request: TokenRequest, address: string, signal?: AbortSignal): Promise<ExchangeOutcome> {
    let authenticated: Authenticated | undefined;
    try {
      const profile = checkProfile(request.profile);
      // Before any credential work: nothing this instance could sign now would be right.
      if (this.ports.clock.refusal() !== undefined) throw unavailable(CLOCK_RETRY_AFTER_SECONDS, 'This instance cannot issue tokens now; retry shortly.');
      authenticated =
        request.assertion !== undefined
          ? await this.ports.assertions.authenticate({ assertion: request.assertion, as: request.assertionAs, clientId: request.apiKeyId === '' ? undefined : request.apiKeyId, address, signal })
          : await this.ports.authenticator.authenticate({ apiKeyId: request.apiKeyId, secret: request.secret ?? '', address, signal });
      return { issued: await this.issue(authenticated, request, profile, address, signal) };
    } catch (error) {
      if (!(error instanceof ServiceError || error instanceof StoreUnavailableError)) throw error;
      return { refused: error, checked: this.refused(error, authenticated, request, address, signal) };
    }
  }

  /**
   * Records a refusal of a credential check, in the next batch without holding the answer: a refusal costs
   * the same with or without an agent behind the key id (no timing signal), and an audit outage never turns
   * 401 into 503. Refusals before any check (a bad profile, a locked-out address, a full queue, an outage
   * before the check named anyone) are not recorded; whether it was checked is returned.
   */
  private refused(error: ServiceError | StoreUnavailableError, authenticated: Authenticated | undefined, request: TokenRequest, address: string, signal?: AbortSignal): boolean {
    const refusal = error instanceof CredentialRefusal ? error : undefined;
    const agentId = refusal ? refusal.agentId : authenticated?.view.agentId;
    const code = toServiceError(error).code;
    const checked = agentId !== undefined || code === 'invalid_credentials';
    // An answer nobody waits for any more (the client hung up) is not recorded.
    if (!checked || signal?.aborted) return checked;
    const by = refusal?.claimed ?? authenticated?.authentication ?? (request.assertion === undefined ? { method: 'client_secret' as const, apiKeyId: request.apiKeyId } : undefined);
    this.ports.audit.emit(
      auditEvents.tokenRefused({
        errorCode: code,
        agentId,
        platformId: request.platformId?.toLowerCase(),
        clientAddress: address,
        by,
      }),
    );
    return checked;
  }

  private async issue({ view, authentication }: Authenticated, request: TokenRequest, profile: TokenProfile, address: string, signal?: AbortSignal): Promise<IssuedToken> {
    const counted = this.ports.limits.consumeToken(view.apiKeyId);
    if (counted) await counted; // else spent from a lease in process: no turn of the event loop
    if (view.status !== 'active') throw new ServiceError('agent_inactive');
    if (request.platformId === undefined) throw new ServiceError('platform_access_denied');
    const platformId = request.platformId.toLowerCase();
    const grant = view.grants[platformId];
    if (!grant || grant.platformStatus !== 'active') throw new ServiceError('platform_access_denied');
    const scopes = resolveScopes(request.scopes ?? [], grant.scopes);

    const key = this.ports.keys.activeKey();
    const iat = Math.floor(Date.now() / 1000);
    const jti = randomUUID();
    const scope = scopes.join(' ');
    const payload = JSON.stringify({
      iss: this.ports.issuer,
      sub: view.agentId,
      aud: profile === OAUTH_PROFILE && request.resource !== undefined ? [request.resource, platformId] : platformId,
      iat,
      nbf: iat,
      exp: iat + this.ports.tokenTtlSeconds,
      jti,
      scope,
      svc_token_profile: profile,
      client_id: view.apiKeyId,
    });
    // The token leaves only once the trail holds it durably (Postgres or the local spool): a crash never
    // leaves a token in a client's hands that the trail does not show. Everything the event says is known
    // before the signature, so the batch commit runs while the token is signed instead of after it. If
    // signing then fails, the trail shows a token that never left (followed by its token.refused): it
    // errs on the side of showing too much, never too little.
    const recorded = this.ports.audit
      .record(auditEvents.tokenIssued({ jti, agentId: view.agentId, platformId, scope, kid: key.kid, clientAddress: address, by: authentication }))
      .then(
        () => true,
        () => false,
      );
    const accessToken = await this.ports.signer.signToken(key.kid, key.privateKeyPem, payload, signal, PROFILE_TYP[profile]);
    if (!(await recorded)) throw unavailable(1, 'The audit trail cannot record the token now; retry shortly.');
    return { accessToken, expiresIn: this.ports.tokenTtlSeconds, scope };
  }
}

/** The profile is part of request validation (docs/decisions.md): refused before any credential work. */
function checkProfile(requested: string | undefined): TokenProfile {
  const profile = requested ?? TOKEN_PROFILE;
  if (!(TOKEN_PROFILES as readonly string[]).includes(profile)) {
    throw new ServiceError('unsupported_profile', `Unsupported token profile "${profile.slice(0, 64)}": only ${TOKEN_PROFILES.map((p) => `"${p}"`).join(' and ')} are accepted.`);
  }
  return profile as TokenProfile;
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
