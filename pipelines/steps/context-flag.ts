/**
 * A CDK context flag as a boolean. `-c name=false` passes the string "false", cdk.json a real
 * boolean: both are accepted, an absent flag takes its default, and anything else is refused
 * naming the flag, the value and how to set it.
 */
import type { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';

/** The flag's value (true/false or their strings), `fallback` when absent; throws naming the flag otherwise. */
export function booleanFlag(field: string, value: unknown, fallback: boolean, how: string): boolean {
  if (value === undefined) return fallback;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new ConfigError(field, value, `must be true or false (${how})`);
}

/** The context flag `key` of `scope`'s app as a boolean (see booleanFlag). */
export function contextFlag(scope: Construct, key: string, fallback: boolean, how: string): boolean {
  return booleanFlag(`context ${key}`, scope.node.tryGetContext(key), fallback, how);
}
