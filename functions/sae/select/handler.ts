/** Reads every SAE result and chooses the one to label (shared/sae/steps.ts). */
import { selectStep, saeHandler } from '#shared/sae/steps.ts';

export const handler = saeHandler('select', selectStep);
