/**
 * Test material with known labels, mixed into a real corpus so that each refinery step's
 * precision and recall can be measured: spam for the filters, near-duplicates for MinHash dedup,
 * benchmark items for decontamination.
 *
 * What it guarantees:
 * 1. Deterministic: the same documents, items and options (seed included) give the same output.
 * 2. Labels stay out of the text: every injected document gets a neutral id `mix:<n>`, numbered
 *    in the order the documents appear in the mixed corpus, and the labels travel separately as
 *    the truth list.
 * 3. Spam comes in four variants, each written to be caught by a default filter rule
 *    (filters.ts), with seeded vocabulary, lengths and density so that the rate is measured, not
 *    built in: keyword stuffing (repetition rules), link farms (lines of URLs and anchor text:
 *    the line-punctuation, word-length and short-line rules), lorem ipsum (C4's placeholder
 *    rule, or language ID when the page does not open with the phrase), repeated lines (the
 *    duplicate-line rules). It is spam a crawler meets, not text that merely trips a rule.
 * 4. Near-duplicates are edited copies (word substitutions, deletions, insertions at seeded
 *    positions) of real documents that have at least `minWords` words and pass the default
 *    filters themselves, so dedup, not a filter, is what should remove them; the copy must pass
 *    the filters too. Each copy aims at a target Jaccard similarity of word 5-gram shingle sets
 *    (normalised as dedup.ts and normalize.ts define them), targets spread evenly over
 *    `jaccardRange` (default 0.5-0.95), and the truth records the exact Jaccard measured on the
 *    two texts as injected (`jaccard`), and on the texts the default filters leave
 *    (`filteredJaccard`: what dedup compares when it runs after filtering).
 * 5. Contamination: a benchmark item (prompt and answer) embedded at a paragraph break of a real
 *    document that passes the filters, verbatim or lightly reformatted (case, spacing and
 *    punctuation, "Q:"/"A:" lines). The contaminated document takes the place of the real one,
 *    which leaves the corpus, so it is not also a near-duplicate of it; the truth names the host
 *    (`of`) and the item. With no benchmark items there is no contamination, and a note says so.
 * 6. When the corpus has too few eligible documents, fewer near-duplicates or contaminated
 *    documents are made than asked, and a note says how many.
 */
import { ConfigError } from '../errors.ts';
import { type Random, randomInt, seededRandom } from '../random.ts';
import type { CorpusDocument } from './corpus.ts';
import type { BenchmarkItem } from './decontaminate.ts';
import { SHINGLE_WORDS } from './dedup.ts';
import { applyFilters, type FilterConfigInput } from './filters.ts';
import { normalizedWords, wordNgrams } from './normalize.ts';
import { countedWords } from './text.ts';

export const SPAM_VARIANTS = ['keyword-stuffing', 'link-farm', 'lorem-ipsum', 'repeated-lines'] as const;
export type SpamVariant = (typeof SPAM_VARIANTS)[number];
export const CONTAMINATION_VARIANTS = ['verbatim', 'case', 'spacing', 'qa'] as const;
export type ContaminationVariant = (typeof CONTAMINATION_VARIANTS)[number];
export type InjectedKind = 'spam' | 'near-duplicate' | 'contamination';

export interface InjectionTruth {
  readonly id: string;
  readonly kind: InjectedKind;
  /** A SpamVariant, a ContaminationVariant, or `edit` for a near-duplicate. */
  readonly variant: string;
  /** Near-duplicate: the document copied (still in the corpus). Contamination: the host it replaced. */
  readonly of?: string;
  /** Near-duplicate: the Jaccard aimed at. */
  readonly targetJaccard?: number;
  /** Near-duplicate: exact word-5-gram shingle Jaccard with `of`, on the texts as injected. */
  readonly jaccard?: number;
  /** Near-duplicate: the same, on the texts as the default filters leave them. */
  readonly filteredJaccard?: number;
  readonly benchmark?: { readonly name: string; readonly version: number; readonly itemId: string | number };
}

/** A number of documents, or a fraction of the real corpus's size with a floor. */
export type InjectCount = number | { readonly fraction: number; readonly atLeast?: number };

export interface InjectOptions {
  readonly seed: number;
  /** Default: 5 % of the corpus, at least 8 (two of each variant). */
  readonly spam?: InjectCount;
  /** Default: 5 % of the corpus, at least 5. */
  readonly nearDuplicate?: InjectCount;
  /** Default: 1 % of the corpus, at least 3 (none without benchmark items). */
  readonly contamination?: InjectCount;
  /** Near-duplicate targets, spread evenly over [min, max]. Default [0.5, 0.95]. */
  readonly jaccardRange?: readonly [number, number];
  /** Words a document needs to be copied or to host an item. Default 100. */
  readonly minWords?: number;
  /** The filters a copied or host document (and a copy) must pass. Default: FilterConfig's defaults. */
  readonly filters?: FilterConfigInput;
}

export interface InjectedCounts {
  readonly spam: number;
  readonly nearDuplicate: number;
  readonly contamination: number;
}

export interface InjectionResult {
  /** The real documents (hosts replaced by their contaminated copies) with the rest mixed in at seeded positions. */
  readonly documents: CorpusDocument[];
  /** One entry per injected document, in id order. */
  readonly truth: InjectionTruth[];
  readonly counts: InjectedCounts;
  readonly requested: InjectedCounts;
  readonly notes: string[];
}

export const INJECTED_ID_PREFIX = 'mix:';
const DEFAULT_COUNTS = {
  spam: { fraction: 0.05, atLeast: 8 },
  nearDuplicate: { fraction: 0.05, atLeast: 5 },
  contamination: { fraction: 0.01, atLeast: 3 },
} as const;

/** Mixes labelled test material into `real` (see the module comment). */
export function injectTestMaterial(real: readonly CorpusDocument[], items: readonly BenchmarkItem[], options: InjectOptions): InjectionResult {
  if (!Array.isArray(real)) throw new ConfigError('documents', real, 'must be an array of {id, text}');
  if (!Array.isArray(items)) throw new ConfigError('items', items, 'must be an array of benchmark items');
  real.forEach((document, i) => {
    if (document.id.startsWith(INJECTED_ID_PREFIX))
      throw new ConfigError(`documents[${i}].id`, document.id, `must not start with "${INJECTED_ID_PREFIX}", which injected documents use`);
  });
  const random = seededRandom(options.seed);
  const [minJaccard, maxJaccard] = options.jaccardRange ?? [0.5, 0.95];
  if (!(minJaccard > 0 && minJaccard <= maxJaccard && maxJaccard < 1))
    throw new ConfigError('jaccardRange', options.jaccardRange, 'must be [min, max] with 0 < min <= max < 1');
  const minWords = options.minWords ?? 100;
  if (!Number.isSafeInteger(minWords) || minWords < SHINGLE_WORDS)
    throw new ConfigError('minWords', options.minWords, `must be an integer >= ${SHINGLE_WORDS}`);
  const filters = options.filters ?? {};
  const requested: InjectedCounts = {
    spam: resolveCount('spam', options.spam ?? DEFAULT_COUNTS.spam, real.length),
    nearDuplicate: resolveCount('nearDuplicate', options.nearDuplicate ?? DEFAULT_COUNTS.nearDuplicate, real.length),
    contamination: resolveCount('contamination', options.contamination ?? DEFAULT_COUNTS.contamination, real.length),
  };
  const notes: string[] = [];

  // Eligible documents, found lazily in a seeded order: long enough, and kept by the filters.
  const order = shuffledIndexes(real.length, random);
  let scanned = 0;
  const nextEligible = (): { index: number; filtered: string } | undefined => {
    while (scanned < order.length) {
      const index = order[scanned++]!;
      const text = real[index]!.text;
      if (countedWords(text).length < minWords) continue;
      const result = applyFilters(text, filters);
      if (result.keep) return { index, filtered: result.text };
    }
    return undefined;
  };

  type Pending = { text: string; truth: Omit<InjectionTruth, 'id'> };
  const extras: Pending[] = [];

  // Spam: the variants in turn, from a seeded start.
  const firstVariant = randomInt(random, SPAM_VARIANTS.length);
  for (let i = 0; i < requested.spam; i++) {
    const variant = SPAM_VARIANTS[(firstVariant + i) % SPAM_VARIANTS.length]!;
    extras.push({ text: spamDocument(variant, random), truth: { kind: 'spam', variant } });
  }

  // Near-duplicates: targets spread evenly (stratified), in seeded order.
  const targets = Array.from(
    { length: requested.nearDuplicate },
    (_, i) => minJaccard + ((maxJaccard - minJaccard) * (i + random())) / requested.nearDuplicate,
  );
  shuffleInPlace(targets, random);
  let nearDuplicates = 0;
  for (const target of targets) {
    let made = false;
    while (!made) {
      const source = nextEligible();
      if (!source) break;
      const document = real[source.index]!;
      // Three edit plans per source: a copy the filters remove is no test of dedup.
      for (let attempt = 0; attempt < 3 && !made; attempt++) {
        const copy = nearDuplicateText(document.text, target, random);
        const filtered = applyFilters(copy.text, filters);
        if (!filtered.keep) continue;
        extras.push({
          text: copy.text,
          truth: {
            kind: 'near-duplicate',
            variant: 'edit',
            of: document.id,
            targetJaccard: round4(target),
            jaccard: copy.jaccard,
            filteredJaccard: shingleJaccard(source.filtered, filtered.text),
          },
        });
        made = true;
      }
    }
    if (!made) break;
    nearDuplicates++;
  }
  if (nearDuplicates < requested.nearDuplicate)
    notes.push(`near-duplicates: made ${nearDuplicates} of ${requested.nearDuplicate}; too few documents of >= ${minWords} words that pass the filters`);

  // Contamination: hosts replaced in place.
  const replacements = new Map<number, Pending>();
  if (items.length === 0) {
    if (requested.contamination > 0) notes.push('contamination: none injected, no benchmark items were given');
  } else {
    const itemOrder = shuffledIndexes(items.length, random);
    const firstContamination = randomInt(random, CONTAMINATION_VARIANTS.length);
    for (let i = 0; i < requested.contamination; i++) {
      const host = nextEligible();
      if (!host) {
        notes.push(`contamination: made ${i} of ${requested.contamination}; too few documents of >= ${minWords} words that pass the filters`);
        break;
      }
      const item = items[itemOrder[i % items.length]!]!;
      const variant = CONTAMINATION_VARIANTS[(firstContamination + i) % CONTAMINATION_VARIANTS.length]!;
      const hostDocument = real[host.index]!;
      replacements.set(host.index, {
        text: embedBenchmarkItem(hostDocument.text, item, variant, random),
        truth: { kind: 'contamination', variant, of: hostDocument.id, benchmark: { name: item.benchmark, version: item.version, itemId: item.id } },
      });
    }
  }

  // Mix: each extra before a seeded position of the real list (n + 1 slots), hosts in place.
  const slots: Pending[][] = Array.from({ length: real.length + 1 }, () => []);
  for (const extra of extras) slots[randomInt(random, real.length + 1)]!.push(extra);
  const injectedTotal = extras.length + replacements.size;
  const width = Math.max(4, String(injectedTotal).length);
  let counter = 0;
  const documents: CorpusDocument[] = [];
  const truth: InjectionTruth[] = [];
  const place = (pending: Pending): void => {
    const id = `${INJECTED_ID_PREFIX}${String(counter++).padStart(width, '0')}`;
    documents.push({ id, text: pending.text });
    truth.push({ id, ...pending.truth });
  };
  for (let i = 0; i <= real.length; i++) {
    for (const extra of slots[i]!) place(extra);
    if (i === real.length) break;
    const replacement = replacements.get(i);
    if (replacement) place(replacement);
    else documents.push(real[i]!);
  }
  return {
    documents,
    truth,
    counts: { spam: requested.spam, nearDuplicate: nearDuplicates, contamination: replacements.size },
    requested,
    notes,
  };
}

function resolveCount(field: string, count: InjectCount, corpusSize: number): number {
  if (typeof count === 'number') {
    if (!Number.isSafeInteger(count) || count < 0) throw new ConfigError(field, count, 'must be an integer >= 0 or {fraction, atLeast?}');
    return count;
  }
  const { fraction, atLeast = 0 } = count;
  if (!(fraction >= 0 && fraction <= 1)) throw new ConfigError(`${field}.fraction`, fraction, 'must be in [0, 1]');
  if (!Number.isSafeInteger(atLeast) || atLeast < 0) throw new ConfigError(`${field}.atLeast`, atLeast, 'must be an integer >= 0');
  return Math.max(atLeast, Math.round(fraction * corpusSize));
}

// ---------------------------------------------------------------------------------------------
// Shingles, as dedup.ts makes them.

/** The set of normalised word 5-gram shingles of `text` (fewer than 5 words: one shingle of all; no words: none). */
export function shingleSet(text: string): Set<string> {
  const words = normalizedWords(text);
  if (words.length === 0) return new Set();
  if (words.length < SHINGLE_WORDS) return new Set([words.join(' ')]);
  return new Set(wordNgrams(words, SHINGLE_WORDS));
}

/** Exact Jaccard similarity of two texts' shingle sets (1 for two texts with no words). */
export function shingleJaccard(a: string | ReadonlySet<string>, b: string | ReadonlySet<string>): number {
  const setA = typeof a === 'string' ? shingleSet(a) : a;
  const setB = typeof b === 'string' ? shingleSet(b) : b;
  if (setA.size === 0 && setB.size === 0) return 1;
  let shared = 0;
  const [small, large] = setA.size <= setB.size ? [setA, setB] : [setB, setA];
  for (const shingle of small) if (large.has(shingle)) shared++;
  return shared / (setA.size + setB.size - shared);
}

// ---------------------------------------------------------------------------------------------
// Near-duplicates.

type Edit = { readonly at: number; readonly op: 'substitute' | 'delete' | 'insert'; readonly word: string };

/**
 * An edited copy of `text` whose shingle Jaccard with it is as close to `target` as whole edits
 * allow, and that Jaccard, exact. Edits are word substitutions (half), deletions and insertions
 * (a quarter each) at distinct seeded word positions, with words drawn from the text's own
 * vocabulary, so the copy reads like the original with slips; whitespace and line breaks stay.
 * The number of edits is found by bisection: Jaccard falls as edits are added.
 */
export function nearDuplicateText(text: string, target: number, random: Random): { text: string; jaccard: number; edits: number } {
  if (!(target > 0 && target < 1)) throw new ConfigError('target', target, 'must be in (0, 1)');
  const tokens = text.split(/(\s+)/);
  const wordAt: number[] = [];
  tokens.forEach((token, i) => {
    if (i % 2 === 0 && token !== '') wordAt.push(i);
  });
  const vocabulary = [...new Set(wordAt.map((i) => tokens[i]!).filter((word) => /^[a-z]{3,}$/.test(word)))];
  if (vocabulary.length === 0) vocabulary.push('the', 'and', 'with');
  const positions = shuffledIndexes(wordAt.length, random);
  const edits: Edit[] = positions.map((p) => {
    const u = random();
    return { at: wordAt[p]!, op: u < 0.5 ? 'substitute' : u < 0.75 ? 'delete' : 'insert', word: vocabulary[randomInt(random, vocabulary.length)]! };
  });
  const original = shingleSet(text);
  const edited = (k: number): string => applyEdits(tokens, edits.slice(0, k));
  let lo = 0;
  let hi = edits.length;
  // Smallest k with Jaccard <= target.
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (shingleJaccard(original, shingleSet(edited(mid))) <= target) hi = mid;
    else lo = mid + 1;
  }
  const candidates = [lo, Math.max(0, lo - 1)].map((k) => {
    const copy = edited(k);
    return { text: copy, jaccard: shingleJaccard(original, shingleSet(copy)), edits: k };
  });
  const best = candidates.reduce((a, b) => (Math.abs(b.jaccard - target) < Math.abs(a.jaccard - target) ? b : a));
  return best;
}

function applyEdits(tokens: readonly string[], edits: readonly Edit[]): string {
  const out = [...tokens];
  for (const { at, op, word } of edits) {
    const current = out[at]!;
    if (op === 'substitute') out[at] = matchCase(word === current ? `${word}s` : word, current);
    else if (op === 'insert') out[at] = `${word} ${current}`;
    else {
      out[at] = '';
      // Drop one neighbouring space so the words either side do not end up two spaces apart; a
      // line break stays a line break.
      if (at + 1 < out.length && !out[at + 1]!.includes('\n')) out[at + 1] = '';
      else if (at > 0 && !out[at - 1]!.includes('\n')) out[at - 1] = '';
    }
  }
  return out.join('');
}

function matchCase(word: string, like: string): string {
  return /^[A-Z]/.test(like) ? word[0]!.toUpperCase() + word.slice(1) : word;
}

// ---------------------------------------------------------------------------------------------
// Contamination.

/** `text` with the item embedded at a seeded paragraph break in its middle, as `variant` writes it. */
export function embedBenchmarkItem(text: string, item: BenchmarkItem, variant: ContaminationVariant, random: Random): string {
  const paragraphs = text.split(/\n[ \t]*\n/);
  const at = paragraphs.length < 3 ? paragraphs.length : 1 + randomInt(random, paragraphs.length - 1);
  const block = formatItem(item, variant, random);
  return [...paragraphs.slice(0, at), block, ...paragraphs.slice(at)].join('\n\n');
}

function formatItem(item: BenchmarkItem, variant: ContaminationVariant, random: Random): string {
  const prompt = item.prompt.trim();
  const answer = item.answer.trim();
  switch (variant) {
    case 'verbatim':
      return `${prompt} ${answer}`;
    case 'case': {
      const joined = `${prompt} ${answer}`;
      return random() < 0.5 ? joined.toUpperCase() : joined.toLowerCase();
    }
    case 'spacing':
      // Doubled spaces, a space before punctuation, the answer quoted: what copy-paste and
      // reformatting do, and what normalisation is meant to see through.
      return `${prompt} "${answer}"`
        .replace(/ /g, () => (random() < 0.3 ? '  ' : ' '))
        .replace(/([,.?!:;])(?=\s)/g, (mark: string) => (random() < 0.5 ? ` ${mark}` : mark));
    case 'qa':
      return `Q: ${prompt}\nA: ${answer}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Spam.

const pick = <T>(random: Random, items: readonly T[]): T => items[randomInt(random, items.length)]!;
const between = (random: Random, min: number, max: number): number => min + randomInt(random, max - min + 1);

const SPAM_TOPICS: readonly (readonly string[])[] = [
  ['cheap flights', 'last minute flights', 'flight deals', 'cheap airline tickets', 'discount airfare'],
  ['payday loans', 'fast cash loans', 'bad credit loans', 'instant loan approval', 'no credit check loans'],
  ['replica watches', 'cheap replica watches', 'luxury watches for sale', 'designer watches discount', 'swiss replica watches'],
  ['weight loss pills', 'lose weight fast', 'diet pills', 'fat burner supplements', 'best weight loss supplement'],
  ['online casino', 'casino bonus', 'free spins', 'best online slots', 'no deposit casino bonus'],
  ['buy followers', 'cheap instagram followers', 'get more likes', 'social media growth', 'real followers fast'],
  ['seo services', 'cheap backlinks', 'rank first on google', 'link building service', 'seo expert'],
  ['essay writing service', 'cheap essays', 'buy essay online', 'write my essay', 'custom essay writing'],
];
const CITIES = ['London', 'New York', 'Paris', 'Dubai', 'Chicago', 'Sydney', 'Toronto', 'Berlin', 'Miami', 'Houston', 'Boston', 'Dallas'];
const SPAM_ADJECTIVES = ['best', 'cheap', 'cheapest', 'top', 'top rated', 'affordable', 'discount', 'guaranteed', 'trusted', 'official', 'free'];
const SPAM_CALLS = ['buy now', 'order today', 'click here', 'call now', 'sign up today', 'get started', 'visit our site', 'apply online'];
const SPAM_FILLER = [
  'We offer the best prices and the fastest service in the market.',
  'Our team of experts is ready to help you with all of your needs.',
  'Thousands of happy customers have already trusted us with their orders.',
  'Contact us today and get a free quote with no obligation.',
  'This is the best deal you will find anywhere on the internet.',
  'Do not miss this chance to save money and time.',
  'Customer satisfaction is our number one priority, and we work hard every day to keep it that way.',
  'All of our products come with a money back guarantee.',
  'Our friendly support staff are available around the clock to answer your questions.',
  'Join the many satisfied clients who have already made the switch.',
];
const TLDS = ['com', 'net', 'info', 'biz', 'org', 'xyz', 'top', 'online'];
const LOREM =
  'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt in culpa qui officia deserunt mollit anim id est laborum sed ut perspiciatis unde omnis iste natus error sit voluptatem accusantium doloremque laudantium totam rem aperiam eaque ipsa quae ab illo inventore veritatis et quasi architecto beatae vitae dicta sunt explicabo nemo enim ipsam voluptatem quia voluptas sit aspernatur aut odit aut fugit'.split(
    ' ',
  );
const PAGE_TITLES = ['Welcome to our website', 'About us', 'Our services', 'Latest news', 'Home', 'Products'];

/** One spam document of `variant`, drawn from `random`. */
export function spamDocument(variant: SpamVariant, random: Random): string {
  switch (variant) {
    case 'keyword-stuffing':
      return keywordStuffing(random);
    case 'link-farm':
      return linkFarm(random);
    case 'lorem-ipsum':
      return loremIpsum(random);
    case 'repeated-lines':
      return repeatedLines(random);
  }
}

const capitalise = (text: string): string => text[0]!.toUpperCase() + text.slice(1);

const SEO_TEMPLATES = [
  'If you are looking for {kw} in {city}, you have come to the right place.',
  'Our {adj} {kw} service is the choice of thousands of customers.',
  'We know that finding {kw} can be hard, and that is why we are here to help you.',
  'With us you get {kw} at the lowest price, with no hidden fees.',
  'Many people ask us about {kw}, and the answer is always the same: we have the best offer.',
  'Getting {kw} has never been easier than it is today.',
  'Read our guide to {kw} and learn how to save more on every order.',
  'Compare {kw} from the top providers in {city} and choose the one that suits you.',
  'The team behind our {kw} has years of experience in the industry.',
];

/**
 * A landing page for a topic's keywords. How stuffed it is, is drawn per page: from lists of
 * keywords with nothing between them, through search-engine "articles" that repeat the keyword
 * in every sentence, to pages with more generic sales text than keywords. The lighter pages are
 * the ones a repetition rule can miss.
 */
function keywordStuffing(random: Random): string {
  const keywords = pick(random, SPAM_TOPICS);
  const city = pick(random, CITIES);
  const sentences: string[] = [];
  const count = between(random, 8, 30);
  const listShare = random() * 0.7;
  const fillerShare = random() * 0.4;
  for (let i = 0; i < count; i++) {
    const u = random();
    if (u < listShare) {
      const kw = pick(random, keywords);
      const parts = [
        `${pick(random, SPAM_ADJECTIVES)} ${kw}`,
        random() < 0.5 ? `${kw} in ${pick(random, CITIES)}` : `${pick(random, keywords)} ${pick(random, keywords)}`,
        random() < 0.5 ? `${pick(random, SPAM_ADJECTIVES)} ${pick(random, keywords)} online` : `${kw} ${pick(random, SPAM_CALLS)}`,
      ];
      sentences.push(`${capitalise(parts.slice(0, between(random, 2, 3)).join(', '))}.`);
    } else if (u < listShare + fillerShare * (1 - listShare)) {
      sentences.push(pick(random, SPAM_FILLER));
    } else {
      const sentence = pick(random, SEO_TEMPLATES)
        .replace('{kw}', pick(random, keywords))
        .replace('{adj}', pick(random, SPAM_ADJECTIVES))
        .replace('{city}', random() < 0.7 ? city : pick(random, CITIES));
      sentences.push(capitalise(sentence));
    }
  }
  // Paragraphs of a few sentences, as a stuffed landing page has.
  const paragraphs: string[] = [];
  for (let i = 0; i < sentences.length; ) {
    const take = between(random, 2, 5);
    paragraphs.push(sentences.slice(i, i + take).join(' '));
    i += take;
  }
  return paragraphs.join('\n\n');
}

function domain(random: Random, keywords: readonly string[]): string {
  const name = pick(random, keywords).replace(/ /g, random() < 0.5 ? '-' : '');
  return `${name}${random() < 0.5 ? between(random, 1, 999) : ''}.${pick(random, TLDS)}`;
}

/** Lines of anchor text and URLs, some with a short blurb. */
function linkFarm(random: Random): string {
  const keywords = pick(random, SPAM_TOPICS);
  const lines: string[] = [random() < 0.5 ? 'Related links' : `${capitalise(pick(random, keywords))} partner sites`];
  const count = between(random, 15, 60);
  for (let i = 0; i < count; i++) {
    const url = `http${random() < 0.7 ? 's' : ''}://${random() < 0.5 ? 'www.' : ''}${domain(random, keywords)}/${pick(random, keywords).replace(/ /g, '-')}${random() < 0.4 ? `?ref=${between(random, 100, 99999)}` : ''}`;
    const anchor = capitalise(`${pick(random, SPAM_ADJECTIVES)} ${pick(random, keywords)}`);
    const u = random();
    if (u < 0.4) lines.push(`${anchor} - ${url}`);
    else if (u < 0.7) lines.push(url);
    else if (u < 0.85) lines.push(`${anchor} | ${capitalise(pick(random, keywords))} | ${url}`);
    else lines.push(`${anchor} ${pick(random, CITIES)}: ${url}`);
  }
  return lines.join('\n');
}

function loremWords(random: Random, count: number, from = randomInt(random, LOREM.length)): string {
  const words: string[] = [];
  for (let i = 0; i < count; i++) words.push(random() < 0.8 ? LOREM[(from + i) % LOREM.length]! : pick(random, LOREM));
  return words.join(' ');
}

function loremParagraph(random: Random): string {
  const sentences: string[] = [];
  const count = between(random, 3, 8);
  for (let i = 0; i < count; i++) sentences.push(`${capitalise(loremWords(random, between(random, 6, 16)))}.`);
  return sentences.join(' ');
}

/**
 * Placeholder text: a template page that opens with "Lorem ipsum" (half), or paragraphs drawn
 * from further into the placeholder (no "lorem ipsum" in them), under English page headings.
 */
function loremIpsum(random: Random): string {
  const opensWithLorem = random() < 0.5;
  const title = random() < 0.5 ? [pick(random, PAGE_TITLES)] : [];
  const body = Array.from({ length: between(random, 2, 6) }, () => loremParagraph(random));
  if (opensWithLorem) body[0] = `Lorem ipsum dolor sit amet, ${body[0]![0]!.toLowerCase()}${body[0]!.slice(1)}`;
  else for (let i = 0; i < body.length; i++) body[i] = body[i]!.replace(/lorem ipsum/gi, 'dolor sit');
  return [...title, ...body].join('\n\n');
}

const BOILERPLATE_LINES = [
  'Click here to claim your free gift card now!',
  'Subscribe to our newsletter for exclusive deals.',
  'Limited time offer, act now before it is too late!',
  'Share this page with your friends and family.',
  'Log in or register to post comments.',
  'Add to cart and get free shipping on all orders.',
  'You have been selected as a winner, claim your prize today!',
  'Call our hotline now for the best offers in town.',
  'Follow us on social media for daily updates.',
  'Back to top',
];

/** A page of a few boilerplate lines repeated in a seeded order, with a little unique text. */
function repeatedLines(random: Random): string {
  const pool = shuffledIndexes(BOILERPLATE_LINES.length, random)
    .slice(0, between(random, 2, 5))
    .map((i) => BOILERPLATE_LINES[i]!);
  const lines: string[] = [];
  const count = between(random, 15, 60);
  for (let i = 0; i < count; i++) {
    if (random() < 0.15) {
      const keywords = pick(random, SPAM_TOPICS);
      lines.push(`${capitalise(pick(random, SPAM_ADJECTIVES))} ${pick(random, keywords)} in ${pick(random, CITIES)} with the best service available.`);
    } else lines.push(pick(random, pool));
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Helpers.

function shuffledIndexes(n: number, random: Random): number[] {
  const out = Array.from({ length: n }, (_, i) => i);
  shuffleInPlace(out, random);
  return out;
}

function shuffleInPlace<T>(items: T[], random: Random): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
}

const round4 = (x: number): number => Math.round(x * 10_000) / 10_000;
