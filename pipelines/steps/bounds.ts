/**
 * The bounds of what a pipeline's state holds, declared where the pipeline is built, so that every
 * cache key is checked at synth: a cached step's key hashes the JSON of its inputs with
 * `States.Hash`, which refuses more than 10,000 characters and fails the run where no Catch can
 * take it. A step's inputs are a Parameters template of literals, JSONPaths and intrinsics; each
 * JSONPath must lie under a declared path: the config (bounded by its schema: every string at its
 * worst escaping, every array full, see maxJsonChars) or a value the pipeline's own code makes,
 * declared with its bound and why it holds. A cached step whose inputs could pass the limit, or
 * that reads an undeclared path, fails the synth naming the step and the path.
 */
import type { z } from 'zod';
import { ConfigError } from '#shared/errors.ts';
import { maxJsonChars, maxJsonCharsAt } from '#shared/schema.ts';

/** What States.Hash takes at most. */
export const MAX_HASH_INPUT_CHARS = 10_000;
/** A number's longest JSON text (`-1.7976931348623157e+308`). */
const NUMBER_CHARS = 24;
/** A context-object value (`$$.Execution.Name`, ids, times): names and ids of at most 256 characters. */
const CONTEXT_CHARS = 256;

interface Bound {
  readonly chars?: number;
  readonly schema?: z.ZodType;
  readonly why: string;
}

export class StateBounds {
  private readonly bounds = new Map<string, Bound>();
  /** Each cached step's key input bound, in characters, as checked (for tests and reports). */
  readonly keyChars = new Map<string, number>();

  /** Values at `path` (and under it) are valid outputs of `schema`: their bound comes from it, per field. */
  schema(path: string, schema: z.ZodType, why: string): this {
    maxJsonChars(schema); // refuses an unbounded schema now, naming the field
    this.bounds.set(checkPath(path), { schema, why });
    return this;
  }

  /** Values at `path` (and under it) have at most `chars` characters of JSON, because `why`. */
  chars(path: string, chars: number, why: string): this {
    if (!Number.isInteger(chars) || chars < 1) throw new ConfigError('chars', chars, 'must be a positive integer');
    if (why.length < 20) throw new ConfigError('why', why, 'must say why the bound holds (20 characters at least)');
    this.bounds.set(checkPath(path), { chars, why });
    return this;
  }

  /** The bound of a JSONPath's value (a filter or index yields sub-values, bounded by their container's). */
  pathChars(path: string): number {
    if (path.startsWith('$$.')) return CONTEXT_CHARS;
    const segments = segmentsOf(path);
    for (let n = segments.length; n >= 1; n--) {
      const bound = this.bounds.get(`$.${segments.slice(0, n).join('.')}`);
      if (!bound) continue;
      if (bound.chars !== undefined) return bound.chars;
      const rest = segments.slice(n);
      // A filter or an index keeps to the schema's sub-values; anything else is bounded by the whole.
      return (rest.every((s) => /^\w+$/.test(s)) ? maxJsonCharsAt(bound.schema!, rest) : undefined) ?? maxJsonChars(bound.schema!);
    }
    throw new ConfigError(path, path, 'has no declared bound: declare the path, or a path above it, with StateBounds.chars or .schema');
  }

  /** The bound of a Parameters template's evaluated JSON. */
  templateChars(template: unknown): number {
    if (typeof template === 'string' || typeof template === 'number' || typeof template === 'boolean' || template === null)
      return JSON.stringify(template).length;
    if (Array.isArray(template)) return 2 + template.reduce<number>((n, v) => n + this.templateChars(v) + 1, 0);
    const entries = Object.entries(template as Record<string, unknown>);
    return (
      2 +
      entries.reduce((n, [key, value]) => {
        const dynamic = key.endsWith('.$');
        const name = dynamic ? key.slice(0, -2) : key;
        return n + JSON.stringify(name).length + 1 + (dynamic ? this.expressionChars(String(value)) : this.templateChars(value)) + 1;
      }, 0)
    );
  }

  /** A JSONPath or an intrinsic function's result. */
  expressionChars(expression: string): number {
    const e = expression.trim();
    if (e.startsWith('$')) return this.pathChars(e);
    const call = /^States\.(\w+)\((.*)\)$/s.exec(e);
    if (!call) throw new ConfigError('expression', e, 'is neither a JSONPath nor an intrinsic function');
    const [, name, body] = call;
    if (name === 'MathAdd' || name === 'MathRandom' || name === 'ArrayLength') return NUMBER_CHARS;
    if (name === 'UUID') return 38;
    if (name === 'Hash') return 130;
    const args = splitArguments(body!).map((a) => (a.startsWith("'") ? a.length - 2 : /^-?\d/.test(a) ? a.length : this.expressionChars(a)));
    // A string made of the arguments' text; written as JSON, every character may take two.
    return 2 + 2 * args.reduce((n, a) => n + a, 0);
  }

  /** Checks a cached step's key input (step id, code version, the inputs' JSON) against States.Hash's limit. */
  checkCacheKey(stepId: string, version: string, inputs: Record<string, unknown>): number {
    let chars: number;
    try {
      chars = stepId.length + version.length + 2 + this.templateChars(inputs);
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(`${stepId}: cache key input ${error.field}`, error.value, error.reason);
      throw error;
    }
    if (chars > MAX_HASH_INPUT_CHARS) {
      throw new ConfigError(
        `${stepId}: cache key`,
        chars,
        `its input may reach ${chars} characters, over the ${MAX_HASH_INPUT_CHARS} States.Hash takes: key large inputs by the content hash of an S3 document`,
      );
    }
    this.keyChars.set(stepId, chars);
    return chars;
  }
}

/** A declared path, normalized as pathChars looks it up: names and bracket segments joined by dots. */
function checkPath(path: string): string {
  if (!/^\$(\.\w+|\[[^\]]*\])+$/.test(path)) throw new ConfigError('path', path, 'must be a JSONPath, e.g. "$.config" or "$.item.seed"');
  return `$.${segmentsOf(path).join('.')}`;
}

/** `$.a.b[0].c[?(@.ok == true)]` -> ['a', 'b', '[0]', 'c', '[?(@.ok == true)]']. */
function segmentsOf(path: string): string[] {
  const segments: string[] = [];
  const re = /\.(\w+)|(\[[^\]]*\])/g;
  for (const m of path.slice(1).matchAll(re)) segments.push(m[1] ?? m[2]!);
  return segments;
}

/** An intrinsic's arguments at depth 0: quoted strings (with \' escapes), paths, nested calls. */
function splitArguments(body: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let current = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (quoted) {
      current += c;
      if (c === '\\') current += body[++i] ?? '';
      else if (c === "'") quoted = false;
      continue;
    }
    if (c === "'") quoted = true;
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === ',' && depth === 0) {
      out.push(current.trim());
      current = '';
      continue;
    }
    current += c;
  }
  if (current.trim()) out.push(current.trim());
  return out;
}
