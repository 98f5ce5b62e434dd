// Who may authenticate with a client assertion, in memory: the key agents by api_key_id, the trusted
// workload issuers by `iss`, and the (issuer, subject) bindings. A token request reads only this map (no
// query per request). Loaded at start, re-read for one agent when the bus names it (any change of an
// agent: its keys, status, deletion), fully on a `client_keys` notice (issuers, bindings), on `all`, and
// every REFRESH_MS in case a message was lost. While a re-read after a notice has not succeeded, what it
// concerns is not trusted from memory: the check answers 503 (nothing falls back to stale keys).
import { StoreUnavailableError } from '../errors.js';
import type { AgentKeys, ClientKeyStore, TrustedIssuer } from '../ports/client-keys.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { Telemetry } from '../ports/telemetry.js';

const REFRESH_MS = 60_000;

export interface ClientKeyIndexPorts {
  store: ClientKeyStore;
  bus: InvalidationBus;
  telemetry: Telemetry;
}

export interface Federated {
  issuer: TrustedIssuer;
  /** The bound agent's api_key_id, when (issuer, subject) is bound. */
  apiKeyId: string | undefined;
  agentId: string | undefined;
}

interface Snapshot {
  agents: Map<string, AgentKeys>;
  issuers: Map<string, TrustedIssuer>;
  /** `<issuer id>\n<subject>` -> the bound agent. */
  bindings: Map<string, { agentId: string; apiKeyId: string }>;
}

export class ClientKeyIndex {
  private readonly store: ClientKeyStore;
  private readonly telemetry: Telemetry;
  private snapshot: Snapshot | undefined;
  private loadedAt = 0;
  private full: Promise<void> | undefined;
  private fullFailed = false;
  private readonly partial = new Map<string, Promise<void>>();
  private readonly failedAgents = new Set<string>();

  constructor(ports: ClientKeyIndexPorts) {
    ({ store: this.store, telemetry: this.telemetry } = ports);
    ports.bus.subscribe((message) => {
      if (message.kind === 'agent') this.reloadAgent(message.apiKeyId);
      else if (message.kind === 'agents') message.apiKeyIds.forEach((id) => this.reloadAgent(id));
      else if (message.kind === 'client_keys' || message.kind === 'all') void this.reloadAll().catch((error: unknown) => this.failed(error));
    });
  }

  /** The first load (start-up waits for it: a store outage then fails the start, as every other load). */
  async init(): Promise<void> {
    await this.reloadAll();
  }

  /** The key agent with this api_key_id, or undefined (not a key agent, or unknown). */
  async agent(apiKeyId: string): Promise<AgentKeys | undefined> {
    const snapshot = await this.current();
    await this.partial.get(apiKeyId);
    if (this.failedAgents.has(apiKeyId)) throw new StoreUnavailableError('postgres', new Error('the client keys of this agent could not be re-read'));
    return snapshot.agents.get(apiKeyId);
  }

  /** The trusted issuer of this `iss` and the agent bound to `subject`, or undefined when `iss` is not trusted. */
  async federated(iss: string, subject: string): Promise<Federated | undefined> {
    const snapshot = await this.current();
    const issuer = snapshot.issuers.get(iss);
    if (!issuer) return undefined;
    const bound = snapshot.bindings.get(`${issuer.id}\n${subject}`);
    return { issuer, apiKeyId: bound?.apiKeyId, agentId: bound?.agentId };
  }

  private async current(): Promise<Snapshot> {
    if (this.snapshot === undefined || this.fullFailed || Date.now() - this.loadedAt > REFRESH_MS) {
      try {
        await this.reloadAll();
      } catch (error) {
        // A periodic refresh that fails keeps the last good copy (it was current within REFRESH_MS and every
        // change since came with a notice); a failed load after a notice or at start is an outage.
        if (this.snapshot === undefined || this.fullFailed) throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError('postgres', error);
        this.failed(error);
      }
    }
    return this.snapshot!;
  }

  private reloadAll(): Promise<void> {
    return (this.full ??= this.loadAll().finally(() => (this.full = undefined)));
  }

  private async loadAll(): Promise<void> {
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
      this.fullFailed = true;
      throw error;
    }
  }

  private reloadAgent(apiKeyId: string): void {
    const previous = this.partial.get(apiKeyId) ?? Promise.resolve();
    const next = previous.then(async () => {
      try {
        const keys = await this.store.agentKeysByApiKeyId(apiKeyId);
        const snapshot = this.snapshot;
        if (snapshot) {
          if (keys) snapshot.agents.set(apiKeyId, keys);
          else snapshot.agents.delete(apiKeyId);
        }
        this.failedAgents.delete(apiKeyId);
      } catch (error) {
        this.failedAgents.add(apiKeyId);
        this.failed(error);
      }
    });
    this.partial.set(apiKeyId, next);
    void next.then(() => {
      if (this.partial.get(apiKeyId) === next) this.partial.delete(apiKeyId);
    });
  }

  private failed(error: unknown): void {
    this.telemetry.record({ type: 'background_failure', what: 'client_keys_reload', error });
  }
}
