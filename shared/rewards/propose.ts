/**
 * Reward search, step 1: Claude proposes K reward functions for a task, as structured output
 * validated by a schema. The fixed part of the prompt (the task, the spaces, the dynamics, the
 * reward interface and the rules) is one cached block, so every generation after the first reads
 * it from the prompt cache; the variable part is the previous generation's candidates with their
 * per-seed success and training curves, scored by the trusted grader (never by what a candidate
 * reported about itself).
 */
import { Anthropic } from '@anthropic-ai/sdk';
import { MissingApiKeyError, ProposalError } from './errors.ts';
import { zodOutputFormat } from '@anthropic-ai/sdk/helpers/zod';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { z } from 'zod';
import { secretsClient } from '../clients/aws.ts';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';

/**
 * Initial value of the Anthropic API key secret (the platform stack stores it). It is not a
 * secret: it tells whoever reads it what to do, and the Anthropic API rejects it, so a forgotten
 * key fails loudly; resolveApiKey treats it as no key.
 */
export const ANTHROPIC_KEY_PLACEHOLDER = 'UNSET: store the key with aws secretsmanager put-secret-value --secret-id <AnthropicApiKeyArn> --secret-string <key>';

/** The most tokens a proposal may take (its max_tokens). */
export const PROPOSE_MAX_TOKENS = 8000;

/** At most this many characters of Python per candidate: a reward function, not a program. */
export const MAX_SOURCE_CHARS = 6000;

export const RewardCandidate = z
  .object({
    /** A short slug naming the idea, unique in its generation. */
    name: z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/, 'must be a lowercase slug of at most 40 characters'),
    /** Why this reward should work, in a few sentences. */
    rationale: z.string().min(1).max(2000),
    /** Python source defining the reward function. */
    source: z.string().min(1).max(MAX_SOURCE_CHARS),
  })
  .strict();
export type RewardCandidate = z.infer<typeof RewardCandidate>;

export const ProposalOutput = z.object({ candidates: z.array(RewardCandidate).min(1).max(16) }).strict();
export type ProposalOutput = z.infer<typeof ProposalOutput>;

/** What the model is told about the task: fixed per task, so it is the cached prefix. */
export interface RewardTask {
  readonly name: string;
  /** Goal, observation and action spaces, dynamics, the success rule. */
  readonly description: string;
  /** The exact function signature and semantics the source must implement. */
  readonly rewardInterface: string;
  /** The name the source must define, checked before anything runs it. */
  readonly functionName: string;
}

/** One graded candidate of an earlier generation, as fed back. */
export interface CandidateFeedback {
  readonly generation: number;
  readonly name: string;
  readonly source: string;
  /** Trusted grading on fresh seeds: success rate per training seed. */
  readonly perSeedSuccess: readonly { seed: number; success: number | null; error?: string }[];
  readonly meanSuccess: number | null;
  /** A few points of the training curve (env-reward return, success) per seed, or a failure. */
  readonly curve?: string;
  /** The sandbox's verdict when the candidate misbehaved (timeout, memory, network...). */
  readonly verdict?: string;
}

export interface ProposeRequest {
  readonly task: RewardTask;
  readonly generation: number;
  readonly candidates: number;
  readonly history: readonly CandidateFeedback[];
  readonly model: string;
  /** Default: PROPOSE_MAX_TOKENS. */
  readonly maxTokens?: number;
}

function fixedPrompt(task: RewardTask): string {
  return [
    `You design reward functions for reinforcement learning. Task: ${task.name}.`,
    '',
    task.description,
    '',
    "The reward function you write is used to train a PPO policy; the policy is then graded by the task's own success rule on",
    'fresh seeds it never trained on. Only that grade counts; anything your code prints or writes is ignored by the grader.',
    '',
    'Interface:',
    task.rewardInterface,
    '',
    'Rules: pure Python 3 with the standard library and numpy only; no I/O, no imports of other modules, no global state',
    'between calls; keep it short. Each candidate should try a different idea; learn from the earlier generations below.',
  ].join('\n');
}

/**
 * The most characters of a seed's failure, a sandbox verdict or a training curve the history
 * shows: a failure carries the job's stderr tail (1,500 characters) after its error (at most 256),
 * and a cause that reached the fan-out whole may be 32,768. Cut, each prompt has a known most
 * size, which the plan's cost bound counts (pipelines/rewards/plan.ts).
 */
export const MAX_FEEDBACK_CHARS = 2000;

/** `text` cut to MAX_FEEDBACK_CHARS UTF-16 units, saying so (a surrogate pair is never split). */
export function feedbackText(text: string): string {
  if (text.length <= MAX_FEEDBACK_CHARS) return text;
  const mark = ' [cut]';
  let end = MAX_FEEDBACK_CHARS - mark.length;
  if (/[\uD800-\uDBFF]/.test(text[end - 1] ?? '')) end -= 1;
  return `${text.slice(0, end)}${mark}`;
}

function historyPrompt(request: ProposeRequest): string {
  if (!request.history.length) return `Generation ${request.generation}: no earlier candidates. Propose ${request.candidates} reward functions.`;
  const lines = request.history.map((c) => {
    const seeds = c.perSeedSuccess
      .map((s) => `seed ${s.seed}: ${s.success === null ? `failed (${feedbackText(s.error ?? 'error')})` : s.success.toFixed(2)}`)
      .join(', ');
    return [
      `### generation ${c.generation}, ${c.name}: mean success ${c.meanSuccess === null ? 'none' : c.meanSuccess.toFixed(2)}${c.verdict ? `; sandbox verdict: ${feedbackText(c.verdict)}` : ''}`,
      `per seed: ${seeds}`,
      ...(c.curve ? [`training curve (the job's own log, not graded): ${feedbackText(c.curve)}`] : []),
      '```python',
      c.source,
      '```',
    ].join('\n');
  });
  return [
    `Generation ${request.generation}. Earlier candidates, graded on fresh seeds:`,
    '',
    ...lines,
    '',
    `Propose ${request.candidates} new reward functions.`,
  ].join('\n');
}

/** The Messages API request: the fixed task block cached, the history after it, structured output. */
export function buildProposeParams(request: ProposeRequest) {
  if (!Number.isInteger(request.candidates) || request.candidates < 1 || request.candidates > 16) {
    throw new ConfigError('candidates', request.candidates, 'must be an integer from 1 to 16');
  }
  return {
    model: request.model,
    max_tokens: request.maxTokens ?? PROPOSE_MAX_TOKENS,
    system: [{ type: 'text' as const, text: fixedPrompt(request.task), cache_control: { type: 'ephemeral' as const } }],
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: historyPrompt(request) }] }],
    output_config: { format: zodOutputFormat(ProposalOutput) },
  };
}

/**
 * Checks what the model returned beyond the schema: exactly K candidates, unique names, and a
 * source that defines the interface's function. Nothing here runs the source.
 */
export function checkProposal(output: unknown, request: Pick<ProposeRequest, 'candidates' | 'task'>): RewardCandidate[] {
  const parsed = parseOrThrow(ProposalOutput, output, 'proposal');
  if (parsed.candidates.length !== request.candidates) {
    throw new ProposalError(`proposal.candidates: expected ${request.candidates} candidates, got ${parsed.candidates.length}`);
  }
  const seen = new Set<string>();
  parsed.candidates.forEach((c, i) => {
    if (seen.has(c.name)) throw new ConfigError(`proposal.candidates[${i}].name`, c.name, 'is used by an earlier candidate of this generation');
    seen.add(c.name);
    if (!new RegExp(`^def ${request.task.functionName}\\(`, 'm').test(c.source)) {
      throw new ConfigError(`proposal.candidates[${i}].source`, c.source.slice(0, 80), `must define ${request.task.functionName}(...) at the top level`);
    }
  });
  return parsed.candidates;
}

export interface ProposeResult {
  readonly candidates: RewardCandidate[];
  readonly usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number };
  readonly model: string;
}

/** Asks the model; the result is checked before it is returned. */
export async function proposeRewards(client: Anthropic, request: ProposeRequest): Promise<ProposeResult> {
  const message = await client.messages.parse(buildProposeParams(request));
  if (message.stop_reason === 'max_tokens')
    throw new ProposalError(`the model ran out of tokens (max_tokens ${request.maxTokens ?? PROPOSE_MAX_TOKENS}) before finishing the proposal`);
  const candidates = checkProposal(message.parsed_output, request);
  return {
    candidates,
    model: message.model,
    usage: {
      inputTokens: message.usage.input_tokens,
      outputTokens: message.usage.output_tokens,
      cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
      cacheWriteTokens: message.usage.cache_creation_input_tokens ?? 0,
    },
  };
}

/**
 * The API key: ANTHROPIC_API_KEY when set (local mode), else the secret the platform stores
 * (AWS). A secret still holding the placeholder is a missing key.
 */
export async function resolveApiKey(env: NodeJS.ProcessEnv, secretArn: string | undefined): Promise<string> {
  const fromEnv = env.ANTHROPIC_API_KEY;
  if (fromEnv) return fromEnv;
  if (secretArn) {
    const value = ((await secretsClient().send(new GetSecretValueCommand({ SecretId: secretArn }))).SecretString ?? '').trim();
    if (value && value !== ANTHROPIC_KEY_PLACEHOLDER) return value;
    throw new MissingApiKeyError(
      `the Anthropic API key secret (${secretArn}) is not set: store the key with aws secretsmanager put-secret-value --secret-id ${secretArn} --secret-string <key>`,
    );
  }
  throw new MissingApiKeyError('no Anthropic API key: set ANTHROPIC_API_KEY, or evaluate reward functions from files instead');
}

/** The SDK's retries of a proposal (429, 5xx, connection errors): a proposal sends at most PROPOSE_RETRIES + 1 requests. */
export const PROPOSE_RETRIES = 2;

/** A client for the real API, or for ANTHROPIC_BASE_URL (the tests' fake server on loopback). */
export function anthropicClient(apiKey: string, baseURL = process.env.ANTHROPIC_BASE_URL): Anthropic {
  return new Anthropic({ apiKey, ...(baseURL ? { baseURL } : {}), maxRetries: PROPOSE_RETRIES });
}
