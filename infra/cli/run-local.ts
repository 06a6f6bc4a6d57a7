/** `frontier run` on the embedded runtime: start, show progress, print the outcome. */
import { readFileSync } from 'node:fs';
import { LocalRuntime, type ExecutionRecord } from '../local/runtime.ts';
import { linksInEml } from '../local/outbox.ts';
import type { PipelineEntry } from '../registry.ts';
import type { Io } from './output.ts';
import { errorText, failureLines, startedBy } from './run-outcome.ts';

export interface LocalRunOptions {
  readonly dataDir?: string;
  readonly portBase?: number;
  readonly name?: string;
  /** Print every state entered (default: only steps and Map progress) and a failure's raw cause. */
  readonly verbose?: boolean;
  /** What to put in the platform bucket before the run starts (e.g. reward files' sources). */
  readonly beforeStart?: (bucket: string) => Promise<void>;
}

export async function runLocal(entry: PipelineEntry, config: Record<string, unknown>, options: LocalRunOptions, io: Io): Promise<ExecutionRecord> {
  const t0 = performance.now();
  const runtime = await LocalRuntime.start({ dataDir: options.dataDir, portBase: options.portBase });
  try {
    io.out(`local runtime ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (data in ${runtime.dataDir})`);
    return await followLocalRun(runtime, entry, config, options, io);
  } finally {
    await runtime.stop();
  }
}

/**
 * Starts a run on a runtime that is up, shows its progress, waits until it and the runs it set
 * off have ended, and prints the outcome. Leaves the runtime running, with no listener of its own.
 */
export async function followLocalRun(
  runtime: LocalRuntime,
  entry: PipelineEntry,
  config: Record<string, unknown>,
  options: Pick<LocalRunOptions, 'name' | 'verbose' | 'beforeStart'>,
  io: Io,
): Promise<ExecutionRecord> {
  const maps = new Map<string, { done: number; failed: number }>();
  let executionArn: string | undefined;
  let lastStep = '';
  // The state this run was in when it ended: the last one it entered.
  let lastState: string | undefined;
  const onStateEntered = ({ executionArn: arn, state }: { executionArn: string; state: string }) => {
    if (arn === executionArn) lastState = state;
    const step = state.split(': ')[0]!;
    if (options.verbose) io.out(`  > ${state}`);
    else if (step !== lastStep) io.out(`  > ${step}`);
    lastStep = step;
  };
  const onMapItem = ({ state, ok }: { state: string; ok: boolean }) => {
    if (state.endsWith(': Check outputs')) return; // the cache's own existence checks
    const m = maps.get(state) ?? { done: 0, failed: 0 };
    if (ok) m.done++;
    else m.failed++;
    maps.set(state, m);
    io.out(`    ${state}: ${m.done} done${m.failed ? `, ${m.failed} failed` : ''}`);
  };
  const onJobProgress = ({ jobName, progress }: { jobName: string; progress: unknown }) => io.out(`    [${jobName}] ${JSON.stringify(progress)}`);
  const onEmail = ({ file }: { file: string }) => {
    for (const link of linksInEml(readFileSync(file, 'utf8'))) io.out(`  approval needed: open ${link}`);
    io.out(`  (email saved to ${file})`);
  };
  // Other runs that end meanwhile (a checkpoint's upload starting an evaluation, a StartExecution
  // through the loopback API) are reported with who started them.
  const onExecutionDone = (done: ExecutionRecord) => {
    if (done.executionArn === executionArn) return;
    const outcome = done.status === 'SUCCEEDED' ? '' : ` (${errorText(done.error, done.cause)})`;
    io.out(`  ${startedBy(done.input)}: ${done.pipeline} ${done.name} ${done.status}${outcome}`);
  };
  const listeners = { stateEntered: onStateEntered, mapItem: onMapItem, jobProgress: onJobProgress, email: onEmail, executionDone: onExecutionDone };
  for (const [event, listener] of Object.entries(listeners)) runtime.on(event, listener);
  try {
    if (options.beforeStart) await options.beforeStart(runtime.resources.buckets[0]!);
    const execution = runtime.startExecution(entry.name, { config }, { name: options.name });
    executionArn = execution.executionArn;
    io.out(`started ${execution.executionArn}`);
    const record = await execution.done;
    await runtime.idle();
    const seconds = (Date.parse(record.stopDate!) - Date.parse(record.startDate)) / 1000;
    io.out(
      `${record.status} in ${seconds.toFixed(2)} s: ${record.stats.statesEntered} states, ` +
        `${record.stats.lambdaInvocations} Lambda invocations, ${record.stats.batchJobs} Batch jobs, ` +
        `largest state ${(record.stats.largestState.bytes / 1024).toFixed(1)} KiB of 256 (${record.stats.largestState.name})`,
    );
    if (record.status === 'SUCCEEDED') {
      io.out(JSON.stringify(record.output, null, 2).slice(0, 4000));
      if (record.runCost) io.out(record.runCost.line);
      if (record.runCost?.reportUri) io.out(`report with that line: ${record.runCost.reportUri}`);
      if (record.runCost?.error) io.err(`note: ${record.runCost.error}`);
      if (entry.afterRun) io.out(entry.afterRun);
    } else {
      for (const line of failureLines({ ...record, state: lastState }, options.verbose ?? false)) io.err(line);
    }
    return record;
  } finally {
    for (const [event, listener] of Object.entries(listeners)) runtime.off(event, listener);
  }
}
