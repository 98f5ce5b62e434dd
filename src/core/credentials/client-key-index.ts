// Who may authenticate with a client assertion, in memory: the key agents by api_key_id with their view
// (status and grants, what the token is then issued from), the trusted workload issuers by `iss`, and the
// (issuer, subject) bindings. A key agent's token request reads only this map (no query, no cache round
// trip per request, even for its first token). Loaded at start, re-read for the agents the bus names (any
// change of an agent: its keys, status, grants, deletion), fully on a `client_keys` notice (issuers,
// bindings), on a `platform` notice that concerns a key agent's grant (the platform's status is in the
// view), on `all`, and every REFRESH_MS in case a message was lost (in the background). A request waits
// for a re-read that a notice started (what it concerns is not answered from the copy it replaces), and
// while such a re-read has not succeeded the check answers 503 (nothing falls back to stale keys or a
// stale view).
import { StoreUnavailableError } from '../errors.js';
import type { AgentView } from '../model.js';
import type { AgentKeys, ClientKeyStore, TrustedIssuer } from '../ports/client-keys.js';
import type { AssertionVerifier } from '../ports/assertions.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { Telemetry } from '../ports/telemetry.js';

const REFRESH_MS = 60_000;

export interface ClientKeyIndexPorts {
  store: ClientKeyStore;
  /** Imports the keys a notice brings before their agent's first token needs them. */
  verifier: Pick<AssertionVerifier, 'prepare'>;
  bus: InvalidationBus;
  telemetry: Telemetry;
}

export interface Federated {
  issuer: TrustedIssuer;
  /** The bound agent's api_key_id, when (issuer, subject) is bound. */
  apiKeyId: string | undefined;
  agentId: string | undefined;
  /** The bound agent's view when it is a key agent too (else undefined: read it from the store). */
  view: AgentView | undefined;
}

interface Snapshot {
  agents: Map<string, AgentKeys>;
  issuers: Map<string, TrustedIssuer>;
  /** `<issuer id>\n<subject>` -> the bound agent. */
  bindings: Map<string, { agentId: string; apiKeyId: string }>;
}

export class ClientKeyIndex {
  private readonly store: ClientKeyStore;
  private readonly verifier: Pick<AssertionVerifier, 'prepare'>;
  private readonly telemetry: Telemetry;
  private snapshot: Snapshot | undefined;
  private loadedAt = 0;
  /** The full load in flight; whether a failure of it is an outage; the one queued behind it after a notice. */
  private full: Promise<void> | undefined;
  private fullCritical = false;
  private queued: Promise<void> | undefined;
  /** The full load the latest notice asked for, until it settles: requests wait for it. */
  private noticed: Promise<void> | undefined;
  private fullFailed = false;
  private refreshTriedAt = 0;
  private readonly partial = new Map<string, Promise<void>>();
  private readonly failedAgents = new Set<string>();
  /** Agents named by a notice while a full load was out: that load may have read them before the change. */
  private readonly noticedDuringFull = new Set<string>();

  constructor(ports: ClientKeyIndexPorts) {
    ({ store: this.store, verifier: this.verifier, telemetry: this.telemetry } = ports);
    ports.bus.subscribe((message) => {
      if (message.kind === 'agent') this.reloadAgents([message.apiKeyId]);
      else if (message.kind === 'agents') this.reloadAgents(message.apiKeyIds);
      else if (message.kind === 'client_keys' || message.kind === 'all' || (message.kind === 'platform' && this.grantsOn(message.platformId))) {
        void this.reloadAfterNotice().catch((error: unknown) => this.failed(error));
      }
    });
  }

  /** The first load (start-up waits for it: a store outage then fails the start, as every other load). */
  async init(): Promise<void> {
    await this.reload(true);
  }

  /** The key agent with this api_key_id, or undefined (not a key agent, or unknown). */
  async agent(apiKeyId: string): Promise<AgentKeys | undefined> {
    await this.current();
    await this.partial.get(apiKeyId);
    if (this.failedAgents.has(apiKeyId)) throw new StoreUnavailableError('postgres', new Error('the client keys of this agent could not be re-read'));
    return this.snapshot!.agents.get(apiKeyId);
  }

  /** The trusted issuer of this `iss` and the agent bound to `subject`, or undefined when `iss` is not trusted. */
  async federated(iss: string, subject: string): Promise<Federated | undefined> {
    const snapshot = await this.current();
    const issuer = snapshot.issuers.get(iss);
    if (!issuer) return undefined;
    const bound = snapshot.bindings.get(`${issuer.id}\n${subject}`);
    // A bound key agent's view comes with it; another bound agent's view is read by the caller.
    const view = bound && (await this.agent(bound.apiKeyId))?.view;
    return { issuer, apiKeyId: bound?.apiKeyId, agentId: bound?.agentId, view };
  }

  private async current(): Promise<Snapshot> {
    // A full re-read a notice asked for is waited for: its copy replaces one that may be stale. The periodic
    // refresh is not: it runs beside the requests, and one that fails keeps the last good copy (it was current
    // within REFRESH_MS and every change since came with a notice).
    await this.noticed?.catch(() => undefined); // its failure is kept in fullFailed, which the next line acts on
    if (this.snapshot === undefined || this.fullFailed) {
      try {
        await this.reload(true);
      } catch (error) {
        throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError('postgres', error);
      }
    } else if (Date.now() - Math.max(this.loadedAt, this.refreshTriedAt) > REFRESH_MS) {
      this.refreshTriedAt = Date.now();
      void this.reload(false).catch((error: unknown) => this.failed(error));
    }
    return this.snapshot!;
  }

  /** `critical`: a failure is an outage until a load succeeds (at start, after a notice), not a missed refresh. */
  private reload(critical: boolean): Promise<void> {
    this.fullCritical ||= critical;
    return (this.full ??= this.loadAll().finally(() => {
      this.full = undefined;
      this.fullCritical = false;
    }));
  }

  /** After a notice: a load already out may have read before the change, so another one follows it. */
  private reloadAfterNotice(): Promise<void> {
    const running = this.full;
    if (running && !this.queued) {
      this.queued = running
        .catch(() => undefined) // only the order matters here: the running load's failure goes to its own waiters
        .then(() => {
          this.queued = undefined;
          return this.reload(true);
        });
    }
    const next = this.queued ?? this.reload(true);
    this.noticed = next;
    void next
      .catch(() => undefined) // clean-up only: the failure goes to the callers waiting on `next`
      .then(() => {
        if (this.noticed === next) this.noticed = undefined;
      });
    return next;
  }

  /** Does a key agent hold a grant on this platform (its view carries the platform's status)? */
  private grantsOn(platformId: string): boolean {
    for (const agent of this.snapshot?.agents.values() ?? []) if (platformId in agent.view.grants) return true;
    return false;
  }

  private async loadAll(): Promise<void> {
    this.noticedDuringFull.clear();
    try {
      const [agents, issuers, bindings] = await Promise.all([this.store.allAgentKeys(), this.store.listTrustedIssuers(), this.store.listBindings()]);
      this.snapshot = {
        agents: new Map(agents.map((a) => [a.apiKeyId, a])),
        issuers: new Map(issuers.map((i) => [i.issuer, i])),
        bindings: new Map(bindings.filter((b) => b.apiKeyId !== undefined).map((b) => [`${b.issuerId}\n${b.subject}`, { agentId: b.agentId, apiKeyId: b.apiKeyId! }])),
      };
      this.loadedAt = Date.now();
      this.fullFailed = false;
      this.failedAgents.clear();
    } catch (error) {
      if (this.fullCritical) this.fullFailed = true;
      throw error;
    } finally {
      // Their own re-read may have landed before this load's older copy replaced it: read them once more.
      if (this.noticedDuringFull.size > 0) this.reloadAgents([...this.noticedDuringFull]);
    }
  }

  /** One query for the agents a notice names; requests for them wait for it. */
  private reloadAgents(apiKeyIds: string[]): void {
    if (this.full) apiKeyIds.forEach((id) => this.noticedDuringFull.add(id));
    const previous = Promise.all(apiKeyIds.map((id) => this.partial.get(id)));
    const next = previous.then(async () => {
      try {
        const found = new Map((await this.store.agentKeysByApiKeyIds(apiKeyIds)).map((a) => [a.apiKeyId, a]));
        for (const id of apiKeyIds) {
          const keys = found.get(id);
          if (keys) {
            this.verifier.prepare(keys.source);
            this.snapshot?.agents.set(id, keys);
          } else this.snapshot?.agents.delete(id);
          this.failedAgents.delete(id);
        }
      } catch (error) {
        apiKeyIds.forEach((id) => this.failedAgents.add(id));
        this.failed(error);
      }
    });
    for (const id of apiKeyIds) this.partial.set(id, next);
    void next.then(() => {
      for (const id of apiKeyIds) if (this.partial.get(id) === next) this.partial.delete(id);
    });
  }

  private failed(error: unknown): void {
    this.telemetry.record({ type: 'background_failure', what: 'client_keys_reload', error });
  }
}
