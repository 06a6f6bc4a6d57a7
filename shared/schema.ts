import { toJSONSchema, type z } from 'zod';
import { ConfigError } from './errors.ts';

/** Parse with a zod schema; on failure throw ConfigError naming the first bad field and its value. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, root = ''): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = [root, ...issue.path.map(String)].filter(Boolean).join('.') || '(root)';
  throw new ConfigError(field, valueAt(input, issue.path), issue.message);
}

export function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let at: unknown = input;
  for (const key of path) at = at && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[key] : undefined;
  return at;
}

/** The longest s3:// URI a config takes: a bucket name (63) and a key (S3 allows 1,024 bytes) fit. */
export const MAX_S3_URI_CHARS = 1100;

/** A JSON schema node, as z.toJSONSchema writes one (the parts maxJsonChars reads). */
interface JsonSchemaNode {
  type?: string | string[];
  properties?: Record<string, JsonSchemaNode>;
  additionalProperties?: boolean | JsonSchemaNode;
  items?: JsonSchemaNode;
  maxItems?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchemaNode[];
  oneOf?: JsonSchemaNode[];
}

/** The longest number JSON writes for a double: `-1.7976931348623157e+308`. */
const MAX_NUMBER_CHARS = 24;

/**
 * A pattern made only of character classes of characters JSON writes as themselves (letters,
 * digits, `_ . : @ / -`), each with a bounded quantifier: the longest string it admits, or
 * undefined for any other pattern.
 */
function safePatternLength(pattern: string): number | undefined {
  if (!/^\^(?:\[[A-Za-z0-9_.:@/-]+\](?:\{\d+(?:,\d+)?\}|\?)?)+\$$/.test(pattern)) return undefined;
  let total = 0;
  for (const [, , count] of pattern.matchAll(/\[([^\]]+)\](\{\d+(?:,\d+)?\}|\?)?/g)) {
    if (count === '?' || count === undefined) total += 1;
    else total += Number(count.slice(1, -1).split(',').at(-1));
  }
  return total;
}

function nodeChars(node: JsonSchemaNode, path: string): number {
  const options = node.anyOf ?? node.oneOf;
  if (options) return Math.max(...options.map((o) => nodeChars(o, path)));
  if (node.const !== undefined) return JSON.stringify(node.const).length;
  if (node.enum) return Math.max(...node.enum.map((v) => JSON.stringify(v).length));
  const types = Array.isArray(node.type) ? node.type : [node.type];
  return Math.max(
    ...types.map((type) => {
      switch (type) {
        case 'null':
          return 4;
        case 'boolean':
          return 5;
        case 'integer':
        case 'number': {
          const low = node.minimum ?? node.exclusiveMinimum;
          const high = node.maximum ?? node.exclusiveMaximum;
          if (type === 'number' || low === undefined || high === undefined) return MAX_NUMBER_CHARS;
          return Math.max(String(low).length, String(high).length);
        }
        case 'string': {
          // Every character at its worst: a control character is written as \u00XX (six).
          const safe = node.pattern === undefined ? undefined : safePatternLength(node.pattern);
          if (safe !== undefined) return 2 + Math.min(safe, node.maxLength ?? safe);
          if (node.maxLength === undefined) throw new ConfigError(path, node, 'is a string without maxLength: its JSON has no bound');
          return 2 + 6 * node.maxLength;
        }
        case 'array': {
          if (node.maxItems === undefined) throw new ConfigError(path, node.maxItems, 'is an array without maxItems: its JSON has no bound');
          if (node.maxItems === 0) return 2;
          return 2 + node.maxItems * (nodeChars(node.items ?? {}, `${path}[]`) + 1) - 1;
        }
        case 'object': {
          if (node.additionalProperties !== false)
            throw new ConfigError(path, 'additionalProperties', 'must be false (a strict object): other keys have no bound');
          const entries = Object.entries(node.properties ?? {});
          if (!entries.length) return 2;
          return 2 + entries.reduce((n, [key, value]) => n + JSON.stringify(key).length + 1 + nodeChars(value, `${path}.${key}`) + 1, 0) - 1;
        }
        default:
          throw new ConfigError(path, type, 'has no type a JSON bound can be computed for');
      }
    }),
  );
}

/**
 * An upper bound on the JSON text (JSON.stringify) of any value the schema's output can be: what
 * a config may take of a state (256 KiB) or of a cache key (States.Hash takes 10,000 characters).
 * A string needs maxLength (or a pattern of safe character classes), an array maxItems, an
 * object to be strict; anything unbounded throws, naming where.
 */
export function maxJsonChars(schema: z.ZodType): number {
  return nodeChars(jsonSchemaOf(schema), 'config');
}

/** Each schema converted once: the synth-time checks ask for many fields of the same config. */
const converted = new WeakMap<z.ZodType, JsonSchemaNode>();
function jsonSchemaOf(schema: z.ZodType): JsonSchemaNode {
  let node = converted.get(schema);
  if (!node) {
    node = toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchemaNode;
    converted.set(schema, node);
  }
  return node;
}

/** The bound of the value at `path` (property names) under the schema's output, or undefined if the path is not a field of it. */
export function maxJsonCharsAt(schema: z.ZodType, path: readonly string[]): number | undefined {
  const at = (node: JsonSchemaNode, rest: readonly string[], where: string): number | undefined => {
    if (!rest.length) return nodeChars(node, where);
    const options = node.anyOf ?? node.oneOf;
    if (options) {
      const found = options.map((o) => at(o, rest, where)).filter((n): n is number => n !== undefined);
      return found.length ? Math.max(...found) : undefined;
    }
    const child = node.properties?.[rest[0]!];
    return child ? at(child, rest.slice(1), `${where}.${rest[0]}`) : undefined;
  };
  return at(jsonSchemaOf(schema), path, 'config');
}
