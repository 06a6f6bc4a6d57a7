/**
 * One Lambda sandbox: a worker thread with the function's own environment (process.env is
 * per worker), its module loaded once at start (the Init phase, outside the invoke timeout)
 * and reused by later invocations, one invocation at a time, as on AWS.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';

interface Invocation {
  id: number;
  event: unknown;
  context: { functionName: string; awsRequestId: string; invokedFunctionArn: string; deadline: number; memoryLimitInMB: string };
}

type Handler = (event: unknown, context: unknown) => Promise<unknown>;
const { entry, handlerName } = workerData as { entry: string; handlerName: string };

function describe(error: unknown): { name: string; message: string; stack: string } {
  return error instanceof Error
    ? { name: error.name || 'Error', message: error.message ?? '', stack: error.stack ?? '' }
    : { name: 'Error', message: String(error), stack: '' };
}

let handler: Handler | undefined;
try {
  const mod = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
  const fn = mod[handlerName];
  if (typeof fn !== 'function') throw new Error(`${entry} exports no function "${handlerName}"`);
  handler = fn as Handler;
  parentPort!.postMessage({ ready: true });
} catch (error) {
  // As Lambda reports an Init failure: the invocation fails with Runtime.ImportModuleError.
  parentPort!.postMessage({ ready: false, error: { ...describe(error), name: 'Runtime.ImportModuleError' } });
}

parentPort!.on('message', async (msg: Invocation) => {
  try {
    const context = {
      ...msg.context,
      functionVersion: '$LATEST',
      callbackWaitsForEmptyEventLoop: false,
      getRemainingTimeInMillis: () => Math.max(0, msg.context.deadline - Date.now()),
    };
    const result = await handler!(msg.event, context);
    // Lambda serializes the result as JSON: Dates become strings, undefined fields vanish.
    const json = result === undefined ? null : (JSON.parse(JSON.stringify(result)) as unknown);
    parentPort!.postMessage({ id: msg.id, ok: true, result: json });
  } catch (error) {
    parentPort!.postMessage({ id: msg.id, ok: false, error: describe(error) });
  }
});
