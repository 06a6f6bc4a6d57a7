/**
 * Task tokens for `.waitForTaskToken` tasks, which the local engine lacks: a token per task
 * invocation, the task's promise held until SendTaskSuccess/Failure, heartbeats and the task
 * timeout enforced here, and every token swept when its execution ends (the engine does not
 * cancel a timed-out task, so without the sweep a token would stay pending forever).
 */
import { randomUUID } from 'node:crypto';
import { TaskError } from './lambda-host.ts';

/** What `$$.Task.Token` evaluates to; replaced with a fresh token per task invocation. */
export const TASK_TOKEN_MARKER = 'local-tt-marker';

interface Waiter {
  readonly executionArn: string;
  resolve(value: unknown): void;
  reject(error: Error): void;
  heartbeatSeconds?: number;
  heartbeatTimer?: NodeJS.Timeout;
  timeoutTimer?: NodeJS.Timeout;
}

/** The Step Functions API's own error names for callbacks. */
export class CallbackError extends Error {
  constructor(name: 'TaskDoesNotExist' | 'TaskTimedOut' | 'InvalidToken', message: string) {
    super(message);
    this.name = name;
  }
}

export class CallbackRegistry {
  private readonly waiters = new Map<string, Waiter>();
  private readonly finished = new Set<string>();

  /** A fresh token for a task invocation and the promise that settles with the callback. */
  register(executionArn: string, opts: { timeoutSeconds?: number; heartbeatSeconds?: number }): { token: string; done: Promise<unknown> } {
    const token = `local-tt-${randomUUID()}`;
    let waiter!: Waiter;
    const done = new Promise<unknown>((resolve, reject) => {
      waiter = { executionArn, resolve, reject, heartbeatSeconds: opts.heartbeatSeconds };
    });
    this.waiters.set(token, waiter);
    if (opts.heartbeatSeconds) this.armHeartbeat(token, waiter);
    if (opts.timeoutSeconds) {
      // A second after the engine's own Task timeout, which must win: its States.Timeout is the
      // one States.TaskFailed does not match. This timer only retires the token.
      waiter.timeoutTimer = setTimeout(
        () => this.settle(token, new TaskError('States.Timeout', 'The task timed out waiting for its callback'), true),
        opts.timeoutSeconds * 1000 + 1000,
      );
    }
    return { token, done };
  }

  pending(executionArn?: string): string[] {
    return [...this.waiters.entries()].filter(([, w]) => !executionArn || w.executionArn === executionArn).map(([t]) => t);
  }

  sendSuccess(token: string, output: unknown): void {
    this.settle(token, output, false, true);
  }

  sendFailure(token: string, error: string, cause: string): void {
    this.settle(token, new TaskError(error || 'States.TaskFailed', cause ?? ''), true, true);
  }

  /** Fails the task if its token still waits; a token already answered or timed out is left alone. */
  failIfPending(token: string, error: string, cause: string): void {
    if (this.waiters.has(token)) this.sendFailure(token, error, cause);
  }

  sendHeartbeat(token: string): void {
    const waiter = this.lookup(token);
    if (waiter.heartbeatSeconds) this.armHeartbeat(token, waiter);
  }

  /** Ends every token of an execution: later callbacks get TaskTimedOut, as on AWS. */
  sweep(executionArn: string): void {
    for (const token of this.pending(executionArn)) {
      this.settle(token, new TaskError('States.Runtime', 'The execution ended while the task waited'), true);
    }
  }

  private lookup(token: string): Waiter {
    const waiter = this.waiters.get(token);
    if (waiter) return waiter;
    if (this.finished.has(token)) throw new CallbackError('TaskTimedOut', 'Task Timed Out: the task is no longer waiting for this token');
    throw new CallbackError(token.startsWith('local-tt-') ? 'TaskDoesNotExist' : 'InvalidToken', 'Provided task does not exist anymore');
  }

  private settle(token: string, value: unknown, failed: boolean, external = false): void {
    const waiter = external ? this.lookup(token) : this.waiters.get(token);
    if (!waiter) return;
    clearTimeout(waiter.heartbeatTimer);
    clearTimeout(waiter.timeoutTimer);
    this.waiters.delete(token);
    this.finished.add(token);
    if (failed) waiter.reject(value as Error);
    else waiter.resolve(value);
  }

  private armHeartbeat(token: string, waiter: Waiter): void {
    clearTimeout(waiter.heartbeatTimer);
    waiter.heartbeatTimer = setTimeout(
      () => this.settle(token, new TaskError('States.HeartbeatTimeout', 'No heartbeat within HeartbeatSeconds'), true),
      waiter.heartbeatSeconds! * 1000,
    );
  }
}
