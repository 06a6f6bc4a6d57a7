/**
 * The reward search's Lambda steps: propose (Claude, or reward files), record a generation, plan
 * and record the final, and the report. The search document lives in S3, content-addressed.
 * Each handler parses its event with the step's request schema (its root names the step in
 * errors) and the loop's config with LoopConfig (root `config`), then calls the step.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';
import { readContentAddressed, writeContentAddressed, writeFile } from '../documents.ts';
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
import { anthropicClient, proposeRewards, resolveApiKey } from './propose.ts';
import { RewardSearchDoc, rewardMetrics, rewardReportHtml } from './report.ts';
import type { FinalRole } from './report.ts';

export interface StoreContext {
  readonly bucket: string;
  readonly pipeline: string;
}

export const LoopConfig = z
  .object({
    generations: z.int(),
    candidates: z.int(),
    model: z.string(),
    rewardFiles: z.array(z.object({ name: z.string(), source: z.string() })).optional(),
    trainSeeds: z.array(z.int()),
    gradeSeeds: z.array(z.int()),
    finalTrainSeeds: z.array(z.int()).min(1),
    finalSeeds: z.array(z.int()),
    episodesPerSeed: z.int(),
    train: z.object({ total_steps: z.int(), num_envs: z.int(), evaluation_episodes: z.int() }),
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

/** Step 1 of a generation: the candidates (reward files, or Claude with the graded history) and their training items. */
export async function proposeStep(request: ProposeRequest, config: LoopConfig, env: { anthropicSecretArn?: string }) {
  const { generation, searchUri } = request;
  let candidates: ProposedCandidate[];
  let usage: { generation: number; inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number } | undefined;
  if (config.rewardFiles) {
    candidates = config.rewardFiles.map((f) => ({ name: f.name, rationale: 'given as a file', source: f.source, origin: 'file' as const }));
  } else {
    const history = searchUri ? feedbackFrom(await readSearch(searchUri)) : [];
    const client = anthropicClient(await resolveApiKey(process.env, env.anthropicSecretArn));
    const result = await proposeRewards(client, { task: MOUNTAINCAR_TASK, generation, candidates: config.candidates, history, model: config.model });
    candidates = result.candidates.map((c) => ({ ...c, origin: 'claude' as const }));
    usage = { generation, ...result.usage };
  }
  return {
    phase: 'search',
    generation,
    candidates,
    items: itemsFor(candidates, config, { train: config.trainSeeds, grade: config.gradeSeeds }),
    ...(usage ? { usage } : {}),
  };
}

const Proposal = z
  .object({
    candidates: z.array(z.object({ name: z.string(), rationale: z.string(), source: z.string(), origin: z.enum(['claude', 'file', 'baseline']) })),
    items: z.array(z.unknown()),
    usage: z
      .object({ generation: z.int(), inputTokens: z.number(), outputTokens: z.number(), cacheReadTokens: z.number(), cacheWriteTokens: z.number() })
      .optional(),
  })
  .loose();

export const RecordRequest = z
  .object({ generation: z.int(), searchUri: z.string().nullable(), proposal: Proposal, results: z.array(z.unknown()), config: z.unknown() })
  .strict();
export type RecordRequest = z.infer<typeof RecordRequest>;

/** Step 3 of a generation: its seed results into the search document. */
export async function recordStep(ctx: StoreContext, req: RecordRequest, config: LoopConfig) {
  const before = req.searchUri ? await readSearch(req.searchUri) : undefined;
  const results = candidateResults(req.proposal.candidates, req.proposal.items as TrainItem[], req.results);
  let doc = recordGeneration(before, req.generation, results);
  if (req.proposal.usage) doc = { ...doc, usage: [...(before?.usage ?? []), req.proposal.usage] };
  const done = req.generation >= config.generations || !!config.rewardFiles;
  return { searchUri: await writeSearch(ctx, doc), generation: req.generation + 1, done };
}

const Baselines = z.object({ env: z.string().min(1), shaped: z.string().min(1) }).strict();

export const FinalPlanRequest = z.object({ searchUri: z.string(), baselines: Baselines, config: z.unknown() }).strict();
export type FinalPlanRequest = z.infer<typeof FinalPlanRequest>;

/** The final's plan: the winner and both baselines, retrained on the final's training seeds, graded on its fresh seeds. */
export async function finalPlanStep(req: FinalPlanRequest, config: LoopConfig) {
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
  return {
    phase: 'final',
    roles: roles.map((r) => r.role),
    candidates: roles.map((r) => r.candidate),
    items: itemsFor(
      roles.map((r) => r.candidate),
      config,
      { train: config.finalTrainSeeds, grade: config.finalSeeds },
    ),
  };
}

export const FinalRecordRequest = z
  .object({
    searchUri: z.string(),
    proposal: Proposal.extend({ roles: z.array(z.enum(['winner', 'env-reward', 'shaped-reward'])) }),
    results: z.array(z.unknown()),
  })
  .strict();
export type FinalRecordRequest = z.infer<typeof FinalRecordRequest>;

/** The final's record: the graded seeds of the winner and both baselines into the search document. */
export async function finalRecordStep(ctx: StoreContext, req: FinalRecordRequest) {
  const doc = await readSearch(req.searchUri);
  const roles = req.proposal.roles.map((role, i) => ({ role: role as FinalRole, candidate: req.proposal.candidates[i]! }));
  if (roles.length !== req.proposal.candidates.length) throw new ConfigError('proposal.roles', req.proposal.roles, 'must name one role per candidate');
  return { searchUri: await writeSearch(ctx, recordFinal(doc, roles, req.proposal.items as TrainItem[], req.results)) };
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
