/** Stores the VLM job's captions per clip (shared/video/steps.ts). */
import { captionStoreStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('caption-store', captionStoreStep);
