/**
 * One RolloutPool worker: compiles the G1 once, then runs each rollout it is sent (rollouts.ts).
 */
import { parentPort } from 'node:worker_threads';
import { serveRollouts } from './rollouts.ts';

await serveRollouts(parentPort!);
