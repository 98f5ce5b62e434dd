// Agents without secrets (RFC 7523 §2.2 client authentication): the client proves who it is with a JWT
// instead of a shared secret, checked at signature speed (no argon2).
//
// - private_key_jwt: `iss` = `sub` = the agent's api_key_id (= client_id), signed by one of the agent's
//   registered public keys, `aud` this token endpoint or our issuer, a short life, and a `jti` used once
//   across every instance until it expires.
// - workload identity federation: a token the workload's platform issued (a Kubernetes projected
//   service-account token, a SPIFFE JWT-SVID, a CI job's OIDC token): `iss` a trusted issuer, `aud` the
//   audience the operator registered for it, `sub` bound to an agent.
//
// Every failure is the same Refusal `invalid_credentials` (401 invalid_client, one body): the reason goes
// to telemetry only. Every refusal costs one signature verification (a decoy for an unknown client; the
// client's or issuer's own keys for a client_id that does not match or an unbound subject), so the
// answer's timing does not tell registered clients or bound subjects from others. Failures spend the address's failed-login
// budget like wrong secrets do.
import { CredentialRefusal } from '../errors.js';
import type { Authenticated, ClientAuthentication } from './client-authentication.js';
import { AssertionRejected, type AssertionExpectations, type AssertionVerifier, type ClaimedAssertion, type ReplayGuard } from '../ports/assertions.js';
import type { KeySource } from '../ports/client-keys.js';
import type { AttemptLimits } from '../ports/limits.js';
import type { Store } from '../ports/store.js';
import type { Telemetry } from '../ports/telemetry.js';
import type { ClientKeyIndex } from './client-key-index.js';

export interface AssertionAuthenticatorPorts {
  index: ClientKeyIndex;
  verifier: AssertionVerifier;
  replays: ReplayGuard;
  store: Store;
  limits: AttemptLimits;
  telemetry: Telemetry;
  /** What a private_key_jwt assertion's `aud` may name: the token endpoint URL and the issuer (RFC 7523 §3). */
  audiences: string[];
  /** Longest `exp - now` of a private_key_jwt assertion (seconds). */
  maxAssertionLifetimeSeconds: number;
  /** Longest `exp - now` of a workload token (seconds): platforms issue them for an hour or more. */
  maxWorkloadTokenLifetimeSeconds: number;
  clockToleranceSeconds: number;
  /** Verified against when the client is unknown, so that it costs what a known one does. */
  decoyKeys: KeySource;
}

export interface AssertionCaller {
  assertion: string;
  /** client_id when the request named one (it must then be the agent's api_key_id). */
  clientId: string | undefined;
  address: string;
  signal?: AbortSignal;
  /** 'authorization_grant' (RFC 7523 §2.1): only a trusted issuer's token; a key agent's own assertion is refused. */
  as?: 'client_assertion' | 'authorization_grant';
}

type Method = 'private_key_jwt' | 'workload';

export class AssertionAuthenticator {
  constructor(private readonly ports: AssertionAuthenticatorPorts) {}

  /** The agent and how it authenticated; a refusal (CredentialRefusal) carries what the assertion claimed. */
  async authenticate(caller: AssertionCaller): Promise<Authenticated> {
    const { limits } = this.ports;
    // A locked-out address is refused from memory. Unlike argon2, a signature check is cheap, so nothing is
    // reserved up front (a success costs the limiter no round trip); a failure spends a point afterwards.
    limits.assertNotLockedOut(caller.address);
    let method: Method = 'private_key_jwt';
    let agentId: string | undefined;
    let claimed: ClaimedAssertion | undefined;
    let issuerId: string | undefined;
    try {
      claimed = this.ports.verifier.peek(caller.assertion);
      const issuer = identifier(claimed?.issuer);
      const subject = identifier(claimed?.subject);
      const found = issuer !== undefined && subject !== undefined ? await this.plan(issuer, subject, caller.clientId) : undefined;
      // A key agent's self-signed assertion authenticates the client; as a grant it grants nothing (refused
      // after its signature check, as every refusal, so that timing tells nothing).
      const plan = found && caller.as === 'authorization_grant' && found.method === 'private_key_jwt' && found.refusal === undefined ? { ...found, refusal: 'not_a_grant' as const } : found;
      method = plan?.method ?? (issuer !== undefined && issuer !== subject ? 'workload' : 'private_key_jwt');
      agentId = plan?.agentId;
      issuerId = plan?.issuerId;
      // Every refusal verifies one signature, as a wrong key does, before it is refused: against the decoy
      // for an unknown client or issuer, else against the keys the client or issuer holds (an unbound
      // subject and a client_id that does not match too), so timing tells none of them apart.
      if (!plan) {
        await this.decoy(caller);
        throw new AssertionRejected('unknown_client');
      }
      const checked = this.ports.verifier.verify(caller.assertion, plan.expect, caller.signal);
      if (plan.refusal !== undefined || plan.apiKeyId === undefined) {
        await checked.catch((error: unknown) => {
          if (!(error instanceof AssertionRejected)) throw error; // ours (the keys could not be read): not the client's failure
        });
        throw new AssertionRejected(plan.refusal ?? 'subject_not_bound');
      }
      const verified = await checked;
      // Single use for private_key_jwt only: a workload presents the token its platform mounted until it is
      // rotated (Kubernetes: about an hour), whatever its jti. A key agent's view came with its keys from the
      // index; another bound agent's is read meanwhile.
      const [firstUse, view] = await Promise.all([
        // Remembered as long as jwtVerify would still accept it: exp + the clock tolerance (+1 s for rounding).
        plan.expect.requireJti ? this.ports.replays.firstUse(`${verified.issuer}\n${verified.jti}`, (verified.expiresAt + this.ports.clockToleranceSeconds + 1) * 1000) : true,
        plan.view ?? this.ports.store.getAgentView(plan.apiKeyId),
      ]);
      if (!firstUse) throw new AssertionRejected('jti_replayed');
      if (!view || view.agentId !== plan.agentId) throw new AssertionRejected('agent_changed');
      this.ports.telemetry.record({ type: 'client_assertion', method, outcome: 'accepted' });
      return { view, authentication: authentication(method, { issuer: verified.issuer, subject: verified.subject, kid: verified.kid, jti: verified.jti }, issuerId) };
    } catch (error) {
      if (!(error instanceof AssertionRejected)) throw error; // ours (a store outage): not the client's failure
      this.ports.telemetry.record({ type: 'client_assertion', method, outcome: error.reason });
      // The failure spends a point of the address's budget (past it: 429, and refused from memory after).
      await limits.recordAuthFailure(caller.address);
      // The audit trail says what was claimed (cleaned and bounded there), with the client_id presented.
      const claims = authentication(method, claimed ?? {}, issuerId);
      throw new CredentialRefusal('invalid_credentials', agentId, undefined, { ...claims, apiKeyId: caller.clientId ?? claims.apiKeyId });
    }
  }

  /** Whose keys to verify with and what the assertion must say; undefined: nobody we know. */
  private async plan(issuer: string, subject: string, clientId: string | undefined) {
    const { index } = this.ports;
    if (issuer === subject) {
      const agent = await index.agent(issuer);
      if (agent) {
        const refusal = clientId !== undefined && clientId !== agent.apiKeyId ? ('client_id_mismatch' as const) : undefined;
        const expect: AssertionExpectations = {
          keys: agent.source,
          issuer,
          subject,
          audiences: this.ports.audiences,
          maxLifetimeSeconds: this.ports.maxAssertionLifetimeSeconds,
          clockToleranceSeconds: this.ports.clockToleranceSeconds,
          requireJti: true,
        };
        return { method: 'private_key_jwt' as const, apiKeyId: agent.apiKeyId, agentId: agent.agentId, issuerId: undefined, view: agent.view, expect, refusal };
      }
    }
    const federated = await index.federated(issuer, subject);
    if (!federated) return undefined;
    const refusal = clientId !== undefined && federated.apiKeyId !== undefined && clientId !== federated.apiKeyId ? ('client_id_mismatch' as const) : undefined;
    const expect: AssertionExpectations = {
      keys: federated.issuer.source,
      issuer,
      subject,
      audiences: [federated.issuer.audience],
      maxLifetimeSeconds: this.ports.maxWorkloadTokenLifetimeSeconds,
      clockToleranceSeconds: this.ports.clockToleranceSeconds,
      requireJti: false,
    };
    return { method: 'workload' as const, apiKeyId: federated.apiKeyId, agentId: federated.agentId, issuerId: federated.issuer.id, view: federated.view, expect, refusal };
  }

  /** One verification against keys nobody holds: an unknown client costs what a known one does. */
  private async decoy(caller: AssertionCaller): Promise<void> {
    const expect: AssertionExpectations = {
      keys: this.ports.decoyKeys,
      issuer: '',
      audiences: this.ports.audiences,
      maxLifetimeSeconds: this.ports.maxAssertionLifetimeSeconds,
      clockToleranceSeconds: this.ports.clockToleranceSeconds,
      requireJti: true,
    };
    try {
      await this.ports.verifier.verify(caller.assertion, expect, caller.signal);
    } catch (error) {
      if (!(error instanceof AssertionRejected)) throw error;
    }
  }
}

/** An `iss` or `sub` that can name a client or a workload (longer ones name nobody: refused as unknown). */
function identifier(value: string | undefined): string | undefined {
  return value !== undefined && value.length <= 1024 ? value : undefined;
}

/**
 * How the client authenticated with an assertion: for private_key_jwt its `iss` is its api_key_id and the
 * `kid` names one of its keys; a workload is named by its issuer and subject.
 */
function authentication(method: Method, claims: ClaimedAssertion, issuerId: string | undefined): ClientAuthentication {
  if (method === 'private_key_jwt') return { method, apiKeyId: claims.issuer, clientKid: claims.kid, assertionJti: claims.jti };
  return { method, issuer: claims.issuer, issuerId, subject: claims.subject, assertionJti: claims.jti };
}
