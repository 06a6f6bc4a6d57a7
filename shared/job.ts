/**
 * The Batch job contract for jobs written in TypeScript, the same as batch-jobs/common/jobio.py
 * for the Python ones, so the state machine's job step cannot tell them apart:
 *
 * 1. The spec (JSON) is read from the S3 URI in JOB_SPEC_URI.
 * 2. The job's main function gets the spec and a JobContext; outputs go under OUTPUT_URI.
 * 3. What main returns is written as OUTPUT_URI/result.json and the process exits 0.
 * 4. Progress goes to stdout as JSON lines, `{"progress": {...}, "time": <unix seconds>}`.
 * 5. Any error is written as result.json `{"error": {"type", "message"}}` (the stack goes to
 *    stderr, which the job log keeps) and the process exits 1.
 *
 * The same code runs in the container on AWS and as a child process of the embedded runtime;
 * the S3 endpoint comes from AWS_ENDPOINT_URL_S3, which the SDK reads itself.
 */
import { readObjectBytes } from './clients/aws.ts';
import { writeFile, type S3Written } from './documents.ts';
import { ConfigError } from './errors.ts';

/** Where a job wrote one output: the object and its s3:// URI (the shape jobio.py returns). */
export type JobOutput = S3Written;

/** What a job's main function gets besides its spec. */
export interface JobContext {
  /** s3://bucket/prefix/ (always ending with '/'), under which the outputs go. */
  readonly outputUri: string;
  putBytes(name: string, data: Uint8Array | string, contentType?: string): Promise<JobOutput>;
  /** Written indented, as jobio.py writes it. */
  putJson(name: string, value: unknown): Promise<JobOutput>;
  /** One JSON line on stdout; the local runtime passes it on as the job's progress. */
  progress(fields: Record<string, unknown>): void;
}

export type JobMain = (spec: unknown, ctx: JobContext) => Promise<unknown>;

/** Exit status when JOB_SPEC_URI or OUTPUT_URI is missing: there is nowhere to write result.json. */
export const JOB_MISCONFIGURED_EXIT = 2;

/** The context for outputs under `outputUri` (s3://bucket/prefix, with or without the trailing '/'). */
export function jobContext(outputUri: string): JobContext {
  const prefix = outputUri.endsWith('/') ? outputUri : `${outputUri}/`;
  const match = /^s3:\/\/([^/]+)\/(.*)$/.exec(prefix);
  if (!match) throw new ConfigError('OUTPUT_URI', outputUri, 'expected s3://bucket/prefix/');
  const Bucket = match[1]!;
  const base = match[2]!;
  const putBytes = (name: string, data: Uint8Array | string, contentType = 'application/octet-stream'): Promise<JobOutput> =>
    writeFile(Bucket, `${base}${name}`, data, contentType);
  return {
    outputUri: prefix,
    putBytes,
    putJson: (name, value) => putBytes(name, JSON.stringify(value, null, 2), 'application/json'),
    progress: (fields) => {
      process.stdout.write(`${JSON.stringify({ progress: fields, time: Date.now() / 1000 })}\n`);
    },
  };
}

/**
 * Runs `main` under the contract and returns the exit status (0, 1, or JOB_MISCONFIGURED_EXIT)
 * instead of exiting, so a test can call it in-process.
 */
export async function runJob(main: JobMain, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const specUri = env['JOB_SPEC_URI'];
  const outputUri = env['OUTPUT_URI'];
  if (!specUri || !outputUri) {
    process.stderr.write(`${JSON.stringify({ error: 'JOB_SPEC_URI and OUTPUT_URI must be set' })}\n`);
    return JOB_MISCONFIGURED_EXIT;
  }
  let ctx: JobContext;
  try {
    ctx = jobContext(outputUri);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return JOB_MISCONFIGURED_EXIT;
  }
  try {
    // Inside the try, as in jobio.py: a spec that cannot be read is the job's error, in result.json.
    const spec: unknown = JSON.parse((await readObjectBytes(specUri, 'JOB_SPEC_URI')).toString('utf8'));
    const result = await main(spec, ctx);
    if (result !== undefined) await ctx.putJson('result.json', result);
    return 0;
  } catch (error) {
    const type = error instanceof Error ? error.name : typeof error;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`${error instanceof Error ? (error.stack ?? `${type}: ${message}`) : message}\n`);
    try {
      await ctx.putJson('result.json', { error: { type, message } });
    } catch (writeError) {
      process.stderr.write(`could not write result.json: ${(writeError as Error).message}\n`);
    }
    return 1;
  }
}

/**
 * The entry of a TypeScript job: runs `main` under the contract, then exits with its status.
 * Exiting explicitly matters: the SDK's keep-alive sockets would otherwise hold the process open.
 */
export async function runJobMain(main: JobMain): Promise<never> {
  const status = await runJob(main);
  process.exit(status);
}

/**
 * Why a Batch job failed, from the task's error and cause as Step Functions reports them: the
 * sandbox's verdict when a limit stopped it, else the last `lines` lines of its stderr tail (or of
 * the cause itself), stack frames left out.
 */
export function jobFailureText(error: string | undefined, cause: string | undefined, lines = 3): string {
  let text = cause ?? '';
  try {
    const parsed = JSON.parse(text) as { StatusReason?: string; SandboxLimit?: string; StderrTail?: string; errorMessage?: string };
    if (parsed.SandboxLimit) return parsed.StatusReason ?? `sandbox limit: ${parsed.SandboxLimit}`;
    text = parsed.StderrTail ?? parsed.errorMessage ?? text;
  } catch {
    /* a plain-text cause */
  }
  const kept = text
    .trim()
    .split('\n')
    .filter((l) => l.trim() && !/^\s+at /.test(l));
  return `${error ?? 'error'}: ${kept.slice(-lines).join(' / ').slice(0, 1500)}`;
}
