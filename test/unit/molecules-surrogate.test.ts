import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import { seededRandom, type Random } from '#shared/random.ts';
import {
  averageRanks,
  cholesky,
  expectedImprovement,
  fingerprintFromOnBits,
  fingerprintFromUnpacked,
  fingerprintOnBits,
  fitTanimotoGp,
  hitEnrichment,
  lowerConfidenceBound,
  mae,
  popcount,
  proposeBatch,
  spearman,
  tanimoto,
  TanimotoGp,
  type Fingerprint,
} from '#shared/molecules/surrogate.ts';
import { CholeskyError } from '#shared/molecules/errors.ts';
import { assertClose } from '../support/floats.ts';

/** A random fingerprint over bits [from, from + width), each on with probability `density`. */
function randomFingerprint(random: Random, nBits: number, density: number, from = 0, width = nBits): Fingerprint {
  const onBits: number[] = [];
  for (let bit = from; bit < from + width; bit++) if (random() < density) onBits.push(bit);
  return fingerprintFromOnBits(onBits, nBits);
}

/** A standard normal draw (Box-Muller) from the seeded stream. */
function gaussian(random: Random): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

const hasBit = (fingerprint: Fingerprint, bit: number): number => (fingerprint[bit >> 3]! >> (bit & 7)) & 1;

describe('fingerprints and Tanimoto', () => {
  it('packs bit i into byte i >> 3 at position i & 7', () => {
    assert.deepEqual([...fingerprintFromOnBits([0, 9, 15], 16)], [0b0000_0001, 0b1000_0010]);
    // 10 bits take two bytes; the unused high bits of the last byte stay 0.
    const unpacked = Uint8Array.from([1, 0, 0, 0, 0, 0, 0, 1, 0, 1]);
    assert.deepEqual([...fingerprintFromUnpacked(unpacked)], [0b1000_0001, 0b0000_0010]);
    assert.deepEqual(fingerprintOnBits(fingerprintFromUnpacked(unpacked)), [0, 7, 9]);
    assert.equal(popcount(fingerprintFromOnBits([3, 3, 200], 256)), 2);
  });

  it('rejects bits outside the fingerprint and unpacked values other than 0 and 1', () => {
    assert.throws(
      () => fingerprintFromOnBits([16], 16),
      (error) => error instanceof ConfigError && /onBits/.test(error.message),
    );
    assert.throws(
      () => fingerprintFromUnpacked(Uint8Array.from([0, 2])),
      (error) => error instanceof ConfigError && /bits\[1\]/.test(error.message),
    );
  });

  it('computes |a & b| / |a | b| on hand-made bitsets', () => {
    const a = fingerprintFromOnBits([0, 1, 2, 3], 16);
    const b = fingerprintFromOnBits([2, 3, 4], 16);
    assert.equal(tanimoto(a, b), 2 / 5);
    assert.equal(tanimoto(a, a), 1);
    assert.equal(tanimoto(a, fingerprintFromOnBits([8, 15], 16)), 0);
    // Across bytes: {1, 9, 10} and {9, 10, 12}: 2 shared of 4 distinct.
    assert.equal(tanimoto(fingerprintFromOnBits([1, 9, 10], 16), fingerprintFromOnBits([9, 10, 12], 16)), 0.5);
  });

  it('scores two empty fingerprints 1 and an empty against a non-empty one 0', () => {
    const empty = fingerprintFromOnBits([], 16);
    assert.equal(tanimoto(empty, fingerprintFromOnBits([], 16)), 1);
    assert.equal(tanimoto(empty, fingerprintFromOnBits([4], 16)), 0);
  });
});

describe('cholesky', () => {
  it('factors a positive definite matrix exactly, without jitter', () => {
    // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]].
    const { factor, jitter } = cholesky(Float64Array.from([4, 2, 2, 3]), 2);
    assert.equal(jitter, 0);
    // Exact: sqrt(4), 2 / 2 and sqrt(3 - 1 * 1) are IEEE basic operations, correctly rounded, and
    // Math.SQRT2 is sqrt(2) correctly rounded.
    assert.deepEqual([...factor], [2, 0, 1, Math.SQRT2]);
  });

  it('survives a singular matrix (duplicate molecules) by adding a small jitter', () => {
    // The Tanimoto matrix of [x, x, y] with T(x, y) = 0.5 has rank 2; rounding makes the third
    // pivot 0 or negative.
    const a = Float64Array.from([1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 1]);
    const { factor, jitter } = cholesky(a, 3);
    assert.ok(jitter > 0 && jitter <= 1e-2, `jitter ${jitter}`);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j <= i; j++) {
        let product = 0;
        for (let k = 0; k < 3; k++) product += factor[i * 3 + k]! * factor[j * 3 + k]!;
        // L L^T recomputed here against A: Cholesky's backward error is ~n eps |A| (~1e-15 for
        // these entries <= 1.01), so 1e-12 is loose yet far below a wrong factor.
        assertClose(product, a[i * 3 + j]! + (i === j ? jitter : 0), { abs: 1e-12 }, `(L L^T)[${i}][${j}]`);
      }
    }
  });

  it('factors a larger matrix (the four-row blocks and the tail) so that L L^T = A', () => {
    // A = B B^T + I for a random 9 x 9 B: positive definite, no jitter needed.
    const random = seededRandom(9);
    const n = 9;
    const b = Array.from({ length: n * n }, () => random() - 0.5);
    const a = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        let sum = i === j ? 1 : 0;
        for (let k = 0; k < n; k++) sum += b[i * n + k]! * b[j * n + k]!;
        a[i * n + j] = sum;
      }
    }
    const { factor, jitter } = cholesky(a, n);
    assert.equal(jitter, 0);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        let product = 0;
        for (let k = 0; k < n; k++) product += factor[i * n + k]! * factor[j * n + k]!;
        // As above: entries <= ~4, backward error ~9 * 4 * 1.1e-16 = 4e-15 at most.
        assertClose(product, a[i * n + j]!, { abs: 1e-12 }, `(L L^T)[${i}][${j}]`);
        if (j > i) assert.equal(factor[i * n + j], 0);
      }
    }
  });

  it('throws CholeskyError on an indefinite matrix', () => {
    assert.throws(() => cholesky(Float64Array.from([1, 2, 2, 1]), 2), CholeskyError);
  });
});

describe('TanimotoGp', () => {
  const nBits = 128;
  const random = seededRandom(11);
  // Training molecules use bits 0..63 only, so a molecule on bits 64..127 shares nothing with them.
  const train = Array.from({ length: 30 }, () => randomFingerprint(random, nBits, 0.3, 0, 64));
  const targets = train.map((fingerprint) => 5 - 1.5 * hasBit(fingerprint, 3) - hasBit(fingerprint, 17) + 0.5 * hasBit(fingerprint, 40));

  it('interpolates its training points when the noise is small', () => {
    const model = fitTanimotoGp(train, targets, { noiseRatios: [1e-4] });
    const predictions = model.predict(train);
    const signalStd = Math.sqrt(model.hyperparameters.signalVariance);
    predictions.forEach(({ mean, std }, i) => {
      // A modelling tolerance (the noise lets the mean miss a point a little), not a rounding one.
      assertClose(mean, targets[i]!, { abs: 0.05 }, `mean at training point ${i}`);
      assert.ok(std < 0.05 * signalStd, `std at training point ${i}: ${std} vs prior ${signalStd}`);
    });
  });

  it('reverts to the training mean with the prior std on a molecule that shares no bits', () => {
    const model = fitTanimotoGp(train, targets, { noiseRatios: [1e-4] });
    const far = fingerprintFromOnBits([64, 70, 99, 127], nBits);
    const [prediction] = model.predict([far]);
    const trainingMean = targets.reduce((sum, y) => sum + y, 0) / targets.length;
    // No shared bits: every Tanimoto value is exactly 0, so the prediction is the prior (the mean
    // plus exact zeros, sqrt of the variance times 1). The 1e-12 only spares the test from
    // relying on that; the mean itself is the same sum in the same order: exact, below.
    assertClose(prediction!.mean, trainingMean, { abs: 1e-12 }, 'mean far away');
    assertClose(prediction!.std, Math.sqrt(model.hyperparameters.signalVariance), { abs: 1e-12 }, 'std far away');
    assert.equal(model.hyperparameters.mean, trainingMean);
    assert.ok(prediction!.std > 20 * model.predict([train[0]!])[0]!.std);
  });

  it('picks a higher noise variance on noisy data than on clean data', () => {
    const noiseRandom = seededRandom(5);
    const many = Array.from({ length: 80 }, () => randomFingerprint(noiseRandom, nBits, 0.3, 0, 64));
    const clean = many.map((fingerprint) => 5 - 1.5 * hasBit(fingerprint, 3) - hasBit(fingerprint, 17) + 0.5 * hasBit(fingerprint, 40));
    const noisy = clean.map((y) => y + 0.8 * gaussian(noiseRandom));
    const cleanModel = fitTanimotoGp(many, clean);
    const noisyModel = fitTanimotoGp(many, noisy);
    const share = (model: TanimotoGp): number =>
      model.hyperparameters.noiseVariance / (model.hyperparameters.noiseVariance + model.hyperparameters.signalVariance);
    console.log(`noise share of variance: clean ${share(cleanModel).toExponential(2)}, noisy ${share(noisyModel).toExponential(2)}`);
    assert.ok(noisyModel.hyperparameters.noiseVariance > 10 * cleanModel.hyperparameters.noiseVariance);
    assert.ok(share(noisyModel) > share(cleanModel));
  });

  it('predicts a list (four at a time, with a ragged tail) exactly as one molecule at a time', () => {
    // Bit for bit: each query's sums are the same basic operations in the same order, whichever
    // slot of a group of four it takes (the slots never mix).
    const model = fitTanimotoGp(train, targets);
    const queries = Array.from({ length: 7 }, () => randomFingerprint(random, nBits, 0.2));
    assert.deepEqual(
      model.predict(queries),
      queries.flatMap((query) => model.predict([query])),
    );
  });

  it('round-trips through JSON with identical predictions', () => {
    // Bit for bit: JSON keeps every float64 exactly, and both models run the same code.
    const model = fitTanimotoGp(train, targets);
    const restored = TanimotoGp.fromJSON(JSON.parse(JSON.stringify(model)));
    const queries = Array.from({ length: 9 }, () => randomFingerprint(random, nBits, 0.2));
    assert.deepEqual(restored.predict(queries), model.predict(queries));
    assert.deepEqual(restored.hyperparameters, model.hyperparameters);
  });

  it('rejects a malformed serialised model, naming the field', () => {
    const json = JSON.parse(JSON.stringify(fitTanimotoGp(train, targets)));
    json.signalVariance = -1;
    assert.throws(
      () => TanimotoGp.fromJSON(json),
      (error) => error instanceof ConfigError && error.message.startsWith('model.signalVariance'),
    );
  });

  it('rejects fingerprints of different lengths', () => {
    assert.throws(() => fitTanimotoGp([fingerprintFromOnBits([1], 16), fingerprintFromOnBits([1], 24)], [1, 2]), ConfigError);
    const model = fitTanimotoGp(train, targets);
    assert.throws(() => model.predict([fingerprintFromOnBits([1], 64)]), /fingerprints\[0\]\.length/);
  });
});

describe('acquisition', () => {
  it('computes the lower confidence bound and expected improvement for minimisation', () => {
    assert.equal(lowerConfidenceBound(3, 0.5, 2), 2); // exact: 3 - 2 * 0.5, basic operations
    // At mean = incumbent, EI = std * phi(0) = std / sqrt(2 pi). The tolerances allow for Phi's
    // Chebyshev fit (fractional error < 1.2e-7, times std = 0.5) and the 10-digit literals.
    assertClose(expectedImprovement(2, 0.5, 2), 0.5 / Math.sqrt(2 * Math.PI), { abs: 1e-7 }, 'EI at z = 0');
    // Without uncertainty EI is the plain improvement, and 0 above the incumbent (exact: a subtraction).
    assert.equal(expectedImprovement(1.5, 0, 2), 0.5);
    assert.equal(expectedImprovement(2.5, 0, 2), 0);
    // z = 1: std (Phi(1) + phi(1)) = 0.5 * (0.8413447 + 0.2419707).
    assertClose(expectedImprovement(1.5, 0.5, 2), 0.5 * (0.8413447461 + 0.2419707245), { abs: 1e-7 }, 'EI at z = 1');
  });
});

describe('proposeBatch', () => {
  const nBits = 64;
  const random = seededRandom(3);
  // Two measured clusters: A (core bits 0-5) has gaps near 2 eV, B (core bits 10-15) near 4 eV.
  // Each member adds two random bits from 32..63.
  const member = (core: readonly number[]): Fingerprint =>
    fingerprintFromOnBits([...core, 32 + Math.floor(random() * 32), 32 + Math.floor(random() * 32)], nBits);
  const coreA = [0, 1, 2, 3, 4, 5];
  const coreB = [10, 11, 12, 13, 14, 15];
  const train = [...Array.from({ length: 10 }, () => member(coreA)), ...Array.from({ length: 10 }, () => member(coreB))];
  const targets = train.map((_, i) => (i < 10 ? 2 : 4) + 0.05 * gaussian(random));
  const model = fitTanimotoGp(train, targets);
  // The pool: the measured molecules again, then 40 unmeasured B-like molecules.
  const poolFingerprints = [...train, ...Array.from({ length: 40 }, () => member(coreB))];
  const ids = poolFingerprints.map((_, i) => `mol-${i}`);
  const measuredIds = ids.slice(0, train.length);
  const pool = { ids, fingerprints: poolFingerprints };
  const base = { model, pool, measuredIds, batchSize: 10, explorationFraction: 0.2, seed: 42 };

  it('never proposes a measured molecule or the same molecule twice, and splits the arms', () => {
    const batch = proposeBatch(base);
    assert.equal(batch.length, 10);
    assert.equal(new Set(batch.map((item) => item.id)).size, 10);
    for (const item of batch) assert.ok(!measuredIds.includes(item.id), `${item.id} was already measured`);
    assert.equal(batch.filter((item) => item.arm === 'exploit').length, 8);
    assert.equal(batch.filter((item) => item.arm === 'explore').length, 2);
  });

  it('is deterministic for a seed, and the seed moves only the explore arm', () => {
    assert.deepEqual(proposeBatch(base), proposeBatch(base));
    const explored = new Set<string>();
    const exploited = new Set<string>();
    for (let seed = 1; seed <= 6; seed++) {
      const batch = proposeBatch({ ...base, seed });
      explored.add(
        batch
          .filter((item) => item.arm === 'explore')
          .map((item) => item.id)
          .join(),
      );
      exploited.add(
        batch
          .filter((item) => item.arm === 'exploit')
          .map((item) => item.id)
          .join(),
      );
    }
    assert.equal(exploited.size, 1);
    assert.ok(explored.size > 1, 'different seeds should draw different explore arms');
  });

  it('ranks a clearly better predicted candidate first, under both acquisitions', () => {
    // An unmeasured molecule with exactly cluster A's core: predicted near 2 eV, every other
    // candidate near 4 eV.
    const withCandidate = { ids: [...ids, 'a-core'], fingerprints: [...poolFingerprints, fingerprintFromOnBits(coreA, nBits)] };
    for (const acquisition of [{ kind: 'ei' } as const, { kind: 'lcb', beta: 2 } as const]) {
      const batch = proposeBatch({ ...base, pool: withCandidate, acquisition });
      assert.equal(batch[0]!.id, 'a-core', `${acquisition.kind}: first was ${JSON.stringify(batch[0])}`);
      assert.equal(batch[0]!.arm, 'exploit');
      assert.ok(batch[0]!.predictedMean < 2.5, `predicted ${batch[0]!.predictedMean}`);
      const exploit = batch.filter((item) => item.arm === 'exploit');
      for (let i = 1; i < exploit.length; i++) assert.ok(exploit[i - 1]!.score >= exploit[i]!.score, 'exploit arm in score order');
    }
  });

  it('skips a near-duplicate of a chosen molecule, unless nothing else is left', () => {
    const aCore = fingerprintFromOnBits(coreA, nBits);
    const withTwins = { ids: [...ids, 'twin-a', 'twin-b'], fingerprints: [...poolFingerprints, aCore, aCore] };
    const batch = proposeBatch({ ...base, pool: withTwins, explorationFraction: 0 });
    assert.equal(batch[0]!.id, 'twin-a');
    assert.ok(!batch.some((item) => item.id === 'twin-b'), 'the identical twin was proposed too');
    assert.equal(batch.length, 10);
    // A pool of nothing but twins still fills the batch, in score order.
    const onlyTwins = { ids: ['twin-a', 'twin-b', 'twin-c'], fingerprints: [aCore, aCore, aCore] };
    assert.deepEqual(
      proposeBatch({ ...base, pool: onlyTwins, batchSize: 3, explorationFraction: 0 }).map((item) => item.id),
      ['twin-a', 'twin-b', 'twin-c'],
    );
  });

  it('returns every unmeasured molecule when the pool is smaller than the batch', () => {
    const small = { ids: ids.slice(0, 25), fingerprints: poolFingerprints.slice(0, 25) };
    const batch = proposeBatch({ ...base, pool: small, batchSize: 10 });
    assert.deepEqual(batch.map((item) => item.id).sort(), ids.slice(20, 25).sort());
  });

  it('rejects a repeated pool id and a bad exploration fraction', () => {
    assert.throws(() => proposeBatch({ ...base, pool: { ids: ['a', 'a'], fingerprints: poolFingerprints.slice(0, 2) } }), /pool\.ids\[1\]/);
    assert.throws(() => proposeBatch({ ...base, explorationFraction: 1.5 }), /explorationFraction/);
  });
});

describe('metrics', () => {
  it('computes the mean absolute error', () => {
    assert.equal(mae([1, 2, 3], [2, 2, 5]), 1);
  });

  it('computes Spearman with average ranks for ties', () => {
    // predicted ranks [1, 2.5, 2.5, 4], actual ranks [1, 3, 2, 4]; deviations from 2.5:
    // dx = [-1.5, 0, 0, 1.5], dy = [-1.5, 0.5, -0.5, 1.5]; sum dx dy = 4.5, sum dx^2 = 4.5,
    // sum dy^2 = 5, so rho = 4.5 / sqrt(22.5) = 3 / sqrt(10).
    assert.deepEqual(averageRanks([10, 20, 20, 30]), [1, 2.5, 2.5, 4]);
    // Basic operations and sqrt, but not in the closed form's order: a few ulps of |rho| <= 1.
    assertClose(spearman([10, 20, 20, 30], [1, 3, 2, 4]), 3 / Math.sqrt(10), { abs: 1e-15 }, 'rho');
    assertClose(spearman([1, 2, 3], [30, 20, 10]), -1, { abs: 1e-15 }, 'reversed');
    assert.ok(Number.isNaN(spearman([1, 1, 1], [1, 2, 3])));
  });

  it('computes hit enrichment of the lowest predictions against the base rate', () => {
    // Hits (actual < 2): molecules 1 and 4, base rate 2 / 5. The two lowest predictions are
    // molecules 1 and 2, with one hit: rate 1 / 2, enrichment (1 / 2) / (2 / 5) = 1.25.
    // Exact: counts and three divisions, the same basic operations as the expected literals; no
    // value is near the threshold 2 (the hit rule's boundary).
    const result = hitEnrichment([3, 0.5, 1, 4, 2], [3, 1, 5, 4, 1.5], { threshold: 2, k: 2 });
    assert.deepEqual(result, { k: 2, hitsInTopK: 1, topKHitRate: 0.5, hits: 2, baseRate: 0.4, enrichment: 1.25 });
  });
});

describe('synthetic benchmark', () => {
  it('finds at least twice the base rate of hidden hits in its top 10 % after 50 measurements', () => {
    const random = seededRandom(2024);
    const nBits = 256;
    const n = 2000;
    const fingerprints = Array.from({ length: n }, () => randomFingerprint(random, nBits, 0.08));
    // The hidden gap depends on a few substructure bits, plus noise.
    const hidden = fingerprints.map(
      (fingerprint) =>
        4 -
        1.2 * hasBit(fingerprint, 7) -
        0.9 * hasBit(fingerprint, 50) -
        0.8 * hasBit(fingerprint, 130) +
        0.5 * hasBit(fingerprint, 200) +
        0.15 * gaussian(random),
    );
    const threshold = [...hidden].sort((a, b) => a - b)[Math.floor(0.05 * n)]!; // hits: bottom 5 %
    const order = fingerprints.map((_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const trainIndices = order.slice(0, 50);
    const unmeasured = order.slice(50);
    const model = fitTanimotoGp(
      trainIndices.map((i) => fingerprints[i]!),
      trainIndices.map((i) => hidden[i]!),
    );
    // Scored on the unmeasured molecules only: training points would flatter the model.
    const predicted = model.predict(unmeasured.map((i) => fingerprints[i]!)).map((prediction) => prediction.mean);
    const actual = unmeasured.map((i) => hidden[i]!);
    const result = hitEnrichment(predicted, actual, { threshold, k: Math.ceil(0.1 * unmeasured.length) });
    console.log(
      `synthetic enrichment: ${result.hitsInTopK} hits in the top ${result.k} (${(100 * result.topKHitRate).toFixed(1)} %) ` +
        `vs base rate ${(100 * result.baseRate).toFixed(1)} % -> ${result.enrichment.toFixed(2)}x; ` +
        `spearman ${spearman(predicted, actual).toFixed(3)}, mae ${mae(predicted, actual).toFixed(3)} eV`,
    );
    assert.ok(result.enrichment >= 2, `enrichment ${result.enrichment}`);
  });
});
