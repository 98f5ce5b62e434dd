// The check behind the service's Postgres pool (whole-results.ts): a result with an empty slot before its
// rows, or a statement's result among several with one, is incomplete; anything else is whole.
import { describe, expect, it } from 'vitest';
import { hasMissingRows } from '../../src/adapters/postgres/whole-results.js';

/** A result as postgres.js builds one: a row array carrying the statement's `command` and `count`. */
const result = (rows: unknown[], count = rows.length) => Object.assign(rows, { command: 'SELECT', count });

describe('hasMissingRows', () => {
  it('takes whole results, empty ones and what is not a result', () => {
    expect(hasMissingRows(result([]))).toBe(false);
    expect(hasMissingRows(result([{ a: 1 }, { a: 2 }]))).toBe(false);
    expect(hasMissingRows(result([[null, 1]]))).toBe(false); // .values(): a row whose first value is NULL
    expect(hasMissingRows(undefined)).toBe(false);
    expect(hasMissingRows({ 1: 'x', length: 2 })).toBe(false);
  });

  it('finds an empty slot before the rows, alone or in one statement of several', () => {
    const sparse: unknown[] = [];
    sparse[3] = { answer: 42 };
    expect(hasMissingRows(result(sparse, 1))).toBe(true);
    expect(hasMissingRows([result([{ a: 1 }]), result(sparse, 1)])).toBe(true);
    expect(hasMissingRows([result([{ a: 1 }]), result([])])).toBe(false);
  });
});
