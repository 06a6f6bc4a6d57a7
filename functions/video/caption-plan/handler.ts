/** Lists the kept clips without a caption by this captioner and model (shared/video/steps.ts). */
import { captionPlanStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('caption-plan', captionPlanStep);
