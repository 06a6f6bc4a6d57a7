/**
 * A fake Anthropic Messages API on loopback: answers POST /v1/messages with scripted replies (a
 * structured output is the JSON text of the reply), records every request, and reports prompt
 * caching as the API does: a cached system block seen before is a cache read, the first time a
 * cache write.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeClaude {
  readonly url: string;
  readonly requests: { headers: Record<string, string | string[] | undefined>; body: Record<string, unknown> }[];
  /** The usage fields of every answer given, in order. */
  readonly usages: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number }[];
  /** Queue the next replies: objects become the reply's JSON text; `{status, body}` an HTTP error. */
  reply(...outputs: unknown[]): void;
  close(): Promise<void>;
}

export async function startFakeClaude(): Promise<FakeClaude> {
  const queue: unknown[] = [];
  const requests: FakeClaude['requests'] = [];
  const usages: FakeClaude['usages'] = [];
  const cached = new Set<string>();
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      requests.push({ headers: req.headers, body });
      if (req.method !== 'POST' || req.url !== '/v1/messages') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: req.url } }));
        return;
      }
      const next = queue.shift();
      if (next === undefined) {
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'the fake server has no scripted reply left' } }));
        return;
      }
      if (next && typeof next === 'object' && 'status' in next && 'body' in next) {
        const { status, body: errorBody } = next as { status: number; body: unknown };
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(errorBody));
        return;
      }
      const system = (body.system as { text: string; cache_control?: unknown }[] | undefined) ?? [];
      let cacheRead = 0;
      let cacheWrite = 0;
      for (const block of system) {
        if (!block.cache_control) continue;
        const tokens = Math.ceil(block.text.length / 4);
        if (cached.has(block.text)) cacheRead += tokens;
        else {
          cached.add(block.text);
          cacheWrite += tokens;
        }
      }
      const text = typeof next === 'string' ? next : JSON.stringify(next);
      const usage = {
        input_tokens: Math.ceil(raw.length / 4) - cacheRead,
        output_tokens: Math.ceil(text.length / 4),
        cache_read_input_tokens: cacheRead,
        cache_creation_input_tokens: cacheWrite,
      };
      usages.push(usage);
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_fake_${requests.length}` }).end(
        JSON.stringify({
          id: `msg_fake_${requests.length}`,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    usages,
    reply: (...outputs) => queue.push(...outputs),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
