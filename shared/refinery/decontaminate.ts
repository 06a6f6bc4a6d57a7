/**
 * Decontamination: removes documents that contain text of a benchmark item, so that a model
 * trained on the refined corpus has not seen the evaluation's answers.
 *
 * What it guarantees:
 * 1. Word n-grams of the normalised text (normalize.ts: case, punctuation, digits and spacing do
 *    not matter). n is a parameter, default 13 (GPT-3's choice, which the refinery's issue names);
 *    the reference implementation this follows defaults to 12. Every result states the n it used.
 * 2. Indexed per item: the n-grams of the answer, and the n-grams of prompt + answer that span the
 *    boundary (start in the prompt, end in the answer), so a short answer ("18") is caught together
 *    with the end of its question. The prompt's own n-grams only when `indexPrompt` is set (off by
 *    default: prompts are often generic instructions or quoted public text).
 * 3. A document is removed when any of its n-grams is indexed (one hit is enough), and the result
 *    names the benchmark, its version and the item id. When an n-gram belongs to several items,
 *    the first item given is named.
 * 4. An item whose prompt + answer has fewer than n words is indexed whole, as one phrase, and
 *    matched as a substring of the normalised document on word boundaries (" x y " inside
 *    " ...document... "). Such short items can match common text; the index counts them
 *    (`shortItems`) so a report can say how many there were.
 * 5. An empty benchmark list is not an error: the result says there was nothing to check against
 *    and keeps every document.
 *
 * Items have the shape of the evaluation registry's JSONL rows ({id, prompt, answer}, see
 * shared/evals/benchmarks.ts) plus the benchmark's name and version.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';
import type { RefineryDocument } from './dedup.ts';
import { normalizeText, normalizedWords, wordsOfNormalized } from './normalize.ts';

export const DEFAULT_DECONTAMINATION_NGRAM = 13;
/** Longer n-grams than this would miss reformatted copies; shorter than 1 is meaningless. */
export const MAX_DECONTAMINATION_NGRAM = 50;

export const BenchmarkItem = z
  .object({
    benchmark: z.string().min(1),
    version: z.int().min(1),
    id: z.union([z.string().min(1), z.int()]),
    prompt: z.string(),
    answer: z.string(),
  })
  .loose();
export type BenchmarkItem = z.infer<typeof BenchmarkItem>;

export interface DecontaminationOptions {
  /** Words per n-gram. Default 13. */
  readonly ngram?: number;
  /** Also index n-grams that lie wholly in the prompt. Default false. */
  readonly indexPrompt?: boolean;
}

/** The benchmark item an indexed n-gram or phrase came from. */
export interface ContaminationSource {
  readonly benchmark: string;
  readonly version: number;
  readonly itemId: string | number;
}

/** A hit: the item, and the normalised text that matched (an n-gram, or a short item's phrase). */
export interface ContaminationMatch extends ContaminationSource {
  readonly matched: string;
}

export interface ContaminationIndex {
  readonly ngram: number;
  readonly indexPrompt: boolean;
  readonly items: number;
  /** Items indexed whole as one phrase because they have fewer than `ngram` words. */
  readonly shortItems: number;
  readonly ngrams: ReadonlyMap<string, ContaminationSource>;
  readonly phrases: readonly { readonly phrase: string; readonly source: ContaminationSource }[];
}

/** The n-gram index of a list of benchmark items. */
export function buildContaminationIndex(items: readonly unknown[], options: DecontaminationOptions = {}): ContaminationIndex {
  const n = options.ngram ?? DEFAULT_DECONTAMINATION_NGRAM;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_DECONTAMINATION_NGRAM) {
    throw new ConfigError('ngram', options.ngram, `must be an integer in [1, ${MAX_DECONTAMINATION_NGRAM}]`);
  }
  const indexPrompt = options.indexPrompt ?? false;
  if (typeof indexPrompt !== 'boolean') throw new ConfigError('indexPrompt', options.indexPrompt, 'must be true or false');
  if (!Array.isArray(items)) throw new ConfigError('items', items, 'must be an array of {benchmark, version, id, prompt, answer}');
  const ngrams = new Map<string, ContaminationSource>();
  const phrases: { phrase: string; source: ContaminationSource }[] = [];
  items.forEach((raw, i) => {
    const item = parseOrThrow(BenchmarkItem, raw, `items[${i}]`);
    const source: ContaminationSource = { benchmark: item.benchmark, version: item.version, itemId: item.id };
    const prompt = normalizedWords(item.prompt);
    const answer = normalizedWords(item.answer);
    const words = [...prompt, ...answer];
    if (words.length === 0) return;
    if (words.length < n) {
      phrases.push({ phrase: words.join(' '), source });
      return;
    }
    // Windows [start, start + n) of prompt + answer: those reaching into the answer always
    // (answer-only and boundary-spanning), those wholly in the prompt when asked.
    const firstStart = indexPrompt ? 0 : Math.max(0, prompt.length - n + 1);
    const reachesAnswer = answer.length > 0;
    if (!reachesAnswer && !indexPrompt) return;
    for (let start = firstStart; start + n <= words.length; start++) {
      const gram = words.slice(start, start + n).join(' ');
      if (!ngrams.has(gram)) ngrams.set(gram, source);
    }
  });
  return { ngram: n, indexPrompt, items: items.length, shortItems: phrases.length, ngrams, phrases };
}

/** The first indexed n-gram (in document order) or short-item phrase found in `text`, if any. */
export function findContamination(index: ContaminationIndex, text: string): ContaminationMatch | undefined {
  const normalized = normalizeText(text);
  const words = wordsOfNormalized(normalized);
  if (index.ngrams.size > 0) {
    for (let start = 0; start + index.ngram <= words.length; start++) {
      const gram = words.slice(start, start + index.ngram).join(' ');
      const source = index.ngrams.get(gram);
      if (source) return { ...source, matched: gram };
    }
  }
  if (index.phrases.length > 0) {
    const padded = ` ${normalized} `;
    for (const { phrase, source } of index.phrases) if (padded.includes(` ${phrase} `)) return { ...source, matched: phrase };
  }
  return undefined;
}

/** A removed document and the benchmark item it contained. */
export interface ContaminatedDocument extends ContaminationMatch {
  readonly documentId: string;
}

export type DecontaminationResult =
  | {
      /** False: there were no benchmark items, so nothing was checked and every document is kept. */
      readonly checked: false;
      readonly reason: string;
      readonly kept: string[];
      readonly removed: [];
    }
  | {
      readonly checked: true;
      readonly ngram: number;
      readonly indexPrompt: boolean;
      readonly items: number;
      readonly shortItems: number;
      readonly kept: string[];
      readonly removed: ContaminatedDocument[];
    };

/** Documents split into kept and removed (each with the item it contained), in input order. */
export function decontaminate(documents: readonly RefineryDocument[], items: readonly unknown[], options: DecontaminationOptions = {}): DecontaminationResult {
  const index = buildContaminationIndex(items, options);
  if (!Array.isArray(documents)) throw new ConfigError('documents', documents, 'must be an array of {id, text}');
  documents.forEach((document, i) => {
    if (typeof document?.id !== 'string' || document.id === '') throw new ConfigError(`documents[${i}].id`, document?.id, 'must be a non-empty string');
    if (typeof document.text !== 'string') throw new ConfigError(`documents[${i}].text`, document.text, 'must be a string');
  });
  if (index.items === 0) {
    return { checked: false, reason: 'no benchmark items to check against', kept: documents.map((document) => document.id), removed: [] };
  }
  const kept: string[] = [];
  const removed: ContaminatedDocument[] = [];
  for (const document of documents) {
    const match = findContamination(index, document.text);
    if (match) removed.push({ documentId: document.id, ...match });
    else kept.push(document.id);
  }
  return { checked: true, ngram: index.ngram, indexPrompt: index.indexPrompt, items: index.items, shortItems: index.shortItems, kept, removed };
}
