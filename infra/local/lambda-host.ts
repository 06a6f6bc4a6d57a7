/**
 * Runs Lambda handlers locally: one worker per function (its own environment and module
 * state, kept warm between invocations), the template's timeout enforced, and errors shaped
 * as Step Functions sees a Lambda error (name = errorType, cause = the AWS-style JSON).
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

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

class Container {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  dead = false;

  constructor(readonly fn: LocalFunction, baseEnv: Record<string, string>) {
    this.worker = new Worker(WORKER, {
      workerData: { entry: fn.entry, handlerName: fn.handler },
      env: { ...baseEnv, ...fn.environment },
      execArgv: ['--import', TSX],
    });
    this.worker.on('message', (msg: { id: number; ok: boolean; result?: unknown; error?: { name: string; message: string; stack: string } }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(lambdaError(msg.error!.name, msg.error!.message, msg.error!.stack));
    });
    this.worker.on('error', (error) => this.fail(lambdaError('Runtime.ExitError', String(error?.message ?? error), '')));
    this.worker.on('exit', () => this.fail(lambdaError('Runtime.ExitError', `${fn.name}: the runtime exited`, '')));
  }

  invoke(event: unknown): Promise<unknown> {
    const id = this.next++;
    const deadline = Date.now() + this.fn.timeoutSeconds * 1000;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        // As on AWS, a timed-out invocation takes its container with it.
        reject(new TaskError('Sandbox.Timedout', JSON.stringify({ errorMessage: `Task timed out after ${this.fn.timeoutSeconds}.00 seconds` })));
        void this.terminate();
      }, this.fn.timeoutSeconds * 1000);
      this.pending.set(id, { resolve, reject, timer });
      this.worker.postMessage({
        id,
        event,
        context: {
          functionName: this.fn.name,
          awsRequestId: randomUUID(),
          invokedFunctionArn: this.fn.arn,
          deadline,
          memoryLimitInMB: String(this.fn.memoryMb),
        },
      });
    });
  }

  private fail(error: Error) {
    this.dead = true;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(error);
      this.pending.delete(id);
    }
  }

  async terminate(): Promise<void> {
    this.dead = true;
    await this.worker.terminate();
  }
}

export class LambdaHost {
  private readonly containers = new Map<string, Container>();
  invocations = 0;

  constructor(private readonly baseEnv: Record<string, string>) {}

  async invoke(fn: LocalFunction, event: unknown): Promise<unknown> {
    let container = this.containers.get(fn.name);
    if (!container || container.dead) {
      container = new Container(fn, this.baseEnv);
      this.containers.set(fn.name, container);
    }
    this.invocations++;
    // Lambda payloads cross as JSON: nothing but JSON reaches the handler.
    return container.invoke(JSON.parse(JSON.stringify(event ?? null)));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.containers.values()].map((c) => c.terminate()));
    this.containers.clear();
  }
}

