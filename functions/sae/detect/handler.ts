/** Scores each label for detection against a mismatched-label control (shared/sae/steps.ts). */
import { detectStep, saeHandler } from '#shared/sae/steps.ts';

export const handler = saeHandler('detect', detectStep);
