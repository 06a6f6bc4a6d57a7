import type { z } from 'zod';
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
