/** Checks the checkpoint a run continues from and writes the run's replay settings (shared/humanoid/steps.ts). */
import { humanoidHandler, prepareStep } from '#shared/humanoid/steps.ts';

export const handler = humanoidHandler('prepare', prepareStep);
