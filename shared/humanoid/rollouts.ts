/**
 * Rollouts of a linear policy in the CPU twin, one at a time (rollout) or spread over worker
 * threads, each with its own compiled model (RolloutPool): ARS's two rollouts per direction run
 * in parallel on every core. A rollout is reproducible from its seed: the environment's noise,
 * pushes, reset and commands all come from it.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type MessagePort, Worker } from 'node:worker_threads';
import { act, addObservation, emptyStats, type LinearPolicy, type ObservationStats } from './ars.ts';
import { type EnvOptions, G1Env } from './env.ts';
import { compileG1, type G1Sim } from './model.ts';
import { TIMING } from './task.ts';
import { seededRandom } from '../random.ts';

export interface RolloutRequest {
  readonly weights: Float64Array;
  readonly mean: Float64Array;
  readonly std: Float64Array;
  readonly seed: number;
  /** Control steps at most; the rollout ends earlier when the episode does. */
  readonly steps: number;
  readonly env?: EnvOptions;
  /** Collect the observations' sums for the normaliser. */
  readonly collectStats?: boolean;
}

export interface RolloutResult {
  /** The sum of the rewards. */
  readonly return: number;
  readonly steps: number;
  readonly ended: string | null;
  /** Forward distance of the pelvis in its starting heading (m) over the rollout's time: mean forward speed. */
  readonly forwardSpeed: number;
  readonly stats?: ObservationStats;
}

/** One rollout in `sim`, from the request's seed. */
export function rollout(sim: G1Sim, request: RolloutRequest): RolloutResult {
  const env = new G1Env(sim, seededRandom(request.seed), request.env);
  const observationSize = env.observationSize;
  const policy: LinearPolicy = { observationSize, actionSize: env.actionSize, weights: request.weights, mean: request.mean, std: request.std };
  const stats = request.collectStats ? emptyStats(observationSize) : undefined;
  const action = new Float64Array(env.actionSize);
  let observation = env.reset();
  const qpos = () => sim.data.qpos as Float64Array;
  // The starting heading: the pelvis's x axis in the world, flattened.
  const [w, , , z] = [qpos()[3]!, qpos()[4]!, qpos()[5]!, qpos()[6]!];
  const heading = Math.atan2(2 * w * z, 1 - 2 * z * z);
  const [x0, y0] = [qpos()[0]!, qpos()[1]!];
  let total = 0;
  let steps = 0;
  let ended: string | null = null;
  while (steps < request.steps) {
    if (stats) addObservation(stats, observation);
    act(policy, policy.weights, observation, action);
    const result = env.step(action);
    total += result.reward;
    steps += 1;
    observation = result.observation;
    if (result.done) {
      ended = result.ended;
      break;
    }
  }
  const distance = (qpos()[0]! - x0) * Math.cos(heading) + (qpos()[1]! - y0) * Math.sin(heading);
  const seconds = steps * TIMING.ctrlDt;
  return { return: total, steps, ended, forwardSpeed: seconds > 0 && ended !== 'unstable' ? distance / seconds : 0, ...(stats ? { stats } : {}) };
}

/** A worker's loop: compiles the G1 once, then runs each rollout it is sent. */
export async function serveRollouts(port: MessagePort): Promise<void> {
  const sim = await compileG1({ timestep: TIMING.simDt });
  port.on('message', (request: RolloutRequest) => {
    try {
      port.postMessage({ result: rollout(sim, request) });
    } catch (error) {
      port.postMessage({ error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    }
  });
}

const WORKER = fileURLToPath(new URL('./rollout-worker.ts', import.meta.url));

/** Worker threads, each with its own model, running rollouts as they come. */
export class RolloutPool {
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: { request: RolloutRequest; resolve(r: RolloutResult): void; reject(e: Error): void }[] = [];
  private readonly pending = new Map<Worker, { resolve(r: RolloutResult): void; reject(e: Error): void }>();
  private closed = false;

  /**
   * `size` workers, each running `script` (default: rollout-worker.ts under tsx). A bundled job
   * passes its own module, which serves rollouts (serveRollouts) when it is not the main thread.
   */
  constructor(
    readonly size = availableParallelism(),
    script: { readonly url: string | URL; readonly execArgv?: string[] } = { url: WORKER, execArgv: ['--import', import.meta.resolve('tsx')] },
  ) {
    for (let i = 0; i < size; i++) {
      const worker = new Worker(script.url, script.execArgv ? { execArgv: script.execArgv } : {});
      worker.on('message', (message: { result?: RolloutResult; error?: string }) => {
        const job = this.pending.get(worker);
        this.pending.delete(worker);
        if (message.error !== undefined) job?.reject(new Error(message.error));
        else job?.resolve(message.result!);
        this.idle.push(worker);
        this.pump();
      });
      worker.on('error', (error) => {
        const job = this.pending.get(worker);
        this.pending.delete(worker);
        job?.reject(error);
      });
      this.workers.push(worker);
      this.idle.push(worker);
    }
  }

  run(request: RolloutRequest): Promise<RolloutResult> {
    if (this.closed) return Promise.reject(new Error('the rollout pool is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const worker = this.idle.pop()!;
      const job = this.queue.shift()!;
      this.pending.set(worker, job);
      worker.postMessage(job.request);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
