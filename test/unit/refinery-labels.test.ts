/**
 * The refinery's quality labeler through the real Anthropic SDK against a fake Messages API on
 * loopback that labels by a hidden rule: the labels, the measured concurrency, retries that honour
 * retry-after (the waits recorded by an injected sleep, not waited), failures that persist or pass,
 * the cached rubric, a bad key; then the labels file, the stratified sample and the cost table.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';
import { ConfigError } from '#shared/errors.ts';
import {
  documentExtract,
  InvalidApiKeyError,
  type LabelDocument,
  labelDocuments,
  labelerClient,
  type LabelOptions,
  parseLabelsFile,
  RUBRIC_TEXT,
  RUBRIC_VERSION,
  retryAfterMs,
  stratifiedSample,
} from '#shared/refinery/labels.ts';
import { CLAUDE_PRICES, costPerDocument, llmCostUsd } from '#shared/refinery/llm-cost.ts';
import { randomInt, seededRandom } from '#shared/random.ts';
import { type FakeLabeler, type FakeLabelerOptions, hiddenScore, INSTRUCTIONAL_WORDS, startFakeLabeler } from '../support/fake-labeler.ts';

// ---------------------------------------------------------------------------------------------
// Fixtures.

const FILLER = 'the a river town market morning bread children stone bridge weather price old people water field road house'.split(' ');

/** `count` documents whose hidden scores cover 0-5: each draws 0-12 instructional words among filler. */
function corpus(count: number, seed = 7): LabelDocument[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, (_, i) => {
    const wanted = i % 13;
    const words = Array.from({ length: 40 }, () => FILLER[randomInt(random, FILLER.length)]!);
    for (let k = 0; k < wanted; k++) words.splice(randomInt(random, words.length), 0, INSTRUCTIONAL_WORDS[(i + k * 7) % INSTRUCTIONAL_WORDS.length]!);
    return { id: `doc-${String(i).padStart(3, '0')}`, text: `${words.join(' ')}.` };
  });
}

const MODEL = 'claude-labeler-test';

/** Options for a run: a recorded sleep (never waits), a fixed jitter draw. */
function runOptions(overrides: Partial<LabelOptions> = {}): LabelOptions & { slept: number[] } {
  const slept: number[] = [];
  return {
    model: MODEL,
    concurrency: 4,
    random: () => 0.5,
    sleep: async (ms) => void slept.push(ms),
    slept,
    ...overrides,
  };
}

const fakes: FakeLabeler[] = [];
async function fake(options: FakeLabelerOptions = {}): Promise<FakeLabeler> {
  const started = await startFakeLabeler(options);
  fakes.push(started);
  return started;
}
after(() => Promise.all(fakes.map((f) => f.close())));

const byText = (documents: readonly LabelDocument[], id: string) => documents.find((d) => d.id === id)!.text;

// ---------------------------------------------------------------------------------------------

describe('labelDocuments against the fake Messages API', () => {
  it('labels every document with the hidden rule, sends the model asked for, and reaches but never passes the concurrency', async () => {
    const server = await fake({ latencyMs: 25 });
    const documents = corpus(48);
    const options = runOptions({ concurrency: 8 });
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, options);

    assert.deepEqual(
      run.labels.map((l) => [l.id, l.score]),
      documents.map((d) => [d.id, hiddenScore(d.text)]),
    );
    assert.deepEqual(new Set(run.labels.map((l) => l.score)), new Set([0, 1, 2, 3, 4, 5]), 'the corpus covers every score');
    assert.ok(run.labels.every((l) => l.reason.length > 0 && l.reason.length <= 200 && !l.reason.includes('\n')));
    assert.deepEqual(run.unlabelled, []);
    assert.equal(run.requests, 48);
    assert.equal(run.retries, 0);
    assert.equal(run.maxInFlight, 8);
    assert.equal(server.peakInFlight, 8, 'the server saw 8 at once, never more');
    assert.ok(server.requests.every((r) => r.body.model === MODEL));
    assert.deepEqual(options.slept, []);
  });

  it('sends the rubric as one cached system block; the first response writes the cache and every later one reads it', async () => {
    const server = await fake({ latencyMs: 10 });
    const documents = corpus(24, 11);
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, runOptions({ concurrency: 8 }));

    const system = server.requests[0]!.body.system as { type: string; text: string; cache_control?: unknown }[];
    assert.equal(system.length, 1);
    assert.equal(system[0]!.text, RUBRIC_TEXT);
    assert.deepEqual(system[0]!.cache_control, { type: 'ephemeral' });
    assert.ok(Number.isInteger(RUBRIC_VERSION) && RUBRIC_VERSION >= 1);
    const [first, second] = server.requests;
    assert.ok(first!.usage!.cache_creation_input_tokens > 0 && first!.usage!.cache_read_input_tokens === 0, JSON.stringify(first!.usage));
    assert.ok(second!.usage!.cache_read_input_tokens > 0 && second!.usage!.cache_creation_input_tokens === 0, JSON.stringify(second!.usage));
    // The others waited for the first answer, so the rubric was written once and read 23 times.
    const rubricTokens = first!.usage!.cache_creation_input_tokens;
    assert.deepEqual([run.usage.cacheWriteTokens, run.usage.cacheReadTokens], [rubricTokens, 23 * rubricTokens]);
    const format = (server.requests[0]!.body.output_config as { format: { type: string; schema: { required: string[] } } }).format;
    assert.equal(format.type, 'json_schema');
    assert.deepEqual(format.schema.required, ['score', 'reason']);
  });

  it('sends only the first maxChars characters of a document, 1,000 by default', async () => {
    const server = await fake();
    const long = `${'example '.repeat(200)}${INSTRUCTIONAL_WORDS.join(' ')}`;
    const run = await labelDocuments(labelerClient('test-key', server.url), [{ id: 'long', text: long }], runOptions());
    assert.equal(server.requests[0]!.document, long.slice(0, 1000));
    assert.equal(run.labels[0]!.score, 1, 'only "example" is within the first 1,000 characters');
    assert.equal(documentExtract('a😀b', 2), 'a😀', 'a code point is never split');

    await labelDocuments(labelerClient('test-key', server.url), [{ id: 'long2', text: `x${long}` }], runOptions({ maxChars: 3000 }));
    assert.equal(server.requests[1]!.document.length, 1 + long.length);
  });

  it('retries 429 and 529, waiting as retry-after or retry-after-ms says, capped, and with full-jitter backoff without one', async () => {
    const documents = corpus(6, 3);
    // 429 with retry-after 1.5 s to the first two requests; 529 with retry-after-ms to doc-002's first try.
    const server = await fake({ overload: { status: 429, first: 2, retryAfter: '1.5' } });
    const options = runOptions({ concurrency: 1 });
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, options);
    assert.equal(run.labels.length, 6);
    assert.equal(run.retries, 2);
    assert.equal(run.requests, 8);
    // Honoured: at least the 1.5 s asked, plus at most 10% jitter (random() = 0.5 gives 5%).
    assert.deepEqual(options.slept, [1575, 1575]);

    const overloaded = await fake({
      overload: { status: 529, match: (text, attempt) => text === byText(documents, 'doc-002') && attempt <= 2, retryAfterMs: '250' },
    });
    const options529 = runOptions({ concurrency: 2 });
    const run529 = await labelDocuments(labelerClient('test-key', overloaded.url), documents, options529);
    assert.equal(run529.labels.length, 6);
    assert.deepEqual(options529.slept, [262.5, 262.5]);
    assert.deepEqual(
      overloaded.requests.filter((r) => r.answer === 'overloaded').map((r) => r.status),
      [529, 529],
    );

    const noHeader = await fake({ overload: { status: 529, match: (_text, attempt) => attempt <= 3 } });
    const backoff = runOptions({ concurrency: 1 });
    const backedOff = await labelDocuments(labelerClient('test-key', noHeader.url), documents.slice(0, 1), backoff);
    assert.equal(backedOff.labels.length, 1);
    // Full jitter: random() x min(cap, 1 s x 2^(attempt-1)), random() = 0.5.
    assert.deepEqual(backoff.slept, [500, 1000, 2000]);

    const longWait = await fake({ overload: { status: 429, first: 1, retryAfter: '3600' } });
    const capped = runOptions({ concurrency: 1 });
    await labelDocuments(labelerClient('test-key', longWait.url), documents.slice(0, 1), capped);
    assert.deepEqual(capped.slept, [60_000]);
  });

  it('lists a document whose refusal, malformed answer, timeout or rate limit persists as unlabelled with its reason, and labels the rest', async () => {
    const documents = corpus(9, 5);
    const text = (id: string) => byText(documents, id);
    const server = await fake({
      refuse: (doc) => doc === text('doc-001'),
      malformed: (doc) => (doc === text('doc-003') ? 'Educational score: 3' : undefined),
      hangMs: (doc) => (doc === text('doc-005') ? 5000 : undefined),
      overload: { status: 429, match: (doc) => doc === text('doc-007'), retryAfter: '0.2' },
    });
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, runOptions({ concurrency: 4, maxAttempts: 3, timeoutMs: 150 }));

    assert.deepEqual(
      run.unlabelled.map((u) => [u.id, u.reason, u.attempts]),
      [
        ['doc-001', 'refused', 3],
        ['doc-003', 'malformed', 3],
        ['doc-005', 'timeout', 3],
        ['doc-007', 'api-error', 3],
      ],
    );
    const detail = Object.fromEntries(run.unlabelled.map((u) => [u.id, u.detail]));
    assert.match(detail['doc-001']!, /stop_reason refusal/);
    assert.match(detail['doc-003']!, /not.*JSON.*Educational score: 3/);
    assert.match(detail['doc-005']!, /timed out/);
    assert.match(detail['doc-007']!, /^429 rate_limit_error/);
    assert.ok(run.unlabelled.every((u) => u.detail.length <= 300));
    assert.deepEqual(
      run.labels.map((l) => [l.id, l.score]),
      documents.filter((d) => !['doc-001', 'doc-003', 'doc-005', 'doc-007'].includes(d.id)).map((d) => [d.id, hiddenScore(d.text)]),
    );
    assert.equal(run.requests, 5 + 4 * 3);
    assert.equal(run.retries, 4 * 2);
  });

  it('labels a document whose first answer is malformed or out of range when the next is good, and counts the failed attempts in usage', async () => {
    const documents = corpus(3, 9);
    const server = await fake({
      malformed: (doc, attempt) => {
        if (attempt > 1) return undefined;
        if (doc === documents[0]!.text) return '{"score": 9, "reason": "too high"}';
        if (doc === documents[1]!.text) return '{"score": 2';
        return undefined;
      },
    });
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, runOptions({ concurrency: 1 }));
    assert.deepEqual(
      run.labels.map((l) => l.score),
      documents.map((d) => hiddenScore(d.text)),
    );
    assert.deepEqual(run.unlabelled, []);
    assert.equal(run.retries, 2);
    const sum = (field: 'input_tokens' | 'output_tokens' | 'cache_read_input_tokens' | 'cache_creation_input_tokens') =>
      server.requests.reduce((n, r) => n + (r.usage?.[field] ?? 0), 0);
    assert.equal(server.requests.length, 5);
    assert.deepEqual(run.usage, {
      inputTokens: sum('input_tokens'),
      outputTokens: sum('output_tokens'),
      cacheReadTokens: sum('cache_read_input_tokens'),
      cacheWriteTokens: sum('cache_creation_input_tokens'),
    });
  });

  it('does not retry a 400 or a 404: the document is unlabelled as api-error and the rest are labelled', async () => {
    const documents = corpus(4, 13);
    const server = await fake({
      error: (doc) => (doc === documents[2]!.text ? { status: 400, type: 'invalid_request_error', message: 'prompt is too long' } : undefined),
    });
    const run = await labelDocuments(labelerClient('test-key', server.url), documents, runOptions());
    assert.deepEqual(run.unlabelled, [{ id: documents[2]!.id, reason: 'api-error', detail: '400 invalid_request_error: prompt is too long', attempts: 1 }]);
    assert.equal(run.labels.length, 3);
    assert.equal(run.requests, 4);
  });

  it('fails the whole run on a 401 with a message that says the key is wrong, after one request', async () => {
    const server = await fake({ apiKey: 'the-right-key' });
    await assert.rejects(
      labelDocuments(labelerClient('a-wrong-key', server.url), corpus(20), runOptions({ concurrency: 8 })),
      (error: Error) =>
        error instanceof InvalidApiKeyError &&
        error.name === 'InvalidApiKeyError' &&
        /rejected the API key \(401 authentication_error: invalid x-api-key\)/.test(error.message) &&
        /ANTHROPIC_API_KEY/.test(error.message),
    );
    assert.equal(server.requests.length, 1, 'the others never started');
  });

  it('reports progress after each document and rejects bad options naming the field', async () => {
    const server = await fake();
    const seen: number[] = [];
    await labelDocuments(labelerClient('test-key', server.url), corpus(5), runOptions({ onProgress: (p) => seen.push(p.done) }));
    assert.deepEqual(seen, [1, 2, 3, 4, 5]);

    const client = labelerClient('test-key', server.url);
    await assert.rejects(labelDocuments(client, corpus(2), runOptions({ concurrency: 0 })), /concurrency: must be an integer from 1 to 64 \(got 0\)/);
    await assert.rejects(labelDocuments(client, corpus(2), runOptions({ concurrency: 65 })), /concurrency: must be an integer from 1 to 64 \(got 65\)/);
    await assert.rejects(labelDocuments(client, corpus(2), runOptions({ maxAttempts: 0 })), /maxAttempts: must be an integer from 1 to 20 \(got 0\)/);
    await assert.rejects(
      labelDocuments(
        client,
        [
          { id: 'a', text: 'x' },
          { id: 'a', text: 'y' },
        ],
        runOptions(),
      ),
      /documents\[1\]\.id: is also the id of documents\[0\] \(got "a"\)/,
    );
  });

  it('measures throughput at concurrency 1 and 8 (printed, not asserted)', async (t) => {
    const server = await fake({ latencyMs: 20 });
    const documents = corpus(40, 17);
    const rates: string[] = [];
    for (const concurrency of [1, 8]) {
      const started = performance.now();
      const run = await labelDocuments(labelerClient('test-key', server.url), documents, runOptions({ concurrency }));
      const seconds = (performance.now() - started) / 1000;
      assert.equal(run.labels.length, 40);
      rates.push(`concurrency ${concurrency}: ${(40 / seconds).toFixed(0)} documents/s (peak ${run.maxInFlight} in flight)`);
    }
    t.diagnostic(`fake API with 20 ms latency, 40 documents: ${rates.join('; ')}`);
  });
});

describe('retryAfterMs', () => {
  it('reads retry-after-ms first, then retry-after in seconds (fractional) or as an HTTP date', () => {
    assert.equal(retryAfterMs(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' })), 250);
    assert.equal(retryAfterMs(new Headers({ 'retry-after': '1.5' })), 1500);
    assert.equal(retryAfterMs(new Headers({ 'retry-after': 'Wed, 21 Oct 2026 07:28:30 GMT' }), Date.parse('Wed, 21 Oct 2026 07:28:00 GMT')), 30_000);
    assert.equal(retryAfterMs(new Headers({ 'retry-after': 'soon' })), undefined);
    assert.equal(retryAfterMs(new Headers()), undefined);
  });
});

describe('parseLabelsFile', () => {
  it('reads JSONL labels sorted by id, skipping blank lines, with or without a reason', () => {
    const labels = parseLabelsFile('{"id":"b","score":3,"reason":"explains\\nthings"}\r\n\n{"id":"a","score":0,"source":"fortune"}\n');
    assert.deepEqual(labels, [
      { id: 'a', score: 0, reason: '' },
      { id: 'b', score: 3, reason: 'explains things' },
    ]);
  });

  it('names the line and the value of a bad line, and rejects duplicate ids and an empty file', () => {
    const good = '{"id":"a","score":1}';
    assert.throws(
      () => parseLabelsFile(`${good}\n{"id":"b","score":`),
      (e: Error) => e instanceof ConfigError && /^labelsFile line 2: is not JSON/.test(e.message),
    );
    assert.throws(() => parseLabelsFile(`${good}\n\n{"id":"c","score":7}`), /labelsFile line 3\.score: must be an integer from 0 to 5 \(got 7\)/);
    assert.throws(() => parseLabelsFile(`${good}\n{"id":"c","score":2.5}`), /labelsFile line 2\.score: must be an integer from 0 to 5 \(got 2\.5\)/);
    assert.throws(() => parseLabelsFile(`${good}\n{"score":2}`, 'config.labels'), /config\.labels line 2\.id/);
    assert.throws(() => parseLabelsFile(`${good}\n[1,2]`), /labelsFile line 2: must be an object/);
    assert.throws(() => parseLabelsFile(`${good}\n{"id":"a","score":4}`), /labelsFile line 2\.id: duplicates the id on line 1 \(got "a"\)/);
    assert.throws(() => parseLabelsFile('\n\n'), /labelsFile: has no labels/);
  });
});

describe('stratifiedSample', () => {
  const population = (sizes: Record<string, number>) =>
    Object.entries(sizes).flatMap(([stratum, n]) => Array.from({ length: n }, (_, i) => ({ id: `${stratum}-${String(i).padStart(4, '0')}`, stratum })));
  /** Sampled ids per stratum: an id is `<stratum>-<number>`. */
  const perStratum = (ids: string[]) => {
    const counts: Record<string, number> = {};
    for (const id of ids) {
      const stratum = id.slice(0, id.lastIndexOf('-'));
      counts[stratum] = (counts[stratum] ?? 0) + 1;
    }
    return counts;
  };

  it('is deterministic in the seed and the documents, whatever their order, and sorted', () => {
    const documents = population({ 'python-doc': 600, man: 300, fortune: 90, mix: 10 });
    const sample = stratifiedSample(documents, 100, 42);
    assert.deepEqual(stratifiedSample([...documents].reverse(), 100, 42), sample);
    assert.notDeepEqual(stratifiedSample(documents, 100, 43), sample);
    assert.deepEqual(sample, [...sample].sort());
    assert.equal(new Set(sample).size, 100);
  });

  it('allocates proportionally, with at least one from a small stratum', () => {
    const documents = population({ 'python-doc': 600, man: 300, fortune: 90, mix: 10 });
    assert.deepEqual(perStratum(stratifiedSample(documents, 100, 1)), { 'python-doc': 60, man: 30, fortune: 9, mix: 1 });
    const skewed = population({ 'python-doc': 997, man: 2, fortune: 1 });
    assert.deepEqual(perStratum(stratifiedSample(skewed, 10, 1)), { 'python-doc': 8, man: 1, fortune: 1 });
    // Fewer slots than strata: the largest strata get one each.
    assert.deepEqual(perStratum(stratifiedSample(skewed, 2, 1)), { 'python-doc': 1, man: 1 });
    // At or above the population: everything.
    assert.equal(stratifiedSample(skewed, 5000, 1).length, 1000);
  });

  it('rejects a bad size or a duplicate id, naming the field and the value', () => {
    const documents = population({ man: 3 });
    for (const size of [-1, 2.5, Number.NaN, '3']) {
      assert.throws(
        () => stratifiedSample(documents, size as number, 1),
        (e: Error) => e instanceof ConfigError && /^size: must be an integer >= 0 \(got /.test(e.message),
      );
    }
    assert.deepEqual(stratifiedSample(documents, 0, 1), [], 'nothing asked, nothing drawn');
    assert.deepEqual(stratifiedSample([], 10, 1), []);
    assert.throws(() => stratifiedSample([...documents, documents[0]!], 2, 1), /documents\[3\]\.id: is the id of an earlier document \(got "man-0000"\)/);
  });
});

describe('llm cost', () => {
  it('prices a known usage by hand-worked arithmetic', () => {
    // claude-sonnet-4-6: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million tokens.
    // 2,000 x 3 + 500 x 15 + 1,500 x 3.75 + 10,000 x 0.30 = 6,000 + 7,500 + 5,625 + 3,000 = 22,125 micro-dollars.
    const usage = { inputTokens: 2000, outputTokens: 500, cacheWriteTokens: 1500, cacheReadTokens: 10_000 };
    assert.ok(Math.abs(llmCostUsd(usage, 'claude-sonnet-4-6') - 0.022125) < 1e-12);
    assert.ok(Math.abs(costPerDocument(usage, 'claude-sonnet-4-6', 5) - 0.004425) < 1e-12);
    const override = { inputPerMTok: 1, outputPerMTok: 2, cacheWritePerMTok: 0, cacheReadPerMTok: 0 };
    assert.ok(Math.abs(llmCostUsd(usage, 'a-model-with-no-price', override) - 0.003) < 1e-12);
  });

  it('has a dated price for the default model, and names an unknown model and how to price it', () => {
    assert.match(CLAUDE_PRICES.pricesAsOf, /^\d{4}-\d{2}-\d{2}$/);
    assert.ok(llmCostUsd({ inputTokens: 1, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, DEFAULT_CLAUDE_MODEL) > 0);
    assert.throws(
      () => llmCostUsd({ inputTokens: 1, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, 'claude-unknown-9'),
      /model: has no price .*add its price there, or give priceOverride \{inputPerMTok, outputPerMTok, cacheWritePerMTok, cacheReadPerMTok\}.*\(got "claude-unknown-9"\)/,
    );
    assert.throws(
      () => llmCostUsd({ inputTokens: 1, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, 'x', { inputPerMTok: -1 } as never),
      /priceOverride\.inputPerMTok/,
    );
    assert.throws(
      () => costPerDocument({ inputTokens: 1, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, DEFAULT_CLAUDE_MODEL, 0),
      /documents: must be an integer >= 1 \(got 0\)/,
    );
  });
});
