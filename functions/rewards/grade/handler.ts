/** Reward search, step 3: the trusted grade of one trained seed (shared/reward/grade.ts). */
import { gradeSeed } from '#shared/reward/grade.ts';

export async function handler(event: unknown) {
  return gradeSeed(event);
}
