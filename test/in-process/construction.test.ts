// "Constructors take one typed object of ports; no field is assigned after construction" (docs/architecture.md):
// a dependency handed over later (an attach/register method storing its argument in a field) leaves a
// window in which the object runs without it, and hides the wiring from the composition root. This scans
// every class in src/ for a method other than the constructor that stores one of its own parameters in a
// field of `this`, and for a method named attach*/register* at all (one that declares a series reading its
// argument keeps no field, but hands a dependency over all the same). State a method computes (counters,
// caches, timestamps) is not a dependency and passes.
// It also scans every class in src/ and workers/ for a constructor taking more than one parameter (or a
// rest parameter): positional arguments name nothing at the call site, and a port added beside an options
// object stays outside it.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const WORKERS = path.resolve(import.meta.dirname, '../../workers');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

const ASSIGNMENTS = new Set([ts.SyntaxKind.EqualsToken, ts.SyntaxKind.QuestionQuestionEqualsToken, ts.SyntaxKind.BarBarEqualsToken]);

/** `Class.method: this.field = parameter` for every such assignment in `file`. */
export function lateAssignments(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visitClass = (cls: ts.ClassLikeDeclaration) => {
    for (const member of cls.members) {
      if (ts.isConstructorDeclaration(member)) continue;
      const fn = ts.isMethodDeclaration(member) || ts.isSetAccessorDeclaration(member) ? member
        : ts.isPropertyDeclaration(member) && member.initializer && (ts.isArrowFunction(member.initializer) || ts.isFunctionExpression(member.initializer)) ? member.initializer
        : undefined;
      if (!fn?.body) continue;
      // A method named for handing a dependency over is the pattern even when it keeps no field (it may
      // declare a series reading its argument, or pass it on).
      const name = member.name?.getText(source) ?? '';
      if (/^(attach|register)[A-Z]/.test(name)) found.push(`${cls.name?.text ?? '(class)'}.${name}: a dependency handed over after construction`);
      // Event subscriptions (`onData(handler)`, the uWS shape) register a callback of the caller's, not a dependency.
      if (/^on[A-Z]/.test(name)) continue;
      // A string, number or boolean a method keeps is state (a status line), not a dependency.
      const PRIMITIVE = new Set([ts.SyntaxKind.StringKeyword, ts.SyntaxKind.NumberKeyword, ts.SyntaxKind.BooleanKeyword]);
      const params = new Set(fn.parameters.flatMap((p) => (ts.isIdentifier(p.name) && !(p.type && PRIMITIVE.has(p.type.kind)) ? [p.name.text] : [])));
      const walk = (node: ts.Node): void => {
        if (ts.isBinaryExpression(node) && ASSIGNMENTS.has(node.operatorToken.kind)) {
          const { left, right } = node;
          if (ts.isPropertyAccessExpression(left) && left.expression.kind === ts.SyntaxKind.ThisKeyword && ts.isIdentifier(right) && params.has(right.text)) {
            found.push(`${cls.name?.text ?? '(class)'}.${member.name?.getText(source)}: this.${left.name.text} = ${right.text}`);
          }
        }
        // A nested class or function has its own `this` and parameters.
        if (ts.isClassLike(node) || ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node)) return;
        ts.forEachChild(node, walk);
      };
      ts.forEachChild(fn.body, walk);
    }
  };
  const visit = (node: ts.Node): void => {
    if (ts.isClassLike(node)) visitClass(node);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('no field is assigned after construction', () => {
  it('finds the pattern it looks for (a setter of a dependency)', () => {
    const text = 'class A { private cache?: object; attach(cache: object) { this.cache = cache; } count(n: number) { this.total = n + 1; } register = (source: () => number) => { this.source ??= source; } registerGauges(read: () => number) { gauge(read); } }';
    expect(lateAssignments('a.ts', text)).toEqual([
      'A.attach: this.cache = cache',
      'A.register: this.source = source',
      'A.registerGauges: a dependency handed over after construction',
    ]);
  });

  it('in src/: no method stores its parameter in a field', () => {
    const found = sourceFiles(SRC).flatMap((file) => lateAssignments(file, readFileSync(file, 'utf8')).map((hit) => `${path.relative(SRC, file)}: ${hit}`));
    expect(found).toEqual([]);
  }, 30_000); // parses every file of src/: seconds on a loaded machine
});

/** `Class(n parameters)` for every constructor in `file` that takes more than one parameter or a rest parameter. */
export function positionalConstructors(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    // Parameter properties (`private readonly x: X`) are parameters like any other.
    if (ts.isConstructorDeclaration(node) && (node.parameters.length > 1 || node.parameters.some((p) => p.dotDotDotToken))) {
      const cls = node.parent;
      found.push(`${cls.name?.text ?? '(class)'}(${node.parameters.length} parameter${node.parameters.length === 1 ? '' : 's'})`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Errors are thrown values, not services wired with ports: like Error(message, { cause }) they take
 * their code, detail and cause positionally at the throw site, hundreds of times over.
 */
const POSITIONAL_ERRORS = new Set([
  'ServiceError', 'CredentialRefusal', 'StoreUnavailableError', 'WriteDeadlineError', // core/errors.ts
  'HttpError', 'FormError', 'OAuthError', 'PortInUseError', // adapters/http
  'UsageError', 'ServiceFailure', // cli/errors.ts
]);

describe('constructors take one typed object', () => {
  it('finds the pattern it looks for (positional parameters, parameter properties included)', () => {
    const text = 'class A { constructor(private readonly a: number, b: string) {} } class B { constructor(options: BOptions) {} } class C { constructor() {} } const D = class { constructor(...parts: string[]) {} }; class E { constructor(readonly x: X, y = 2) {} }';
    expect(positionalConstructors('a.ts', text)).toEqual(['A(2 parameters)', '(class)(1 parameter)', 'E(2 parameters)']);
  });

  it('in src/ and workers/: no constructor takes more than one parameter (errors aside)', () => {
    const found = [SRC, WORKERS].flatMap((root) => sourceFiles(root).flatMap((file) => positionalConstructors(file, readFileSync(file, 'utf8')).map((hit) => ({ file: path.relative(root, file), hit }))));
    const className = (hit: string) => hit.slice(0, hit.indexOf('('));
    expect(found.filter(({ hit }) => !POSITIONAL_ERRORS.has(className(hit))).map(({ file, hit }) => `${file}: ${hit}`)).toEqual([]);
    // Every name the list lets through is still there: a class converted leaves the list with it.
    expect([...POSITIONAL_ERRORS].filter((name) => !found.some(({ hit }) => className(hit) === name))).toEqual([]);
  }, 30_000); // parses every file of src/ and workers/: seconds on a loaded machine
});
