// What a refused token request leaves behind, bounded: a durable row per refusal would let one client write
// rows as fast as it can send bad requests (107,000 rows, 18 MB, in 10 s at 32 connections, measured), so:
// - a refusal before any credential check (415, 422, 400, a bad profile, a 429 of the per-address
//   limits, 503) never reaches the trail: the HTTP door counts it in the metrics
//   (ace_tokens_issued_total{outcome}) and in one sampled log line per window (http/token-door.ts);
// - a refusal of a credential check (wrong secret or assertion, unknown key id, or a refusal naming the
//   agent) is a `token.refused` event the core records (TokenService), through the one sink it has: this
//   one. Up to `perWindow` per client address and per agent in each window go on to the trail; past either
//   bound they are counted, and the window ends with one `token.refusals_aggregated` event per address and
//   per agent that went past it ("N refusals from X in window W").
// Every other event passes through unchanged. Everything here is per process and bounded: at most
// `maxTracked` addresses and agents per window.
import type { AuditEvent, AuditSink } from '../../core/audit/events.js';
import { auditEvents } from '../../core/audit/events.js';

export interface RefusalBounds {
  /** token.refused rows per client address and per agent in one window. */
  perWindow: number;
  windowSeconds: number;
  /** Addresses (and, apart, agents) tracked per window; refusals from more go to one overflow count. */
  maxTracked?: number;
  /** token.refused rows per window from the whole process, whatever the addresses and agents. */
  processPerWindow?: number;
}

interface Tally {
  stored: number;
  /** Refusals not recorded one by one, by error code. */
  counted: Map<string, number>;
}

export interface RefusalRecorderOptions {
  /** The trail: every event goes on to it, token.refused within the bounds, and the aggregates. */
  sink: AuditSink;
  bounds: RefusalBounds;
}

const OVERFLOW = '';

/** The audit sink of the process, bounding token.refused (see above). */
export class RefusalRecorder implements AuditSink {
  private readonly maxTracked: number;
  private readonly processPerWindow: number;
  private windowStart = Date.now();
  private storedInWindow = 0;
  private readonly byAddress = new Map<string, Tally>();
  private readonly byAgent = new Map<string, Tally>();
  private readonly timer: NodeJS.Timeout;

  private readonly sink: AuditSink;
  private readonly bounds: RefusalBounds;

  constructor({ sink, bounds }: RefusalRecorderOptions) {
    this.sink = sink;
    this.bounds = bounds;
    this.maxTracked = bounds.maxTracked ?? 10_000;
    this.processPerWindow = bounds.processPerWindow ?? bounds.perWindow * 50;
    this.timer = setInterval(() => this.endWindow(), bounds.windowSeconds * 1000);
    this.timer.unref();
  }

  /** A token.refused is recorded within the bounds (else counted: resolved at once); anything else as is. */
  record(event: AuditEvent): Promise<void> {
    return event.type !== 'token.refused' || this.within(event) ? this.sink.record(event) : Promise.resolve();
  }

  emit(event: AuditEvent): void {
    if (event.type !== 'token.refused' || this.within(event)) this.sink.emit(event);
  }

  /** Whether this refusal is within the window's bounds (then it is stored), else it is counted. */
  private within(event: AuditEvent): boolean {
    const errorCode = event.data?.error_code ?? 'unknown';
    const address = tally(this.byAddress, event.clientAddress ?? OVERFLOW, this.maxTracked);
    const agent = event.agentId ? tally(this.byAgent, event.agentId, this.maxTracked) : undefined;
    const within =
      this.storedInWindow < this.processPerWindow && address.stored < this.bounds.perWindow && (!agent || agent.stored < this.bounds.perWindow);
    if (within) {
      this.storedInWindow++;
      address.stored++;
      if (agent) agent.stored++;
      return true;
    }
    // Counted in the aggregate of the address if it is past its bound, in the agent's if that one is
    // (both when both are), else (the process bound) in the one aggregate naming neither. So a thousand
    // addresses trying one agent once each make one aggregate, not a thousand.
    const overAddress = address.stored >= this.bounds.perWindow;
    const overAgent = agent !== undefined && agent.stored >= this.bounds.perWindow;
    if (overAddress) count(address, errorCode);
    if (overAgent) count(agent, errorCode);
    if (!overAddress && !overAgent) count(tally(this.byAddress, OVERFLOW, Infinity), errorCode);
    return false;
  }

  /** Ends the window now: writes its aggregates, and starts a new one. */
  endWindow(): void {
    const windowStart = this.windowStart;
    const windowSeconds = this.bounds.windowSeconds;
    this.windowStart = Date.now();
    this.storedInWindow = 0;
    const emit = (tallies: Map<string, Tally>, who: (key: string) => { clientAddress?: string; agentId?: string }) => {
      for (const [key, t] of tallies) {
        if (t.counted.size === 0) continue;
        const errorCodes = Object.fromEntries(t.counted);
        const refusals = [...t.counted.values()].reduce((a, b) => a + b, 0);
        this.sink.emit(auditEvents.refusalsAggregated({ ...who(key), refusals, errorCodes, windowStart, windowSeconds }));
      }
      tallies.clear();
    };
    emit(this.byAddress, (key) => (key === OVERFLOW ? {} : { clientAddress: key }));
    emit(this.byAgent, (key) => (key === OVERFLOW ? {} : { agentId: key }));
  }

  /** At shutdown, before the trail closes: the current window's aggregates are written, not lost. */
  close(): void {
    clearInterval(this.timer);
    this.endWindow();
  }
}

function tally(map: Map<string, Tally>, key: string, max: number): Tally {
  let t = map.get(key);
  if (t) return t;
  // Beyond the bound, one shared tally: memory stays bounded whatever the number of addresses.
  if (map.size >= max) key = OVERFLOW;
  t = map.get(key);
  if (!t) map.set(key, (t = { stored: 0, counted: new Map() }));
  return t;
}

function count(t: Tally, code: string): void {
  t.counted.set(code, (t.counted.get(code) ?? 0) + 1);
}
