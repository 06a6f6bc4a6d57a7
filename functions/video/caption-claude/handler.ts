/** Captions clips with Claude's vision input over their contact sheets (shared/video/steps.ts). */
import { captionClaudeStep, videoHandler } from '#shared/video/steps.ts';

export const handler = videoHandler('caption-claude', captionClaudeStep);
