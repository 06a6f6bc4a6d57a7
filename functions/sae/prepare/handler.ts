/** Finds the corpus artifact, resolves the explainer and lists the SAE grid (shared/sae/steps.ts). */
import { prepareStep, saeHandler } from '#shared/sae/steps.ts';

export const handler = saeHandler('prepare', prepareStep);
