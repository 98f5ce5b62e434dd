// The documentation stands alone: someone with only a clone of this repository finds everything the
// README and docs/ point to. No link leaves the repository through a relative path (such as the
// ../shared/ folder these documents were once written beside), every relative link names a file that
// exists (and, for #anchors into markdown, a heading that exists), and code comments cite the
// specification by its path in docs/.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SKIP = new Set(['node_modules', 'dist', '.git', 'data', '.ci', '.scratch', '.helpers', '.test-data']);

function walk(dir: string, keep: (file: string) => boolean, found: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, keep, found);
    else if (keep(full)) found.push(full);
  }
  return found;
}

const markdown = walk(ROOT, (f) => f.endsWith('.md'));
const rel = (file: string) => path.relative(ROOT, file);

/** Inline links and images, `[text](target "title")`, outside fenced code blocks. */
function links(text: string): string[] {
  const prose = text.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const prose = text.replace(/^```[\s\S]*?^```/gm, '');
  for (const m of prose.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]!
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('documentation links', () => {
  it('finds the README and the docs', () => {
    const names = markdown.map(rel);
    for (const doc of ['README.md', 'docs/contract.md', 'docs/decisions.md', 'docs/admin-api.md', 'docs/http-front-end.md']) {
      expect(names).toContain(doc);
    }
  });

  it('no markdown file points outside the repository through ../shared or a path above the root', () => {
    for (const file of markdown) {
      const text = readFileSync(file, 'utf8');
      expect(text, rel(file)).not.toMatch(/\.\.\/shared\b|\/work\/shared\b/);
      for (const target of links(text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
        const resolved = path.resolve(path.dirname(file), decodeURI(target.split('#')[0]!));
        expect(resolved.startsWith(ROOT + path.sep) || resolved === ROOT, `${rel(file)}: ${target} leaves the repository`).toBe(true);
      }
    }
  });

  it('every relative link resolves to a file or folder in the repository, anchors to a heading', () => {
    const broken: string[] = [];
    for (const file of markdown) {
      for (const target of links(readFileSync(file, 'utf8'))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
        const [pathPart, anchor] = target.split('#') as [string, string | undefined];
        const resolved = pathPart ? path.resolve(path.dirname(file), decodeURI(pathPart)) : file;
        if (!existsSync(resolved)) {
          broken.push(`${rel(file)}: ${target}`);
          continue;
        }
        if (anchor && resolved.endsWith('.md') && statSync(resolved).isFile() && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
          broken.push(`${rel(file)}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('the README links the contract, the decisions and the admin API in docs/', () => {
    const readme = links(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
    for (const doc of ['docs/contract.md', 'docs/decisions.md', 'docs/admin-api.md']) expect(readme).toContain(doc);
  });

  it('code comments cite the specification by its path in docs/', () => {
    // This file quotes the bad forms on purpose.
    const code = walk(ROOT, (f) => (/\.(ts|mts|js|mjs|ya?ml|env)$/.test(f) || path.basename(f) === 'Dockerfile') && f !== import.meta.filename);
    const bare: string[] = [];
    for (const file of code) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/(^|[^\w/.-])((?:[\w.-]+\/)*)(decisions|admin-api|contract-v1|contract)\.md\b/g)) {
        if (m[2] !== 'docs/') bare.push(`${rel(file)}: ${m[2]}${m[3]}.md`);
      }
    }
    expect(bare).toEqual([]);
  });

  it('the link checks catch a broken link, a missing anchor and a link into ../shared', () => {
    expect(links('see [x](../shared/spec/decisions.md) and [y](docs/a.md#b) `[z](no)`\n```\n[w](skip.md)\n```')).toEqual([
      '../shared/spec/decisions.md',
      'docs/a.md#b',
      'no',
    ]);
    expect([...anchors('# The issued JWT\n## Signing keys and the JWKS\n## `code` & more\n## Same\n## Same')]).toEqual([
      'the-issued-jwt',
      'signing-keys-and-the-jwks',
      'code--more',
      'same',
      'same-1',
    ]);
  });
});
