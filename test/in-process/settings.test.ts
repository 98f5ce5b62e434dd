// The settings table is the one declaration: docs/configuration.md's table is its rendering, and the loader reads it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { SETTINGS, defaultBaseUrl, settingsTable } from '../../src/config/settings.js';

describe('settings table', () => {
  it('docs/configuration.md shows the current table (regenerate with npm run build && npm run docs:settings)', () => {
    const readme = readFileSync(path.resolve(import.meta.dirname, '../../docs/configuration.md'), 'utf8');
    const between = /<!-- settings:start[^>]*-->\n([\s\S]*?)\n<!-- settings:end -->/.exec(readme);
    expect(between?.[1]).toBe(settingsTable());
  });

  it('declares each variable once, and every Config field comes from one setting', () => {
    const names = SETTINGS.map((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
    const keys = SETTINGS.flatMap((s) => (s.key ? [s.key] : []));
    expect(new Set(keys).size).toBe(keys.length);
    const config = loadConfig({}) as unknown as Record<string, unknown>;
    const fields = Object.entries(config).flatMap(([k, v]) => (k === 'audit' ? Object.keys(v as object).map((inner) => `audit.${inner}`) : [k]));
    expect(fields.sort()).toEqual([...keys].sort());
  });

  it('applies each declared default and bound', () => {
    const config = loadConfig({}) as unknown as Record<string, Record<string, unknown>>;
    for (const s of SETTINGS) {
      if (!s.key) continue;
      const [outer, inner] = s.key.split('.');
      const value = inner ? config[outer][inner] : config[outer];
      if ((s.type === 'int' || s.type === 'bool' || s.type === 'oneOf') && typeof s.default !== 'function') expect(value, s.env).toBe(s.default);
      if (s.type === 'int') {
        expect(() => loadConfig({ [s.env]: String(s.max + 1) }), s.env).toThrow(`${s.env} must be between ${s.min} and ${s.max}`);
        expect(() => loadConfig({ [s.env]: String(s.min - 1) }), s.env).toThrow(ConfigError);
      }
    }
  });

  it('reports every bad value at once, never echoing URLs or keys', () => {
    try {
      loadConfig({ PORT: 'eighty', DATABASE_URL: 'postgres://u:hunter2@[bad', KEY_ENCRYPTION_KEY: 'c2hvcnQ=', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (error) {
      const text = String(error);
      for (const name of ['PORT', 'DATABASE_URL', 'KEY_ENCRYPTION_KEY', 'LOG_LEVEL']) expect(text).toContain(name);
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('c2hvcnQ');
    }
  });

  it('builds the default base URL from HOST and PORT, bracketing IPv6', () => {
    expect(defaultBaseUrl('0.0.0.0', 8080)).toBe('http://localhost:8080');
    expect(defaultBaseUrl('::', 8080)).toBe('http://localhost:8080');
    expect(defaultBaseUrl('::1', 9000)).toBe('http://[::1]:9000');
    expect(defaultBaseUrl('127.0.0.1', 9000)).toBe('http://127.0.0.1:9000');
    expect(loadConfig({ HOST: '::1', PORT: '9000' })).toMatchObject({ publicBaseUrl: 'http://[::1]:9000', issuer: 'http://[::1]:9000' });
    expect(new URL(loadConfig({ HOST: 'fe80::1', PORT: '1' }).publicBaseUrl).port).toBe('1');
  });
});
