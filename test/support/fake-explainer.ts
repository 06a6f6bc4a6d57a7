/**
 * A fake Anthropic Messages API on loopback that explains SAE features and answers detection
 * prompts by a simple, known rule, so the SAE explainer and detector can be tested through the
 * real SDK without a key or a network.
 *
 * The rule. An explain request (its user message has "Activating examples:") is answered
 * {"label": "the token <S>"}, S the JSON-quoted span marked <<like this>> most often (ties: the
 * first seen). A detection request (its user message has <explanation>) is answered
 * {"predictions": [...]}: 1 for each <example n> whose text contains one of the label's quoted
 * strings, else 0.
 *
 * Usage as the API reports it, about four characters a token: the system prefix up to the last
 * block marked cache_control is a cache write the first time a model sees it (registered when the
 * answer is sent) and a cache read after, if it is at least `minCacheableTokens` long.
 *
 * On request it misbehaves: 429 or 529 with retry-after / retry-after-ms to the first N requests
 * or the calls a predicate picks, refusals (stop_reason 'refusal'), scripted malformed text, and
 * 401 for a wrong key. It records every request and the peak number in flight.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenMessagesServer } from './messages-server.ts';

export interface FakeExplainerCall {
  readonly kind: 'explain' | 'detect' | 'unknown';
  /** 1 for the first request with this user message, 2 for the second... */
  readonly attempt: number;
  /** Explain: the marked spans, in order. */
  readonly marked: string[];
  /** Detect: the label between the <explanation> tags. */
  readonly label: string;
  /** Detect: each example's text. */
  readonly examples: string[];
}

export type CallPredicate = (call: FakeExplainerCall) => boolean;

export interface FakeExplainerOptions {
  /** Every answer waits this long first, so concurrency shows. 0 by default. */
  readonly latencyMs?: number;
  /** When set, a request with another x-api-key gets 401. */
  readonly apiKey?: string;
  readonly overload?: {
    readonly status?: 429 | 529;
    readonly first?: number;
    readonly match?: CallPredicate;
    readonly retryAfter?: string;
    readonly retryAfterMs?: string;
  };
  readonly refuse?: CallPredicate;
  /** Answer this text instead of the rule's, for these calls. */
  readonly malformed?: (call: FakeExplainerCall) => string | undefined;
  /** 1,024 by default. */
  readonly minCacheableTokens?: number;
}

export interface FakeExplainerRequest extends FakeExplainerCall {
  readonly body: Record<string, unknown>;
  readonly answer: 'answer' | 'overloaded' | 'unauthorized' | 'refusal' | 'malformed';
  readonly status: number;
  usage?: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number };
}

export interface FakeExplainer {
  readonly url: string;
  readonly requests: FakeExplainerRequest[];
  readonly peakInFlight: number;
  close(): Promise<void>;
}

/** The rule's label for marked spans. */
export function fakeLabel(marked: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const span of marked) counts.set(span, (counts.get(span) ?? 0) + 1);
  let best = '';
  let most = 0;
  for (const [span, n] of counts)
    if (n > most) {
      best = span;
      most = n;
    }
  return `the token ${JSON.stringify(best)}`;
}

/** The rule's predictions for a label: an example containing one of its quoted strings is 1. */
export function fakePredictions(label: string, examples: readonly string[]): number[] {
  const quoted = [...label.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map(([q]) => JSON.parse(q) as string).filter(Boolean);
  return examples.map((text) => (quoted.some((q) => text.includes(q)) ? 1 : 0));
}

function userText(body: Record<string, unknown>): string {
  const messages = (body.messages as { content: string | { text?: string }[] }[] | undefined) ?? [];
  const last = messages.at(-1);
  return typeof last?.content === 'string' ? last.content : (last?.content ?? []).map((b) => b.text ?? '').join('');
}

function readCall(text: string, attempt: number): FakeExplainerCall {
  const examples = [...text.matchAll(/<example (\d+)>\n([\s\S]*?)\n<\/example \1>/g)].map((m) => m[2]!);
  if (text.includes('Activating examples:')) {
    const active = text.slice(0, text.indexOf('Non-activating examples:'));
    return { kind: 'explain', attempt, marked: [...active.matchAll(/<<([\s\S]*?)>>/g)].map((m) => m[1]!), label: '', examples };
  }
  const label = /<explanation>\n([\s\S]*?)\n<\/explanation>/.exec(text)?.[1];
  if (label !== undefined) return { kind: 'detect', attempt, marked: [], label, examples };
  return { kind: 'unknown', attempt, marked: [], label: '', examples };
}

const tokens = (chars: number) => Math.ceil(chars / 4);

export async function startFakeExplainer(options: FakeExplainerOptions = {}): Promise<FakeExplainer> {
  const requests: FakeExplainerRequest[] = [];
  const seen = new Map<string, number>();
  const cached = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const minCacheable = options.minCacheableTokens ?? 1024;
  let overloaded = 0;

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };
  const send = (res: ServerResponse, status: number, headers: Record<string, string>, payload: unknown) => {
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(payload));
  };
  const apiError = (type: string, message: string) => ({ type: 'error', error: { type, message } });

  const answer = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    const body = JSON.parse(raw || '{}') as Record<string, unknown>;
    const text = userText(body);
    const attempt = (seen.get(text) ?? 0) + 1;
    seen.set(text, attempt);
    const call = readCall(text, attempt);
    const record = (answer: FakeExplainerRequest['answer'], status: number): FakeExplainerRequest => {
      const entry: FakeExplainerRequest = { ...call, body, answer, status };
      requests.push(entry);
      return entry;
    };
    const latency = options.latencyMs ?? 0;
    if (options.apiKey !== undefined && req.headers['x-api-key'] !== options.apiKey) {
      record('unauthorized', 401);
      return later(latency, () => send(res, 401, {}, apiError('authentication_error', 'invalid x-api-key')));
    }
    const overload = options.overload;
    if (overload && (overloaded < (overload.first ?? 0) || overload.match?.(call))) {
      overloaded++;
      const status = overload.status ?? 429;
      record('overloaded', status);
      const headers: Record<string, string> = {
        ...(overload.retryAfter !== undefined ? { 'retry-after': overload.retryAfter } : {}),
        ...(overload.retryAfterMs !== undefined ? { 'retry-after-ms': overload.retryAfterMs } : {}),
      };
      return later(latency, () =>
        send(res, status, headers, status === 429 ? apiError('rate_limit_error', 'rate limited (fake)') : apiError('overloaded_error', 'overloaded (fake)')),
      );
    }
    const refuse = options.refuse?.(call) ?? false;
    const malformed = refuse ? undefined : options.malformed?.(call);
    const entry = record(refuse ? 'refusal' : malformed !== undefined ? 'malformed' : 'answer', 200);

    const system = (body.system as { text: string; cache_control?: unknown }[] | undefined) ?? [];
    const lastMarked = system.findLastIndex((block) => Boolean(block.cache_control));
    const prefix = system
      .slice(0, lastMarked + 1)
      .map((block) => block.text)
      .join('');
    const prefixTokens = lastMarked >= 0 && tokens(prefix.length) >= minCacheable ? tokens(prefix.length) : 0;
    const key = `${String(body.model)}\u0000${prefix}`;
    const cacheRead = prefixTokens && cached.has(key) ? prefixTokens : 0;
    const cacheWrite = prefixTokens && !cacheRead ? prefixTokens : 0;

    later(latency, () => {
      if (cacheWrite) cached.add(key);
      const reply = refuse
        ? ''
        : (malformed ??
          (call.kind === 'explain'
            ? JSON.stringify({ label: fakeLabel(call.marked) })
            : JSON.stringify({ predictions: fakePredictions(call.label, call.examples) })));
      const usage = {
        input_tokens: Math.max(1, tokens(raw.length) - cacheRead - cacheWrite),
        output_tokens: Math.max(1, tokens(reply.length)),
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
          content: [{ type: 'text', text: reply }],
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
    close: () => http.close(),
  };
}
