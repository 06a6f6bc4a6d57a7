/** The sae config check: the run's config parsed with SaeConfig, defaults filled in, or the field named. */
import { configCheckHandler } from '#shared/config-check.ts';
import { SaeConfig } from '#pipelines/sae/config.ts';

export const handler = configCheckHandler(SaeConfig);
