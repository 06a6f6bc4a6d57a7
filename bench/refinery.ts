/**
 * Refinery: documents per second and MB per second of each filter rule, of the whole filter chain
 * (`applyFilters` with the default config) and of MinHash signatures, on one core. The goal the
 * refinery issue sets: filters and signatures together at 1,000 documents per second per core,
 * measured as the shard step does the work (shard-refine.ts): every document through the filter
 * chain, then a signature of each survivor's filtered text (decontamination, which runs between
 * the two there, is not timed). Signatures of every document's text as received are reported
 * beside it, with what the two stages measured alone would predict for them.
 *
 * The text is the refinery's own local corpus (debian-corpus.ts): a seeded sample of Debian's
 * python3-doc HTML, debian-reference, man pages and fortunes, equal shares per source. Reading it
 * (HTML extraction, groff renders) takes a few minutes for 1,600 documents on two cores and is not
 * timed; only the per-document work is. Sources differ a lot in size (a fortune is ~30 words, a
 * Python library page thousands), so documents/s is reported per source too.
 * Run alone with `tsx bench/refinery.ts [sample]`, or call `measureRefinery()`.
 */
import { pathToFileURL } from 'node:url';
import { readDebianCorpus } from '#shared/refinery/debian-corpus.ts';
import { createMinHasher } from '#shared/refinery/dedup.ts';
import { applyFilters, FILTER_ORDER, FILTERS, FilterConfig } from '#shared/refinery/filters.ts';

/** Documents in the sample: enough that every source has hundreds, few enough to read in minutes. */
export const DEFAULT_SAMPLE = 1_600;
/** Passes over the documents per stage; the median pass is reported. */
const PASSES = 3;

export interface StageFigures {
  readonly documentsPerSecond: number;
  readonly megabytesPerSecond: number;
}

export interface SourceFigures {
  readonly documents: number;
  readonly meanWords: number;
  readonly megabytes: number;
  readonly kept: number;
  /** Filters, and signatures of the survivors, of this source's documents only. */
  readonly filtersAndSignatures: StageFigures;
}

export interface RefineryFigures {
  readonly documents: number;
  readonly meanWords: number;
  readonly megabytes: number;
  /** Where the documents came from: `debian-corpus sample=1600 seed=0`. */
  readonly corpus: string;
  /** Seconds spent reading the sample (extraction and rendering; not part of any figure). */
  readonly readSeconds: number;
  /** Each rule alone, with its default params, over every document. */
  readonly rules: Record<string, StageFigures>;
  /** applyFilters with the default config: the rules in order, stopping at a removal. */
  readonly filterChain: StageFigures;
  readonly kept: number;
  readonly minhash: StageFigures;
  /** The filter chain on every document, then signatures of the survivors' filtered text, as the shard step does: the issue's goal is 1,000 documents/s. */
  readonly filtersAndSignatures: StageFigures;
  /** The filter chain and a signature of the text as received, for every document. */
  readonly filtersAndSignaturesOfAll: StageFigures;
  /** The same, per source of the corpus. */
  readonly bySource: Record<string, SourceFigures>;
}

export interface BenchDocument {
  readonly text: string;
  /** The corpus source (`man`, `fortune`, ...), for the per-source figures. */
  readonly source: string;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const wordCount = (text: string) => text.split(/\s+/).filter(Boolean).length;
const byteCount = (docs: readonly BenchDocument[]) => docs.reduce((sum, d) => sum + Buffer.byteLength(d.text), 0);

function timed(docs: readonly BenchDocument[], run: (text: string) => void): StageFigures {
  const bytes = byteCount(docs);
  const seconds: number[] = [];
  for (let pass = 0; pass < PASSES; pass++) {
    const start = process.hrtime.bigint();
    for (const { text } of docs) run(text);
    seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  const s = median(seconds);
  return { documentsPerSecond: docs.length / s, megabytesPerSecond: bytes / 1e6 / s };
}

/** The figures for documents already in memory (the corpus read is the caller's). */
export async function measureDocuments(docs: readonly BenchDocument[], corpus: string, readSeconds = 0): Promise<RefineryFigures> {
  if (docs.length < 20) throw new Error(`only ${docs.length} documents in ${corpus}: are the corpus packages installed (scripts/setup.sh)?`);
  const config = FilterConfig.parse({});
  const defaults: Record<string, unknown> = {
    language: config.language,
    'gopher-repetition': config.gopherRepetition,
    'gopher-quality': config.gopherQuality,
    'c4-quality': config.c4Quality,
    'fineweb-quality': config.finewebQuality,
  };
  // Warm up: the language model's tables load on first use, and the first calls compile.
  applyFilters(docs[0]!.text, config);
  const hasher = await createMinHasher();
  hasher.signature(docs[0]!.text);
  // What the shard step does with a document (shard-refine.ts): only a survivor is signed, and
  // its text as the filters left it (C4 removes lines).
  const both = (text: string) => {
    const result = applyFilters(text, config);
    if (result.keep) hasher.signature(result.text);
  };
  const bothOfAll = (text: string) => {
    applyFilters(text, config);
    hasher.signature(text);
  };

  const rules: Record<string, StageFigures> = {};
  for (const name of FILTER_ORDER) {
    const rule = FILTERS[name] as { apply(text: string, params?: unknown): unknown };
    rules[name] = timed(docs, (text) => rule.apply(text, defaults[name]));
  }
  const keep = docs.map((d) => applyFilters(d.text, config).keep);
  const bySource: Record<string, SourceFigures> = {};
  for (const source of [...new Set(docs.map((d) => d.source))].sort()) {
    const ofSource = docs.filter((d) => d.source === source);
    bySource[source] = {
      documents: ofSource.length,
      meanWords: ofSource.reduce((sum, d) => sum + wordCount(d.text), 0) / ofSource.length,
      megabytes: byteCount(ofSource) / 1e6,
      kept: docs.filter((d, i) => d.source === source && keep[i]).length,
      filtersAndSignatures: timed(ofSource, both),
    };
  }
  return {
    documents: docs.length,
    meanWords: docs.reduce((sum, d) => sum + wordCount(d.text), 0) / docs.length,
    megabytes: byteCount(docs) / 1e6,
    corpus,
    readSeconds,
    rules,
    filterChain: timed(docs, (text) => applyFilters(text, config)),
    kept: keep.filter(Boolean).length,
    minhash: timed(docs, (text) => hasher.signature(text)),
    filtersAndSignatures: timed(docs, both),
    filtersAndSignaturesOfAll: timed(docs, bothOfAll),
    bySource,
  };
}

/** Reads a seeded sample of the local Debian corpus, then measures it (see the module comment). */
export async function measureRefinery(options: { readonly sample?: number; readonly seed?: number } = {}): Promise<RefineryFigures> {
  const sample = options.sample ?? DEFAULT_SAMPLE;
  const seed = options.seed ?? 0;
  const start = process.hrtime.bigint();
  const corpus = await readDebianCorpus({ sample, seed });
  const readSeconds = Number(process.hrtime.bigint() - start) / 1e9;
  return measureDocuments(corpus.documents, `debian-corpus sample=${sample} seed=${seed}`, readSeconds);
}

export function describeRefinery(f: RefineryFigures): string {
  const figures = (s: StageFigures) => `${s.documentsPerSecond.toFixed(0).padStart(7)} documents/s ${s.megabytesPerSecond.toFixed(2).padStart(7)} MB/s`;
  const line = (name: string, s: StageFigures) => `  ${name.padEnd(24)} ${figures(s)}`;
  return [
    `refinery (one core): ${f.documents} documents of ${f.meanWords.toFixed(0)} words on average (${f.megabytes.toFixed(2)} MB; ${f.corpus}, read in ${f.readSeconds.toFixed(0)} s), ${f.kept} kept by the default filters`,
    ...Object.entries(f.rules).map(([name, s]) => line(name, s)),
    line('filter chain', f.filterChain),
    line('MinHash signatures', f.minhash),
    line('filters + signatures', f.filtersAndSignatures),
    `${line('  of every document', f.filtersAndSignaturesOfAll)}   (chain and signatures alone predict ${(1 / (1 / f.filterChain.documentsPerSecond + 1 / f.minhash.documentsPerSecond)).toFixed(0)})`,
    '  filters + signatures by source:',
    ...Object.entries(f.bySource).map(
      ([source, s]) =>
        `    ${source.padEnd(22)} ${figures(s.filtersAndSignatures)}   (${s.documents} documents, ${s.meanWords.toFixed(0)} words on average, ${s.megabytes.toFixed(2)} MB, ${s.kept} kept)`,
    ),
    `  goal: filters + signatures >= 1,000 documents/s per core (${f.filtersAndSignatures.documentsPerSecond >= 1000 ? 'met' : 'not met'})`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argument = process.argv[2];
  console.log(describeRefinery(await measureRefinery(argument === undefined ? {} : { sample: Number(argument) })));
}
