// DATABASE_URL in libpq's URI form, including its multi-host form
// (postgres://user:pass@h1:5432,h2:5432/db?target_session_attrs=primary), which WHATWG `new URL` rejects.
// Read by the configuration (to refuse a URL that cannot work, naming the setting) and by the Postgres
// adapter (to connect with what it says). Never echoes the URL: it may carry a password.

export type SessionTarget = 'primary' | 'any';

export interface PostgresUrl {
  hosts: { host: string; port: number }[];
  /**
   * Which servers a connection may stay on. `primary` (also what libpq's `read-write` asks for here):
   * a server in recovery (a hot standby) is detected at connect and left for the next host. `any`: no check
   * (one direct server or a pooler that is known to point at the primary).
   */
  target: SessionTarget;
  /**
   * Named prepared statements: only with `prepare=true`, for a direct connection. A transaction-mode
   * pooler hands each transaction another server connection, where a statement prepared on the first is
   * unknown (SQLSTATE 26000).
   */
  prepare: boolean;
  /** The URL without the parameters this file interprets, for the driver (it rejects target_session_attrs=any). */
  driverUrl: string;
}

const REFUSED_TARGETS: Record<string, string> = {
  'read-only': 'the service writes, a read-only server refuses every write',
  standby: 'the service writes, a standby refuses every write',
  'prefer-standby': 'the service writes, a standby refuses every write',
};

/** Parses `text`; `problems` name the setting (`name`) and what is wrong, never the value itself. */
export function parsePostgresUrl(text: string, name = 'DATABASE_URL'): { url?: PostgresUrl; problems: string[] } {
  const problems: string[] = [];
  const m = /^(postgres(?:ql)?):\/\/([^/?#]*)([^#]*)$/.exec(text.trim());
  if (!m) return { problems: [`${name} is not a valid URL (expected postgres://user:password@host:port[,host2:port2]/database)`] };
  const [, scheme, authority, rest] = m;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const hosts: PostgresUrl['hosts'] = [];
  const entries = hostList.split(',');
  entries.forEach((entry, i) => {
    try {
      const u = new URL(`postgres://${entry}`);
      if (!u.hostname || u.pathname || u.search) throw new Error('not host:port');
      hosts.push({ host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port ? Number(u.port) : 5432 });
    } catch {
      problems.push(
        entries.length > 1
          ? `${name}: host ${i + 1} of ${entries.length} is not host[:port] (hosts are separated by commas)`
          : `${name} is not a valid URL`,
      );
    }
  });
  let params: URLSearchParams;
  let rebuilt: URL;
  try {
    // The first host stands for the list: path, credentials and parameters are what is checked here.
    rebuilt = new URL(`${scheme}://${userinfo}${entries[0] || 'localhost'}${rest}`);
    params = rebuilt.searchParams;
  } catch {
    return { problems: [...problems, `${name} is not a valid URL`] };
  }
  if (problems.length > 0) return { problems };

  const tsa = params.get('target_session_attrs');
  let target: SessionTarget = 'primary';
  if (tsa !== null) {
    if (tsa === 'primary' || tsa === 'read-write') target = 'primary';
    else if (tsa === 'any') target = 'any';
    else if (REFUSED_TARGETS[tsa]) problems.push(`${name} target_session_attrs=${tsa} cannot work: ${REFUSED_TARGETS[tsa]} (use primary)`);
    else problems.push(`${name} target_session_attrs must be primary, read-write or any (got "${tsa.slice(0, 32)}")`);
  }
  if (target === 'any' && hosts.length > 1) {
    problems.push(`${name} lists ${hosts.length} hosts with target_session_attrs=any: writes could land on a standby (use primary)`);
  }
  const prepareText = params.get('prepare');
  let prepare = false;
  if (prepareText !== null) {
    if (prepareText === 'true') prepare = true;
    else if (prepareText !== 'false') problems.push(`${name} prepare must be true or false (got "${prepareText.slice(0, 32)}")`);
  }
  const sslmode = params.get('sslmode');
  const SSLMODES = ['disable', 'allow', 'prefer', 'require', 'verify-full'];
  if (sslmode !== null && !SSLMODES.includes(sslmode)) {
    problems.push(`${name} sslmode must be one of ${SSLMODES.join(', ')} (got "${sslmode.slice(0, 32)}")`);
  }
  if (problems.length > 0) return { problems };

  // The driver reads the hosts itself (it understands the list); it gets the parameters it knows.
  const driverParams = new URLSearchParams(params);
  driverParams.delete('target_session_attrs');
  driverParams.delete('prepare');
  const query = driverParams.toString();
  const pathPart = rest.replace(/\?.*$/, '');
  const driverUrl = `${scheme}://${userinfo}${hostList}${pathPart}${query ? `?${query}` : ''}`;
  return { url: { hosts, target, prepare, driverUrl }, problems };
}
