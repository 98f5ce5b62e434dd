// Reading a platform's 403 challenge for the agent client's scope step-up (packages/client/src/agent-client.ts).
import { describe, expect, it } from 'vitest';
import { insufficientScope } from '../../packages/client/src/agent-client.js';

const answer = (status: number, challenge?: string) => new Response(null, { status, headers: challenge ? { 'www-authenticate': challenge } : {} });

describe('insufficientScope', () => {
  it('reads the scopes of an insufficient_scope challenge, in any scheme and parameter order', () => {
    expect(insufficientScope(answer(403, 'Bearer realm="shop", error="insufficient_scope", scope="orders:write orders:read"'))).toEqual(['orders:write', 'orders:read']);
    expect(insufficientScope(answer(403, 'DPoP scope="a", error=insufficient_scope, algs="ES256"'))).toEqual(['a']);
    expect(insufficientScope(answer(403, 'Bearer error="insufficient_scope"'))).toEqual([]);
  });

  it('is undefined for other challenges or none', () => {
    expect(insufficientScope(answer(403))).toBeUndefined();
    expect(insufficientScope(answer(401, 'Bearer error="invalid_token"'))).toBeUndefined();
    expect(insufficientScope(answer(403, 'Bearer error="insufficient_scopes"'))).toBeUndefined();
    expect(insufficientScope(answer(403, 'Bearer error_description="insufficient_scope"'))).toBeUndefined();
  });

  it('drops what is not a scope token and bounds the list', () => {
    expect(insufficientScope(answer(403, 'Bearer error="insufficient_scope", scope="ok \u00e9vil bad\\\\x"'))).toEqual(['ok']);
    expect(insufficientScope(answer(403, `Bearer error="insufficient_scope", scope="${Array.from({ length: 100 }, (_, i) => `s${i}`).join(' ')}"`))).toHaveLength(64);
  });
});
