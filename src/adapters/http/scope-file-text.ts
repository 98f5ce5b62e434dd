// The scope file's text. It must read the same in YAML 1.2 readers (the `yaml` package, Go, Rust) and
// in YAML 1.1 readers (PyYAML, SnakeYAML, Ruby's Psych), which resolve plain scalars such as `yes`,
// `on`, `1:20`, `2001-12-14` or `1_000` to booleans, numbers and dates, and which also end a line
// (and so a comment) at NEL, LS and PS.
import { stringify } from 'yaml';

/**
 * Characters that must never appear raw in the file: line breaks beyond CR/LF in either YAML version
 * (NEL U+0085, LS U+2028, PS U+2029), C1 controls and DEL (PyYAML refuses them even in comments), the
 * byte-order mark and the non-characters U+FFFE/U+FFFF. The C0 controls are escaped by `yaml` itself.
 */
const UNSAFE = /[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g;
const escapeUnsafe = (text: string): string =>
  text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `# ...` header plus the document. Every string value is double-quoted, so no reader resolves it to anything else. */
export function renderScopeFile(platformName: string, document: object): string {
  // JSON string syntax escapes CR, LF and the other C0 controls; escapeUnsafe the rest.
  const name = escapeUnsafe(JSON.stringify(platformName));
  // Keys are fixed ASCII words and every string value is double-quoted (lineWidth 0: never folded), so
  // the unsafe characters can only sit inside double quotes, where `\uXXXX` means the same in 1.1 and 1.2.
  const body = stringify(document, { defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN', lineWidth: 0 });
  return `# SvcScopesYaml v1 for platform ${name}. Place in the project root.\n${escapeUnsafe(body)}`;
}
