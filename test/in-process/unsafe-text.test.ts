// Names that do not show as themselves: the admin API's name pattern refuses them, the CLI escapes them.
import { describe, expect, it } from 'vitest';
import { escapeControl, terminalSafe } from '../../src/cli/output.js';
import { PRINTABLE_NAME } from '../../src/adapters/http/schemas/admin.js';
import { UNSAFE_NAME_CHARACTERS } from '../../src/support/unsafe-text.js';
import { claimedText, UNSAFE_TEXT_CHARACTERS } from '../../src/core/audit/events.js';

const REFUSED = [0x00, 0x09, 0x0a, 0x1b, 0x1f, 0x7f, 0x85, 0x9b, 0x9f, 0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff];
const ALLOWED = ['café ☕ – Ünïcode', 'שלום עולם', 'مرحبا', '日本語', 'a\u00a0b', 'emoji 👩‍💻'.replace('\u200d', '')];

describe('names that do not show as themselves', () => {
  const pattern = new RegExp(PRINTABLE_NAME, 'u');

  it('are refused by the admin API name pattern, one character at a time', () => {
    for (const code of REFUSED) expect([code.toString(16), pattern.test(`a${String.fromCharCode(code)}b`)]).toEqual([code.toString(16), false]);
    for (const name of ALLOWED) expect([name, pattern.test(name)]).toEqual([name, true]);
  });

  it('are escaped by the CLI, JSON style; a block keeps its own line breaks and tabs', () => {
    for (const code of REFUSED) expect(escapeControl(`a${String.fromCharCode(code)}b`)).not.toMatch(new RegExp(`[${String.fromCharCode(code)}]`, 'u'));
    expect(escapeControl('invoice-\u202eexe.nimda')).toBe('invoice-\\u202eexe.nimda');
    expect(escapeControl('x\u200by\u2028z\ufeff')).toBe('x\\u200by\\u2028z\\ufeff');
    expect(terminalSafe('row 1\tA\nrow 2\u202e\n')).toBe('row 1\tA\nrow 2\\u202e\n');
    const json = terminalSafe(JSON.stringify({ name: 'a\u202eb\u2029c' }));
    expect(JSON.parse(json)).toEqual({ name: 'a\u202eb\u2029c' });
    for (const name of ALLOWED) expect(escapeControl(name)).toBe(name);
  });
});

describe('claimed values in audit events (core/audit/events.ts claimedText)', () => {
  it('uses the same class as support/unsafe-text.ts (the core may not import it)', () => {
    expect(UNSAFE_TEXT_CHARACTERS).toBe(UNSAFE_NAME_CHARACTERS);
  });

  it('replaces each character that would not show as itself, and each lone surrogate, by U+FFFD', () => {
    for (const code of REFUSED) expect(claimedText(`a${String.fromCharCode(code)}b`, 10)).toBe('a\uFFFDb');
    expect(claimedText('a\uD800b\uDC00c', 10)).toBe('a\uFFFDb\uFFFDc');
    for (const name of [...ALLOWED, 'emoji 👩‍💻']) expect(claimedText(name, 100)).toBe(name.replace('\u200d', '\uFFFD'));
  });

  it('cuts to the bound with a last "…", a split surrogate pair included; empty is absent', () => {
    expect(claimedText('x'.repeat(300), 256)).toBe(`${'x'.repeat(255)}…`);
    expect(claimedText('x'.repeat(256), 256)).toBe('x'.repeat(256));
    expect(claimedText(`${'x'.repeat(254)}😀`, 256)).toBe(`${'x'.repeat(254)}😀`);
    expect(claimedText(`${'x'.repeat(254)}😀y`, 256)).toBe(`${'x'.repeat(254)}\uFFFD…`);
    expect(claimedText('', 10)).toBeUndefined();
    expect(claimedText(undefined, 10)).toBeUndefined();
  });
});
