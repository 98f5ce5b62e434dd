// The revocation feed's Security Event Tokens (RFC 8417): one per revocation entry, and the signed stream
// head; each signed with the active key through the TokenSigner port (the signing threads). An entry's SET
// has the entry's creation as iat, so the same entry signs to the same bytes with the same key.
import type { TokenSigner } from '../ports/crypto.js';
import type { RevocationEntry } from '../ports/revocation-log.js';
import {
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
  SET_TYP,
  headJti,
  revocationJti,
  type LiveRange,
  type SetPayload,
} from '@agent-credential-exchange/protocol/feed-document';

/** The key that signs now (KeyManager). */
export interface ActiveSigningKey {
  activeKey(): { kid: string; privateKeyPem: string };
}

export interface SignedSet {
  seq: number;
  jti: string;
  kid: string;
  jws: string;
  /** `"<jti>":"<jws>"`: the SET's member of a poll answer's `sets`. */
  member: string;
  expiresAtMs: number;
  createdAtMs: number;
}

export interface SignedHead {
  jws: string;
  kid: string;
  seq: number;
  /** The `live` it was signed with, as JSON (re-signed when the stream's differs). */
  liveJson: string;
  member: string;
  signedAt: number;
}

export interface SetSigningOptions {
  keys: ActiveSigningKey;
  signer: TokenSigner;
  issuer: string;
}

export class SetSigning {
  private readonly keys: ActiveSigningKey;
  private readonly signer: TokenSigner;
  private readonly issuer: string;

  constructor({ keys, signer, issuer }: SetSigningOptions) {
    this.keys = keys;
    this.signer = signer;
    this.issuer = issuer;
  }

  /** The kid of the key that signs now (SETs kept from another key are signed again). */
  activeKid(): string {
    return this.keys.activeKey().kid;
  }

  private async sign(payload: SetPayload): Promise<{ jws: string; kid: string }> {
    const { kid, privateKeyPem } = this.keys.activeKey();
    const jws = await this.signer.signToken(kid, privateKeyPem, JSON.stringify(payload), undefined, SET_TYP);
    return { jws, kid };
  }

  async signEntry(entry: RevocationEntry): Promise<SignedSet> {
    const payload = this.setPayload(entry);
    const { jws, kid } = await this.sign(payload);
    return { seq: entry.seq, jti: payload.jti, kid, jws, member: member(payload.jti, jws), expiresAtMs: entry.expiresAt.getTime(), createdAtMs: entry.createdAt.getTime() };
  }

  async resign(platformId: string, set: SignedSet): Promise<SignedSet> {
    const payload = JSON.parse(Buffer.from(set.jws.split('.')[1], 'base64url').toString()) as SetPayload;
    if (payload.aud !== platformId) throw new Error('cached SET of another platform');
    const { jws, kid } = await this.sign(payload);
    return { ...set, jws, kid, member: member(set.jti, jws) };
  }

  /** The stream head `{seq, live}` of a platform, signed at `now` (ms). */
  signHead(platformId: string, seq: number, live: LiveRange[], liveJson: string, now: number): Promise<SignedHead> {
    return this.sign({
      iss: this.issuer,
      aud: platformId,
      iat: Math.floor(now / 1000),
      jti: headJti(platformId),
      sub_id: { format: 'opaque', id: platformId },
      events: { [EVENT_STREAM_HEAD]: { seq, live } },
    }).then(({ jws, kid }) => ({ jws, kid, seq, liveJson, member: member(headJti(platformId), jws), signedAt: now }));
  }

  /** One revocation entry as a SET; iat is the entry's creation, so the same entry signs to the same bytes. */
  private setPayload(entry: RevocationEntry): SetPayload {
    const iat = Math.floor(entry.createdAt.getTime() / 1000);
    const expires_at = Math.floor(entry.expiresAt.getTime() / 1000);
    const base = { iss: this.issuer, aud: entry.platformId, iat, jti: revocationJti(entry.platformId, entry.seq) };
    if (entry.kind === 'agent') {
      return {
        ...base,
        sub_id: { format: 'iss_sub', iss: this.issuer, sub: entry.agentId! },
        events: { [EVENT_SESSION_REVOKED]: { event_timestamp: iat, iat_max: entry.iatMax!, expires_at } },
      };
    }
    if (entry.kind === 'platform') {
      return {
        ...base,
        sub_id: { format: 'opaque', id: entry.platformId },
        events: { [EVENT_PLATFORM_TOKENS_REVOKED]: { event_timestamp: iat, iat_max: entry.iatMax!, expires_at } },
      };
    }
    return {
      ...base,
      sub_id: { format: 'opaque', id: entry.kid! },
      events: { [EVENT_SIGNING_KEY_RETIRED]: { event_timestamp: iat, expires_at } },
    };
  }
}

/** A member of a poll answer's `sets` object (jti and compact JWS hold no character JSON escapes, but the encoder decides). */
function member(jti: string, jws: string): string {
  return `${JSON.stringify(jti)}:${JSON.stringify(jws)}`;
}
