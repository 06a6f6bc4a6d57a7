/** Labels a sample of the chosen SAE's features (shared/sae/steps.ts). */
import { labelStep, saeHandler } from '#shared/sae/steps.ts';

export const handler = saeHandler('label', labelStep);
