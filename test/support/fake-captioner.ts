/**
 * A fake Anthropic Messages API on loopback that captions video clips from their contact sheets
 * by a simple, known rule, so the video captioner can be tested through the real SDK without a
 * key or a network.
 *
 * It reads each request as the API would: the user turn must hold an image block with base64
 * data, and the decoded bytes must start with the magic bytes of the declared media type (JPEG
 * FF D8 FF, PNG 89 50 4E 47 0D 0A 1A 0A); otherwise it answers 400 invalid_request_error, as the
 * API does. The rule: the caption names the image's byte length and the first 12 hex digits of
 * its SHA-256 (`fakeCaption`), so a test can tell the caption came from that very image. The
 * request carries no clip id; tests pick the calls to misbehave on by the image's hash.
 *
 * Usage as the API reports it, about four characters a token: the system prefix up to the last
 * block marked cache_control is a cache write the first time a model sees it (registered when the
 * answer is sent) and a cache read after, if it is at least `minCacheableTokens` long.
 *
 * On request it misbehaves: 429 to the first N requests (with retry-after when given), refusals
 * (stop_reason 'refusal'), scripted malformed text, and 401 for a wrong key. It records every
 * request (the parsed body included) and the peak number in flight.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenMessagesServer } from './messages-server.ts';

export interface FakeCaptionerCall {
  /** 1 for the first request with this image, 2 for the second... */
  readonly attempt: number;
  /** The declared media type, '' when there is no image block. */
  readonly mediaType: string;
  /** SHA-256 (hex) of the decoded image bytes, '' when there is no image block. */
  readonly imageSha256: string;
  readonly imageBytes: number;
  /** The user turn's text blocks, joined. */
  readonly text: string;
}

export type CaptionCallPredicate = (call: FakeCaptionerCall) => boolean;

export interface FakeCaptionerOptions {
  /** Every answer waits this long first, so concurrency shows. 0 by default. */
  readonly latencyMs?: number;
  /** When set, a request with another x-api-key gets 401. */
  readonly apiKey?: string;
  /** The first N requests get 429. */
  readonly rateLimitFirst?: number;
  /** The 429s' retry-after header (seconds); none by default, so the client backs off. */
  readonly retryAfter?: string;
  readonly refuse?: CaptionCallPredicate;
  /** Answer this text instead of the rule's, for these calls. */
  readonly malformed?: (call: FakeCaptionerCall) => string | undefined;
  /** 1,024 by default. */
  readonly minCacheableTokens?: number;
}

export interface FakeCaptionerRequest extends FakeCaptionerCall {
  readonly body: Record<string, unknown>;
  readonly answer: 'answer' | 'rate-limited' | 'unauthorized' | 'invalid' | 'refusal' | 'malformed';
  readonly status: number;
  usage?: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number };
}

export interface FakeCaptioner {
  readonly url: string;
  readonly requests: FakeCaptionerRequest[];
  readonly peakInFlight: number;
  close(): Promise<void>;
}

const MAGIC: Record<string, Buffer> = {
  'image/jpeg': Buffer.from([0xff, 0xd8, 0xff]),
  'image/png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
};

export function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The rule's caption for an image's bytes. */
export function fakeCaption(bytes: Buffer): string {
  return `A clip whose contact sheet has ${bytes.length} bytes with sha256 ${sha256Hex(bytes).slice(0, 12)}.`;
}

interface ImageBlock {
  type: 'image';
  source?: { type?: string; media_type?: string; data?: unknown };
}

function userContent(body: Record<string, unknown>): { type?: string; text?: string }[] {
  const messages = (body.messages as { role?: string; content: string | { type?: string; text?: string }[] }[] | undefined) ?? [];
  const last = messages.at(-1);
  if (last?.role !== 'user') return [];
  return typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
}

/** The image's bytes, or why the API would reject the request. */
function readImage(content: { type?: string }[]): { bytes: Buffer; mediaType: string } | { error: string } {
  const images = content.filter((block): block is ImageBlock => block.type === 'image');
  if (images.length !== 1) return { error: `expected one image block in the user turn, got ${images.length}` };
  const source = images[0]!.source;
  if (source?.type !== 'base64' || typeof source.data !== 'string' || !source.data) return { error: 'image.source: expected base64 data' };
  const mediaType = source.media_type ?? '';
  const magic = MAGIC[mediaType];
  if (!magic) return { error: `image.source.media_type: unsupported ${JSON.stringify(mediaType)}` };
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(source.data)) return { error: 'image.source.data: not valid base64' };
  const bytes = Buffer.from(source.data, 'base64');
  if (!bytes.subarray(0, magic.length).equals(magic)) return { error: `image.source.base64.data: Image does not match the provided media type ${mediaType}` };
  return { bytes, mediaType };
}

const tokens = (chars: number) => Math.ceil(chars / 4);

export async function startFakeCaptioner(options: FakeCaptionerOptions = {}): Promise<FakeCaptioner> {
  const requests: FakeCaptionerRequest[] = [];
  const seen = new Map<string, number>();
  const cached = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const minCacheable = options.minCacheableTokens ?? 1024;
  let rateLimited = 0;

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
    const content = userContent(body);
    const image = readImage(content);
    const imageSha256 = 'bytes' in image ? sha256Hex(image.bytes) : '';
    const attempt = (seen.get(imageSha256) ?? 0) + 1;
    seen.set(imageSha256, attempt);
    const call: FakeCaptionerCall = {
      attempt,
      mediaType: 'bytes' in image ? image.mediaType : '',
      imageSha256,
      imageBytes: 'bytes' in image ? image.bytes.length : 0,
      text: content.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join(''),
    };
    const record = (answer: FakeCaptionerRequest['answer'], status: number): FakeCaptionerRequest => {
      const entry: FakeCaptionerRequest = { ...call, body, answer, status };
      requests.push(entry);
      return entry;
    };
    const latency = options.latencyMs ?? 0;
    if (options.apiKey !== undefined && req.headers['x-api-key'] !== options.apiKey) {
      record('unauthorized', 401);
      return later(latency, () => send(res, 401, {}, apiError('authentication_error', 'invalid x-api-key')));
    }
    if (rateLimited < (options.rateLimitFirst ?? 0)) {
      rateLimited++;
      record('rate-limited', 429);
      const headers: Record<string, string> = options.retryAfter !== undefined ? { 'retry-after': options.retryAfter } : {};
      return later(latency, () => send(res, 429, headers, apiError('rate_limit_error', 'rate limited (fake)')));
    }
    if ('error' in image) {
      record('invalid', 400);
      return later(latency, () => send(res, 400, {}, apiError('invalid_request_error', `messages.0.content: ${image.error}`)));
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
      const reply = refuse ? '' : (malformed ?? JSON.stringify({ caption: fakeCaption(image.bytes) }));
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
