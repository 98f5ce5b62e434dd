// The middleware's path check in process: the length limits' boundaries, and the template matcher (no
// regular expression) answering exactly what the anchored regular expression of a template would.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { pathTooLong } from '../../packages/middleware/src/canonical-path.js';
import { RouteTable } from '../../packages/middleware/src/scope-map.js';

describe('pathTooLong', () => {
  const limits = { maxPathLength: 12, maxSegmentLength: 4 };

  it('counts the path only (not the query or fragment), segment by segment', () => {
    expect(pathTooLong('/abcd/efgh/i', limits)).toBeUndefined(); // 12 characters, segments of 4
    expect(pathTooLong('/abcd/efgh/ij', limits)).toMatch(/path is longer than 12/);
    expect(pathTooLong('/abcde', limits)).toMatch(/segment is longer than 4/);
    expect(pathTooLong(`/abcd?${'q'.repeat(100)}`, limits)).toBeUndefined();
    expect(pathTooLong(`/abcd#${'f'.repeat(100)}`, limits)).toBeUndefined();
    expect(pathTooLong('/a/b/c/d/e/f/', limits)).toMatch(/path is longer/);
    expect(pathTooLong('', limits)).toBeUndefined();
  });
});

describe('template segments', () => {
  /** The reading a template had when it was a regular expression: each parameter one or more non-"/" characters. */
  function regexFor(template: string): RegExp {
    const source = template
      .split(/(\{[a-z0-9]+\})/)
      .filter((part) => part !== '')
      .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    return new RegExp(`^${source}$`);
  }
  const literal = fc.string({ unit: fc.constantFrom('a', 'b', '-', '_', '~'), maxLength: 3 });
  const template = fc
    .array(fc.tuple(literal, fc.boolean()), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.map(([text, param], i) => `${text}${param ? `{p${i}}` : ''}`).join(''))
    .filter((t) => t !== '');
  const segment = fc.string({ unit: fc.constantFrom('a', 'b', '-', '_', '~'), minLength: 1, maxLength: 10 });

  it('property: a segment matches exactly when the regular expression reading matches', () => {
    fc.assert(
      fc.property(template, segment, (t, value) => {
        const table = new RouteTable([{ method: 'GET', path: `/${t}`, scopes: ['s'] }]);
        const resolved = table.resolvePath('GET', `/${value}`);
        expect(resolved.kind === 'rule').toBe(regexFor(t).test(value));
      }),
      { numRuns: 3000 },
    );
  });

  it('literals before parameters, case folded for doubt', () => {
    const table = new RouteTable([
      { method: 'GET', path: '/v/{a}-{b}-{c}.json', scopes: ['v'] },
      { method: 'GET', path: '/v/export', scopes: ['x'] },
    ]);
    expect(table.resolvePath('GET', '/v/1-2-3.json')).toMatchObject({ kind: 'rule', rule: { scopes: ['v'] } });
    expect(table.resolvePath('GET', '/v/1---3.json')).toMatchObject({ kind: 'rule' }); // a parameter may be a "-" itself
    expect(table.resolvePath('GET', '/v/-.json').kind).toBe('none');
    expect(table.resolvePath('GET', '/v/1-2-.json').kind).toBe('none');
    expect(table.resolvePath('GET', '/v/EXPORT').kind).toBe('ambiguous');
    // "ſ" (long s) and "K" (Kelvin sign) read as "s" and "k" in a case-insensitive Unicode comparison.
    const folded = new RouteTable([{ method: 'GET', path: '/s/{id}', scopes: ['a'] }, { method: 'GET', path: '/s/kiosk', scopes: ['b'] }]);
    expect(folded.resolvePath('GET', '/s/%E2%84%AAio%C5%BFk').kind).toBe('ambiguous');
  });
});
