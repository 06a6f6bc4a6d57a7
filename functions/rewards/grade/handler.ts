/** Reward search, step 3: the trusted grade of one trained seed (shared/rewards/grade.ts). */
import type { Context } from 'aws-lambda';
import { startInvocationLog } from '#shared/log.ts';
import { gradeSeed, GradeRequest } from '#shared/rewards/grade.ts';
import { parseOrThrow } from '#shared/schema.ts';

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'grade' });
  return gradeSeed(parseOrThrow(GradeRequest, event, 'grade'));
}
