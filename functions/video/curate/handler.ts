/** Reads every source outcome and keeps or drops each clip by the curation rules (shared/video/steps.ts). */
import { curateStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('curate', curateStep);
