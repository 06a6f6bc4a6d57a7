/**
 * A fake Anthropic Messages API on loopback that labels documents for educational value, so the
 * labeler and the classifier trained on its labels can be tested without a key or a network.
 *
 * The hidden rule. The fake reads the extract between `<extract>` and `</extract>` in the user
 * message and scores it by how many DISTINCT words of INSTRUCTIONAL_WORDS (40 words such as
 * "function", "example", "returns", "argument", "tutorial") it contains. Words are the runs of
 * ASCII letters of the lower-cased text, matched exactly ("return" is not "returns"). The count
 * maps to a score by fixed cut points: 0 words -> 0, 1 -> 1, 2-3 -> 2, 4-5 -> 3, 6-8 -> 4,
 * 9 or more -> 5 (SCORE_CUTS). `hiddenScore(text)` computes it, so a test knows the truth; a
 * classifier over hashed word unigrams can learn it, since the score rises with the presence of
 * each listed word. The fake scores only what it is sent: the labeler's first `maxChars`
 * characters of a document, so the truth for a long document is hiddenScore of that extract.
 *
 * The answer is a structured output {score, reason} as the reply's JSON text, with usage as the
 * API reports it: about four characters a token; the system prefix up to the last block marked
 * cache_control is a cache write the first time a model sees it (registered when that response is
 * sent, so requests already in flight miss it, as on the API) and a cache read after, if it is at
 * least `minCacheableTokens` long (the API ignores cache_control on shorter prefixes).
 *
 * On request it also misbehaves: 429 or 529 with retry-after to the first N requests or to the
 * documents a predicate picks, refusals (stop_reason 'refusal'), malformed text, answers held past
 * the client's timeout, arbitrary HTTP errors, and 401 for a wrong key. It records every request
 * and the peak number in flight.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenMessagesServer } from './messages-server.ts';

/** The hidden set: words that mark instructional text. */
export const INSTRUCTIONAL_WORDS: readonly string[] = [
  'function',
  'example',
  'returns',
  'argument',
  'parameter',
  'module',
  'install',
  'configure',
  'describes',
  'tutorial',
  'option',
  'default',
  'syntax',
  'command',
  'variable',
  'usage',
  'documentation',
  'library',
  'method',
  'class',
  'object',
  'string',
  'integer',
  'directory',
  'exception',
  'import',
  'loop',
  'define',
  'specify',
  'manual',
  'reference',
  'explains',
  'instance',
  'attribute',
  'keyword',
  'compile',
  'algorithm',
  'exercise',
  'lesson',
  'chapter',
];

const INSTRUCTIONAL = new Set(INSTRUCTIONAL_WORDS);

/** The least count of distinct instructional words for scores 1 to 5. */
export const SCORE_CUTS: readonly number[] = [1, 2, 4, 6, 9];

/** The distinct instructional words in `text`, sorted. */
export function instructionalWordsIn(text: string): string[] {
  const found = new Set<string>();
  for (const [word] of text.toLowerCase().matchAll(/[a-z]+/g)) if (INSTRUCTIONAL.has(word)) found.add(word);
  return [...found].sort();
}

/** The score the fake gives `text` (an extract as sent): the number of cut points its distinct word count reaches. */
export function hiddenScore(text: string): number {
  const count = instructionalWordsIn(text).length;
  return SCORE_CUTS.filter((cut) => count >= cut).length;
}

/** Which document a request is for, and how many times the fake has seen it (1 on the first). */
export type DocumentPredicate = (document: string, attempt: number) => boolean;

export interface FakeLabelerOptions {
  /** Every answer waits this long first, so concurrency shows. 0 by default. */
  readonly latencyMs?: number;
  /** When set, a request with another x-api-key gets 401 authentication_error. */
  readonly apiKey?: string;
  /** 429 (rate_limit_error) or 529 (overloaded_error) to the first `first` requests, and to the documents `match` picks. */
  readonly overload?: {
    readonly status?: 429 | 529;
    readonly first?: number;
    readonly match?: DocumentPredicate;
    /** The retry-after header, in seconds as the API sends it ('1.5'); none when unset. */
    readonly retryAfter?: string;
    /** The retry-after-ms header; none when unset. */
    readonly retryAfterMs?: string;
  };
  /** Answer stop_reason 'refusal' for these. */
  readonly refuse?: DocumentPredicate;
  /** Answer this text (not a valid {score, reason}) for these; undefined answers normally. */
  readonly malformed?: (document: string, attempt: number) => string | undefined;
  /** Hold the answer this many ms (past the client's timeout) for these; undefined answers normally. */
  readonly hangMs?: (document: string, attempt: number) => number | undefined;
  /** Answer this HTTP error for these; undefined answers normally. */
  readonly error?: (document: string, attempt: number) => { status: number; type?: string; message?: string } | undefined;
  /** The shortest cacheable prefix, in tokens; 1,024 by default as for most Claude models. */
  readonly minCacheableTokens?: number;
}

export type FakeAnswerKind = 'label' | 'overloaded' | 'unauthorized' | 'error' | 'refusal' | 'malformed' | 'hang';

export interface FakeLabelerRequest {
  readonly headers: IncomingMessage['headers'];
  readonly body: Record<string, unknown>;
  /** The extract between the tags ('' when the message had none). */
  readonly document: string;
  /** 1 for the first request for this document text, 2 for the second... */
  readonly attempt: number;
  readonly answer: FakeAnswerKind;
  readonly status: number;
  /** The usage reported, for answers that carry one. */
  usage?: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number };
  /** The score answered, for 'label'. */
  score?: number;
}

export interface FakeLabeler {
  readonly url: string;
  readonly requests: FakeLabelerRequest[];
  /** The most requests in flight at once so far. */
  readonly peakInFlight: number;
  readonly inFlight: number;
  close(): Promise<void>;
}

const EXTRACT_OPEN = '<extract>\n';
const EXTRACT_CLOSE = '\n</extract>';

function extractOf(body: Record<string, unknown>): string {
  const messages = (body.messages as { content: string | { type: string; text?: string }[] }[] | undefined) ?? [];
  const last = messages.at(-1);
  const text = typeof last?.content === 'string' ? last.content : (last?.content ?? []).map((block) => block.text ?? '').join('');
  const start = text.indexOf(EXTRACT_OPEN);
  const end = text.lastIndexOf(EXTRACT_CLOSE);
  return start >= 0 && end >= start + EXTRACT_OPEN.length ? text.slice(start + EXTRACT_OPEN.length, end) : '';
}

const tokens = (chars: number) => Math.ceil(chars / 4);

export async function startFakeLabeler(options: FakeLabelerOptions = {}): Promise<FakeLabeler> {
  const requests: FakeLabelerRequest[] = [];
  const seen = new Map<string, number>();
  const cached = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const minCacheable = options.minCacheableTokens ?? 1024;
  let overloaded = 0;

  const later = (ms: number, fn: () => void) => {
    if (ms <= 0) return fn();
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const send = (res: ServerResponse, status: number, headers: Record<string, string>, payload: unknown) => {
    if (res.destroyed || res.writableEnded) return; // the client gave up (its timeout)
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake_${requests.length}`, ...headers }).end(JSON.stringify(payload));
  };
  const apiError = (type: string, message: string) => ({ type: 'error', error: { type, message } });

  const answer = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    const body = JSON.parse(raw || '{}') as Record<string, unknown>;
    const document = extractOf(body);
    const attempt = (seen.get(document) ?? 0) + 1;
    seen.set(document, attempt);
    const record = (answer: FakeAnswerKind, status: number): FakeLabelerRequest => {
      const entry: FakeLabelerRequest = { headers: req.headers, body, document, attempt, answer, status };
      requests.push(entry);
      return entry;
    };
    const latency = options.latencyMs ?? 0;

    if (req.method !== 'POST' || req.url !== '/v1/messages') {
      record('error', 404);
      return later(latency, () => send(res, 404, {}, apiError('not_found_error', `no route ${req.method} ${req.url}`)));
    }
    if (options.apiKey !== undefined && req.headers['x-api-key'] !== options.apiKey) {
      record('unauthorized', 401);
      return later(latency, () => send(res, 401, {}, apiError('authentication_error', 'invalid x-api-key')));
    }
    const overload = options.overload;
    if (overload && (overloaded < (overload.first ?? 0) || overload.match?.(document, attempt))) {
      overloaded++;
      const status = overload.status ?? 429;
      record('overloaded', status);
      const headers: Record<string, string> = {
        ...(overload.retryAfter !== undefined ? { 'retry-after': overload.retryAfter } : {}),
        ...(overload.retryAfterMs !== undefined ? { 'retry-after-ms': overload.retryAfterMs } : {}),
      };
      const error = status === 429 ? apiError('rate_limit_error', 'rate limited (fake)') : apiError('overloaded_error', 'overloaded (fake)');
      return later(latency, () => send(res, status, headers, error));
    }
    const failure = options.error?.(document, attempt);
    if (failure) {
      record('error', failure.status);
      return later(latency, () => send(res, failure.status, {}, apiError(failure.type ?? 'invalid_request_error', failure.message ?? 'error (fake)')));
    }
    const hang = options.hangMs?.(document, attempt);
    const refuse = options.refuse?.(document, attempt) ?? false;
    const malformed = refuse ? undefined : options.malformed?.(document, attempt);
    const score = hiddenScore(document);
    const entry = record(hang !== undefined ? 'hang' : refuse ? 'refusal' : malformed !== undefined ? 'malformed' : 'label', 200);
    if (entry.answer === 'label') entry.score = score;

    // The cached prefix: the system blocks up to the last one marked cache_control. It is looked
    // up when the request arrives and written when its answer is sent, so requests that arrive
    // before the first answer all miss, as on the API.
    const system = (body.system as { text: string; cache_control?: unknown }[] | string | undefined) ?? [];
    const blocks = typeof system === 'string' ? [{ text: system }] : system;
    const lastMarked = blocks.findLastIndex((block) => 'cache_control' in block && block.cache_control);
    const prefix = blocks
      .slice(0, lastMarked + 1)
      .map((block) => block.text)
      .join('');
    const prefixTokens = lastMarked >= 0 && tokens(prefix.length) >= minCacheable ? tokens(prefix.length) : 0;
    const key = `${String(body.model)}\u0000${prefix}`;
    const cacheRead = prefixTokens && cached.has(key) ? prefixTokens : 0;
    const cacheWrite = prefixTokens && !cacheRead ? prefixTokens : 0;

    later(latency + (hang ?? 0), () => {
      if (res.destroyed) return;
      if (cacheWrite) cached.add(key);

      const words = instructionalWordsIn(document);
      const text = refuse
        ? ''
        : (malformed ??
          JSON.stringify({ score, reason: words.length ? `${words.length} instructional words: ${words.join(', ')}` : 'no instructional content' }));
      const usage = {
        input_tokens: Math.max(1, tokens(raw.length) - cacheRead - cacheWrite),
        output_tokens: Math.max(1, tokens(text.length)),
        cache_read_input_tokens: cacheRead,
        cache_creation_input_tokens: cacheWrite,
      };
      entry.usage = usage;
      send(
        res,
        200,
        {},
        {
          id: `msg_fake_${requests.length}`,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text }],
          stop_reason: refuse ? 'refusal' : 'end_turn',
          stop_sequence: null,
          usage,
        },
      );
    });
  };

  const http = await listenMessagesServer(answer, timers);
  return {
    url: http.url,
    requests,
    get peakInFlight() {
      return http.peakInFlight;
    },
    get inFlight() {
      return http.inFlight;
    },
    close: () => http.close(),
  };
}
