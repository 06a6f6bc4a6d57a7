/** Checks the source list entry by entry and writes the Map items (shared/video/steps.ts). */
import { sourcesStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('sources', sourcesStep);
