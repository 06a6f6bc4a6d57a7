/**
 * One Lambda "container": a worker thread with the function's own environment (process.env
 * is per worker), its module loaded once and reused across invocations, as on AWS.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';

interface Invocation {
  id: number;
  event: unknown;
  context: { functionName: string; awsRequestId: string; invokedFunctionArn: string; deadline: number; memoryLimitInMB: string };
}

const { entry, handlerName } = workerData as { entry: string; handlerName: string };
let handler: ((event: unknown, context: unknown) => Promise<unknown>) | undefined;

async function load() {
  if (!handler) {
    const mod = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
    const fn = mod[handlerName];
    if (typeof fn !== 'function') throw new Error(`${entry} exports no function "${handlerName}"`);
    handler = fn as unknown as typeof handler;
  }
  return handler!;
}

parentPort!.on('message', async (msg: Invocation) => {
  try {
    const fn = await load();
    const context = {
      ...msg.context,
      functionVersion: '$LATEST',
      callbackWaitsForEmptyEventLoop: false,
      getRemainingTimeInMillis: () => Math.max(0, msg.context.deadline - Date.now()),
    };
    const result = await fn(msg.event, context);
    parentPort!.postMessage({ id: msg.id, ok: true, result: result === undefined ? null : result });
  } catch (error) {
    const e = error as { name?: string; message?: string; stack?: string };
    const isError = error instanceof Error;
    parentPort!.postMessage({
      id: msg.id,
      ok: false,
      error: {
        name: isError ? (e.name ?? 'Error') : 'Error',
        message: isError ? (e.message ?? '') : String(error),
        stack: isError ? (e.stack ?? '') : '',
      },
    });
  }
});
