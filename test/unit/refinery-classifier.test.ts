/**
 * The refinery's quality classifier across its two languages: the TypeScript features
 * (shared/refinery/features.ts) equal the Python ones (batch-jobs/refinery-classifier/features.py)
 * for tricky texts, and a model trained by the Python job's code scores the same texts in
 * onnxruntime-node as torch did, within 1e-4. Scoring throughput and the memory per batch are
 * printed, not asserted.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { documentFeatures, fnv1a32, tokenize, type FeatureSettings } from '#shared/refinery/features.ts';
import { InvalidClassifierModel, loadClassifier, scoreDocuments, toTensors, type Classifier } from '#shared/refinery/scorer.ts';
import { ConfigError } from '#shared/errors.ts';
import { randomInt, seededRandom } from '#shared/random.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const jobDir = join(REPO_ROOT, 'batch-jobs/refinery-classifier');

function runPython(args: string[], input?: string): string {
  const result = spawnSync(python, args, {
    cwd: jobDir,
    input,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'batch-jobs/common'), OMP_NUM_THREADS: '1', PYTHONDONTWRITEBYTECODE: '1' },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    timeout: 120_000,
  });
  assert.equal(result.status, 0, `python3 ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

interface PythonFeatures {
  tokens: string[];
  indices: number[];
  weights: number[];
}

function pythonFeatures(texts: string[], settings: FeatureSettings): PythonFeatures[] {
  return JSON.parse(runPython(['features.py'], JSON.stringify({ texts, ...settings })));
}

const LONG = Array.from({ length: 3000 }, (_, i) => `word${i % 37} Ünïcode${i % 11}`).join(' ');
const TRICKY: string[] = [
  '',
  '   \n\t ',
  '...!?—–-',
  'Hello, World! hello world',
  "don't stop-believing: e-mail@example.com 3.14159 1,000,000 v2.0",
  'Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬁne ﬂow ① ² ½ Ⅻ',
  'ΟΔΟΣ Σ ΣΑΣ. İstanbul ǅemal ẞtraße Straße',
  'नमस्ते दुनिया; ไทย ภาษา; 日本語のテキスト；中文，标点。',
  'café cafe\u0301 naïve Å Å', // precomposed and combining forms: NFKC makes them equal
  'emoji 😀 stay 👩‍👩‍👧 apart🙂together 𝐁𝐨𝐥𝐝 𝔉𝔯𝔞𝔨',
  'snake_case camelCase kebab-case #hashtag @mention $100 %20',
  'lone \ud800 surrogate \udfff here',
  `${'x'.repeat(70)} ${'y'.repeat(300)} z`,
  'Zero\u200bwidth\u00a0nbsp\u2028line\u0085next',
  'Arabic العربية ١٢٣ Hebrew עברית Cyrillic ПРИВЕТ мир',
  LONG,
];

describe('refinery classifier features: TypeScript equals Python', () => {
  it('FNV-1a 32 matches the specification test vectors', () => {
    assert.equal(fnv1a32(''), 0x811c9dc5);
    assert.equal(fnv1a32('a'), 0xe40c292c);
    assert.equal(fnv1a32('foobar'), 0xbf9cf968);
  });

  for (const settings of [
    { buckets: 1 << 18, maxTokens: 2000 },
    { buckets: 1009, maxTokens: 7 },
  ]) {
    it(`tokens, indices and float32 weights are identical (buckets ${settings.buckets}, maxTokens ${settings.maxTokens})`, () => {
      const expected = pythonFeatures(TRICKY, settings);
      for (const [i, text] of TRICKY.entries()) {
        const label = `text ${i}: ${JSON.stringify(text.slice(0, 40))}`;
        assert.deepEqual(tokenize(text, settings.maxTokens), expected[i]!.tokens, label);
        const ours = documentFeatures(text, settings);
        assert.deepEqual(Array.from(ours.indices), expected[i]!.indices, label);
        // Exact: both round the same float64 quotient once to float32.
        assert.deepEqual(Array.from(ours.weights), expected[i]!.weights, label);
      }
    });
  }

  it('the first maxTokens tokens only, and an empty text has no pairs', () => {
    assert.deepEqual(tokenize(LONG, 3), ['word0', 'ünïcode0', 'word1']);
    const empty = documentFeatures(' ;; ', { buckets: 8, maxTokens: 10 });
    assert.equal(empty.indices.length, 0);
    const { pairs } = toTensors([empty]);
    assert.equal(pairs, 1);
  });
});

// ---------------------------------------------------------------------------------------------
// A model trained by the Python job's code, scored here.

const EDUCATIONAL = ['photosynthesis', 'theorem', 'equation', 'history', 'molecule', 'lesson', 'algebra', 'experiment', 'chapter', 'evidence'];

/** The synthetic rule: a document of filler words holds `score` distinct educational words. */
function syntheticDocument(random: () => number, score: number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words - score; i++) out.push(`w${randomInt(random, 200)}`);
  const pool = [...EDUCATIONAL];
  for (let k = 0; k < score; k++) {
    const [word] = pool.splice(randomInt(random, pool.length), 1);
    out.splice(randomInt(random, out.length + 1), 0, word!);
  }
  return out.join(' ');
}

describe('refinery classifier scoring: onnxruntime-node agrees with torch', () => {
  const settings = { buckets: 1 << 14, maxTokens: 2000 };
  const dim = 16;
  let dir: string;
  let modelBytes: Uint8Array;
  let classifier: Classifier;
  let texts: string[];
  let torchScores: number[];
  let metrics: { nTrain: number; nVal: number; heldOut: { mae: number; binary: { agreement: number } }; training: { seconds: number } };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'refinery-classifier-'));
    const random = seededRandom(17);
    const labels = Array.from({ length: 400 }, (_, i) => {
      const score = randomInt(random, 6);
      return { id: `doc-${i}`, text: syntheticDocument(random, score, 40), score };
    });
    writeFileSync(join(dir, 'labels.jsonl'), labels.map((l) => JSON.stringify(l)).join('\n'));
    texts = [...Array.from({ length: 50 }, (_, i) => syntheticDocument(random, i % 6, 30 + (i % 50))), ...TRICKY];
    writeFileSync(join(dir, 'texts.json'), JSON.stringify(texts));
    const config = { buckets: settings.buckets, maxTokens: settings.maxTokens, dim, hidden: 32, seed: 3, threshold: 3 };
    const out = join(dir, 'out');
    runPython(['model.py', 'fit', '--labels', join(dir, 'labels.jsonl'), '--out', out, '--config', JSON.stringify(config), '--score', join(dir, 'texts.json')]);
    modelBytes = readFileSync(join(out, 'model.onnx'));
    torchScores = JSON.parse(readFileSync(join(out, 'predictions.json'), 'utf8'));
    metrics = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8'));
    classifier = await loadClassifier(modelBytes, settings, { name: 'synthetic' });
  });

  after(async () => {
    await classifier?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  it('scores every text as torch did, within 1e-4 absolute, at any batch size', async () => {
    // Two code paths (torch's and onnxruntime's kernels) sum the same float32 products in
    // different orders: they agree to a tolerance, not bit for bit.
    let maxDiff = 0;
    for (const batchSize of [1, 7, 64]) {
      const scores = await scoreDocuments(classifier, texts, { batchSize });
      assert.equal(scores.length, texts.length);
      for (const [i, score] of scores.entries()) {
        const diff = Math.abs(score - torchScores[i]!);
        maxDiff = Math.max(maxDiff, diff);
        assert.ok(diff <= 1e-4, `text ${i}: onnxruntime ${score}, torch ${torchScores[i]} (batch size ${batchSize})`);
        assert.ok(score >= 0 && score <= 5, `text ${i}: score ${score} outside 0-5`);
      }
    }
    const held = metrics.heldOut;
    console.log(
      `refinery classifier: trained on ${metrics.nTrain} labels in ${metrics.training.seconds.toFixed(2)} s; held-out (${metrics.nVal}) keep/drop agreement ${held.binary.agreement.toFixed(3)}, MAE ${held.mae.toFixed(3)}; TS vs torch max |diff| ${maxDiff.toExponential(2)} over ${texts.length} texts`,
    );
  });

  it('refuses a model paired with the wrong bucket count, and a bad batch size', async () => {
    await assert.rejects(loadClassifier(modelBytes, { ...settings, buckets: settings.buckets * 2 }), InvalidClassifierModel);
    await assert.rejects(loadClassifier(modelBytes, { ...settings, buckets: settings.buckets / 2 }), /more than 8192 rows/);
    await assert.rejects(loadClassifier(new Uint8Array([1, 2, 3]), settings), InvalidClassifierModel);
    await assert.rejects(loadClassifier(modelBytes, { ...settings, maxTokens: 0 }), ConfigError);
    await assert.rejects(scoreDocuments(classifier, ['a'], { batchSize: 0 }), ConfigError);
  });

  it('measures throughput and memory per batch (printed, not asserted)', async () => {
    const random = seededRandom(5);
    const pages = Array.from({ length: 2000 }, (_, i) => syntheticDocument(random, i % 6, 300 + randomInt(random, 400)));
    const batchSize = 64;
    const start = performance.now();
    const scores = await scoreDocuments(classifier, pages, { batchSize });
    const seconds = (performance.now() - start) / 1000;
    assert.equal(scores.length, pages.length);
    // Bytes onnxruntime holds for one batch: int64 indices + float32 weights + the gathered
    // dim-wide float32 rows, per padded pair.
    let worst = 0;
    let pairsTotal = 0;
    for (let s = 0; s < pages.length; s += batchSize) {
      const batch = pages.slice(s, s + batchSize).map((text) => documentFeatures(text, settings));
      const { pairs } = toTensors(batch);
      worst = Math.max(worst, batch.length * pairs * (8 + 4 + 4 * dim));
      pairsTotal += batch.length * pairs;
    }
    const words = pages.reduce((sum, page) => sum + page.split(' ').length, 0) / pages.length;
    console.log(
      `refinery classifier: ${(pages.length / seconds).toFixed(0)} documents/s (${words.toFixed(0)} words each, batch ${batchSize}, 1 thread); ` +
        `largest batch ${(worst / 1e6).toFixed(1)} MB in onnxruntime, ${((pairsTotal * (12 + 4 * dim)) / pages.length / 1e3).toFixed(1)} KB per document; model ${(modelBytes.byteLength / 1e6).toFixed(2)} MB`,
    );
  });
});
