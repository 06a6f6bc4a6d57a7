/** The humanoid config check: the run's config parsed with HumanoidConfig, defaults filled in, or the field named. */
import { configCheckHandler } from '#shared/config-check.ts';
import { HumanoidConfig } from '#pipelines/humanoid/config.ts';

export const handler = configCheckHandler(HumanoidConfig);
