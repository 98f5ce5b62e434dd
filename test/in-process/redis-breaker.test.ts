// The Redis breaker's states, on a stand-in client: opens once on ioredis's socket-timeout drop (however
// many follow while a half-open Redis swallows every reconnect), ignores other errors, stays open while
// PING fails, closes once when PING answers (tried on 'ready' and on its interval).
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isSilence, RedisBreaker } from '../../src/adapters/cache/redis-breaker.js';
import type { RedisClient } from '../../src/adapters/cache/redis.js';
import { waitFor } from '../../kit/wait.js';

const silence = () => new Error("Socket timeout. Expecting data, but didn't receive any in 1000ms.");

class StandIn extends EventEmitter {
  answering = false;
  pings = 0;
  async ping(): Promise<string> {
    this.pings++;
    if (!this.answering) throw new Error("Stream isn't writeable and enableOfflineQueue options is false");
    return 'PONG';
  }
}

function breakerOn(client: StandIn, checkEveryMs = 10_000) {
  const changes: [boolean, string][] = [];
  const breaker = new RedisBreaker({ client: client as unknown as RedisClient, connection: 'commands', checkEveryMs, onChange: (open, why) => changes.push([open, why]) });
  return { breaker, changes };
}

describe('RedisBreaker', () => {
  it('knows ioredis socket-timeout errors from others', () => {
    expect(isSilence(silence())).toBe(true);
    expect(isSilence(new Error('Command timed out'))).toBe(false);
    expect(isSilence(new Error('connect ECONNREFUSED 127.0.0.1:1'))).toBe(false);
  });

  it('opens once on silence, not on other errors', () => {
    const client = new StandIn();
    const { breaker, changes } = breakerOn(client);
    client.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:1'));
    expect(breaker.isOpen).toBe(false);
    client.emit('error', silence());
    client.emit('error', silence());
    expect(breaker.isOpen).toBe(true);
    expect(changes).toEqual([[true, silence().message]]);
    breaker.stop();
  });

  it('stays open while PING fails and closes once when it answers', async () => {
    const client = new StandIn();
    const { breaker, changes } = breakerOn(client, 20);
    client.emit('error', silence());
    await waitFor('a few failed PINGs', () => client.pings >= 3, 5000, 5);
    expect(breaker.isOpen).toBe(true);
    client.answering = true;
    await waitFor('the breaker to close', () => !breaker.isOpen, 5000, 5);
    const pings = client.pings;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(client.pings).toBe(pings); // no PING once closed
    expect(changes.map(([open]) => open)).toEqual([true, false]);
    breaker.stop();
  });

  it("checks at once on 'ready', without waiting for its interval", async () => {
    const client = new StandIn();
    const { breaker } = breakerOn(client, 60_000);
    client.emit('error', silence());
    client.answering = true;
    client.emit('ready');
    await waitFor('the breaker to close', () => !breaker.isOpen, 1000, 5);
    breaker.stop();
  });

  it("'ready' while closed sends no PING", () => {
    const client = new StandIn();
    breakerOn(client).breaker.stop();
    client.emit('ready');
    expect(client.pings).toBe(0);
  });
});
