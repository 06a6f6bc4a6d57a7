/** `frontier run` on the embedded runtime: start, show progress, print the outcome. */
import { readFileSync } from 'node:fs';
import { LocalRuntime, type ExecutionRecord } from '../local/runtime.ts';
import { linksInEml } from '../local/outbox.ts';
import type { PipelineEntry } from '../registry.ts';
import type { Io } from './output.ts';

export interface LocalRunOptions {
  readonly dataDir?: string;
  readonly portBase?: number;
  readonly name?: string;
  /** Print every state entered (default: only steps and Map progress). */
  readonly verbose?: boolean;
  /** What to put in the platform bucket before the run starts (e.g. reward files' sources). */
  readonly beforeStart?: (bucket: string) => Promise<void>;
}

export async function runLocal(entry: PipelineEntry, config: Record<string, unknown>, options: LocalRunOptions, io: Io): Promise<ExecutionRecord> {
  const t0 = performance.now();
  const runtime = await LocalRuntime.start({ dataDir: options.dataDir, portBase: options.portBase });
  try {
    io.out(`local runtime ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (data in ${runtime.dataDir})`);
    const maps = new Map<string, { done: number; failed: number }>();
    let lastStep = '';
    runtime.on('stateEntered', ({ state }: { state: string }) => {
      const step = state.split(': ')[0]!;
      if (options.verbose) io.out(`  > ${state}`);
      else if (step !== lastStep) io.out(`  > ${step}`);
      lastStep = step;
    });
    runtime.on('mapItem', ({ state, ok }: { state: string; ok: boolean }) => {
      if (state.endsWith(': Check outputs')) return; // the cache's own existence checks
      const m = maps.get(state) ?? { done: 0, failed: 0 };
      if (ok) m.done++;
      else m.failed++;
      maps.set(state, m);
      io.out(`    ${state}: ${m.done} done${m.failed ? `, ${m.failed} failed` : ''}`);
    });
    runtime.on('jobProgress', ({ jobName, progress }: { jobName: string; progress: unknown }) => io.out(`    [${jobName}] ${JSON.stringify(progress)}`));
    runtime.on('email', ({ file }: { file: string }) => {
      for (const link of linksInEml(readFileSync(file, 'utf8'))) io.out(`  approval needed: open ${link}`);
      io.out(`  (email saved to ${file})`);
    });
    if (options.beforeStart) await options.beforeStart(runtime.resources.buckets[0]!);
    const execution = runtime.startExecution(entry.name, { config }, { name: options.name });
    io.out(`started ${execution.executionArn}`);
    // Runs this one starts through uploads (checkpoints starting evaluations) are reported too.
    runtime.on('executionDone', (done: ExecutionRecord) => {
      if (done.executionArn !== execution.executionArn)
        io.out(`  started by an upload: ${done.pipeline} ${done.name} ${done.status}${done.status === 'SUCCEEDED' ? '' : ` (${done.error}: ${done.cause})`}`);
    });
    const record = await execution.done;
    await runtime.idle();
    const seconds = (Date.parse(record.stopDate!) - Date.parse(record.startDate)) / 1000;
    io.out(
      `${record.status} in ${seconds.toFixed(2)} s: ${record.stats.statesEntered} states, ` +
        `${record.stats.lambdaInvocations} Lambda invocations, ${record.stats.batchJobs} Batch jobs, ` +
        `largest state ${(record.stats.largestState.bytes / 1024).toFixed(1)} KiB of 256 (${record.stats.largestState.name})`,
    );
    if (record.status === 'SUCCEEDED') io.out(JSON.stringify(record.output, null, 2).slice(0, 4000));
    if (record.status === 'SUCCEEDED' && entry.afterRun) io.out(entry.afterRun);
    else io.err(`${record.error}: ${record.cause}`);
    return record;
  } finally {
    await runtime.stop();
  }
}
