// Request framing rules against smuggling (RFC 9112 §6): one numeric Content-Length, never with
// Transfer-Encoding, and Transfer-Encoding only as the single coding "chunked".
import { describe, expect, it } from 'vitest';
import { framingRefusal } from '../../src/adapters/http/framing.js';

const verdict = (contentLength: string[], transferEncoding: string[] = []) => framingRefusal({ contentLength, transferEncoding })?.code ?? 'ok';

describe('framingRefusal', () => {
  it('accepts no length, one numeric Content-Length, or Transfer-Encoding: chunked alone', () => {
    expect(verdict([])).toBe('ok');
    expect(verdict(['0'])).toBe('ok');
    expect(verdict(['45'])).toBe('ok');
    expect(verdict([], ['chunked'])).toBe('ok');
    expect(verdict([], ['Chunked'])).toBe('ok'); // coding names are case-insensitive (RFC 9112 §7)
    expect(verdict([], [' chunked '])).toBe('ok');
  });

  it('refuses duplicate or conflicting Content-Length, and one that is not digits only', () => {
    for (const cl of [['2', '45'], ['2', '2'], ['2, 2'], ['2,45'], ['abc'], ['-1'], ['+2'], ['1e3'], ['0x10'], [''], ['2 2']]) expect(verdict(cl), JSON.stringify(cl)).toBe('bad_request');
  });

  it('refuses Content-Length together with Transfer-Encoding, whatever the values', () => {
    expect(verdict(['5'], ['chunked'])).toBe('bad_request');
    expect(verdict(['0'], ['identity'])).toBe('bad_request');
  });

  it('refuses every coding but chunked with 501, and chunked twice or empty with 400', () => {
    for (const te of [['xchunked'], ['chunkedx'], ['identity'], ['gzip'], ['chunked, gzip'], ['gzip, chunked'], ['chunked;q=1'], ['chunked', 'gzip']]) expect(verdict([], te), te.join(' | ')).toBe('not_implemented');
    for (const te of [['chunked, chunked'], ['chunked', 'chunked'], [''], ['chunked,'], [',chunked']]) expect(verdict([], te), te.join(' | ')).toBe('bad_request');
  });
});
