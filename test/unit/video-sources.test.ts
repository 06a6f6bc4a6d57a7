import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_SOURCES, VIDEO_SIZES, VideoConfig } from '#pipelines/video/config.ts';
import { checkSources } from '#shared/video/sources.ts';

const good = (id: string) => ({
  id,
  uri: `s3://bucket/videos/${id}.mp4`,
  title: `Film ${id}`,
  author: 'Blender Foundation',
  licence: 'CC-BY-4.0',
  deedUrl: 'https://creativecommons.org/licenses/by/4.0/',
  sourceUrl: 'https://studio.blender.org/films/',
});

describe('video source lists', () => {
  it('accepts complete entries and refuses each bad one with its field, the others proceed', () => {
    const { accepted, refused } = checkSources([
      good('a'),
      { ...good('b'), licence: undefined },
      { ...good('c'), uri: 'ftp://x/y.mp4' },
      good('a'),
      'not an object',
      { ...good('Bad Id') },
      { ...good('e'), licence: 'CC-BY-NC-ND-4.0' },
      { ...good('f'), sha256: 'abc' },
      { ...good('g'), sha256: 'a'.repeat(64) },
    ]);
    assert.deepEqual(
      accepted.map((s) => s.id),
      ['a', 'g'],
    );
    assert.equal(accepted[1]!.sha256, 'a'.repeat(64));
    assert.deepEqual(
      refused.map((r) => [r.id, r.field]),
      [
        ['b', 'sources[1].licence'],
        ['c', 'sources[2].uri'],
        ['a', 'sources[3].id'],
        ['#4', 'sources[4]'],
        ['#5', 'sources[5].id'],
        ['e', 'sources[6].licence'],
        ['f', 'sources[7].sha256'],
      ],
    );
    assert.match(refused[0]!.reason, /lacks licence: a clip cannot be attributed/);
    assert.match(refused[5]!.reason, /forbids adaptations/);
  });

  it('refuses a list that is not one, or too long, naming the field', () => {
    assert.throws(() => checkSources({}), /sources: must be a JSON array of sources/);
    assert.throws(() => checkSources([]), /sources: must list at least one source/);
    assert.throws(
      () => checkSources(Array.from({ length: MAX_SOURCES + 1 }, (_, i) => good(`s${i}`))),
      new RegExp(`lists more than the ${MAX_SOURCES} sources`),
    );
  });

  it('parses every size, and names inconsistent settings', () => {
    for (const size of Object.values(VIDEO_SIZES)) VideoConfig.parse(size);
    const clipBounds = VideoConfig.safeParse({ cut: { minClipSeconds: 20, maxClipSeconds: 15 } });
    assert.equal(clipBounds.success, false);
    assert.deepEqual(clipBounds.error!.issues[0]!.path, ['cut', 'maxClipSeconds']);
    const luma = VideoConfig.safeParse({ curate: { darkLuma: 0.5, brightLuma: 0.4 } });
    assert.deepEqual(luma.error!.issues[0]!.path, ['curate', 'darkLuma']);
    assert.equal(VideoConfig.safeParse({ sources: { kind: 'list', uri: 'https://x/y.json' } }).success, false);
  });
});
