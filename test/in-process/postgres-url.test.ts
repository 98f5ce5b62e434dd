// DATABASE_URL as libpq writes it, including the multi-host form WHATWG URL rejects; a Postgres setting
// that is set but cannot work refuses start-up, naming the setting and never echoing the password.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { parsePostgresUrl } from '../../src/support/postgres-url.js';

const problems = (url: string): string => {
  try {
    loadConfig({ DATABASE_URL: url });
    return '';
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return String(error);
  }
};

describe('DATABASE_URL', () => {
  it('accepts the multi-host form with target_session_attrs, and connects with primary semantics', () => {
    const text = 'postgres://u:s3cret@h1:5432,h2:5433,[fd00::1]/db?target_session_attrs=read-write&sslmode=require';
    expect(loadConfig({ DATABASE_URL: text }).databaseUrl).toBe(text);
    const { url } = parsePostgresUrl(text);
    expect(url).toMatchObject({
      hosts: [{ host: 'h1', port: 5432 }, { host: 'h2', port: 5433 }, { host: 'fd00::1', port: 5432 }],
      target: 'primary',
      prepare: false,
    });
    // The driver gets the hosts and what it knows; the parameters interpreted here are gone.
    expect(url!.driverUrl).toBe('postgres://u:s3cret@h1:5432,h2:5433,[fd00::1]/db?sslmode=require');
  });

  it('uses named prepared statements only when the URL asks for them', () => {
    expect(parsePostgresUrl('postgres://h/db').url?.prepare).toBe(false);
    expect(parsePostgresUrl('postgres://h/db?prepare=true').url?.prepare).toBe(true);
    expect(parsePostgresUrl('postgres://h/db?target_session_attrs=any').url?.target).toBe('any');
  });

  it('refuses what is set but cannot work, naming the setting and never echoing the password', () => {
    const cases: [string, RegExp][] = [
      ['postgres://u:hunter2@h1,h2/db?target_session_attrs=standby', /DATABASE_URL target_session_attrs=standby cannot work/],
      ['postgres://u:hunter2@h1/db?target_session_attrs=read-only', /DATABASE_URL target_session_attrs=read-only cannot work/],
      ['postgres://u:hunter2@h1/db?target_session_attrs=sometimes', /DATABASE_URL target_session_attrs must be primary, read-write or any/],
      ['postgres://u:hunter2@h1,h2/db?target_session_attrs=any', /DATABASE_URL lists 2 hosts with target_session_attrs=any/],
      ['postgres://u:hunter2@h1,h2:port/db', /DATABASE_URL: host 2 of 2 is not host\[:port\]/],
      ['postgres://u:hunter2@h1/db?prepare=yes', /DATABASE_URL prepare must be true or false/],
      ['postgres://u:hunter2@h1/db?sslmode=verify-sometimes', /DATABASE_URL sslmode must be one of/],
      ['postgres://u:hunter2@[bad', /DATABASE_URL is not a valid URL/],
      ['mysql://u:hunter2@h1/db', /DATABASE_URL is not a valid URL/],
    ];
    for (const [url, message] of cases) {
      const text = problems(url);
      expect(text, url).toMatch(message);
      expect(text, url).not.toContain('hunter2');
    }
  });
});
