// No heading appears twice in a document: a section written twice drifts into two versions that contradict
// each other (docs/revocation.md once held three sections twice, with different figures), and the second
// copy's anchor is unreachable.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function markdownFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.md'))
    .map((file) => path.join('docs', file));
  return ['README.md', 'bench/README.md', 'packages/middleware/README.md', 'packages/client/README.md', ...docs];
}

/** The headings of a Markdown text, outside fenced code blocks. */
function headings(text: string): string[] {
  const found: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced && /^#{1,6}\s/.test(line)) found.push(line.trim());
  }
  return found;
}

describe('documentation headings', () => {
  it('are unique within each document', () => {
    const duplicates: string[] = [];
    for (const file of markdownFiles()) {
      if (!existsSync(path.join(ROOT, file))) continue;
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      const seen = new Set<string>();
      for (const heading of headings(text)) {
        if (seen.has(heading)) duplicates.push(`${file}: ${heading}`);
        seen.add(heading);
      }
    }
    expect(duplicates).toEqual([]);
  });
});
