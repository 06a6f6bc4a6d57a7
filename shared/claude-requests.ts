/**
 * Many small Messages API requests, one per item (a document to label, a feature to explain, a
 * prompt of windows to classify), sent with the care a long unattended run needs. The refinery's
 * labeler and the SAE pipeline's explainer and detector share it.
 *
 * Guarantees:
 * 1. At most `concurrency` requests of a run are in flight at once (`maxInFlight` is the measured
 *    peak); runs that share a `limiter` are bounded together by it as well.
 * 2. With `firstAlone`, the first item is sent alone and the others start when its first answer
 *    arrives: requests sent before the first prompt-cache write completes would each write the
 *    cache again.
 * 3. The SDK does no retrying (maxRetries 0); this module does, once per failure: 408, 409, 429,
 *    5xx and 529 answers, connection errors and timeouts wait with exponential backoff and full
 *    jitter, or for the answer's retry-after-ms / retry-after (capped at `maxBackoffMs`, 60 s by
 *    default); a refusal or an answer the caller's `parse` rejects is asked again at once. After
 *    `maxAttempts` the item settles as failed with its reason ('refused', 'malformed', 'timeout',
 *    'api-error') and a detail; no item is dropped and no single item fails the run.
 * 4. A 401 (the key is wrong) fails the whole run with InvalidApiKeyError and aborts the requests
 *    in flight: every other request would fail the same way. Any other 4xx settles the item as
 *    'api-error' without retrying.
 * 5. `usage` sums the tokens of every response that carried usage, failed attempts included, so
 *    its cost is what was billed.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Anthropic, APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import { ConfigError, PipelineError } from './errors.ts';
import type { Random } from './random.ts';
import type { TokenUsage } from './refinery/llm-cost.ts';

/** The longest `detail` of a failed item. */
export const MAX_DETAIL_CHARS = 300;

/** The Anthropic API rejected the key (401): no request of the run can succeed. */
export class InvalidApiKeyError extends PipelineError {}

/** Why an item has no answer after its attempts. */
export type FailureReason = 'refused' | 'malformed' | 'timeout' | 'api-error';

/** One failed attempt, classified. */
export interface RequestFailure {
  readonly ok: false;
  readonly reason: FailureReason;
  readonly detail: string;
  /** The HTTP status, when the API answered with an error. */
  readonly status?: number;
  /** Undefined: not retried. 0: retried at once. 'backoff': exponential backoff. Else the answer's retry-after. */
  readonly retryAfterMs: number | 'backoff' | undefined;
}

/** One attempt's outcome: the parsed answer or a classified failure. */
export type AttemptOutcome<O> = { readonly ok: true; readonly value: O } | RequestFailure;

/** Options every run takes. */
export interface ClaudeRequestOptions {
  /** Requests in flight at once, 1 to 64. */
  readonly concurrency: number;
  /** Requests per item before it settles as failed; 4 by default. */
  readonly maxAttempts?: number;
  /** Per request; 60,000 ms by default. */
  readonly timeoutMs?: number;
  /** The first wait of the exponential backoff (full jitter draws below it); 1,000 ms by default. */
  readonly backoffBaseMs?: number;
  /** No wait is longer, retry-after included; 60,000 ms by default. */
  readonly maxBackoffMs?: number;
  /** Waits between attempts; tests pass one that records the delays. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Draws the jitter; Math.random by default (it changes timing, never an answer). */
  readonly random?: Random;
  /** A bound shared with other runs (createRequestLimiter), on top of `concurrency`. */
  readonly limiter?: RequestLimiter;
}

/** The checked numeric settings of a run. */
export interface RequestSettings {
  readonly concurrency: number;
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly backoffBaseMs: number;
  readonly maxBackoffMs: number;
}

/** An integer in [low, high], or a ConfigError naming the field, the range and the value. */
export function checkInteger(field: string, value: unknown, low: number, high: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < low || value > high)
    throw new ConfigError(field, value, `must be an integer from ${low} to ${high}`);
  return value;
}

/** Requests per item at most, retries included, unless a run sets `maxAttempts` (the plans' high cost bound reads it). */
export const DEFAULT_MAX_ATTEMPTS = 4;

/** The run's settings with defaults, each checked (ConfigError naming the field otherwise). */
export function checkRequestOptions(options: ClaudeRequestOptions): RequestSettings {
  return {
    concurrency: checkInteger('concurrency', options.concurrency, 1, 64),
    maxAttempts: checkInteger('maxAttempts', options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, 1, 20),
    timeoutMs: checkInteger('timeoutMs', options.timeoutMs ?? 60_000, 1, 600_000),
    backoffBaseMs: checkInteger('backoffBaseMs', options.backoffBaseMs ?? 1000, 0, 60_000),
    maxBackoffMs: checkInteger('maxBackoffMs', options.maxBackoffMs ?? 60_000, 0, 600_000),
  };
}

/** A client for these runs: the SDK must not retry, because runClaudeRequests does. */
export function anthropicClient(apiKey: string, baseURL = process.env.ANTHROPIC_BASE_URL): Anthropic {
  return new Anthropic({ apiKey, ...(baseURL ? { baseURL } : {}), maxRetries: 0 });
}

// ---------------------------------------------------------------------------------------------
// Classifying an attempt.

/** Statuses worth another try: timeouts, conflicts, rate limits, server errors, overload. */
export function isRetriedStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || (status >= 500 && status !== 501);
}

/** A thrown SDK error as a failure: its reason, a detail, and whether and how to retry. */
export function classifyError(error: unknown): RequestFailure {
  if (error instanceof APIConnectionTimeoutError) return { ok: false, reason: 'timeout', detail: 'the request timed out', retryAfterMs: 'backoff' };
  if (error instanceof APIUserAbortError) return { ok: false, reason: 'api-error', detail: 'aborted', retryAfterMs: undefined };
  if (error instanceof APIConnectionError)
    return { ok: false, reason: 'api-error', detail: clip(`connection error: ${error.message}`, MAX_DETAIL_CHARS), retryAfterMs: 'backoff' };
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    const detail = clip(`${status} ${error.type ?? 'error'}: ${error.apiMessage ?? error.message}`, MAX_DETAIL_CHARS);
    if (!isRetriedStatus(status)) return { ok: false, reason: 'api-error', detail, status, retryAfterMs: undefined };
    return { ok: false, reason: 'api-error', detail, status, retryAfterMs: retryAfterMs(error.headers) ?? 'backoff' };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, reason: 'api-error', detail: clip(`unexpected error: ${message}`, MAX_DETAIL_CHARS), retryAfterMs: undefined };
}

/** The text blocks of a message, joined. */
export function messageText(message: Anthropic.Message): string {
  return message.content
    .filter((block): block is Anthropic.TextBlock => block.type === 'text')
    .map((block) => block.text)
    .join('');
}

/**
 * A message as an outcome: a refusal is 'refused', an answer cut at max_tokens or one `parse`
 * throws on is 'malformed' (both asked again at once), else `parse`'s value.
 */
export function classifyAnswer<O>(message: Anthropic.Message, maxTokens: number, parse: (text: string) => O): AttemptOutcome<O> {
  const text = messageText(message);
  if (message.stop_reason === 'refusal')
    return { ok: false, reason: 'refused', detail: clip(`stop_reason refusal${text ? `: ${text}` : ''}`, MAX_DETAIL_CHARS), retryAfterMs: 0 };
  if (message.stop_reason === 'max_tokens')
    return {
      ok: false,
      reason: 'malformed',
      detail: clip(`stopped at max_tokens (${maxTokens}) before the answer ended: ${text}`, MAX_DETAIL_CHARS),
      retryAfterMs: 0,
    };
  try {
    return { ok: true, value: parse(text) };
  } catch (error) {
    return {
      ok: false,
      reason: 'malformed',
      detail: clip(`${(error as Error).message.replace(/\s+/g, ' ')}; got ${JSON.stringify(text)}`, MAX_DETAIL_CHARS),
      retryAfterMs: 0,
    };
  }
}

/** retry-after-ms (milliseconds), else retry-after (seconds, possibly fractional, or an HTTP date). */
export function retryAfterMs(headers: Headers | undefined, now = Date.now()): number | undefined {
  const ms = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers?.get('retry-after')?.trim();
  if (!raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * How long to wait before attempt `attempt + 1`: full jitter below min(cap, base x 2^(attempt-1))
 * for 'backoff'; the answer's retry-after plus up to 10% (at most 1 s) jitter, capped, so workers
 * told the same retry-after do not all come back at once; 0 for a retry at once.
 */
export function retryWaitMs(failure: RequestFailure, attempt: number, settings: RequestSettings, random: Random): number {
  if (failure.retryAfterMs === 'backoff') return random() * Math.min(settings.maxBackoffMs, settings.backoffBaseMs * 2 ** (attempt - 1));
  const after = failure.retryAfterMs ?? 0;
  if (after <= 0) return 0;
  return Math.min(settings.maxBackoffMs, after + random() * Math.min(1000, after * 0.1));
}

// ---------------------------------------------------------------------------------------------
// Usage.

/** Token counts being summed. */
export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export function emptyUsage(): UsageTotals {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

/** Adds a response's usage (or another total) to `total`. */
export function addUsage(total: UsageTotals, usage: Anthropic.Usage | TokenUsage): void {
  if ('input_tokens' in usage) {
    total.inputTokens += usage.input_tokens;
    total.outputTokens += usage.output_tokens;
    total.cacheReadTokens += usage.cache_read_input_tokens ?? 0;
    total.cacheWriteTokens += usage.cache_creation_input_tokens ?? 0;
  } else {
    total.inputTokens += usage.inputTokens;
    total.outputTokens += usage.outputTokens;
    total.cacheReadTokens += usage.cacheReadTokens;
    total.cacheWriteTokens += usage.cacheWriteTokens;
  }
}

// ---------------------------------------------------------------------------------------------
// Concurrency.

/** A counting semaphore over requests, to bound several runs together. */
export interface RequestLimiter {
  /** Waits for a slot; call the returned function once to give it back. */
  acquire(): Promise<() => void>;
  readonly inFlight: number;
  /** The most slots held at once. */
  readonly peak: number;
}

export function createRequestLimiter(concurrency: number): RequestLimiter {
  checkInteger('concurrency', concurrency, 1, 64);
  let held = 0;
  let peak = 0;
  const waiting: (() => void)[] = [];
  const take = (): (() => void) => {
    held++;
    peak = Math.max(peak, held);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held--;
      waiting.shift()?.();
    };
  };
  return {
    acquire: () => {
      if (held < concurrency) return Promise.resolve(take());
      return new Promise((resolve) => waiting.push(() => resolve(take())));
    },
    get inFlight() {
      return held;
    },
    get peak() {
      return peak;
    },
  };
}

/** Controls of a pool run. */
export interface PoolOptions {
  /** Workers, at least 1. */
  readonly concurrency: number;
  /** Only the first worker starts at once; the others wait for `open()` or its first item. */
  readonly firstAlone?: boolean;
  /** Checked before each item: true stops every worker. */
  readonly stopped?: () => boolean;
}

/**
 * Runs `task` over `items` with `concurrency` workers taking items in order. With `firstAlone`,
 * the other workers start when a task calls `open()` (say, when the first answer arrives), when
 * the first worker finishes its first item, or when it stops.
 */
export async function runPool<T>(items: readonly T[], options: PoolOptions, task: (item: T, index: number, open: () => void) => Promise<void>): Promise<void> {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  if (!options.firstAlone) open();
  let next = 0;
  const worker = async (w: number): Promise<void> => {
    if (w > 0) await opened;
    while (!options.stopped?.() && next < items.length) {
      const index = next++;
      await task(items[index]!, index, open);
      if (w === 0) open();
    }
  };
  const workers = Array.from({ length: Math.min(options.concurrency, Math.max(1, items.length)) }, (_, w) => worker(w));
  await Promise.all(workers.map((run, w) => (w === 0 ? run.finally(open) : run)));
}

// ---------------------------------------------------------------------------------------------
// A run.

/** How one item ended. */
export type Settled<I, O> = { readonly item: I; readonly index: number; readonly attempts: number } & (
  | { readonly ok: true; readonly value: O }
  | { readonly ok: false; readonly reason: FailureReason; readonly detail: string }
);

/** What a run of requests cost and how it went. */
export interface RequestStats {
  /** Summed over every response that carried usage, failed attempts included. */
  readonly usage: TokenUsage;
  /** HTTP requests sent. */
  readonly requests: number;
  /** Requests beyond each item's first. */
  readonly retries: number;
  /** The most requests of this run that were in flight at once. */
  readonly maxInFlight: number;
}

export interface RequestRun<I, O> extends RequestStats {
  /** Every item, in the order they settled. */
  readonly settled: Settled<I, O>[];
}

/** What a run sends for each item and how it reads the answer. */
export interface RequestSpec<I, O> {
  /** The request for an item (max_tokens is read from it for the max_tokens detail). */
  readonly request: (item: I) => Anthropic.MessageCreateParamsNonStreaming;
  /** The answer's text as a value; throws (any Error) when the answer is malformed. */
  readonly parse: (text: string, item: I) => O;
  /** Send the first item alone, so its answer writes the prompt cache the others read. */
  readonly firstAlone?: boolean;
  /** What InvalidApiKeyError's message tells the user to do; a default names ANTHROPIC_API_KEY. */
  readonly invalidKeyAdvice?: string;
  /** Called as each item settles, in the same turn, with the run's counts so far. */
  readonly onSettled?: (settled: Settled<I, O>, counts: { readonly requests: number; readonly retries: number }) => void;
}

/** Sends one request per item (plus retries) under the guarantees above. */
export async function runClaudeRequests<I, O>(
  client: Anthropic,
  items: readonly I[],
  options: ClaudeRequestOptions,
  spec: RequestSpec<I, O>,
): Promise<RequestRun<I, O>> {
  const settings = checkRequestOptions(options);
  const sleep = options.sleep ?? ((ms: number) => delay(ms));
  const random = options.random ?? Math.random;

  const settled: Settled<I, O>[] = [];
  const usage = emptyUsage();
  let requests = 0;
  let retries = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let fatal: Error | undefined;
  const abort = new AbortController();

  const attemptOnce = async (item: I, open: () => void): Promise<AttemptOutcome<O>> => {
    const params = spec.request(item);
    const release = options.limiter ? await options.limiter.acquire() : undefined;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let message: Anthropic.Message;
    try {
      message = await client.messages.create(params, { timeout: settings.timeoutMs, maxRetries: 0, signal: abort.signal });
    } catch (error) {
      return classifyError(error);
    } finally {
      inFlight--;
      release?.();
    }
    open();
    addUsage(usage, message.usage);
    return classifyAnswer(message, params.max_tokens, (text) => spec.parse(text, item));
  };

  const settle = (entry: Settled<I, O>) => {
    settled.push(entry);
    spec.onSettled?.(entry, { requests, retries });
  };

  const runOne = async (item: I, index: number, open: () => void): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      if (fatal) return;
      requests++;
      if (attempt > 1) retries++;
      const outcome = await attemptOnce(item, open);
      if (fatal) return;
      if (outcome.ok) return settle({ item, index, attempts: attempt, ok: true, value: outcome.value });
      if (outcome.status === 401) {
        fatal = new InvalidApiKeyError(
          `the Anthropic API rejected the API key (${outcome.detail}): ${spec.invalidKeyAdvice ?? "set a valid ANTHROPIC_API_KEY or store one in the key's secret"}`,
        );
        abort.abort();
        return;
      }
      if (outcome.retryAfterMs === undefined || attempt >= settings.maxAttempts)
        return settle({ item, index, attempts: attempt, ok: false, reason: outcome.reason, detail: outcome.detail });
      const wait = retryWaitMs(outcome, attempt, settings, random);
      if (wait > 0) await sleep(wait);
    }
  };

  await runPool(items, { concurrency: settings.concurrency, firstAlone: spec.firstAlone, stopped: () => fatal !== undefined }, runOne);
  if (fatal) throw fatal;
  return { settled, usage, requests, retries, maxInFlight };
}

// ---------------------------------------------------------------------------------------------
// Text.

/** One line (whitespace runs become one space), at most `max` characters. */
export function oneLine(text: string, max: number): string {
  return clip(text.replace(/\s+/g, ' ').trim(), max);
}

/** At most `max` characters, ending in … when cut (never on half a surrogate pair). */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = /[\ud800-\udbff]/.test(text[max - 2] ?? '') ? max - 2 : max - 1;
  return `${text.slice(0, cut)}…`;
}
