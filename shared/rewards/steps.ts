/**
 * The reward search's Lambda steps: propose (Claude, or reward files), record a generation, plan
 * and record the final, and the report. The search document lives in S3, content-addressed.
 * Each handler parses its event with the step's request schema (its root names the step in
 * errors) and the loop's config with LoopConfig (root `config`), then calls the step.
 */
import { claudeUsageField } from '#shared/cost/usage.ts';
import pMap from 'p-map';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';
import { readObjectBytes } from '../clients/aws.ts';
import { readContentAddressed, writeContentAddressed, writeFile } from '../documents.ts';
import { errorName } from '../errors.ts';
import { readOutcomes } from '../fan-out.ts';
import { sha256Hex } from '../json.ts';
import {
  candidateResults,
  MAX_TRAIN_TIMEOUT_SECONDS,
  feedbackFrom,
  finalCandidates,
  MOUNTAINCAR_TASK,
  recordFinal,
  recordGeneration,
  trainItems,
  winnerOf,
  type ProposedCandidate,
  type TrainItem,
} from './loop.ts';
import { anthropicClient, MAX_SOURCE_CHARS, proposeRewards, resolveApiKey } from './propose.ts';
import { RewardSearchDoc, rewardMetrics, rewardReportHtml } from './report.ts';
import type { FinalRole } from './report.ts';

export interface StoreContext {
  readonly bucket: string;
  readonly pipeline: string;
}

const TrainSettings = z.object({ total_steps: z.int(), num_envs: z.int(), evaluation_episodes: z.int() });

export const LoopConfig = z
  .object({
    generations: z.int(),
    candidates: z.int(),
    model: z.string(),
    rewardFiles: z.array(z.object({ name: z.string(), sha256: z.string() })).optional(),
    trainSeeds: z.array(z.int()),
    gradeSeeds: z.array(z.int()),
    finalTrainSeeds: z.array(z.int()).min(1),
    finalSeeds: z.array(z.int()),
    episodesPerSeed: z.int(),
    train: TrainSettings,
    trainTimeoutSeconds: z.int().default(MAX_TRAIN_TIMEOUT_SECONDS),
  })
  .loose();
export type LoopConfig = z.infer<typeof LoopConfig>;

export async function readSearch(uri: string): Promise<RewardSearchDoc> {
  return parseOrThrow(RewardSearchDoc, await readContentAddressed(uri, 'searchUri', 'search document'), 'search');
}

async function writeSearch(ctx: StoreContext, doc: RewardSearchDoc): Promise<string> {
  return (await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/search/`, parseOrThrow(RewardSearchDoc, doc, 'search'))).uri;
}

/** Where a reward file's source lies: `data/<pipeline>/sources/<sha256 of its UTF-8 bytes>.py`. */
export function rewardSourceKey(pipeline: string, sha256: string): string {
  return `data/${pipeline}/sources/${sha256}.py`;
}

/** A reward file's source, put where the config's `{name, sha256}` finds it; returns its hash. */
export async function writeRewardSource(ctx: StoreContext, source: string): Promise<string> {
  const sha256 = sha256Hex(source);
  await writeFile(ctx.bucket, rewardSourceKey(ctx.pipeline, sha256), source, 'text/x-python; charset=utf-8');
  return sha256;
}

/** The config's reward files, read and checked: the bytes hash to the name, within the size limit. */
async function readRewardFiles(ctx: StoreContext, files: NonNullable<LoopConfig['rewardFiles']>): Promise<ProposedCandidate[]> {
  return Promise.all(
    files.map(async (f, i) => {
      const field = `config.rewardFiles.${i}.sha256`;
      const uri = `s3://${ctx.bucket}/${rewardSourceKey(ctx.pipeline, f.sha256)}`;
      let bytes: Buffer;
      try {
        bytes = await readObjectBytes(uri, field);
      } catch (error) {
        if (errorName(error) === 'NoSuchKey')
          throw new ConfigError(field, f.sha256, `no reward file has this hash: put its source at ${uri} (frontier run rewards --reward-file FILE.py does)`);
        throw error;
      }
      if (sha256Hex(bytes) !== f.sha256) throw new ConfigError(field, f.sha256, `is not the sha256 of ${uri}`);
      const source = bytes.toString('utf8');
      if (source.length > MAX_SOURCE_CHARS) throw new ConfigError(field, f.sha256, `its source has ${source.length} characters, over ${MAX_SOURCE_CHARS}`);
      return { name: f.name, rationale: 'given as a file', source, origin: 'file' as const };
    }),
  );
}

const ProposalDoc = z
  .object({
    phase: z.enum(['search', 'final']),
    generation: z.int().optional(),
    candidates: z.array(z.object({ name: z.string(), rationale: z.string(), source: z.string(), origin: z.enum(['claude', 'file', 'baseline']) })),
    items: z.array(
      z.object({
        candidate: z.int(),
        name: z.string(),
        sourceSha256: z.string(),
        seed: z.int(),
        gradeSeeds: z.array(z.int()),
        episodesPerSeed: z.int(),
        train: TrainSettings,
        timeoutSeconds: z.int(),
      }),
    ),
    roles: z.array(z.enum(['winner', 'env-reward', 'shaped-reward'])).optional(),
    usage: z
      .object({ generation: z.int(), inputTokens: z.number(), outputTokens: z.number(), cacheReadTokens: z.number(), cacheWriteTokens: z.number() })
      .optional(),
  })
  .strict();
type ProposalDoc = z.infer<typeof ProposalDoc>;

/**
 * A generation's (or the final's) plan, staged: its document (candidates with their sources, the
 * training items) and one job spec per item go to S3, content-addressed; the state gets what its
 * fan-out needs and no more: per item its seed and its spec's key, once the grading settings and
 * the wall limit. Its size is bounded by the config (items x ~130 characters), whatever the
 * candidates' sources are.
 */
async function stageProposal(ctx: StoreContext, doc: Omit<ProposalDoc, 'items'> & { items: readonly TrainItem[] }) {
  const parsed = parseOrThrow(ProposalDoc, doc, 'proposal');
  // Up to 160 specs a generation: written 16 at a time.
  const specs = await pMap(
    parsed.items,
    async (item) => {
      const spec = { reward_source: parsed.candidates[item.candidate]!.source, seed: item.seed, ...item.train };
      return (await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/train-specs/`, spec)).Key;
    },
    { concurrency: 16 },
  );
  const written = await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/proposals/`, parsed);
  const first = parsed.items[0];
  return {
    phase: parsed.phase,
    ...(parsed.generation !== undefined ? { generation: parsed.generation } : {}),
    proposalUri: written.uri,
    items: parsed.items.map((item, i) => ({ seed: item.seed, specKey: specs[i]! })),
    grading: { gradeSeeds: first?.gradeSeeds ?? [], episodesPerSeed: first?.episodesPerSeed ?? 1 },
    timeoutSeconds: first?.timeoutSeconds ?? MAX_TRAIN_TIMEOUT_SECONDS,
  };
}

async function readProposal(uri: string): Promise<ProposalDoc> {
  return parseOrThrow(ProposalDoc, await readContentAddressed(uri, 'proposal.proposalUri', 'proposal'), 'proposal');
}

const itemsFor = (candidates: readonly ProposedCandidate[], config: LoopConfig, seeds: { train: readonly number[]; grade: readonly number[] }) =>
  trainItems(candidates, {
    trainSeeds: seeds.train,
    gradeSeeds: seeds.grade,
    episodesPerSeed: config.episodesPerSeed,
    train: config.train,
    timeoutSeconds: config.trainTimeoutSeconds,
  });

export const ProposeRequest = z.object({ generation: z.int().min(1), searchUri: z.string().nullable(), config: z.unknown() }).strict();
export type ProposeRequest = z.infer<typeof ProposeRequest>;

/** Step 1 of a generation: the candidates (reward files, or Claude with the graded history) and their training items, staged. */
export async function proposeStep(ctx: StoreContext, request: ProposeRequest, config: LoopConfig, env: { anthropicSecretArn?: string }) {
  const { generation, searchUri } = request;
  let candidates: ProposedCandidate[];
  let usage: { generation: number; inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number } | undefined;
  if (config.rewardFiles) {
    candidates = await readRewardFiles(ctx, config.rewardFiles);
  } else {
    const history = searchUri ? feedbackFrom(await readSearch(searchUri)) : [];
    const client = anthropicClient(await resolveApiKey(process.env, env.anthropicSecretArn));
    const result = await proposeRewards(client, { task: MOUNTAINCAR_TASK, generation, candidates: config.candidates, history, model: config.model });
    candidates = result.candidates.map((c) => ({ ...c, origin: 'claude' as const }));
    usage = { generation, ...result.usage };
  }
  const staged = await stageProposal(ctx, {
    phase: 'search',
    generation,
    candidates,
    items: itemsFor(candidates, config, { train: config.trainSeeds, grade: config.gradeSeeds }),
    ...(usage ? { usage } : {}),
  });
  // What Claude's calls used, for the run's counters (shared/cost/usage.ts).
  return usage ? { ...staged, ...claudeUsageField(config.model, usage) } : staged;
}

/** The staged proposal in the state: only its document's URI is read. */
const StagedProposal = z.object({ proposalUri: z.string() }).loose();

export const RecordRequest = z
  .object({ generation: z.int(), searchUri: z.string().nullable(), proposal: StagedProposal, results: z.array(z.unknown()), config: z.unknown() })
  .strict();
export type RecordRequest = z.infer<typeof RecordRequest>;

/** Step 3 of a generation: its seed results into the search document. */
export async function recordStep(ctx: StoreContext, req: RecordRequest, config: LoopConfig) {
  const before = req.searchUri ? await readSearch(req.searchUri) : undefined;
  const proposal = await readProposal(req.proposal.proposalUri);
  const results = candidateResults(proposal.candidates, proposal.items, await readOutcomes(req.results, 'results'));
  let doc = recordGeneration(before, req.generation, results);
  if (proposal.usage) doc = { ...doc, usage: [...(before?.usage ?? []), proposal.usage] };
  const done = req.generation >= config.generations || !!config.rewardFiles;
  return { searchUri: await writeSearch(ctx, doc), generation: req.generation + 1, done };
}

const Baselines = z.object({ env: z.string().min(1), shaped: z.string().min(1) }).strict();

export const FinalPlanRequest = z.object({ searchUri: z.string(), baselines: Baselines, config: z.unknown() }).strict();
export type FinalPlanRequest = z.infer<typeof FinalPlanRequest>;

/** The final's plan: the winner and both baselines, retrained on the final's training seeds, graded on its fresh seeds. */
export async function finalPlanStep(ctx: StoreContext, req: FinalPlanRequest, config: LoopConfig) {
  const doc = await readSearch(req.searchUri);
  const roles = finalCandidates(doc, {
    env: { name: 'env-reward', rationale: "the environment's own reward: -1 per step", source: req.baselines.env, origin: 'baseline' },
    shaped: {
      name: 'shaped-reward',
      rationale: 'a person-written shaped reward: energy gained, and a bonus at the goal',
      source: req.baselines.shaped,
      origin: 'baseline',
    },
  });
  const candidates = roles.map((r) => r.candidate);
  return stageProposal(ctx, {
    phase: 'final',
    roles: roles.map((r) => r.role),
    candidates,
    items: itemsFor(candidates, config, { train: config.finalTrainSeeds, grade: config.finalSeeds }),
  });
}

export const FinalRecordRequest = z.object({ searchUri: z.string(), proposal: StagedProposal, results: z.array(z.unknown()) }).strict();
export type FinalRecordRequest = z.infer<typeof FinalRecordRequest>;

/** The final's record: the graded seeds of the winner and both baselines into the search document. */
export async function finalRecordStep(ctx: StoreContext, req: FinalRecordRequest) {
  const doc = await readSearch(req.searchUri);
  const proposal = await readProposal(req.proposal.proposalUri);
  const names = proposal.roles ?? [];
  if (names.length !== proposal.candidates.length) throw new ConfigError('proposal.roles', names, 'must name one role per candidate');
  const roles = names.map((role, i) => ({ role: role as FinalRole, candidate: proposal.candidates[i]! }));
  const outcomes = await readOutcomes(req.results, 'results');
  return { searchUri: await writeSearch(ctx, recordFinal(doc, roles, proposal.items, outcomes)) };
}

export const ReportRequest = z.object({ searchUri: z.string(), config: z.record(z.string(), z.unknown()) }).strict();
export type ReportRequest = z.infer<typeof ReportRequest>;

/** The report, the winning reward function and the search document, listed for publishing. */
export async function reportStep(ctx: StoreContext, req: ReportRequest) {
  const doc = await readSearch(req.searchUri);
  const winner = winnerOf(doc);
  const prefix = `data/${ctx.pipeline}/report/${req.searchUri.split('/').pop()!.replace('.json', '')}/`;
  const report = await writeFile(ctx.bucket, `${prefix}report.html`, await rewardReportHtml(doc, req.config), 'text/html; charset=utf-8');
  const source = await writeFile(ctx.bucket, `${prefix}reward.py`, winner.source, 'text/x-python');
  return {
    files: [
      { name: 'reward.py', uri: source.uri },
      { name: 'report.html', uri: report.uri },
      { name: 'search.json', uri: req.searchUri },
    ],
    metrics: rewardMetrics(doc),
    reportUri: report.uri,
    winner: winner.name,
    s3Outputs: [report, source].map(({ Bucket, Key }) => ({ Bucket, Key })),
  };
}
