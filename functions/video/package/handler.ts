/** Writes the dataset's manifest, attribution and file list (shared/video/steps.ts). */
import { packageStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('package', packageStep);
