/**
 * What the newer pipelines' Lambda steps share (sae, video): the step context read from the
 * function's environment, the handler around a step, JSON documents content-addressed under
 * data/<pipeline>/, and whether an Anthropic key is there.
 */
import type { Context } from 'aws-lambda';
import { readObjectBytes } from './clients/aws.ts';
import { type S3Written, writeFile } from './documents.ts';
import { ENV, optionalEnv, requireEnv } from './env.ts';
import { ConfigError } from './errors.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { startInvocationLog } from './log.ts';
import { MissingApiKeyError } from './rewards/errors.ts';
import { resolveApiKey } from './rewards/propose.ts';

export interface StepContext {
  readonly bucket: string;
  readonly pipeline: string;
  readonly table?: string;
  readonly anthropicSecretArn?: string;
  readonly env?: NodeJS.ProcessEnv;
}

/** A step's Lambda handler: the context from the function's environment, an invocation log line, the step. */
export function stepHandler(step: string, run: (ctx: StepContext, event: unknown) => Promise<unknown>) {
  const ctx: StepContext = {
    bucket: requireEnv(ENV.bucket),
    pipeline: requireEnv(ENV.pipeline),
    table: optionalEnv(ENV.table),
    anthropicSecretArn: optionalEnv(ENV.anthropicSecretArn),
  };
  return async (event: unknown, context?: Context) => {
    startInvocationLog(context, { step });
    return run(ctx, event);
  };
}

/** A written object's location, as a cached step lists it in `s3Outputs`. */
export const s3Out = (w: S3Written) => ({ Bucket: w.Bucket, Key: w.Key });

/** A JSON document at `data/<pipeline>/<folder>/<sha256 of its canonical JSON>.json`. */
export async function writeJson(ctx: StepContext, folder: string, value: unknown): Promise<S3Written & { sha256: string }> {
  const body = canonicalJson(value);
  const sha256 = sha256Hex(body);
  const written = await writeFile(ctx.bucket, `data/${ctx.pipeline}/${folder}/${sha256}.json`, body, 'application/json');
  return { ...written, sha256 };
}

/** The parsed JSON at `uri`, or a ConfigError naming the field and the URI. */
export async function readJson(uri: string, field: string): Promise<unknown> {
  const bytes = await readObjectBytes(uri, field);
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ConfigError(field, uri, `is not JSON (${(error as Error).message})`);
  }
}

/** Whether an Anthropic key is there (the environment's, or the platform secret set to a key). */
export async function hasApiKey(ctx: StepContext): Promise<boolean> {
  try {
    await resolveApiKey(ctx.env ?? process.env, ctx.anthropicSecretArn);
    return true;
  } catch (error) {
    if (error instanceof MissingApiKeyError) return false;
    throw error;
  }
}
