/** Writes the SAE report and lists the artifact's files (shared/sae/steps.ts). */
import { reportStep, saeHandler } from '#shared/sae/steps.ts';

export const handler = saeHandler('report', reportStep);
