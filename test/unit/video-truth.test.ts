import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CutClip, curate, type SourceOutcome } from '#shared/video/curate.ts';
import { matchCuts, TRUTH_FORMAT, type TruthDocument, truthFigures } from '#shared/video/truth.ts';

const clip = (id: string, startFrame: number, endFrame: number): CutClip => ({
  id,
  startFrame,
  endFrame,
  start: startFrame / 25,
  end: endFrame / 25,
  uri: `s3://b/${id}.mp4`,
  sha256: id.padEnd(64, '0'),
  contactSheetUri: `s3://b/${id}.jpg`,
  keyFrameUris: [],
});
const score = (id: string, over: Record<string, unknown> = {}, h = '0123456789abcdef') => ({
  id,
  aesthetic: 7,
  motion: 5,
  meanLuma: 0.5,
  lumaStd: 0.2,
  phash: [h, h, h],
  ...over,
});

describe('video truth', () => {
  it('matches each cut at most once, nearest first, within the tolerance', () => {
    assert.deepEqual(matchCuts([100, 200, 300], [101, 199, 250, 302], 2), { truePositives: 3, falsePositives: 1, falseNegatives: 0 });
    assert.deepEqual(matchCuts([100, 103], [102], 2), { truePositives: 1, falsePositives: 0, falseNegatives: 1 });
    assert.deepEqual(matchCuts([100], [97], 2), { truePositives: 0, falsePositives: 1, falseNegatives: 1 });
    assert.deepEqual(matchCuts([], [], 2), { truePositives: 0, falsePositives: 0, falseNegatives: 0 });
  });

  it("scores each rule's recall on the shots made for it, and the good clips dropped", () => {
    const truth: TruthDocument = {
      format: TRUTH_FORMAT,
      fps: 25,
      videos: [
        {
          sha256: 'v1',
          frames: 600,
          cuts: [100, 125, 250, 400],
          shots: [
            { startFrame: 0, endFrame: 100, kind: 'good' },
            { startFrame: 100, endFrame: 125, kind: 'short' },
            { startFrame: 125, endFrame: 250, kind: 'dark' },
            { startFrame: 250, endFrame: 400, kind: 'static' },
            { startFrame: 400, endFrame: 600, kind: 'good' },
          ],
        },
      ],
    };
    const outcome: SourceOutcome = {
      id: 'gen-1',
      status: 'ok',
      clips: [clip('a', 0, 100), clip('c', 125, 250), clip('d', 250, 400), clip('e', 400, 600)],
      dropped: [{ startFrame: 100, endFrame: 125, start: 4, end: 5, rule: 'too-short', value: 1, threshold: 2 }],
      scores: [
        score('a', {}, '0000000000000000'),
        score('c', { meanLuma: 0.01 }, '1111111111111111'),
        // Static, but missed by the rule (motion above its threshold): recall 0 for static.
        score('d', { motion: 3 }, '2222222222222222'),
        // A good clip dropped by aesthetics.
        score('e', { aesthetic: 2 }, 'ffffffffffffffff'),
      ],
    };
    const curated = curate([outcome], { minAesthetic: 4.5, minMotion: 1, darkLuma: 0.1, brightLuma: 0.9, maxDuplicateDistance: 10 });
    const f = truthFigures(truth, curated, new Map([['gen-1', 'v1']]), new Map([['gen-1', [100, 126, 250, 330]]]));
    assert.deepEqual(f.cuts, { truePositives: 3, falsePositives: 1, falseNegatives: 1, toleranceFrames: 2 });
    const rule = (r: string) => f.rules.find((x) => x.rule === r)!;
    assert.deepEqual(rule('too-short'), { rule: 'too-short', madeFor: 1, droppedByRule: 1 });
    assert.deepEqual(rule('dark'), { rule: 'dark', madeFor: 1, droppedByRule: 1 });
    assert.deepEqual(rule('static'), { rule: 'static', madeFor: 1, droppedByRule: 0 });
    assert.deepEqual(rule('near-duplicate'), { rule: 'near-duplicate', madeFor: 0, droppedByRule: 0 });
    assert.equal(f.goodClips, 2);
    assert.equal(f.goodDropped, 1);
    assert.deepEqual(f.goodDroppedBy, { 'low-aesthetic': 1 });
  });
});
