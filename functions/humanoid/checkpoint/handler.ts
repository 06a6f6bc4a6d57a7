/** Reads and checks an uploaded checkpoint and its run's replay settings (shared/humanoid/steps.ts). */
import { humanoidHandler, checkpointStep } from '#shared/humanoid/steps.ts';

export const handler = humanoidHandler('checkpoint', checkpointStep);
