/**
 * Refinery: documents per second and MB per second of each filter rule, of the whole filter chain
 * (`applyFilters`, config parsing included) and of MinHash signatures, on one core. The goal the
 * refinery issue sets: filters and signatures together at 1,000 documents per second per core.
 *
 * The text is real prose nobody here wrote: the licence texts Debian installs under
 * /usr/share/common-licenses, cut into documents of about 500 words at paragraph breaks. (The
 * refinery's own local corpus replaces it once the pipeline reads one.)
 * Run alone with `tsx bench/refinery.ts`, or call `measureRefinery()`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createMinHasher } from '#shared/refinery/dedup.ts';
import { applyFilters, FILTER_ORDER, FILTERS, FilterConfig } from '#shared/refinery/filters.ts';

const LICENSES = '/usr/share/common-licenses';
const WORDS_PER_DOCUMENT = 500;
/** Passes over the documents per stage; the median pass is reported. */
const PASSES = 3;

export interface StageFigures {
  readonly documentsPerSecond: number;
  readonly megabytesPerSecond: number;
}

export interface RefineryFigures {
  readonly documents: number;
  readonly meanWords: number;
  readonly megabytes: number;
  /** Each rule alone, with its default params, over every document. */
  readonly rules: Record<string, StageFigures>;
  /** applyFilters with the default config: the rules in order, stopping at a removal. */
  readonly filterChain: StageFigures;
  readonly kept: number;
  readonly minhash: StageFigures;
  /** Filters and signatures of every document, one after the other: the goal is 1,000 documents/s. */
  readonly filtersAndSignatures: StageFigures;
}

/** Documents of about 500 words, cut at blank lines, from every licence text. */
function documents(): string[] {
  const out: string[] = [];
  for (const name of readdirSync(LICENSES).sort()) {
    const path = join(LICENSES, name);
    if (!statSync(path).isFile()) continue;
    let current: string[] = [];
    let words = 0;
    for (const paragraph of readFileSync(path, 'utf8').split(/\n\s*\n/)) {
      current.push(paragraph.trim());
      words += paragraph.split(/\s+/).filter(Boolean).length;
      if (words >= WORDS_PER_DOCUMENT) {
        out.push(current.join('\n\n'));
        current = [];
        words = 0;
      }
    }
    if (words >= 50) out.push(current.join('\n\n'));
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timed(docs: readonly string[], bytes: number, run: (text: string) => void): StageFigures {
  const seconds: number[] = [];
  for (let pass = 0; pass < PASSES; pass++) {
    const start = process.hrtime.bigint();
    for (const text of docs) run(text);
    seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  const s = median(seconds);
  return { documentsPerSecond: docs.length / s, megabytesPerSecond: bytes / 1e6 / s };
}

export async function measureRefinery(): Promise<RefineryFigures> {
  const docs = documents();
  if (docs.length < 20) throw new Error(`only ${docs.length} documents under ${LICENSES}: is the base-files package installed?`);
  const bytes = docs.reduce((sum, d) => sum + Buffer.byteLength(d), 0);
  const config = FilterConfig.parse({});
  const defaults: Record<string, unknown> = {
    language: config.language,
    'gopher-repetition': config.gopherRepetition,
    'gopher-quality': config.gopherQuality,
    'c4-quality': config.c4Quality,
    'fineweb-quality': config.finewebQuality,
  };
  // Warm up: the language model's tables and the WebAssembly hash load on first use.
  applyFilters(docs[0]!);
  const hasher = await createMinHasher();
  hasher.signature(docs[0]!);

  const rules: Record<string, StageFigures> = {};
  for (const name of FILTER_ORDER) {
    const rule = FILTERS[name] as { apply(text: string, params?: unknown): unknown };
    rules[name] = timed(docs, bytes, (text) => rule.apply(text, defaults[name]));
  }
  const kept = docs.filter((d) => applyFilters(d, config).keep).length;
  return {
    documents: docs.length,
    meanWords: docs.reduce((sum, d) => sum + d.split(/\s+/).filter(Boolean).length, 0) / docs.length,
    megabytes: bytes / 1e6,
    rules,
    filterChain: timed(docs, bytes, (text) => applyFilters(text, config)),
    kept,
    minhash: timed(docs, bytes, (text) => hasher.signature(text)),
    filtersAndSignatures: timed(docs, bytes, (text) => {
      applyFilters(text, config);
      hasher.signature(text);
    }),
  };
}

export function describeRefinery(f: RefineryFigures): string {
  const line = (name: string, s: StageFigures) =>
    `  ${name.padEnd(24)} ${s.documentsPerSecond.toFixed(0).padStart(7)} documents/s ${s.megabytesPerSecond.toFixed(2).padStart(7)} MB/s`;
  return [
    `refinery (one core): ${f.documents} documents of about ${f.meanWords.toFixed(0)} words (${f.megabytes.toFixed(2)} MB of licence texts), ${f.kept} kept by the default filters`,
    ...Object.entries(f.rules).map(([name, s]) => line(name, s)),
    line('filter chain', f.filterChain),
    line('MinHash signatures', f.minhash),
    line('filters + signatures', f.filtersAndSignatures),
    `  goal: filters + signatures >= 1,000 documents/s per core (${f.filtersAndSignatures.documentsPerSecond >= 1000 ? 'met' : 'not met'})`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) console.log(describeRefinery(await measureRefinery()));
