/**
 * Video-dataset curation: config and sizes.
 *
 * A run takes a list of source videos, each with its licence record, cuts each at its scene
 * changes into candidate clips (CPU queue), scores every clip (GPU queue: aesthetics, motion,
 * exposure, perceptual hashes), keeps those that pass the curation thresholds, captions the kept
 * ones (a VLM on the GPU queue, or Claude's vision input over the contact sheet), and publishes
 * the kept clips with a manifest and an ATTRIBUTION.txt. The thresholds are read only by the
 * curate step: a stricter threshold reruns that step, the captions of clips not yet captioned,
 * the publication and the report, and no Batch job.
 */
import { z } from 'zod';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';

/** Sources a list may hold: each is a child run of the Distributed Map, read from S3. */
export const MAX_SOURCES = 1_000;
/** Videos the local generator makes at most. */
export const MAX_GENERATED_VIDEOS = 200;

const count = (min: number, max: number) => z.int().min(min).max(max);

export const VideoSources = z.discriminatedUnion('kind', [
  z
    .object({
      /** Made here with ffmpeg's test sources, cut at known times, with clips made to be dropped. */
      kind: z.literal('generated'),
      videos: count(1, MAX_GENERATED_VIDEOS).default(50),
      seed: count(0, 2 ** 30).default(0),
    })
    .strict(),
  z
    .object({
      /** Blender's open films (CC BY), fetched on AWS. */
      kind: z.literal('blender'),
    })
    .strict(),
  z
    .object({
      /**
       * A JSON array in S3 of `{id, uri, title, author, licence, deedUrl, sourceUrl}`: uri is
       * s3:// or https://, licence an SPDX id (CC-BY-4.0). A source without a complete record
       * is refused (and named); the others proceed.
       */
      kind: z.literal('list'),
      uri: z
        .string()
        .max(MAX_S3_URI_CHARS)
        .regex(/^s3:\/\/[^/]+\/.+\.json$/, 'must be s3://bucket/key.json'),
    })
    .strict(),
]);

export const VideoConfig = z
  .object({
    sources: VideoSources.prefault({ kind: 'generated' }),
    fetch: z
      .object({
        /** A longer source is refused (hours-long uploads by mistake). */
        maxSeconds: z
          .number()
          .positive()
          .max(86_400)
          .default(4 * 3_600),
        /** A larger file is refused before it is read to the end. */
        maxBytes: count(1_000, 100 * 2 ** 30).default(20 * 2 ** 30),
      })
      .strict()
      .prefault({}),
    cut: z
      .object({
        /**
         * adaptive: PySceneDetect's AdaptiveDetector (a frame's HSV content change over its
         * neighbours' mean); content: a fixed threshold on the change (ContentDetector).
         */
        detector: z.enum(['adaptive', 'content']).default('adaptive'),
        /** The adaptive ratio (measured best: 2.0), or the content threshold (27); null: the detector's default. */
        threshold: z.number().min(0.01).max(255).nullable().default(null),
        /** The least content change (0-255) an adaptive cut needs. */
        minContentValue: z.number().min(0).max(255).default(20),
        /** Frames on each side the adaptive ratio averages over. */
        windowFrames: count(1, 50).default(2),
        /** Frames a scene lasts at least (PySceneDetect: 15). */
        minSceneFrames: count(1, 10_000).default(15),
        /** A shorter segment is dropped as too short; a longer one is split (Open-Sora: 2-15 s). */
        minClipSeconds: z.number().min(0.5).max(3_600).default(2),
        maxClipSeconds: z.number().min(1).max(3_600).default(15),
        /** Clips are re-encoded to this height (even; width keeps the aspect ratio). */
        height: count(64, 2_160)
          .refine((h) => h % 2 === 0, 'must be even (yuv420p)')
          .default(360),
        /** x264's preset and quality for the clips. */
        preset: z.enum(['ultrafast', 'superfast', 'veryfast', 'faster', 'fast', 'medium']).default('superfast'),
        crf: count(0, 51).default(23),
      })
      .strict()
      .prefault({}),
    score: z
      .object({
        /**
         * quality: a deterministic image-quality score (sharpness, exposure, contrast,
         * colourfulness) on the 1-10 scale, its formula in the report. clip: CLIP ViT-L/14 and
         * the LAION improved aesthetic predictor, in the GPU image on AWS.
         */
        aesthetic: z.enum(['quality', 'clip']).default('quality'),
      })
      .strict()
      .prefault({}),
    curate: z
      .object({
        /**
         * The aesthetic score a clip needs; null: the scorer's own (quality: 4, its made-to-fail
         * clips score 1-3.4 and smooth good ones 4.5; clip: 4.5, where Open-Sora v1.2 cut).
         */
        minAesthetic: z.number().min(0).max(10).nullable().default(null),
        /** Motion (0-255) a clip needs: held frames measure 0-0.15 here, the slowest good shots 0.8. */
        minMotion: z.number().min(0).max(255).default(0.4),
        darkLuma: z.number().min(0).max(1).default(0.1),
        brightLuma: z.number().min(0).max(1).default(0.9),
        maxDuplicateDistance: z.number().min(0).max(64).default(10),
      })
      .strict()
      .prefault({}),
    captions: z
      .object({
        /**
         * vlm: an open VLM over the key frames, on the GPU queue. claude: Claude's vision input
         * over the contact sheet. none: no captions. auto: claude when the platform's Anthropic
         * key is set, else none (a run never invents a caption).
         */
        captioner: z.enum(['auto', 'vlm', 'claude', 'none']).default('auto'),
        vlmModel: z
          .string()
          .max(100)
          .regex(/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/, 'must be <owner>/<name>')
          .default('Qwen/Qwen2-VL-2B-Instruct'),
        claudeModel: z.string().min(1).max(100).default(DEFAULT_CLAUDE_MODEL),
        /** Claude requests in flight at once. */
        concurrency: count(1, 64).default(4),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.cut.maxClipSeconds < 2 * config.cut.minClipSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['cut', 'maxClipSeconds'],
        message: `${config.cut.maxClipSeconds} s must be at least twice cut.minClipSeconds (${config.cut.minClipSeconds} s), so a split segment's pieces are never too short`,
      });
    }
    if (config.curate.darkLuma >= config.curate.brightLuma) {
      ctx.addIssue({
        code: 'custom',
        path: ['curate', 'darkLuma'],
        message: `${config.curate.darkLuma} must be below curate.brightLuma (${config.curate.brightLuma})`,
      });
    }
  });
export type VideoConfig = z.output<typeof VideoConfig>;

/**
 * Sizes. test: 3 short generated videos. smoke: 12. local: 50. full: Blender's open films on
 * AWS, scored by CLIP and captioned by the VLM.
 */
export const VIDEO_SIZES = {
  test: { sources: { kind: 'generated', videos: 3 } },
  smoke: { sources: { kind: 'generated', videos: 12 } },
  local: { sources: { kind: 'generated', videos: 50 } },
  full: { sources: { kind: 'blender' }, score: { aesthetic: 'clip' }, captions: { captioner: 'vlm' } },
} as const satisfies Record<string, z.input<typeof VideoConfig>>;
