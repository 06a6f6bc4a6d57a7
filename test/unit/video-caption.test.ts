/**
 * The video captioner through the real SDK against a fake Messages API on loopback
 * (test/support/fake-captioner.ts), with small real images: every clip captioned from its own
 * contact sheet (the fake's caption names the bytes it decoded), the cached instructions and the
 * image block, bounded concurrency, refusals and malformed or empty answers recorded as missing
 * with their reason after the retries, a 429 retried, an image that does not match its media
 * type missing as an API error, and a wrong key failing the run.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { crc32, deflateSync } from 'node:zlib';
import { anthropicClient, InvalidApiKeyError } from '#shared/claude-requests.ts';
import { ConfigError } from '#shared/errors.ts';
import {
  CAPTION_INSTRUCTIONS,
  CAPTION_MAX_TOKENS,
  CAPTION_USER_TEXT,
  type CaptionItem,
  captionClips,
  captionRequestParams,
  cleanCaption,
  MAX_CAPTION_CHARS,
  parseCaptionAnswer,
} from '#shared/video/caption.ts';
import { type FakeCaptioner, type FakeCaptionerOptions, fakeCaption, sha256Hex, startFakeCaptioner } from '../support/fake-captioner.ts';

// ---------------------------------------------------------------------------------------------
// Images.

/** A 32x18 frame of ffmpeg's testsrc2, encoded as a baseline JPEG by ffmpeg's mjpeg encoder. */
const TESTSRC_JPEG = Buffer.from(
  '/9j/4AAQSkZJRgABAgAAAQABAAD//gAQTGF2YzU5LjM3LjEwMAD/2wBDAAgUFBcUFxsbGxsbGyAeICEhISAgICAhISEkJCQqKiokJCQhISQkKCgqKi4vLisrKisvLzIyMjw8OTlGRkhWVmf/xAB6AAADAQAAAAAAAAAAAAAAAAAEBgUHAQEBAQEAAAAAAAAAAAAAAAAGBAUCEAACAQMCBAcAAwEAAAAAAAABAhEAEgNBUQQhEzFhM7GBMiIUcSNCUhEAAQIEBgEFAQEAAAAAAAAAARECEgAEA0FxMjEiIWGBsVGyNBMz/8AAEQgAEgAgAwEiAAIRAAMRAD8Ay4nM+RlTQT/kAACSSTyA/k04YuL4/GxUPBKhvjii3/q6LY8ZqTiIJ4hIuZukQkwXCGWAO8bc9qYFK9Do2/f59KTNt91s726fLwrGrao1LubAQvQdyhDkK94DbYDred27Tt/tyKlkcJ8qRCOihIGBXxOaf3YMgn6mJB+pBBHcESCPEUzcNxXFywxvpJ5JAA1JIgCh8pt/IgjE6s7WsZ6Qd7kuJ2HMzz3FG8Obv0qYyMzK0A+Za5LWkbjtHPYUifV3nW4i4nNx2jhi3RE5avXGY3Wg60+0SYCQS3AlA5E+VCad8JXMvnH29KJTWhsvnH29KJTWj50jITzWfrdm77OlcXuKrprUhe4qumtLXzA7/F2Y9xP/2Q==',
  'base64',
);

/** The test JPEG with a comment segment (FF FE) carrying `tag` after SOI: a distinct, still valid JPEG. */
function jpeg(tag: string): Buffer {
  const text = Buffer.from(tag, 'latin1');
  const segment = Buffer.alloc(4);
  segment.writeUInt16BE(0xfffe, 0);
  segment.writeUInt16BE(text.length + 2, 2);
  return Buffer.concat([TESTSRC_JPEG.subarray(0, 2), segment, text, TESTSRC_JPEG.subarray(2)]);
}

/** A 2x2 RGB PNG of one colour. */
function png(r: number, g: number, b: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(data.length);
    const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(typed));
    return Buffer.concat([head, typed, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(2, 0);
  header.writeUInt32BE(2, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits, truecolour, deflate, no filter, no interlace
  const row = [0, r, g, b, r, g, b]; // filter byte 0, then two pixels
  const pixels = Buffer.from([...row, ...row]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function item(id: string, bytes: Buffer, mediaType: 'image/jpeg' | 'image/png' = bytes[0] === 0xff ? 'image/jpeg' : 'image/png'): CaptionItem {
  return { id, contactSheet: { mediaType, base64: bytes.toString('base64') } };
}

/** Clips in no particular order, JPEG and PNG, each image distinct. */
function clips(count: number): { items: CaptionItem[]; bytes: Map<string, Buffer> } {
  const bytes = new Map<string, Buffer>();
  for (let k = 0; k < count; k++) bytes.set(`clip-${String((k * 5) % count).padStart(2, '0')}`, k % 3 === 2 ? png(k * 20, 255 - k * 20, 7) : jpeg(`clip ${k}`));
  return { items: [...bytes].map(([id, b]) => item(id, b)), bytes };
}

const shaOf = (items: readonly CaptionItem[]) => new Map(items.map((i) => [sha256Hex(Buffer.from(i.contactSheet.base64, 'base64')), i.id]));

// ---------------------------------------------------------------------------------------------
// The fake.

const MODEL = 'claude-video-test';
const fakes: FakeCaptioner[] = [];
async function fake(options: FakeCaptionerOptions = {}): Promise<FakeCaptioner> {
  const started = await startFakeCaptioner(options);
  fakes.push(started);
  return started;
}
after(() => Promise.all(fakes.map((f) => f.close())));

function runOptions(concurrency = 3) {
  const slept: number[] = [];
  return { model: MODEL, concurrency, random: () => 0.5, sleep: async (ms: number) => void slept.push(ms), slept };
}

describe('the caption request and answer', () => {
  it('sends the cached instructions, the sheet as a base64 image then the text, and a {caption} schema', () => {
    const clip = item('a', jpeg('a'));
    const params = captionRequestParams(clip, MODEL);
    assert.equal(params.model, MODEL);
    assert.equal(params.max_tokens, CAPTION_MAX_TOKENS);
    assert.deepEqual(params.system, [{ type: 'text', text: CAPTION_INSTRUCTIONS, cache_control: { type: 'ephemeral' } }]);
    assert.deepEqual(params.messages, [
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: clip.contactSheet.base64 } },
          { type: 'text', text: CAPTION_USER_TEXT },
        ],
      },
    ]);
    const schema = params.output_config.format.schema as { required: string[]; properties: Record<string, { type: string }> };
    assert.deepEqual(schema.required, ['caption']);
    assert.equal(schema.properties.caption!.type, 'string');
    // Long enough to be cached (1,024 tokens at about four characters a token).
    assert.ok(CAPTION_INSTRUCTIONS.length > 4 * 1024, `${CAPTION_INSTRUCTIONS.length} characters`);
    assert.ok(CAPTION_INSTRUCTIONS.includes(`at most ${MAX_CAPTION_CHARS} characters`));
  });

  it('cleans a caption to one capped line and rejects an empty one', () => {
    assert.equal(cleanCaption('  A dog\n runs\t across a park.  '), 'A dog runs across a park.');
    const long = cleanCaption(`${'word '.repeat(200)}end`);
    assert.equal(long.length, MAX_CAPTION_CHARS);
    assert.ok(long.endsWith('…'));
    assert.throws(() => cleanCaption(' \n\t '), /the caption is empty/);
    assert.equal(parseCaptionAnswer('{"caption": "A cat\\nsleeps."}'), 'A cat sleeps.');
    assert.throws(() => parseCaptionAnswer('{"caption": "  "}'), /empty/);
    assert.throws(() => parseCaptionAnswer('A cat sleeps.'), /JSON/);
    assert.throws(() => parseCaptionAnswer('{"caption": "x", "tags": []}'), /structured output/);
  });
});

describe('captionClips against the fake Messages API', () => {
  it('captions every clip from its own image, caches the instructions, and reaches but never passes the concurrency', async () => {
    const server = await fake({ latencyMs: 20 });
    const { items, bytes } = clips(9);
    const options = runOptions(3);
    const run = await captionClips(anthropicClient('test-key', server.url), items, options);
    const ids = [...bytes.keys()].sort();
    assert.deepEqual(
      run.captions.map((c) => [c.id, c.caption]),
      ids.map((id) => [id, fakeCaption(bytes.get(id)!)]),
    );
    assert.deepEqual(run.missing, []);
    assert.equal(new Set(run.captions.map((c) => c.caption)).size, 9, 'each image its own caption');
    assert.equal(run.stats.requests, 9);
    assert.equal(run.stats.retries, 0);
    assert.equal(run.stats.maxInFlight, 3);
    assert.equal(server.peakInFlight, 3);
    assert.deepEqual(options.slept, []);

    // Every request: the same cached system block, one image of its declared type, no clip id.
    const system = [{ type: 'text', text: CAPTION_INSTRUCTIONS, cache_control: { type: 'ephemeral' } }];
    for (const request of server.requests) {
      assert.equal(request.answer, 'answer');
      assert.equal(request.body.model, MODEL);
      assert.deepEqual(request.body.system, system);
      assert.equal(request.text, CAPTION_USER_TEXT);
      assert.ok(!JSON.stringify(request.body).includes('clip-'), 'the request does not carry the id');
    }
    assert.deepEqual(server.requests.map((r) => r.mediaType).sort(), items.map((i) => i.contactSheet.mediaType).sort());
    assert.deepEqual(new Set(server.requests.map((r) => r.imageSha256)), new Set(shaOf(items).keys()));
    // The first request ran alone and wrote the cache; the other eight read it.
    const [first, ...rest] = server.requests;
    assert.ok(first!.usage!.cache_creation_input_tokens > 0);
    assert.ok(rest.every((r) => r.usage!.cache_read_input_tokens === first!.usage!.cache_creation_input_tokens));
    assert.equal(run.stats.usage.cacheWriteTokens, first!.usage!.cache_creation_input_tokens);
    assert.equal(run.stats.usage.cacheReadTokens, 8 * first!.usage!.cache_creation_input_tokens);
  });

  it('lists clips refused, malformed or captioned empty as missing with the reason after the retries; a clip refused once is captioned', async () => {
    const { items, bytes } = clips(6);
    const idOf = shaOf(items);
    const is = (id: string) => (call: { imageSha256: string }) => idOf.get(call.imageSha256) === id;
    const server = await fake({
      refuse: (call) => is('clip-01')(call) || (is('clip-02')(call) && call.attempt === 1),
      malformed: (call) => {
        if (is('clip-03')(call)) return 'A red tram crosses a bridge.';
        if (is('clip-04')(call)) return JSON.stringify({ caption: ' \n ' });
        if (is('clip-05')(call)) return JSON.stringify({ caption: `A long\ncaption ${'very '.repeat(150)}long.` });
        return undefined;
      },
    });
    const options = { ...runOptions(2), maxAttempts: 3 };
    const run = await captionClips(anthropicClient('test-key', server.url), items, options);
    assert.deepEqual(
      run.missing.map((m) => [m.id, m.reason, m.attempts]),
      [
        ['clip-01', 'refused', 3],
        ['clip-03', 'malformed', 3],
        ['clip-04', 'malformed', 3],
      ],
    );
    const detail = Object.fromEntries(run.missing.map((m) => [m.id, m.detail]));
    assert.match(detail['clip-01']!, /stop_reason refusal/);
    assert.match(detail['clip-03']!, /JSON.*A red tram crosses a bridge/);
    assert.match(detail['clip-04']!, /the caption is empty/);
    assert.deepEqual(
      run.captions.map((c) => c.id),
      ['clip-00', 'clip-02', 'clip-05'],
    );
    const captions = Object.fromEntries(run.captions.map((c) => [c.id, c.caption]));
    assert.equal(captions['clip-02'], fakeCaption(bytes.get('clip-02')!));
    assert.equal(captions['clip-05']!.length, MAX_CAPTION_CHARS);
    assert.match(captions['clip-05']!, /^A long caption very very .*…$/);
    // Every clip is accounted for, once.
    assert.equal(run.captions.length + run.missing.length, items.length);
    assert.equal(server.requests.filter((r) => r.answer === 'refusal').length, 3 + 1);
    assert.equal(run.stats.retries, 2 + 1 + 2 + 2);
    assert.deepEqual(options.slept, [], 'refusals and malformed answers are asked again at once');
  });

  it('retries a 429 with backoff and captions the clip', async () => {
    const server = await fake({ rateLimitFirst: 2 });
    const { items, bytes } = clips(3);
    const options = runOptions(1);
    const run = await captionClips(anthropicClient('test-key', server.url), items, options);
    assert.deepEqual(
      run.captions.map((c) => c.caption),
      [...bytes.keys()].sort().map((id) => fakeCaption(bytes.get(id)!)),
    );
    assert.deepEqual(run.missing, []);
    assert.equal(run.stats.retries, 2);
    assert.deepEqual(
      server.requests.map((r) => r.answer),
      ['rate-limited', 'rate-limited', 'answer', 'answer', 'answer'],
    );
    // Full jitter with random() = 0.5: half of 1 s, then half of 2 s.
    assert.deepEqual(options.slept, [500, 1000]);
  });

  it('lists a clip whose image does not match its media type as missing (api-error, not retried)', async () => {
    const server = await fake();
    const items = [item('good', jpeg('good')), item('liar', png(1, 2, 3), 'image/jpeg')];
    const run = await captionClips(anthropicClient('test-key', server.url), items, runOptions(2));
    assert.deepEqual(
      run.captions.map((c) => c.id),
      ['good'],
    );
    assert.equal(run.missing.length, 1);
    const [missing] = run.missing;
    assert.deepEqual([missing!.id, missing!.reason, missing!.attempts], ['liar', 'api-error', 1]);
    assert.match(missing!.detail, /400 invalid_request_error.*does not match the provided media type image\/jpeg/);
  });

  it('fails the run on a 401', async () => {
    const server = await fake({ apiKey: 'right' });
    await assert.rejects(captionClips(anthropicClient('wrong', server.url), clips(4).items, runOptions()), InvalidApiKeyError);
    assert.equal(server.requests.length, 1, 'the first request goes alone, so only it is sent');
  });

  it('rejects bad items and options before sending anything', async () => {
    const server = await fake();
    const client = anthropicClient('test-key', server.url);
    const good = item('a', jpeg('a'));
    await assert.rejects(
      captionClips(client, [good, item('a', jpeg('b'))], runOptions()),
      (e) => e instanceof ConfigError && /items\[1\]\.id: is a duplicate/.test(e.message),
    );
    await assert.rejects(captionClips(client, [item('', jpeg('a'))], runOptions()), /items\[0\]\.id: must be a non-empty string/);
    await assert.rejects(
      captionClips(client, [{ id: 'g', contactSheet: { mediaType: 'image/gif' as never, base64: 'R0lG' } }], runOptions()),
      /items\[0\]\.contactSheet\.mediaType: must be one of image\/jpeg, image\/png/,
    );
    await assert.rejects(captionClips(client, [{ id: 'e', contactSheet: { mediaType: 'image/png', base64: '' } }], runOptions()), /base64: must be non-empty/);
    await assert.rejects(captionClips(client, [good], { ...runOptions(), model: '' }), /model: must be a model id/);
    await assert.rejects(captionClips(client, [good], { ...runOptions(), concurrency: 0 }), /concurrency: must be an integer from 1 to 64/);
    assert.equal(server.requests.length, 0);
    const none = await captionClips(client, [], runOptions());
    assert.deepEqual([none.captions, none.missing, none.stats.requests], [[], [], 0]);
  });
});
