/**
 * The refinery's default local corpus: real text that nobody here wrote, from Debian packages
 * (scripts/setup.sh installs them; the ingest job's image does too):
 *
 * | source             | files                                              | package             |
 * |--------------------|----------------------------------------------------|---------------------|
 * | `python-doc`       | /usr/share/doc/python3/html/**\/*.html              | python3-doc         |
 * | `debian-reference` | /usr/share/debian-reference/*.en.html              | debian-reference-en |
 * | `man`              | man2, man3, man7 pages of manpages and manpages-dev | manpages, manpages-dev (groff-base renders) |
 * | `fortune`          | /usr/share/games/fortunes/* (one document per fortune) | fortunes         |
 *
 * What it guarantees:
 * 1. HTML pages go through @mozilla/readability over a linkedom DOM: main-content extraction,
 *    the kind FineWeb runs (trafilatura), so navigation, sidebars, "next/previous" links and
 *    footers are dropped and the article's paragraphs stay. html-to-text was not used: it renders
 *    the whole page, navigation and footer included, which is the boilerplate extraction exists
 *    to remove. The article's HTML is turned into text the way FineWeb's extraction keeps it:
 *    one paragraph (p, heading, list, table, pre block) per blank-line-separated block, list items
 *    and table rows one line each, whitespace inside a paragraph collapsed, Sphinx's "¶" anchors gone.
 * 2. Man pages are rendered by groff (`groff -k -t -man -Tutf8 -P-cbou`), with overstrikes
 *    stripped, the running header and footer lines dropped, every line trimmed, and tables'
 *    drawn rules and column bars removed (the cells stay). The line length
 *    is unbounded (LL=5000n), not 80 columns: a filled paragraph then comes out as one line, as
 *    on a web page. At 80 columns every wrapped line would be a "line" to the line-based quality
 *    rules (C4's, FineWeb's), which were tuned on web text. Only the pages the manpages and
 *    manpages-dev packages install are read (from dpkg's file lists), in man2, man3 and man7:
 *    the same set on every machine with those packages, whatever else put pages there. Alias
 *    pages (symlinks, and `.so` stubs) are left out: they would render another page again.
 * 3. Fortunes: entries are separated by lines holding a single '%'; overstrikes are stripped;
 *    the .dat indexes and .u8 links are not read. Short texts with natural near-duplicates.
 * 4. Ids are stable and say where the text came from: `python-doc:library/os.html`,
 *    `debian-reference:ch01.en.html`, `man:man2/open.2`, `fortune:cookie#17` (the 17th fortune,
 *    from 1). Every document has a `source` label, the first column above.
 * 5. Sampling happens before any page is parsed or rendered: each source gets an equal share of
 *    the sample (a source with fewer candidates gives the rest to the others), the candidates of each source
 *    are shuffled by the seed, and taken in that order until the share is filled; a page that
 *    yields no text is counted and the next one taken. The same seed on the same packages gives
 *    the same documents.
 * 6. A source whose files are missing fails with NotFoundError naming the path and the Debian
 *    package to install. `root` (default '/') lets a test point it at an empty directory.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import pMap from 'p-map';
import { ConfigError, NotFoundError } from '../errors.ts';
import { type Random, seededRandom } from '../random.ts';
import type { CorpusDocument } from './corpus.ts';

export const DEBIAN_SOURCES = ['python-doc', 'debian-reference', 'man', 'fortune'] as const;
export type DebianSource = (typeof DEBIAN_SOURCES)[number];

/** Where each source's files are (relative to the root) and the Debian package that installs them. */
export const DEBIAN_PATHS = {
  'python-doc': { dir: 'usr/share/doc/python3/html', packages: ['python3-doc'] },
  'debian-reference': { dir: 'usr/share/debian-reference', packages: ['debian-reference-en'] },
  man: { dir: 'usr/share/man', packages: ['manpages', 'manpages-dev'] },
  fortune: { dir: 'usr/share/games/fortunes', packages: ['fortunes'] },
} as const satisfies Record<DebianSource, { dir: string; packages: readonly string[] }>;

/** dpkg's list of the files each package installed. */
const DPKG_INFO = 'var/lib/dpkg/info';
const MAN_PAGE = /^\/usr\/share\/man\/man[237]\/[^/]+\.[237](type|const|head)?\.gz$/;
/** The groff line length, in ens: long enough that a filled paragraph is one line. */
const MAN_LINE_LENGTH = 5000;
/** A tbl box rule (it spans the whole line length): drawn lines, no text. */
const TABLE_RULE = /^[─━═┌┐└┘├┤┬┴┼╞╡╪+\-=|│ ]+$/u;

export interface DebianSourceFile {
  /** Absolute path of the file. */
  readonly path: string;
  readonly kind: DebianSource;
}

export interface DebianDocument extends CorpusDocument {
  readonly source: DebianSource;
}

export interface DebianCorpusOptions {
  /** Take this many documents (a seeded sample, equal shares per source); undefined or null: all. */
  readonly sample?: number | null;
  readonly seed: number;
  /** The sources to read (default all four). */
  readonly kinds?: readonly DebianSource[];
  /** The file system root the paths are under (default '/'). */
  readonly root?: string;
  /** Pages parsed or rendered at once (default: the machine's parallelism, at least 2). */
  readonly parallel?: number;
}

export interface DebianCorpus {
  readonly documents: DebianDocument[];
  /** Documents per source. */
  readonly bySource: Record<string, number>;
  /** Candidates per source (files; fortunes for `fortune`): what a full read would try. */
  readonly candidates: Record<string, number>;
  /** Candidates tried that gave no text (readability found no article, an empty render), per source. */
  readonly empty: Record<string, number>;
}

/** The source files, sorted by path (cheap: directory listings and dpkg's file lists, nothing parsed). */
export function listDebianSources(options: { readonly root?: string; readonly kinds?: readonly DebianSource[] } = {}): DebianSourceFile[] {
  const root = options.root ?? '/';
  const files: DebianSourceFile[] = [];
  for (const kind of checkKinds(options.kinds)) for (const path of sourceFiles(root, kind)) files.push({ path, kind });
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The corpus (or a sample of it, chosen before anything is parsed); see the module comment. */
export async function readDebianCorpus(options: DebianCorpusOptions): Promise<DebianCorpus> {
  const root = options.root ?? '/';
  const kinds = checkKinds(options.kinds);
  const sample = options.sample ?? undefined;
  if (sample !== undefined && (!Number.isSafeInteger(sample) || sample < 1)) throw new ConfigError('sample', options.sample, 'must be an integer >= 1 or null');
  const parallel = options.parallel ?? Math.max(2, availableParallelism());
  if (!Number.isSafeInteger(parallel) || parallel < 1) throw new ConfigError('parallel', options.parallel, 'must be an integer >= 1');
  const random = seededRandom(options.seed);

  const candidatesByKind = new Map<DebianSource, Candidate[]>();
  for (const kind of kinds) candidatesByKind.set(kind, candidatesOf(root, kind));
  const total = [...candidatesByKind.values()].reduce((sum, list) => sum + list.length, 0);
  const quotas = sample === undefined ? undefined : balancedQuotas(kinds, candidatesByKind, Math.min(sample, total));

  const documents: DebianDocument[] = [];
  const bySource: Record<string, number> = {};
  const candidates: Record<string, number> = {};
  const empty: Record<string, number> = {};
  for (const kind of kinds) {
    const list = candidatesByKind.get(kind)!;
    candidates[kind] = list.length;
    // Shuffled for every kind, sampled or not, so that the stream of draws does not depend on `sample`.
    const order = shuffled(list, random);
    const quota = quotas?.get(kind) ?? list.length;
    const taken: DebianDocument[] = [];
    let next = 0;
    let none = 0;
    while (taken.length < quota && next < order.length) {
      const batch = order.slice(next, next + (quota - taken.length));
      next += batch.length;
      const extracted = await pMap(batch, (candidate) => candidate.extract(), { concurrency: parallel });
      for (const document of extracted) {
        if (document && taken.length < quota) taken.push(document);
        else if (!document) none++;
      }
    }
    bySource[kind] = taken.length;
    empty[kind] = none;
    documents.push(...taken);
  }
  documents.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { documents, bySource, candidates, empty };
}

// ---------------------------------------------------------------------------------------------
// Candidates: one per document a source could give, cheap to list, expensive only to extract.

interface Candidate {
  extract(): Promise<DebianDocument | undefined>;
}

function candidatesOf(root: string, kind: DebianSource): Candidate[] {
  const files = sourceFiles(root, kind);
  switch (kind) {
    case 'python-doc':
    case 'debian-reference': {
      const base = join(root, DEBIAN_PATHS[kind].dir);
      return files.map((path) => ({
        extract: async () => {
          const text = extractMainText(readFileSync(path, 'utf8'));
          return text ? { id: `${kind}:${relative(base, path)}`, text, url: pathToFileURL(path).href, source: kind } : undefined;
        },
      }));
    }
    case 'man': {
      const base = join(root, DEBIAN_PATHS.man.dir);
      return files.map((path) => ({
        extract: async () => {
          const text = await renderManPage(path);
          const name = relative(base, path).replace(/\.gz$/, '');
          return text ? { id: `man:${name}`, text, url: `man:${name}`, source: 'man' } : undefined;
        },
      }));
    }
    case 'fortune': {
      const candidates: Candidate[] = [];
      for (const path of files) {
        const file = path.slice(path.lastIndexOf('/') + 1);
        parseFortunes(readFileSync(path, 'utf8')).forEach((text, i) => {
          const id = `fortune:${file}#${i + 1}`;
          candidates.push({ extract: async () => ({ id, text, url: id, source: 'fortune' }) });
        });
      }
      return candidates;
    }
  }
}

/** The files of one source, sorted; NotFoundError naming the path and the package when absent. */
function sourceFiles(root: string, kind: DebianSource): string[] {
  const { dir, packages } = DEBIAN_PATHS[kind];
  const base = join(root, dir);
  const missing = (path: string, pkg: string = packages.join(' ')): NotFoundError =>
    new NotFoundError(`${path} does not exist: the ${kind} corpus needs Debian's ${pkg} (apt-get install ${pkg})`);
  if (kind === 'man') {
    const pages: string[] = [];
    for (const pkg of packages) {
      const list = join(root, DPKG_INFO, `${pkg}.list`);
      if (!existsSync(list)) throw missing(list, pkg);
      for (const line of readFileSync(list, 'utf8').split('\n')) {
        if (!MAN_PAGE.test(line)) continue;
        const path = join(root, line);
        const stat = lstatSync(path, { throwIfNoEntry: false });
        // Listed but absent: dpkg was told to skip /usr/share/man (the slim Docker images do).
        if (!stat) throw missing(path, pkg);
        if (stat.isFile()) pages.push(path);
      }
    }
    return pages.sort();
  }
  if (!existsSync(base)) throw missing(base);
  let files: string[];
  if (kind === 'python-doc') files = walk(base).filter((path) => path.endsWith('.html'));
  else if (kind === 'debian-reference')
    files = readdirSync(base)
      .filter((name) => name.endsWith('.en.html'))
      .map((name) => join(base, name));
  else {
    files = readdirSync(base, { withFileTypes: true })
      .filter((entry) => entry.isFile() && !entry.name.includes('.'))
      .map((entry) => join(base, entry.name));
  }
  if (files.length === 0) throw missing(join(base, kind === 'python-doc' ? 'index.html' : kind === 'fortune' ? 'fortunes' : 'index.en.html'));
  return files.sort();
}

/** Every file under `dir` (following the python3-doc symlink to python3.x-doc), sorted. */
function walk(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...walk(path));
    else if (entry.isFile()) files.push(path);
  }
  return files;
}

function checkKinds(kinds: readonly DebianSource[] | undefined): readonly DebianSource[] {
  if (kinds === undefined) return DEBIAN_SOURCES;
  if (!Array.isArray(kinds) || kinds.length === 0) throw new ConfigError('kinds', kinds, `must be a non-empty list of ${DEBIAN_SOURCES.join(', ')}`);
  for (const kind of kinds) if (!DEBIAN_SOURCES.includes(kind)) throw new ConfigError('kinds', kind, `must be one of ${DEBIAN_SOURCES.join(', ')}`);
  // Fixed order whatever order was given, so the draws do not depend on it.
  return DEBIAN_SOURCES.filter((kind) => kinds.includes(kind));
}

/**
 * Each kind's share of `sample`: equal shares, a kind with fewer candidates than its share giving
 * the rest to the others (water filling; the last few by kind order). Fortunes are nine in ten
 * of the candidates, so a proportional draw would be mostly one-line texts the quality rules
 * remove; equal shares keep the manuals, man pages and fortunes side by side.
 */
function balancedQuotas(kinds: readonly DebianSource[], candidates: Map<DebianSource, Candidate[]>, sample: number): Map<DebianSource, number> {
  const quotas = new Map<DebianSource, number>(kinds.map((kind) => [kind, 0]));
  let left = Math.min(
    sample,
    kinds.reduce((sum, kind) => sum + candidates.get(kind)!.length, 0),
  );
  let open = kinds.filter((kind) => candidates.get(kind)!.length > 0);
  while (left > 0 && open.length > 0) {
    const share = Math.max(1, Math.floor(left / open.length));
    for (const kind of open) {
      if (left === 0) break;
      const room = candidates.get(kind)!.length - quotas.get(kind)!;
      const give = Math.min(share, room, left);
      quotas.set(kind, quotas.get(kind)! + give);
      left -= give;
    }
    open = open.filter((kind) => quotas.get(kind)! < candidates.get(kind)!.length);
  }
  return quotas;
}

/** A seeded Fisher-Yates shuffle (a copy). */
function shuffled<T>(items: readonly T[], random: Random): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Extraction.

const SKIPPED_ELEMENTS = new Set(['script', 'style', 'noscript', 'template', 'svg', 'button', 'input', 'select', 'textarea', 'nav', 'form', 'iframe']);
const PARAGRAPH_ELEMENTS = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'dl',
  'div',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'main',
  'ol',
  'p',
  'pre',
  'section',
  'table',
  'ul',
  'details',
  'summary',
  'caption',
]);
const LINE_ELEMENTS = new Set(['li', 'tr', 'dt', 'dd', 'br']);
const PARAGRAPH = '\u2029';
const LINE = '\u2028';

/**
 * The main text of an HTML page (readability's article, as paragraphs), or undefined when
 * readability finds no article or it has no text.
 */
export function extractMainText(html: string): string | undefined {
  const { document } = parseHTML(html);
  // linkedom's document is not the DOM lib's Document type, but has what readability reads.
  const article = new Readability(document as unknown as Document).parse();
  if (!article?.content) return undefined;
  const text = htmlToParagraphs(article.content);
  return text === '' ? undefined : text;
}

/** HTML (a fragment) as text: blocks separated by blank lines, list items and rows by line breaks. */
export function htmlToParagraphs(html: string): string {
  const { document } = parseHTML(`<!doctype html><html><body>${html}</body></html>`);
  const parts: string[] = [];
  const visit = (node: Node, inPre: boolean): void => {
    if (node.nodeType === 3) {
      const text = node.textContent ?? '';
      parts.push(inPre ? text.replace(/\r?\n/g, LINE) : text.replace(/\s+/g, ' '));
      return;
    }
    if (node.nodeType !== 1) return;
    const element = node as Element;
    const tag = element.localName.toLowerCase();
    if (SKIPPED_ELEMENTS.has(tag)) return;
    // Sphinx's and DocBook's permalink anchors ("¶", "#") are navigation, not text.
    if (tag === 'a' && /\bheaderlink\b/.test(element.getAttribute('class') ?? '')) return;
    const breakMark = PARAGRAPH_ELEMENTS.has(tag) ? PARAGRAPH : LINE_ELEMENTS.has(tag) ? LINE : '';
    if (tag === 'br') {
      parts.push(LINE);
      return;
    }
    if (tag === 'td' || tag === 'th') parts.push(' ');
    if (breakMark) parts.push(breakMark);
    for (const child of Array.from(element.childNodes)) visit(child, inPre || tag === 'pre');
    if (breakMark) parts.push(breakMark);
  };
  visit(document.body as unknown as Node, false);
  return parts
    .join('')
    .replace(/¶/g, '')
    .replace(/[ \t]*([\u2028\u2029]+)[ \t]*/g, (_, marks: string) => (marks.includes(PARAGRAPH) ? '\n\n' : '\n'))
    .split('\n')
    .map((line) => line.replace(/[ \t\u00a0]+$/u, '').replace(/^[ \t\u00a0]+/u, ''))
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** Removes terminal overstrikes: "X\bX" (bold) and "_\bX" (underline) become "X". */
export function stripOverstrikes(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the backspace is the overstrike being removed.
  return text.replace(/[^\n]\x08/g, '');
}

/**
 * A man page (gzip-compressed roff) rendered to plain text by groff; '' for an alias (`.so`)
 * page or an empty render. Preprocessors are those the page's first line asks for (tbl, eqn).
 */
export async function renderManPage(path: string): Promise<string> {
  const source = gunzipSync(readFileSync(path));
  const head = source.subarray(0, 200).toString('latin1');
  if (/^\.so\s/m.test(head) && source.length < 200) return '';
  const preprocessors = /^'\\" ([a-z]+)/.exec(head)?.[1] ?? 't';
  const args = ['-k', ...(preprocessors.includes('e') ? ['-e'] : []), '-t', '-man', '-Tutf8', '-P-cbou', `-rLL=${MAN_LINE_LENGTH}n`, '-rHY=0'];
  const rendered = await run('groff', args, source);
  const lines = stripOverstrikes(rendered)
    .split('\n')
    .map((line) => line.trim());
  // The running header ("open(2)  System Calls Manual  open(2)") and footer lines.
  const first = lines.findIndex((line) => line !== '');
  let last = lines.length - 1;
  while (last >= 0 && lines[last] === '') last--;
  if (first === -1 || last <= first) return '';
  return lines
    .slice(first + 1, last)
    .filter((line) => !TABLE_RULE.test(line))
    .map((line) => line.replace(/[│┃║]/g, ' ').replace(/ {2,}/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function run(command: string, args: readonly string[], input: Uint8Array): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'ENOENT' ? new NotFoundError(`${command}: not found; the man corpus needs Debian's groff-base (apt-get install groff-base)`) : error,
      ),
    );
    child.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}

/** The fortunes of one fortune file: entries between lines holding a single '%', overstrikes stripped, blank ones dropped. */
export function parseFortunes(text: string): string[] {
  return stripOverstrikes(text)
    .split(/^%[ \t]*$/m)
    .map((entry) => entry.replace(/^\r?\n/, '').replace(/\s+$/, ''))
    .filter((entry) => entry.trim() !== '');
}
