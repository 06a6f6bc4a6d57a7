import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ClipScore,
  type CurateThresholds,
  type CutClip,
  clipDistance,
  curate,
  DROP_RULES,
  hammingDistance,
  type SourceOutcome,
} from '#shared/video/curate.ts';
import { attributionText, checkLicence } from '#shared/video/licence.ts';

const T: CurateThresholds = { minAesthetic: 4.5, minMotion: 1, darkLuma: 0.1, brightLuma: 0.9, maxDuplicateDistance: 10 };

function clip(id: string, start: number, end: number): CutClip {
  return {
    id,
    startFrame: start * 25,
    endFrame: end * 25,
    start,
    end,
    uri: `s3://b/clips/${id}.mp4`,
    sha256: id.padEnd(64, '0'),
    contactSheetUri: `s3://b/clips/${id}-sheet.jpg`,
    keyFrameUris: [0, 1, 2].map((k) => `s3://b/clips/${id}-k${k}.jpg`),
  };
}

const hash = (seed: number) => ((BigInt(seed) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn).toString(16).padStart(16, '0');
/** A hash with `bits` of `base`'s low bits flipped. */
const flip = (base: string, bits: number) => ((BigInt(`0x${base}`) ^ ((1n << BigInt(bits)) - 1n)) & 0xffffffffffffffffn).toString(16).padStart(16, '0');

function score(id: string, over: Partial<ClipScore> = {}, seed = 1): ClipScore {
  return { id, aesthetic: 6, motion: 8, meanLuma: 0.45, lumaStd: 0.2, phash: [hash(seed), hash(seed + 100), hash(seed + 200)], ...over };
}

describe('video curation', () => {
  it('counts differing bits of 64-bit hashes', () => {
    assert.equal(hammingDistance('0000000000000000', 'ffffffffffffffff'), 64);
    assert.equal(hammingDistance('00000000000000f0', '0000000000000000'), 4);
    assert.equal(hammingDistance('8000000000000001', '0000000000000000'), 2);
    assert.equal(clipDistance(['0000000000000000', '0000000000000000'], ['000000000000000f', '0000000000000003']), 3);
    assert.throws(() => hammingDistance('xyz', '0000000000000000'), /phash: must be 16 lowercase hex digits \(got "xyz"\)/);
  });

  it('records each dropped clip under the first rule it fails, with the score and threshold', () => {
    const outcome: SourceOutcome = {
      id: 'a',
      status: 'ok',
      videoSeconds: 60,
      clips: ['good', 'dark', 'white', 'still', 'ugly', 'broken'].map((id, i) => clip(id, i * 5, i * 5 + 4)),
      dropped: [{ startFrame: 750, endFrame: 770, start: 30, end: 30.8, rule: 'too-short', value: 0.8, threshold: 2 }],
      scores: [
        score('good', {}, 1),
        // Dark and still: recorded as dark, the first rule.
        score('dark', { meanLuma: 0.02, motion: 0 }, 2),
        score('white', { meanLuma: 0.97 }, 3),
        score('still', { motion: 0.2 }, 4),
        score('ugly', { aesthetic: 3.1 }, 5),
        { id: 'broken', error: 'the clip could not be decoded' },
      ],
    };
    const c = curate([outcome], T);
    const byId = new Map(c.clips.map((x) => [x.id, x]));
    assert.equal(byId.get('good')!.kept, true);
    assert.deepEqual(byId.get('dark')!.drop, { rule: 'dark', value: 0.02, threshold: 0.1 });
    assert.deepEqual(byId.get('white')!.drop, { rule: 'washed-out', value: 0.97, threshold: 0.9 });
    assert.deepEqual(byId.get('still')!.drop, { rule: 'static', value: 0.2, threshold: 1 });
    assert.deepEqual(byId.get('ugly')!.drop, { rule: 'low-aesthetic', value: 3.1, threshold: 4.5 });
    assert.equal(byId.get('broken')!.drop!.rule, 'unscored');
    assert.equal(byId.get('broken')!.drop!.error, 'the clip could not be decoded');
    assert.deepEqual(byId.get('a@750')!.drop, { rule: 'too-short', value: 0.8, threshold: 2 });
    assert.equal(c.funnel.candidates, 7);
    assert.equal(c.funnel.kept, 1);
    assert.equal(c.funnel.keptSeconds, 4);
    assert.equal(c.funnel.kept + Object.values(c.funnel.dropped).reduce((s, n) => s + n, 0), c.funnel.candidates);
    for (const rule of DROP_RULES.filter((r) => r !== 'near-duplicate')) assert.equal(c.funnel.dropped[rule], 1, rule);
    // In time order within the source.
    assert.deepEqual(
      c.clips.map((x) => x.start),
      [...c.clips.map((x) => x.start)].sort((a, b) => a - b),
    );
  });

  it('keeps the first copy of a near-duplicate in source order and names it in the later ones', () => {
    const original = score('orig', {}, 7);
    const near = { ...score('copy', { aesthetic: 9 }), phash: original.phash!.map((h) => flip(h, 6)) };
    const far = { ...score('other', {}), phash: original.phash!.map((h) => flip(h, 30)) };
    const outcomes: SourceOutcome[] = [
      { id: 'first', status: 'ok', clips: [clip('orig', 0, 5)], scores: [original] },
      { id: 'second', status: 'ok', clips: [clip('copy', 0, 5), clip('other', 5, 10)], scores: [near, far] },
    ];
    const c = curate(outcomes, T);
    const byId = new Map(c.clips.map((x) => [x.id, x]));
    assert.equal(byId.get('orig')!.kept, true);
    assert.deepEqual(byId.get('copy')!.drop, { rule: 'near-duplicate', value: 6, threshold: 10, duplicateOf: 'orig' });
    assert.equal(byId.get('other')!.kept, true);
    // A stricter duplicate distance keeps the copy.
    assert.equal(curate(outcomes, { ...T, maxDuplicateDistance: 5 }).clips.find((x) => x.id === 'copy')!.kept, true);
  });

  it('a stricter aesthetic threshold keeps a subset', () => {
    const outcomes: SourceOutcome[] = [
      {
        id: 's',
        status: 'ok',
        clips: [1, 2, 3, 4, 5, 6].map((i) => clip(`c${i}`, i * 5, i * 5 + 4)),
        scores: [1, 2, 3, 4, 5, 6].map((i) => score(`c${i}`, { aesthetic: 3 + i }, i * 1000)),
      },
    ];
    const loose = curate(outcomes, T);
    const strict = curate(outcomes, { ...T, minAesthetic: 7.5 });
    const keptIds = (c: typeof loose) => new Set(c.clips.filter((x) => x.kept).map((x) => x.id));
    assert.deepEqual(keptIds(strict), new Set(['c5', 'c6']));
    for (const id of keptIds(strict)) assert.ok(keptIds(loose).has(id));
    assert.ok(keptIds(loose).size > keptIds(strict).size);
  });

  it('lists refused and failed sources with their reasons, and the others proceed', () => {
    const outcomes: SourceOutcome[] = [
      { id: 'nolicence', status: 'refused', field: 'sources[0].licence', reason: 'no licence record' },
      { id: 'audio', status: 'refused', field: 'sources[1].uri', reason: 'no video stream (streams: audio)' },
      { id: 'crashed', status: 'failed', field: 'sources[2]', reason: 'the cut job failed' },
      { id: 'fine', status: 'ok', clips: [clip('x', 0, 5)], scores: [score('x')] },
    ];
    const c = curate(outcomes, T);
    assert.equal(c.funnel.sources, 4);
    assert.equal(c.funnel.refused, 2);
    assert.equal(c.funnel.failed, 1);
    assert.equal(c.funnel.kept, 1);
    assert.equal(c.sources[1]!.reason, 'no video stream (streams: audio)');
    assert.throws(() => curate([...outcomes, outcomes[3]!], T), /sources\.id: appears twice: every source needs its own id \(got "fine"\)/);
  });

  it('names a bad threshold', () => {
    assert.throws(() => curate([], { ...T, minAesthetic: -1 }), /curate\.minAesthetic: must be a number from 0 to 10 \(got -1\)/);
    assert.throws(() => curate([], { ...T, darkLuma: 0.95 }), /curate\.darkLuma: must be below curate\.brightLuma \(0\.9\) \(got 0\.95\)/);
  });
});

describe('video licence records', () => {
  const record = {
    title: 'Sintel',
    author: 'Blender Foundation',
    licence: 'CC-BY-3.0',
    deedUrl: 'https://creativecommons.org/licenses/by/3.0/',
    sourceUrl: 'https://durian.blender.org/',
  };

  it('accepts a complete record and refuses an incomplete one, naming the field', () => {
    assert.equal(checkLicence(record, 'sources[0]').ok, true);
    const missing = checkLicence({ ...record, author: ' ', deedUrl: undefined }, 'sources[2]');
    assert.equal(missing.ok, false);
    assert.equal(!missing.ok && missing.field, 'sources[2].author');
    assert.match(!missing.ok ? missing.reason : '', /lacks author, deedUrl/);
    const none = checkLicence(undefined, 'sources[1]');
    assert.equal(!none.ok && none.field, 'sources[1].licence');
    const nd = checkLicence({ ...record, licence: 'CC-BY-ND-4.0' }, 'sources[3]');
    assert.match(!nd.ok ? nd.reason : '', /forbids adaptations/);
    const link = checkLicence({ ...record, sourceUrl: 'durian' }, 'sources[4]');
    assert.equal(!link.ok && link.field, 'sources[4].sourceUrl');
  });

  it('writes title, author, source, licence with its deed, the changes and the disclaimer for each source with a kept clip', () => {
    const text = attributionText(
      [
        { id: 'sintel', record, clips: [{ id: 'abc-000100', start: 4, end: 11.5 }] },
        { id: 'unused', record: { ...record, title: 'Unused' }, clips: [] },
      ],
      360,
    );
    for (const part of [
      'Title: Sintel',
      'Author: Blender Foundation',
      'Source: https://durian.blender.org/',
      'Licence: Creative Commons Attribution 3.0 Unported (CC-BY-3.0), https://creativecommons.org/licenses/by/3.0/',
      'Changes: cut into clips',
      're-encoded to H.264 at 360 pixels high',
      'contact sheet',
      'Disclaimer:',
      'abc-000100.mp4: 0:04.00-0:11.50',
    ]) {
      assert.ok(text.includes(part), part);
    }
    assert.ok(!text.includes('Unused'));
  });
});
