/**
 * Reward search, step 3: the trusted grade of one trained seed, outside the sandbox. It reads the
 * policy the job handed back as bytes and accepts only the data-only MountainCar policy format
 * (checked by shape and size; nothing the candidate wrote is run or unpickled), then plays the
 * environment's own success rule on fresh seeds. A seed whose training failed, or whose policy is
 * refused, becomes that seed's result with the reason; what the job said about itself is never
 * the score.
 */
import { z } from 'zod';
import { readObjectBytes } from '../clients/aws.ts';
import { errorName } from '../errors.ts';
import { jobFailureText } from '../job.ts';
import { MAX_POLICY_BYTES, gradePolicy } from './mountaincar.ts';
import { PolicyFormatError } from './errors.ts';
import { evenlySpaced, MAX_CURVE_POINTS, type CurvePoint, type SeedResult } from './search.ts';

export const GradeRequest = z
  .object({
    /** The training seed (excluded from grading). */
    seed: z.int().min(0),
    /**
     * Where the trusted runner put the job's policy.json (its OUTPUT_URI + policy.json), never a
     * location read from the job's own result.json, which the candidate could have written.
     */
    policyUri: z.string(),
    /**
     * The job's curves.json beside it (same prefix): its own training log, read as numbers only
     * and fed back to the proposer as the training curve; never part of the score.
     */
    curvesUri: z.string().optional(),
    /** The fan-out item's outcome: `{ok: true, value}` or `{ok: false, error, cause}`; only ok/failure is used. */
    train: z.union([
      z.object({ ok: z.literal(true) }).loose(),
      z.object({ ok: z.literal(false), error: z.string().optional(), cause: z.string().optional() }).loose(),
    ]),
    gradeSeeds: z.array(z.int().min(0)).min(1).max(1000),
    episodesPerSeed: z.int().min(1).max(10_000),
  })
  .strict();
export type GradeRequest = z.infer<typeof GradeRequest>;

/**
 * The limit AWS Batch stopped a job at, read from the failed `submitJob.sync` task's cause (the
 * job's description): the attempt timeout ("Job attempt duration exceeded timeout") or the
 * container's memory ("OutOfMemoryError: Container killed due to memory usage"). On AWS these
 * are the sandbox's wall and memory limits; locally the runtime names the limit itself.
 */
export function batchLimitOf(cause: string | undefined): { limit: 'wall' | 'memory'; reason: string } | undefined {
  let job: unknown;
  try {
    job = JSON.parse(cause ?? '');
  } catch {
    return undefined;
  }
  const get = (o: unknown, key: string): unknown => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[key] : undefined);
  const status = get(job, 'StatusReason');
  if (typeof status === 'string' && /attempt duration exceeded timeout/i.test(status)) return { limit: 'wall', reason: status };
  const attempts = get(job, 'Attempts');
  for (const container of [get(job, 'Container'), ...(Array.isArray(attempts) ? attempts.map((a) => get(a, 'Container')) : [])]) {
    const reason = get(container, 'Reason');
    if (typeof reason === 'string' && /^OutOfMemoryError/i.test(reason)) return { limit: 'memory', reason };
  }
  return undefined;
}

/** The failure's one-line reason: the sandbox's verdict when there is one, else the job's last error line. */
export function failureReason(error: string | undefined, cause: string | undefined): string {
  const batch = batchLimitOf(cause);
  if (batch) return `the sandbox stopped the job: ${batch.limit} limit (${batch.reason})`;
  return jobFailureText(error, cause, 1);
}

/** Points of a seed's curve kept for the search document (and the proposer's feedback). */
export const CURVE_POINTS = 10;
/** The largest curves.json read: ~1,000 iterations of the trainer's 12 columns. */
export const MAX_CURVES_BYTES = 1024 * 1024;

/**
 * The training curve and time from a job's curves.json (columns env_steps, env_return_mean,
 * success_rate, seconds: one row per PPO iteration). It is the candidate's own log, so it is read
 * as data only: rows whose values are not finite numbers in range are skipped, at most `points`
 * evenly spaced rows (the last included) are kept, and anything else yields nothing.
 */
export function trainingLogOf(bytes: Buffer | string, points = CURVE_POINTS): { curve?: CurvePoint[]; trainSeconds?: number } {
  if (bytes.length > MAX_CURVES_BYTES) return {};
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString());
  } catch {
    return {};
  }
  const column = (name: string): unknown[] => {
    const value = doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>)[name] : undefined;
    return Array.isArray(value) ? value : [];
  };
  const steps = column('env_steps');
  const returns = column('env_return_mean');
  const success = column('success_rate');
  const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
  const rows: CurvePoint[] = [];
  for (let i = 0; i < Math.min(steps.length, returns.length, success.length); i++) {
    const [step, envReturn, rate] = [steps[i], returns[i], success[i]];
    if (!finite(step) || !Number.isInteger(step) || step < 0 || !finite(envReturn) || !finite(rate) || rate < 0 || rate > 1) continue;
    rows.push({ step, envReturn: Math.round(envReturn * 100) / 100, success: Math.round(rate * 1000) / 1000 });
  }
  const picks = evenlySpaced(rows.length, Math.min(points, MAX_CURVE_POINTS));
  const seconds = column('seconds').at(-1);
  return {
    ...(picks.length ? { curve: picks.map((i) => rows[i]!) } : {}),
    ...(finite(seconds) && seconds >= 0 ? { trainSeconds: Math.round(seconds * 100) / 100 } : {}),
  };
}

/** The job's training log, when it handed one back (a missing or unreadable one is no log). */
async function readTrainingLog(uri: string | undefined): Promise<{ curve?: CurvePoint[]; trainSeconds?: number }> {
  if (!uri) return {};
  try {
    return trainingLogOf(await readObjectBytes(uri, 'curvesUri'));
  } catch (error) {
    if (errorName(error) === 'NoSuchKey') return {};
    throw error;
  }
}

/** The grade of one seed; its handler parses the request (root `grade`). */
export async function gradeSeed(request: GradeRequest): Promise<SeedResult> {
  const { seed, train } = request;
  if (!train.ok) return { seed, success: null, episodes: 0, failure: failureReason(train.error, train.cause) };
  let bytes: Buffer;
  try {
    bytes = await readObjectBytes(request.policyUri, 'policyUri');
  } catch (error) {
    if (errorName(error) === 'NoSuchKey') return { seed, success: null, episodes: 0, failure: 'no policy.json: the job handed back no policy' };
    throw error;
  }
  const log = await readTrainingLog(request.curvesUri);
  if (bytes.length > MAX_POLICY_BYTES)
    return { seed, success: null, episodes: 0, failure: `policy refused: ${bytes.length} bytes, over ${MAX_POLICY_BYTES}`, ...log };
  try {
    const report = gradePolicy(bytes, request.gradeSeeds, { episodesPerSeed: request.episodesPerSeed, excludeSeeds: [seed] });
    return { seed, success: report.successRate, episodes: report.perSeed.reduce((n, s) => n + s.episodes, 0), ...log };
  } catch (error) {
    if (error instanceof PolicyFormatError) return { seed, success: null, episodes: 0, failure: `policy refused: ${error.message}`, ...log };
    throw error;
  }
}
