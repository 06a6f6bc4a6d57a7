/**
 * The video curation's plan model (pipelines/steps/plan.ts): one item of the sources Map per
 * source (the generated count, Blender's films, or a list's entries, which the list document
 * decides: the plan asks for the count), every source accepted, fetched (unless content-addressed:
 * generated videos are in the bucket already) and cut; captions by the captioner the config names,
 * `auto` being Claude when a key is set and none otherwise, for at least one kept clip; Claude
 * captions each kept clip once (at most `maxClips`).
 */
import { DEFAULT_MAX_ATTEMPTS } from '#shared/claude-requests.ts';
import { ConfigError } from '#shared/errors.ts';
import { BLENDER_FILMS } from '#shared/video/blender.ts';
import { CAPTION_MAX_TOKENS, CONTACT_SHEET_MAX_TOKENS, captionRequestParams } from '#shared/video/caption.ts';
import { coldModel, type PlanModel, requestInput } from '#pipelines/steps/plan.ts';
import type { VideoConfig } from './config.ts';

/**
 * The longest generated video, in seconds (batch-jobs/video-cut/generate.py's
 * DEFAULT_SPEC_MAX_SECONDS, for the spec the pipeline submits: 40.5 s by construction, 39.2 s the
 * longest measured). Fetched sources are at most `fetch.maxSeconds` (fetch refuses longer ones). A
 * list entry given with its sha256 is not fetched, and its length is taken to be within
 * `fetch.maxSeconds` too: nothing checks it (the cut job would have to).
 */
export const GENERATED_MAX_SECONDS = 60;

/** The most clips a run can cut: each source's longest duration over the shortest clip. */
export function maxClips(config: VideoConfig, sources: number): number {
  const seconds = config.sources.kind === 'generated' ? GENERATED_MAX_SECONDS : config.fetch.maxSeconds;
  return sources * Math.floor(seconds / config.cut.minClipSeconds);
}

export interface VideoPlanOptions {
  readonly startedByUpload?: boolean;
  /** Whether an Anthropic key will be there (captioner auto). */
  readonly claudeKey?: boolean;
  /** A `list` source's entries. */
  readonly listedSources?: number;
}

export function videoPlanModel(config: VideoConfig, options: VideoPlanOptions = {}): PlanModel {
  const sources = config.sources;
  const count = sources.kind === 'generated' ? sources.videos : sources.kind === 'blender' ? BLENDER_FILMS.length : options.listedSources;
  if (count === undefined)
    throw new ConfigError(
      'sources.uri',
      sources.kind === 'list' ? sources.uri : null,
      'the list document decides the sources: give their count to plan the run',
    );
  const captioner = config.captions.captioner === 'auto' ? (options.claudeKey ? 'claude' : 'none') : config.captions.captioner;
  return coldModel({
    pipeline: 'video',
    startedByUpload: options.startedByUpload,
    // One call per kept clip not captioned yet: none when every clip is dropped or cached, at most
    // every clip the sources can hold.
    claude: () =>
      captioner === 'claude'
        ? [
            {
              step: 'caption-claude',
              model: config.captions.claudeModel,
              calls: { low: 0, high: maxClips(config, count) },
              maxOutputTokens: CAPTION_MAX_TOKENS,
              attempts: DEFAULT_MAX_ATTEMPTS,
              // The instructions, the fixed question and one contact sheet.
              maxInput: requestInput(
                captionRequestParams({ id: 'clip', contactSheet: { mediaType: 'image/jpeg', base64: '' } }, config.captions.claudeModel),
                CONTACT_SHEET_MAX_TOKENS,
              ),
              why: `one per kept clip; at most ${config.sources.kind === 'generated' ? GENERATED_MAX_SECONDS : config.fetch.maxSeconds} s a source over cut.minClipSeconds (${config.cut.minClipSeconds} s) a clip`,
            },
          ]
        : [],
    mapItems: (name) => (name === 'sources-map: Items' ? count : undefined),
    decide(name, state) {
      const rules = (state.Choices ?? []).map((c) => c.Next);
      switch (name) {
        case 'Generated sources?':
          return sources.kind === 'generated' ? rules[0] : state.Default;
        case 'Any source accepted?':
          return count === 0 ? rules[0] : state.Default;
        case 'Content-addressed?':
          return sources.kind === 'generated' ? rules[0] : state.Default;
        case 'Fetched?':
        case 'Cut?':
          return state.Default;
        case 'Caption model?':
          return captioner === 'vlm' ? rules[0] : state.Default;
        case 'Captions to make?':
          return captioner === 'none' ? rules[0] : captioner === 'vlm' ? rules[1] : state.Default;
        default:
          return undefined;
      }
    },
  });
}
