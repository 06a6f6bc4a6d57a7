/**
 * What the refinery's LLM labels cost: a price per million tokens for each Claude model the
 * pinned @anthropic-ai/sdk names (its `Model` type), applied to the four token counts a Messages
 * API response reports.
 *
 * Prices change: Anthropic cuts them, adds tiers and retires models. The table is dated
 * (`CLAUDE_PRICES.pricesAsOf`) and a report should print that date next to any cost. A model
 * missing from the table is an error naming it, not a guess; a config may give a price override
 * instead ({inputPerMTok, outputPerMTok, cacheWritePerMTok, cacheReadPerMTok}).
 *
 * - Cache writes are priced at the 5-minute rate: the labeler's cache_control is
 *   {type: 'ephemeral'}, whose default lifetime is 5 minutes (the 1-hour rate is higher).
 * - Thinking tokens are billed as output tokens and are already in `outputTokens`.
 * - Batch API (50% off) and regional or long-prompt surcharges are not modelled: the labeler
 *   sends short synchronous requests. Claude Haiku 5.5's rates below are its tier for prompts of
 *   up to 100,000 tokens, which every labelling request is.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';

/** Token counts as a Messages API response's `usage` reports them, summed over requests. */
export interface TokenUsage {
  /** Input tokens neither read from nor written to the prompt cache. */
  readonly inputTokens: number;
  /** Output tokens, thinking included. */
  readonly outputTokens: number;
  /** usage.cache_read_input_tokens. */
  readonly cacheReadTokens: number;
  /** usage.cache_creation_input_tokens. */
  readonly cacheWriteTokens: number;
}

const perMTok = z.number().finite().min(0, 'must be a price in USD per million tokens, >= 0');

/** A model's prices in USD per million tokens; also the shape of a config's price override. */
export const ModelPrice = z
  .object({
    inputPerMTok: perMTok,
    outputPerMTok: perMTok,
    /** 5-minute cache writes. */
    cacheWritePerMTok: perMTok,
    cacheReadPerMTok: perMTok,
  })
  .strict();
export type ModelPrice = z.infer<typeof ModelPrice>;

const price = (inputPerMTok: number, outputPerMTok: number, cacheWritePerMTok: number, cacheReadPerMTok: number): ModelPrice => ({
  inputPerMTok,
  outputPerMTok,
  cacheWritePerMTok,
  cacheReadPerMTok,
});

const FABLE_5_2 = price(8, 40, 10, 0.2);
const FABLE_5_1 = price(10, 50, 12.5, 0.25);
const FABLE_5 = price(10, 50, 12.5, 1);
const OPUS_5_5 = price(4, 20, 5, 0.2);
const OPUS_4_5_TO_5 = price(5, 25, 6.25, 0.5);
const SONNET_5_5 = price(2, 10, 2.5, 0.1);
const SONNET_5 = price(2, 10, 2.5, 0.2);
const SONNET_4 = price(3, 15, 3.75, 0.3);
const HAIKU_5_5 = price(0.1, 0.5, 0.125, 0.01);
const HAIKU_4_5 = price(1, 5, 1.25, 0.1);

/**
 * Prices by model id, USD per million tokens: input, output, 5-minute cache write, cache read.
 *
 * Sources, read on the date below: Anthropic's pricing page and model overview pages
 * (platform.claude.com/docs/en/about-claude/pricing, .../models/<model>/overview) for the Opus,
 * Sonnet, Haiku 4.5 and Fable/Mythos 5 and 5.1 rows. Three rows rest on secondary sources that
 * quote Anthropic's list price, because the stored copy of the pricing page predates them: Claude
 * Fable 5.2 and Mythos 5.2 (released 2026-11-09; Mythos shares Fable's pricing as in earlier
 * releases), Claude Sonnet 5.5's cache read (cut from $0.20 to $0.10 on 2026-10-07) and Claude
 * Haiku 5.5's cache rates. Check them against the pricing page before relying on a cost.
 *
 * Not priced: claude-mythos-preview (invitation only, deprecated by the SDK, end of life
 * 2026-06-30); a run with it needs a price override.
 */
export const CLAUDE_PRICES = {
  pricesAsOf: '2026-11-10',
  note: 'Prices change; check https://platform.claude.com/docs/en/about-claude/pricing and update this table (and pricesAsOf), or give a price override in the config.',
  models: {
    'claude-fable-5-2': FABLE_5_2,
    'claude-mythos-5-2': FABLE_5_2,
    'claude-fable-5-1': FABLE_5_1,
    'claude-mythos-5-1': FABLE_5_1,
    'claude-fable-5': FABLE_5,
    'claude-mythos-5': FABLE_5,
    'claude-opus-5-5': OPUS_5_5,
    'claude-opus-5': OPUS_4_5_TO_5,
    'claude-opus-4-8': OPUS_4_5_TO_5,
    'claude-opus-4-7': OPUS_4_5_TO_5,
    'claude-opus-4-6': OPUS_4_5_TO_5,
    'claude-opus-4-5': OPUS_4_5_TO_5,
    'claude-opus-4-5-20251101': OPUS_4_5_TO_5,
    'claude-sonnet-5-5': SONNET_5_5,
    'claude-sonnet-5': SONNET_5,
    'claude-sonnet-4-6': SONNET_4,
    'claude-sonnet-4-5': SONNET_4,
    'claude-sonnet-4-5-20250929': SONNET_4,
    'claude-haiku-5-5': HAIKU_5_5,
    'claude-haiku-4-5': HAIKU_4_5,
    'claude-haiku-4-5-20251001': HAIKU_4_5,
  } as Readonly<Record<string, ModelPrice>>,
} as const;

/** The model's prices: the override when given (checked), else the table's row, else an error naming the model. */
export function modelPrice(model: string, override?: ModelPrice): ModelPrice {
  if (override !== undefined) return parseOrThrow(ModelPrice, override, 'priceOverride');
  const known = Object.hasOwn(CLAUDE_PRICES.models, model) ? CLAUDE_PRICES.models[model] : undefined;
  if (known) return known;
  throw new ConfigError(
    'model',
    model,
    `has no price in shared/refinery/llm-cost.ts (prices as of ${CLAUDE_PRICES.pricesAsOf}): add its price there, or give priceOverride {inputPerMTok, outputPerMTok, cacheWritePerMTok, cacheReadPerMTok} in USD per million tokens`,
  );
}

/** What `usage` cost on `model`, in USD. */
export function llmCostUsd(usage: TokenUsage, model: string, override?: ModelPrice): number {
  const p = modelPrice(model, override);
  const count = (field: keyof TokenUsage): number => {
    const value = usage?.[field];
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
      throw new ConfigError(`usage.${field}`, value, 'must be a token count, an integer >= 0');
    return value;
  };
  return (
    (count('inputTokens') * p.inputPerMTok +
      count('outputTokens') * p.outputPerMTok +
      count('cacheWriteTokens') * p.cacheWritePerMTok +
      count('cacheReadTokens') * p.cacheReadPerMTok) /
    1_000_000
  );
}

/** The cost of `usage` spread over the `documents` it labelled, in USD per document. */
export function costPerDocument(usage: TokenUsage, model: string, documents: number, override?: ModelPrice): number {
  if (!Number.isSafeInteger(documents) || documents < 1) throw new ConfigError('documents', documents, 'must be an integer >= 1');
  return llmCostUsd(usage, model, override) / documents;
}
