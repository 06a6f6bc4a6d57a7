/** The run's config parsed with the pipeline's schema, defaults filled in (shared/config-check.ts). */
import { configCheckHandler } from '#shared/config-check.ts';
import { RefineryConfig } from '#pipelines/refinery/config.ts';

export const handler = configCheckHandler(RefineryConfig);
