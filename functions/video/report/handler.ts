/** Writes the curation report, after the copy (shared/video/steps.ts). */
import { reportStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('report', reportStep);
