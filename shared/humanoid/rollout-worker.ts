/**
 * One RolloutPool worker: compiles the G1 once, then runs each rollout it is sent (rollouts.ts).
 */
import { parentPort } from 'node:worker_threads';
import { compileG1 } from './model.ts';
import { type RolloutRequest, rollout } from './rollouts.ts';
import { TIMING } from './task.ts';

const sim = await compileG1({ timestep: TIMING.simDt });
parentPort!.on('message', (request: RolloutRequest) => {
  try {
    parentPort!.postMessage({ result: rollout(sim, request) });
  } catch (error) {
    parentPort!.postMessage({ error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
  }
});
