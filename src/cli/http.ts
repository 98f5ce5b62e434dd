// A thin fetch wrapper for the admin and public ports. It turns every failure into a CliError:
// error answers keep the service's `detail` and `error_code`; network trouble becomes exit 3.
// The Authorization header is the only place the admin token goes, so it can never reach a message.
import { ConnectionFailure, ServiceFailure } from './errors.js';

export interface Answer {
  status: number;
  contentType: string;
  retryAfter: string | null;
  text: string;
}

export interface HttpClientOptions {
  readonly base: URL;
  /** Names the port in messages: "admin API" or "public API". */
  readonly label: string;
  readonly timeoutMs: number;
  /** The bearer token, read at each request; no Authorization header when absent. */
  readonly token?: () => string;
}

export class HttpClient {
  private readonly base: URL;
  private readonly label: string;
  private readonly timeoutMs: number;
  private readonly token?: () => string;

  constructor({ base, label, timeoutMs, token }: HttpClientOptions) {
    this.base = base;
    this.label = label;
    this.timeoutMs = timeoutMs;
    this.token = token;
  }

  /** The base URL as shown in messages: origin and path only, never user:password. */
  private shown(): string {
    return `${this.base.origin}${this.base.pathname}`;
  }

  async send(method: string, path: string, body?: unknown, accept = 'application/json'): Promise<Answer> {
    const headers: Record<string, string> = { accept };
    if (this.token) headers.authorization = `Bearer ${this.token()}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const url = `${this.base.href.replace(/\/+$/, '')}${path}`;
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: 'manual',
      });
      text = await response.text();
    } catch (error) {
      throw this.connectionFailure(error);
    }
    const answer = {
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      retryAfter: response.headers.get('retry-after'),
      text,
    };
    if (response.status >= 300) throw failureOf(answer, `${method} ${path}`);
    return answer;
  }

  /** Sends and parses a JSON answer; 204 gives undefined. */
  async json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.send(method, path, body);
    if (answer.status === 204 || answer.text === '') return undefined as T;
    try {
      return JSON.parse(answer.text) as T;
    } catch {
      throw new ServiceFailure(answer.status, `the ${this.label} answered with something that is not JSON`, undefined, `${method} ${path}`);
    }
  }

  private connectionFailure(error: unknown): ConnectionFailure {
    const err = error as Error & { cause?: { code?: string; message?: string } };
    if (err?.name === 'TimeoutError' || err?.name === 'AbortError') {
      return new ConnectionFailure(`no answer from the ${this.label} at ${this.shown()} within ${this.timeoutMs / 1000} s`);
    }
    const reason = err?.cause?.code ?? err?.cause?.message ?? err?.message ?? 'unknown error';
    return new ConnectionFailure(`cannot connect to the ${this.label} at ${this.shown()} (${reason}); is the service running there?`);
  }
}

/** Builds the error of a non-2xx answer from the service's Error body ({detail, error_code}). */
function failureOf(answer: Answer, request: string): ServiceFailure {
  let detail: string | undefined;
  let code: string | undefined;
  try {
    const body = JSON.parse(answer.text) as { detail?: unknown; error_code?: unknown };
    if (typeof body?.detail === 'string') detail = body.detail;
    else if (body?.detail !== undefined) detail = JSON.stringify(body.detail);
    if (typeof body?.error_code === 'string') code = body.error_code;
  } catch {
    // not the service's Error body (a proxy page, say): show a short excerpt instead
  }
  detail ??= answer.text.trim().slice(0, 200) || 'no detail given';
  const retry = answer.retryAfter ? `; retry after ${answer.retryAfter} s` : '';
  return new ServiceFailure(answer.status, detail, code, `${request}${retry}`);
}
