// The 405 Allow header, shared by the server's router and the admin routes' guarded 405s.
import { describe, expect, it } from 'vitest';
import { allowHeader, routesByPath, type Route } from '../../src/adapters/http/types.js';

const route = (method: Route['method'], path: string): Pick<Route, 'method' | 'path' | 'name'> => ({ method, path, name: path });

describe('allowHeader / routesByPath', () => {
  it('lists each method once, in declaration order, GET bringing HEAD', () => {
    expect(allowHeader([route('GET', '/a'), route('POST', '/a'), route('GET', '/a')])).toBe('GET, HEAD, POST');
    expect(allowHeader([route('PUT', '/a'), route('DELETE', '/a')])).toBe('PUT, DELETE');
  });

  it('never offers ANY as a method', () => {
    expect(allowHeader([route('ANY', '/x'), route('PATCH', '/x')])).toBe('PATCH');
  });

  it('groups routes by path pattern, keeping their order', () => {
    const groups = routesByPath([route('GET', '/a'), route('GET', '/b'), route('POST', '/a')]);
    expect([...groups.keys()]).toEqual(['/a', '/b']);
    expect(groups.get('/a')!.map((r) => r.method)).toEqual(['GET', 'POST']);
  });
});
