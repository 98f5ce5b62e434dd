// describeNoPrimary: what start-up logs for each way of not reaching a writable primary. Each cause an
// operator acts on differently has its own words; an unknown one keeps its code.
import { describe, expect, it } from 'vitest';
import { describeNoPrimary } from '../../src/adapters/postgres/primary-probe.js';

describe('describeNoPrimary', () => {
  it.each([
    ['ECONNREFUSED', /^connection refused/],
    ['CONNECT_TIMEOUT', /^no answer within 2 s/],
    ['ETIMEDOUT', /^no answer within 2 s/],
    ['no answer within 2000 ms', /^no answer within 2 s/], // our own bound on the check
    ['28P01', /^authentication failed/],
    ['28000', /^authentication failed/],
    ['3D000', /^the database does not exist/],
    ['in recovery', /^standby only/],
    ['read-only', /^read-only/],
    ['ENOTFOUND', /^host name not resolved/],
    ['EHOSTUNREACH', /^host unreachable/],
    ['57P03', /^the server is starting up/],
    ['53300', /^too many connections/],
    ['XX000', /^connection failed \(XX000\)$/],
  ])('%s', (reason, words) => {
    expect(describeNoPrimary(reason, 2000)).toMatch(words);
  });

  it('names its causes apart: no two of refused, unreachable, authentication, missing database, standby read alike', () => {
    const texts = ['ECONNREFUSED', 'CONNECT_TIMEOUT', '28P01', '3D000', 'in recovery'].map((r) => describeNoPrimary(r, 1000));
    expect(new Set(texts).size).toBe(texts.length);
  });
});
