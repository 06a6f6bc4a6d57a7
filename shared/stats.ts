/** Small statistics shared by the league (Elo intervals) and molecular discovery (hit thresholds). */
import { ConfigError } from './errors.ts';

/** Linear interpolation between order statistics (the usual "type 7" definition) of sorted values, q in [0, 1]. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) throw new ConfigError('values', sorted, 'must not be empty');
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below]! + (position - below) * (sorted[above]! - sorted[below]!);
}
