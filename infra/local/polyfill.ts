/**
 * Runtime polyfills the local engine needs, imported first by the embedded runtime.
 *
 * aws-local-stepfunctions 3.0.0 calls `Promise.withResolvers()` for every Task state's timeout
 * timer. Node 22 has it; Node 20 (the system Node on some machines) does not, and there every
 * Task fails with a TypeError. The project runs on Node 22, so this is a safety net only.
 */

/** What `Promise.withResolvers()` returns (ES2024; the project's TypeScript lib is ES2023). */
export interface PromiseResolvers<T> {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
}

type WithResolvers = <T>() => PromiseResolvers<T>;

/** The ES2024 behaviour: a new pending promise together with its settle functions. */
function withResolvers<T>(): PromiseResolvers<T> {
  let resolve!: PromiseResolvers<T>['resolve'];
  let reject!: PromiseResolvers<T>['reject'];
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Defines `Promise.withResolvers` when the running Node lacks it; returns whether it did.
 * A native implementation is never replaced.
 */
export function installPromiseWithResolvers(): boolean {
  const promiseConstructor = Promise as PromiseConstructor & { withResolvers?: WithResolvers };
  if (typeof promiseConstructor.withResolvers === 'function') return false;
  Object.defineProperty(Promise, 'withResolvers', {
    value: withResolvers,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  return true;
}

installPromiseWithResolvers();
