/** Squares one item of the probe's fan-out; negative items fail (a Lambda that throws). */
import { z } from 'zod';
import { parseOrThrow } from '#shared/schema.ts';
import { squareItem } from '../../../shared/probe/square-item.ts';

const Event = z.object({ x: z.number() });

export async function handler(event: unknown) {
  const { x } = parseOrThrow(Event, event);
  return squareItem(x);
}
