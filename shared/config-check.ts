/**
 * The first step of every pipeline: the run's config parsed with the pipeline's schema, defaults
 * filled in. The CLI and the upload trigger parse it before they start a run; a run started any
 * other way (StartExecution from the console or an SDK) is checked here, so every later step,
 * and every cache key, reads a config the schema bounds. A bad config fails the run at once with
 * a ConfigError naming the field and the value.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { startInvocationLog } from './log.ts';
import { parseOrThrow } from './schema.ts';

const Event = z.object({ config: z.unknown() }).strict();

export function configCheckHandler(schema: z.ZodType) {
  return async (event: unknown, context?: Context): Promise<unknown> => {
    startInvocationLog(context, { step: 'config' });
    return parseOrThrow(schema, parseOrThrow(Event, event, 'input').config, 'config');
  };
}
