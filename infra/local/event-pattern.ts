/**
 * EventBridge event-pattern matching, for the rules in the synthesized template: exact
 * values, prefix, suffix, wildcard, anything-but, exists, numeric and equals-ignore-case.
 */
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function matchesPattern(pattern: Record<string, unknown>, event: unknown): boolean {
  for (const [key, rule] of Object.entries(pattern)) {
    const value = event && typeof event === 'object' ? (event as Record<string, unknown>)[key] : undefined;
    if (Array.isArray(rule)) {
      if (!matchesAny(rule, value)) return false;
    } else if (rule && typeof rule === 'object') {
      if (value === undefined || !matchesPattern(rule as Record<string, unknown>, value)) return false;
    } else {
      throw new Error(`event pattern field "${key}" must be an array or an object`);
    }
  }
  return true;
}

function matchesAny(rules: unknown[], value: unknown): boolean {
  const values: unknown[] = Array.isArray(value) ? value : [value];
  return rules.some((rule) => {
    if (rule && typeof rule === 'object' && !Array.isArray(rule)) {
      const [op, arg] = Object.entries(rule)[0] as [string, unknown];
      if (op === 'exists') return (value !== undefined) === arg;
      if (op === 'anything-but') return value !== undefined && values.every((v) => !anythingBut(arg, v));
      return values.some((v) => matchOperator(op, arg, v));
    }
    return values.some((v) => v === rule);
  });
}

function anythingBut(arg: unknown, v: unknown): boolean {
  if (Array.isArray(arg)) return arg.includes(v);
  if (arg && typeof arg === 'object') {
    const [op, inner] = Object.entries(arg)[0] as [string, unknown];
    const list = Array.isArray(inner) ? inner : [inner];
    return list.some((x) => matchOperator(op, x, v));
  }
  return arg === v;
}

function matchOperator(op: string, arg: unknown, v: unknown): boolean {
  switch (op) {
    case 'prefix':
      return typeof v === 'string' && typeof arg === 'string' && v.startsWith(arg);
    case 'suffix':
      return typeof v === 'string' && typeof arg === 'string' && v.endsWith(arg);
    case 'equals-ignore-case':
      return typeof v === 'string' && typeof arg === 'string' && v.toLowerCase() === arg.toLowerCase();
    case 'wildcard':
      return typeof v === 'string' && typeof arg === 'string' && wildcard(arg).test(v);
    case 'numeric':
      return typeof v === 'number' && numeric(arg as Json[], v);
    default:
      throw new Error(`event pattern operator "${op}" is not supported locally`);
  }
}

function wildcard(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`, 's');
}

function numeric(conditions: Json[], v: number): boolean {
  for (let i = 0; i < conditions.length; i += 2) {
    const op = conditions[i];
    const n = conditions[i + 1] as number;
    const ok = op === '=' ? v === n : op === '<' ? v < n : op === '<=' ? v <= n : op === '>' ? v > n : op === '>=' ? v >= n : false;
    if (!ok) return false;
  }
  return true;
}
