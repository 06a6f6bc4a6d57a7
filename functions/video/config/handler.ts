/** The video config check: the run's config parsed with VideoConfig, defaults filled in, or the field named. */
import { configCheckHandler } from '#shared/config-check.ts';
import { VideoConfig } from '#pipelines/video/config.ts';

export const handler = configCheckHandler(VideoConfig);
