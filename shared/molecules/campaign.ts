/**
 * The steps of the discovery loop as the Lambdas run them: each reads the campaign document,
 * applies one pure step of discovery.ts, and writes the next document (content-addressed, so a
 * retried invocation writes the same key with the same bytes).
 *
 * - prepare: the pool (built in code or parsed from a pool file), its fingerprints, round 0.
 * - propose: the surrogate's next batch and the random baseline's, molecules already measured
 *   by earlier runs taken from the oracle cache, the rest split into oracle jobs, and the batch
 *   written as the approval email's items (SMILES, prediction, arm, drawing).
 * - record: the oracle's results (or the approver's refusal) into the campaign and the cache.
 */
import { z } from 'zod';
import { OracleJobFailed } from './errors.ts';
import { objectExists, readObjectBytes } from '../clients/aws.ts';
import { APPROVAL_ITEMS_PREFIX } from '../approval.ts';
import { ConfigError } from '../errors.ts';
import { readOutcomes } from '../fan-out.ts';
import { jobFailureText } from '../job.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import {
  armCounts,
  campaignSummary,
  currentRound,
  newCampaign,
  proposeRound,
  recordRound,
  toMeasure,
  withKnownResults,
  CampaignSettings,
  type Campaign,
  type Decision,
  type OracleResult,
} from './discovery.ts';
import { buildDefaultPool, moleculeSvg, morganFingerprint, parsePoolFile, type PoolResult } from './pool.ts';
import {
  lookupOracle,
  oracleVersion,
  poolKeys,
  readCampaign,
  readFingerprints,
  readPool,
  storeOracle,
  writeCampaign,
  writePool,
  XtbSettings,
  type PoolDoc,
} from './store.ts';
import { parseJsonBytes, writeContentAddressed } from '../documents.ts';

/** Morgan radius 2, 2,048 bits: the surrogate's fingerprints. */
export const FINGERPRINT = { radius: 2, nBits: 2048 } as const;
/** Bumped when the pool's build rules change, so stored pools are rebuilt. */
const POOL_FORMAT = 1;

export interface StoreContext {
  readonly bucket: string;
  readonly pipeline: string;
}

export const PoolSpec = z
  .object({
    uri: z.string().optional(),
    maxSubstituents: z.union([z.literal(1), z.literal(2)]),
    maxHeavyAtoms: z.int().min(1),
  })
  .strict();
export type PoolSpec = z.infer<typeof PoolSpec>;

/** The pool for a spec: read when stored before, else built (or parsed), fingerprinted and stored. */
export async function loadOrBuildPool(ctx: StoreContext, spec: PoolSpec): Promise<{ uri: string; fingerprintsUri: string; doc: PoolDoc; built: boolean }> {
  let text: string | undefined;
  let buildKey: string;
  if (spec.uri) {
    const bytes = await readObjectBytes(spec.uri, 'config.pool.uri');
    text = bytes.toString('utf8');
    buildKey = canonicalJson({ format: POOL_FORMAT, file: sha256Hex(bytes), maxHeavyAtoms: spec.maxHeavyAtoms, fingerprint: FINGERPRINT });
  } else {
    buildKey = canonicalJson({
      format: POOL_FORMAT,
      default: { maxSubstituents: spec.maxSubstituents, maxHeavyAtoms: spec.maxHeavyAtoms },
      fingerprint: FINGERPRINT,
    });
  }
  const keys = poolKeys(ctx.pipeline, buildKey);
  const uri = `s3://${ctx.bucket}/${keys.doc}`;
  const fingerprintsUri = `s3://${ctx.bucket}/${keys.fingerprints}`;
  if ((await objectExists(ctx.bucket, keys.doc)) && (await objectExists(ctx.bucket, keys.fingerprints))) {
    return { uri, fingerprintsUri, doc: await readPool(uri), built: false };
  }
  let result: PoolResult & { candidates?: number };
  let source: string;
  if (text !== undefined) {
    result = await parsePoolFile(text, { source: spec.uri, maxHeavyAtoms: spec.maxHeavyAtoms });
    source = spec.uri!;
  } else {
    result = await buildDefaultPool({ maxSubstituents: spec.maxSubstituents, maxHeavyAtoms: spec.maxHeavyAtoms });
    source = `default pool (up to ${spec.maxSubstituents} substituent${spec.maxSubstituents > 1 ? 's' : ''}, at most ${spec.maxHeavyAtoms} heavy atoms)`;
  }
  const fingerprints = [];
  for (const m of result.molecules) fingerprints.push(await morganFingerprint(m.smiles, FINGERPRINT));
  const doc: PoolDoc = {
    version: 1,
    source,
    smiles: result.molecules.map((m) => m.smiles),
    ...(result.molecules.some((m) => m.id) ? { ids: result.molecules.map((m) => m.id ?? '') } : {}),
    skipped: { ...result.skipped } as Record<string, number>,
    examples: result.examples.map((e) => ({
      reason: e.reason,
      input: e.input,
      ...(e.line !== undefined ? { line: e.line } : {}),
      ...(e.detail !== undefined ? { detail: e.detail } : {}),
    })),
    ...(result.candidates !== undefined ? { candidates: result.candidates } : {}),
    fingerprint: { ...FINGERPRINT },
  };
  await writePool(ctx.bucket, keys, doc, fingerprints);
  return { uri, fingerprintsUri, doc, built: true };
}

/** Step 1: the pool and a campaign whose round 0 (the random sample) is pending. */
export async function prepareCampaign(ctx: StoreContext, spec: PoolSpec, input: unknown) {
  // Checked before the pool is built or read: bad settings cost nothing.
  const settings = parseOrThrow(CampaignSettings, input, 'settings');
  const pool = await loadOrBuildPool(ctx, parseOrThrow(PoolSpec, spec, 'config.pool'));
  const size = pool.doc.smiles.length;
  const campaign = newCampaign(
    { uri: pool.uri, fingerprintsUri: pool.fingerprintsUri, size, nBytes: pool.doc.fingerprint.nBits / 8, source: pool.doc.source },
    settings,
    (i) => pool.doc.smiles[i]!,
  );
  const written = await writeCampaign(ctx.bucket, ctx.pipeline, campaign);
  return {
    campaignUri: written.uri,
    pool: { size, source: pool.doc.source, skipped: pool.doc.skipped, built: pool.built },
  };
}

export interface OracleContext extends StoreContext {
  readonly table: string;
  /** The oracle job's code version (part of the cache key with the xTB settings). */
  readonly oracleCodeVersion: string;
}

export const ProposeOptions = z
  .object({
    xtb: XtbSettings,
    chunkSize: z.int().min(1).max(500),
    parallel: z.int().min(1).max(16),
  })
  .strict();
export type ProposeOptions = z.infer<typeof ProposeOptions>;

function formatGap(p: { mean: number; std: number } | undefined): string {
  return p ? `${p.mean.toFixed(2)} ± ${p.std.toFixed(2)} eV` : 'not predicted (random sample)';
}

/**
 * Step 2 of a round: the batch to measure. Returns the oracle jobs' specs (`chunks`, empty when
 * every molecule is known from earlier runs: then there is nothing to approve), the approval
 * email's items document and the flat details shown with it.
 */
export async function proposeStep(ctx: OracleContext, campaignUri: string, options: ProposeOptions) {
  const opts = parseOrThrow(ProposeOptions, options, 'options');
  let campaign = await readCampaign(campaignUri);
  if (campaign.stopped)
    throw new ConfigError('campaignUri', campaignUri, `the campaign stopped at round ${campaign.stopped.round} (${campaign.stopped.reason})`);
  if (!campaign.pending) {
    const pool = await readPool(campaign.pool.uri);
    const fingerprints = await readFingerprints(campaign.pool.fingerprintsUri, campaign.pool.size, campaign.pool.nBytes);
    campaign = proposeRound(campaign, fingerprints, (i) => pool.smiles[i]!);
  }
  const round = currentRound(campaign);
  if (campaign.pending) {
    const version = oracleVersion(ctx.oracleCodeVersion, opts.xtb);
    const known = await lookupOracle(
      ctx.table,
      version,
      campaign.pending.items.map((i) => i.smiles),
    );
    campaign = withKnownResults(campaign, known);
  }
  const written = await writeCampaign(ctx.bucket, ctx.pipeline, campaign);
  const measure = toMeasure(campaign);
  // Each oracle job's spec (its molecules, up to 500 SMILES) goes to S3, content-addressed: the
  // state holds one key per job.
  const chunks = [];
  for (let i = 0; i < measure.length; i += opts.chunkSize) {
    const spec = {
      molecules: measure.slice(i, i + opts.chunkSize).map((m) => ({ id: String(m.index), smiles: m.smiles })),
      xtb: opts.xtb,
      parallel: opts.parallel,
    };
    chunks.push({ specKey: (await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/oracle-specs/`, spec)).Key });
  }
  const counts = armCounts(measure);
  let itemsUri: string | null = null;
  if (measure.length) {
    const items = [];
    for (const m of measure) {
      items.push({
        values: { smiles: m.smiles, predicted: formatGap(m.predicted), arm: m.arm, pool: String(m.index) },
        svg: await moleculeSvg(m.smiles, { width: 220, height: 160 }),
      });
    }
    const doc = {
      caption:
        round === 0
          ? `Round 0: a random sample of the pool, measured to set the hit threshold and train the surrogate`
          : `Round ${round}: the surrogate's picks (exploit, explore) and the random baseline's, side by side`,
      columns: [
        { key: 'smiles', label: 'SMILES' },
        { key: 'predicted', label: 'Predicted gap' },
        { key: 'arm', label: 'Arm' },
        { key: 'pool', label: 'Pool #' },
      ],
      items,
    };
    itemsUri = (await writeContentAddressed(ctx.bucket, `${APPROVAL_ITEMS_PREFIX}${ctx.pipeline}/`, doc)).uri;
  }
  const best = measure.filter((m) => m.predicted).sort((a, b) => a.predicted!.mean - b.predicted!.mean)[0];
  return {
    campaignUri: written.uri,
    round,
    done: !!campaign.stopped,
    toMeasure: measure.length,
    chunks,
    itemsUri,
    details: {
      round,
      molecules: measure.length,
      ...counts,
      knownFromEarlierRuns: (campaign.pending?.items.length ?? 0) - measure.length,
      hitThreshold: campaign.threshold ? `${campaign.threshold.gap.toFixed(3)} eV` : 'set from this sample',
      bestPredicted: best ? `${best.smiles} (${formatGap(best.predicted)})` : 'none',
    },
  };
}

/** One molecule's result as the oracle job reports it (result.json `measurements`). */
const JobMeasurement = z
  .object({
    id: z.string(),
    smiles: z.string(),
    ok: z.boolean(),
    gap: z.number().optional(),
    reason: z.string().optional(),
    attempts: z.int().min(0).optional(),
    seconds: z.number().min(0),
  })
  .loose();

const JobResultRef = z.object({ resultUri: z.string().startsWith('s3://') }).strict();

/** A fan-out of oracle jobs, read back (shared/fan-out.ts): one `{ok, value}` per job, the value being its result.json. */
const FanOutResults = z.array(
  z.union([
    z.object({ ok: z.literal(true), value: z.object({ measurements: z.array(JobMeasurement) }).loose() }).loose(),
    z.object({ ok: z.literal(false), error: z.string().optional(), cause: z.string().optional() }).loose(),
  ]),
);

/**
 * Step 3 of a round: the approver's decision and the oracle's results into the campaign. Fresh
 * results go into the oracle cache before the campaign is written, so a retried or later run
 * never measures them again; when a job failed as a whole, the other jobs' results are still
 * cached and the run fails naming the job's error.
 */
export async function recordStep(
  ctx: OracleContext,
  input: { campaignUri: string; outcome: Decision; results: unknown; xtb: XtbSettings; executionId: string },
) {
  const campaign = await readCampaign(input.campaignUri);
  const outcomes = await readOutcomes(input.results ?? [], 'results');
  // Each job's result.json stays in S3 (its size grows with the chunk): read it here.
  const withResults = await Promise.all(
    outcomes.map(async (o, j) => {
      if (!o.ok) return o;
      const { resultUri } = parseOrThrow(JobResultRef, o.value, `results.${j}.value`);
      return { ok: true, value: parseJsonBytes(await readObjectBytes(resultUri, `results.${j}.value.resultUri`), `results.${j}.value.resultUri`, resultUri) };
    }),
  );
  const jobs = parseOrThrow(FanOutResults, withResults, 'results');
  const pending = new Map((campaign.pending?.items ?? []).map((item) => [String(item.index), item]));
  const results = new Map<number, OracleResult>();
  const fresh: { smiles: string; result: OracleResult }[] = [];
  const failedJobs: string[] = [];
  jobs.forEach((job, j) => {
    if (!job.ok) {
      failedJobs.push(jobFailureText(job.error, job.cause));
      return;
    }
    for (const m of job.value.measurements) {
      const item = pending.get(m.id);
      if (!item) throw new ConfigError(`results[${j}].measurements.id`, m.id, 'is not a pending molecule of this round');
      if (item.smiles !== m.smiles)
        throw new ConfigError(`results[${j}].measurements.smiles`, m.smiles, `does not match pending molecule ${m.id} (${item.smiles})`);
      const result: OracleResult = {
        ok: m.ok,
        ...(m.gap !== undefined ? { gap: m.gap } : {}),
        ...(m.reason !== undefined ? { reason: m.reason } : {}),
        ...(m.attempts !== undefined ? { attempts: m.attempts } : {}),
        seconds: m.seconds,
        cached: false,
      };
      results.set(item.index, result);
      fresh.push({ smiles: item.smiles, result });
    }
  });
  const version = oracleVersion(ctx.oracleCodeVersion, parseOrThrow(XtbSettings, input.xtb, 'xtb'));
  if (failedJobs.length) {
    await storeOracle(ctx.table, version, fresh, { executionId: input.executionId });
    throw new OracleJobFailed(
      `${failedJobs.length} of ${jobs.length} oracle jobs failed (${fresh.length} molecules measured by the others are cached); first: ${failedJobs[0]}`,
    );
  }
  const next = recordRound(campaign, input.outcome, results);
  if (input.outcome === 'approved' || input.outcome === 'nothingToMeasure') {
    await storeOracle(ctx.table, version, fresh, { executionId: input.executionId });
  }
  const written = await writeCampaign(ctx.bucket, ctx.pipeline, next);
  const summary = campaignSummary(next);
  const last = next.rounds.at(-1)!;
  return {
    campaignUri: written.uri,
    round: next.rounds.length,
    done: !!next.stopped,
    last: { round: last.round, decision: last.decision, measured: last.measured, failed: last.failed, fromCache: last.fromCache, hits: last.hits },
    summary: {
      surrogateHits: summary.surrogate.hits,
      randomHits: summary.random.hits,
      surrogateCalls: summary.surrogate.calls,
      randomCalls: summary.random.calls,
      oracleCalls: summary.oracleCalls,
      threshold: summary.threshold,
    },
  };
}

export type { Campaign };
