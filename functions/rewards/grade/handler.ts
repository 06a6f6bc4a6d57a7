/** Reward search, step 3: the trusted grade of one trained seed (shared/rewards/grade.ts). */
import { gradeSeed } from '#shared/rewards/grade.ts';

export async function handler(event: unknown) {
  return gradeSeed(event);
}
