// Agents without secrets: the public keys an agent signs its client assertions with (RFC 7523
// private_key_jwt, registered with RFC 7591 client metadata), and the workload identity issuers the
// operator trusts (a Kubernetes service-account issuer, a SPIFFE trust domain, a CI's OIDC issuer) with
// the (issuer, subject) pairs bound to agents. Postgres implements it in
// adapters/postgres/client-key-store.ts (migration 006_client_keys.sql); test/support/memory/ in memory.

import type { AgentView } from '../model.js';

/** A public JWK as registered (kty EC/RSA/OKP; `kid` required; never private members). */
export type PublicJwk = Record<string, unknown> & { kty: string; kid: string };

/** Where an agent's or an issuer's keys are: inline (a JWK Set) or fetched from a `jwks_uri`. */
export type KeySource = { keys: PublicJwk[]; jwksUri?: undefined } | { jwksUri: string; keys?: undefined };

/** An agent that authenticates with `private_key_jwt`. */
export interface AgentKeys {
  agentId: string;
  apiKeyId: string;
  source: KeySource;
  updatedAt: Date;
  /** Its status and grants, read in the same statement as the keys (what a token request needs next). */
  view: AgentView;
}

/** A workload identity issuer the operator trusts. */
export interface TrustedIssuer {
  id: string;
  /** The `iss` its tokens carry, exactly. */
  issuer: string;
  /** The `aud` its tokens must carry for this service (e.g. our issuer URL). */
  audience: string;
  source: KeySource;
  createdAt: Date;
}

/** A workload (`subject` of tokens from `issuerId`) that may act as an agent. */
export interface WorkloadBinding {
  issuerId: string;
  subject: string;
  agentId: string;
  /** The bound agent's api_key_id (filled by reads). */
  apiKeyId?: string;
  createdAt: Date;
}

/** Writes inside an admin change's unit of work. */
export interface ClientKeyWrites {
  /** Sets the agent's key source (insert or replace). */
  putAgentKeys(agentId: string, source: KeySource): Promise<void>;
  agentKeysOf(agentId: string): Promise<KeySource | null>;
  insertTrustedIssuer(row: TrustedIssuer): Promise<void>;
  /** false: no such issuer. Its bindings go with it. */
  deleteTrustedIssuer(id: string): Promise<boolean>;
  getTrustedIssuer(id: string): Promise<TrustedIssuer | null>;
  /** The issuer trusted under this exact `iss`, if any. */
  trustedIssuerNamed(issuer: string): Promise<TrustedIssuer | null>;
  /** false: the pair is already bound. */
  insertBinding(row: WorkloadBinding): Promise<boolean>;
  /** The agent the pair was bound to, or null when it was not bound. */
  deleteBinding(issuerId: string, subject: string): Promise<string | null>;
}

/** Reads outside a change: the token path's index is loaded from these. */
export interface ClientKeyStore {
  /** Every key agent with its api_key_id. */
  allAgentKeys(): Promise<AgentKeys[]>;
  /** The key agents among these api_key_ids (the others are not key agents, or are gone). */
  agentKeysByApiKeyIds(apiKeyIds: string[]): Promise<AgentKeys[]>;
  listTrustedIssuers(): Promise<TrustedIssuer[]>;
  listBindings(issuerId?: string): Promise<WorkloadBinding[]>;
}
