/** Writes a training run's report and lists what it publishes (shared/humanoid/steps.ts). */
import { humanoidHandler, reportStep } from '#shared/humanoid/steps.ts';

export const handler = humanoidHandler('report', reportStep);
