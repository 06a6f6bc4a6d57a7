/** Records a checkpoint's replays and rewrites the run's live report (shared/humanoid/steps.ts). */
import { humanoidHandler, liveStep } from '#shared/humanoid/steps.ts';

export const handler = humanoidHandler('live', liveStep);
