/** Squares one item of the probe's fan-out; negative items fail (a Lambda that throws). */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { startInvocationLog } from '#shared/log.ts';
import { squareItem } from '#shared/probe/square-item.ts';
import { parseOrThrow } from '#shared/schema.ts';

const Event = z.object({ x: z.number() });

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'square' });
  const { x } = parseOrThrow(Event, event);
  return squareItem(x);
}
