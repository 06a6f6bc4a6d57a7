/**
 * Runs Lambda handlers locally, as Lambda does: each invocation in a sandbox of its own (a
 * worker thread with the function's environment), sandboxes kept warm and reused one
 * invocation at a time, the template's timeout enforced from the end of Init, and errors
 * shaped as Step Functions sees a Lambda error (name = errorType, cause = the AWS-style JSON).
 * A sandbox's stdout and stderr (the handlers' JSON log lines, shared/log.ts) are not piped:
 * Node forwards them to this process's own, where Lambda would send them to CloudWatch Logs.
 */
import { Worker } from 'node:worker_threads';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface LocalFunction {
  /** Physical name. */
  readonly name: string;
  readonly arn: string;
  /** Absolute path of the handler module. */
  readonly entry: string;
  readonly handler: string;
  readonly environment: Record<string, string>;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
}

/** An error Step Functions can match by name, with the AWS-style Cause. */
export class TaskError extends Error {
  constructor(name: string, cause: string) {
    super(cause);
    this.name = name;
  }
}

export function lambdaError(name: string, message: string, stack: string): TaskError {
  return new TaskError(name, JSON.stringify({ errorType: name, errorMessage: message, trace: stack.split('\n') }));
}

const WORKER = join(fileURLToPath(new URL('.', import.meta.url)), 'lambda-worker.ts');
const TSX = import.meta.resolve('tsx');
type WorkerError = { name: string; message: string; stack: string };

/** One warm sandbox: Init once, then one invocation at a time. */
class Sandbox {
  private readonly worker: Worker;
  /** Settles when Init has finished; rejects with the Init error. */
  readonly ready: Promise<void>;
  private current: { id: number; resolve(value: unknown): void; reject(error: Error): void } | undefined;
  private next = 0;
  busy = false;
  dead = false;

  constructor(
    readonly fn: LocalFunction,
    baseEnv: Record<string, string>,
  ) {
    this.worker = new Worker(WORKER, {
      workerData: { entry: fn.entry, handlerName: fn.handler },
      // As Lambda sets it for an on-demand sandbox: the Logger's `cold_start` is true on its first invocation.
      env: { ...baseEnv, AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand', ...fn.environment },
      execArgv: ['--import', TSX],
    });
    let initDone!: () => void;
    let initFailed!: (error: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      initDone = resolve;
      initFailed = reject;
    });
    this.ready.catch(() => undefined);
    this.worker.on('message', (msg: { ready?: boolean; id?: number; ok?: boolean; result?: unknown; error?: WorkerError }) => {
      if (msg.ready === true) return initDone();
      if (msg.ready === false) {
        this.dead = true;
        return initFailed(lambdaError(msg.error!.name, msg.error!.message, msg.error!.stack));
      }
      const current = this.current;
      if (!current || current.id !== msg.id) return;
      this.current = undefined;
      if (msg.ok) current.resolve(msg.result);
      else current.reject(lambdaError(msg.error!.name, msg.error!.message, msg.error!.stack));
    });
    const crash = (message: string) => {
      this.dead = true;
      const error = lambdaError('Runtime.ExitError', message, '');
      initFailed(error);
      this.current?.reject(error);
      this.current = undefined;
    };
    this.worker.on('error', (error) => crash(String(error?.message ?? error)));
    this.worker.on('exit', () => crash(`${fn.name}: the runtime exited`));
  }

  /** Runs one invocation; the timeout counts from here, after Init, as on AWS. */
  invoke(event: unknown): Promise<unknown> {
    const id = this.next++;
    const timeoutMs = this.fn.timeoutSeconds * 1000;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.current = undefined;
        // As on AWS, a timed-out invocation takes its sandbox with it (and only its own).
        reject(new TaskError('Sandbox.Timedout', JSON.stringify({ errorMessage: `Task timed out after ${this.fn.timeoutSeconds}.00 seconds` })));
        void this.terminate();
      }, timeoutMs);
      this.current = {
        id,
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.worker.postMessage({
        id,
        event,
        context: {
          functionName: this.fn.name,
          awsRequestId: randomUUID(),
          invokedFunctionArn: this.fn.arn,
          deadline: Date.now() + timeoutMs,
          memoryLimitInMB: String(this.fn.memoryMb),
        },
      });
    });
  }

  async terminate(): Promise<void> {
    this.dead = true;
    await this.worker.terminate();
  }
}

/**
 * Sandboxes per function at most. Lambda scales far wider; here each sandbox is a thread with
 * its own module graph (tens of MB), so invocations beyond this wait for a free one.
 */
const MAX_SANDBOXES = 16;

export class LambdaHost {
  private readonly sandboxes = new Map<string, Sandbox[]>();
  private readonly waiting = new Map<string, (() => void)[]>();
  private stopped = false;
  invocations = 0;

  constructor(private readonly baseEnv: Record<string, string>) {}

  async invoke(fn: LocalFunction, event: unknown): Promise<unknown> {
    const sandbox = await this.acquire(fn);
    this.invocations++;
    try {
      await sandbox.ready;
      // Lambda payloads cross as JSON: nothing but JSON reaches the handler.
      return await sandbox.invoke(JSON.parse(JSON.stringify(event ?? null)));
    } finally {
      sandbox.busy = false;
      this.waiting.get(fn.name)?.shift()?.();
    }
  }

  private async acquire(fn: LocalFunction): Promise<Sandbox> {
    for (;;) {
      if (this.stopped) throw new TaskError('Lambda.ServiceException', `${fn.name}: the local runtime is stopping`);
      const pool = (this.sandboxes.get(fn.name) ?? []).filter((s) => !s.dead);
      this.sandboxes.set(fn.name, pool);
      let sandbox = pool.find((s) => !s.busy);
      if (!sandbox && pool.length < MAX_SANDBOXES) {
        sandbox = new Sandbox(fn, this.baseEnv);
        pool.push(sandbox);
      }
      if (sandbox) {
        sandbox.busy = true;
        return sandbox;
      }
      await new Promise<void>((resolve) => {
        const queue = this.waiting.get(fn.name) ?? [];
        queue.push(resolve);
        this.waiting.set(fn.name, queue);
      });
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const queue of this.waiting.values())
      queue.splice(0).forEach((wake) => {
        wake();
      });
    const all = [...this.sandboxes.values()].flat();
    this.sandboxes.clear();
    await Promise.all(all.map((s) => s.terminate()));
  }
}
