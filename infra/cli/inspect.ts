/** The CLI's read commands: runs, artifacts (with lineage), approvals. */
import { DescribeExecutionCommand, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { getArtifactVersion, lineageOf, listArtifactNames, listArtifactVersions, type LineageNode } from '#shared/artifacts.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { BatchClient } from '@aws-sdk/client-batch';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { type CacheSaving, costOf, formatUsd, type RunCost, type RunUsage, type StepUsage, usageOfStats, usageOfStep } from '#shared/cost/usage.ts';
import { MissingDeploymentError } from '#shared/errors.ts';
import { PIPELINES } from '../registry.ts';
import { awsCacheSaving, awsRunUsage, type AwsUsageClients, jobDefinitionLookup } from '#shared/cost/history-usage.ts';
import { pipelineNamed } from './config.ts';
import { jobDefinitionsOf, planOptionsOf, planWithRange, type RunPlan } from './plan.ts';
import { ConfigError } from '#shared/errors.ts';
import { listExecutionRecords } from '../local/runtime.ts';
import { localRunCost } from '../local/run-report.ts';
import { runCostLine } from '#shared/cost/run-report.ts';
import type { PipelineEntry } from '../registry.ts';
import { table, type Io } from './output.ts';
import { deployedStateMachine } from './run-aws.ts';

export function listLocalRuns(dataDir: string, pipeline: string | undefined, io: Io): void {
  const runs = listExecutionRecords(dataDir).filter((r) => !pipeline || r.pipeline === pipeline);
  if (!runs.length) return io.out('no local runs yet');
  for (const line of table(
    runs.map((r) => ({
      name: r.name,
      pipeline: r.pipeline,
      status: r.status,
      started: r.startDate,
      seconds: r.stopDate ? ((Date.parse(r.stopDate) - Date.parse(r.startDate)) / 1000).toFixed(2) : '',
      lambdas: r.stats.lambdaInvocations,
      jobs: r.stats.batchJobs,
      error: r.error ?? '',
    })),
    ['name', 'pipeline', 'status', 'started', 'seconds', 'lambdas', 'jobs', 'error'],
  ))
    io.out(line);
}

/**
 * One local run's figures and their cost: state transitions, Lambda requests and billed
 * duration, Batch job seconds by platform and size, priced with the dated table.
 */
export function showLocalRun(dataDir: string, run: string, io: Io): void {
  const records = listExecutionRecords(dataDir);
  const record = records.find((r) => r.name === run || r.executionArn === run);
  if (!record) throw new ConfigError('RUN', run, `no local run of that name or ARN in ${dataDir} (\`frontier runs\` lists them)`);
  const usage = usageOfStats(record.stats);
  const cost = costOf(usage);
  const seconds = record.stopDate ? ((Date.parse(record.stopDate) - Date.parse(record.startDate)) / 1000).toFixed(2) : 'running';
  io.out(`${record.name} (${record.pipeline}): ${record.status}, ${seconds} s`);
  io.out(`state transitions: ${usage.transitions}; Map items: ${record.stats.mapItemsDone} done, ${record.stats.mapItemsFailed} failed`);
  io.out(`largest state: ${record.stats.largestState.bytes} bytes (${record.stats.largestState.name || '-'}; limit 262,144)`);
  printUsage(usage, io);
  const planned = planOfRun(record.pipeline, record.input);
  io.out(planned.line);
  printSteps(record.stats.steps ?? {}, planned.plan, io);
  printCost(cost, io);
  const byArn = new Map(records.map((r) => [r.executionArn, r]));
  const { saving, line } = localRunCost(record, (arn) => byArn.get(arn));
  io.out(savingLine(saving));
  io.out(line);
  if (record.runCost?.reportUri) io.out(`report with this line: ${record.runCost.reportUri}`);
  if (record.runCost?.error) io.out(`note: ${record.runCost.error}`);
}

export { parentExecutionArn } from '../local/run-report.ts';

export async function listAwsRuns(entry: PipelineEntry, io: Io, sfn = new SFNClient({})): Promise<void> {
  const stateMachineArn = await deployedStateMachine(entry);
  const out = await sfn.send(new ListExecutionsCommand({ stateMachineArn, maxResults: 50 }));
  for (const line of table(
    (out.executions ?? []).map((e) => ({ name: e.name, status: e.status, started: e.startDate?.toISOString(), stopped: e.stopDate?.toISOString() })),
    ['name', 'status', 'started', 'stopped'],
  ))
    io.out(line);
}

/** `name` or `name@version`. */
export function parseArtifactRef(ref: string): { name: string; version?: number } {
  const [name, version] = ref.split('@') as [string, string | undefined];
  if (version === undefined) return { name };
  const n = Number(version);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError('artifact version', version, 'must be a positive integer, as in probe-summary@2');
  return { name, version: n };
}

export async function listArtifacts(where: { table: string; bucket: string }, name: string | undefined, io: Io): Promise<void> {
  if (name) {
    const versions = await listArtifactVersions(where, name);
    if (!versions.length) return io.out(`artifact ${name} has no versions`);
    for (const line of table(
      versions.map((v) => ({ version: v.version, created: v.createdAt, sha256: v.sha256.slice(0, 16), execution: v.executionId.split(':').pop() })),
      ['version', 'created', 'sha256', 'execution'],
    ))
      io.out(line);
    return;
  }
  const names = await listArtifactNames(where);
  if (!names.length) return io.out('no artifacts yet');
  for (const line of table(names, ['name', 'latestVersion', 'updatedAt'])) io.out(line);
}

export async function showArtifact(where: { table: string; bucket: string }, ref: string, io: Io): Promise<void> {
  const { name, version } = parseArtifactRef(ref);
  const artifact = await getArtifactVersion(where, name, version);
  io.out(`${artifact.name}@${artifact.version}  ${artifact.uri}`);
  io.out(`  sha256     ${artifact.sha256}`);
  io.out(`  created    ${artifact.createdAt} by ${artifact.executionId}`);
  io.out(`  pipeline   ${artifact.pipeline}`);
  if (artifact.cardUri) io.out(`  card       ${artifact.cardUri}`);
  io.out(`  metrics    ${JSON.stringify(artifact.metrics)}`);
  io.out('  files');
  for (const f of artifact.files) io.out(`    ${f.name}  ${f.bytes} B  ${f.sha256.slice(0, 16)}  ${f.uri}`);
  io.out('  lineage');
  const tree = await lineageOf(where, artifact.name, artifact.version);
  const print = (node: LineageNode, depth: number) => {
    io.out(`    ${'  '.repeat(depth)}${node.name}@${node.version}  (made by ${node.executionId})`);
    for (const parent of node.parents) print(parent, depth + 1);
  };
  print(tree, 0);
}

export async function listApprovals(where: { table: string }, io: Io): Promise<void> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await dynamoClient().send(
      new ScanCommand({
        TableName: where.table,
        FilterExpression: 'begins_with(pk, :p)',
        ExpressionAttributeValues: { ':p': 'APPROVAL#' },
        // The task token is never read out of the table by anything but the approval API.
        ProjectionExpression: 'pk, pipeline, title, #s, createdAt, expiresAtIso, decidedAt',
        ExpressionAttributeNames: { '#s': 'state' },
        ExclusiveStartKey: start,
      }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  if (!items.length) return io.out('no approvals yet');
  const now = new Date().toISOString();
  const rows = items
    .map((i) => ({
      id: String(i.pk).slice('APPROVAL#'.length),
      pipeline: i.pipeline,
      title: i.title,
      // A pending request past its expiry can no longer be decided.
      state: i.state === 'PENDING' && String(i.expiresAtIso) < now ? 'EXPIRED' : i.state,
      created: i.createdAt,
      expires: i.expiresAtIso,
      decided: i.decidedAt ?? '',
    }))
    .sort((a, b) => (String(a.created) < String(b.created) ? 1 : -1));
  for (const line of table(rows, ['id', 'pipeline', 'title', 'state', 'created', 'expires', 'decided'])) io.out(line);
}

/**
 * The run's figures step by step beside its plan's: transitions, Lambda invocations and Batch jobs
 * (actual / planned for a cold run; a cached step or a failed item makes them differ), the step's
 * job seconds and its cost at AWS's prices.
 */
function printSteps(steps: Readonly<Record<string, StepUsage>>, plan: RunPlan | undefined, io: Io): void {
  const names = [...new Set([...Object.keys(plan?.counts.steps ?? {}), ...Object.keys(steps)])];
  const pair = (actual: number | undefined, planned: number | undefined) => `${actual ?? 0}${plan ? ` / ${planned ?? 0}` : ''}`;
  io.out(`by step${plan ? ' (actual / planned for a cold run)' : ''}:`);
  for (const line of table(
    names.map((name) => {
      const actual = steps[name];
      const planned = plan?.counts.steps[name];
      const cost = actual ? costOf(usageOfStep(actual)) : undefined;
      return {
        step: name || '(pipeline)',
        transitions: pair(actual?.transitions, planned?.transitions),
        Lambda: pair(actual?.lambdaInvocations, planned?.lambdaInvocations),
        jobs: pair(actual?.batch.length, planned?.batchJobs),
        'job seconds': (actual?.batch ?? []).reduce((n, j) => n + j.seconds, 0).toFixed(1),
        'cache stores': actual?.stores ?? 0,
        cost: cost ? formatUsd(cost.lowUsd, cost.highUsd) : '$0',
      };
    }),
    ['step', 'transitions', 'Lambda', 'jobs', 'job seconds', 'cache stores', 'cost'],
  ))
    io.out(`  ${line}`);
}

/** The plan of the run's config beside its actuals: what a cold run of it plans (its line, and the plan), or why there is none. */
function planOfRun(pipeline: string, input: unknown): { line: string; plan?: RunPlan } {
  const config = (input as { config?: Record<string, unknown> } | undefined)?.config;
  if (!config) return { line: 'plan: none (the run was started without a config: an upload, whose trigger fills it in)' };
  try {
    const entry = pipelineNamed(pipeline);
    const options = planOptionsOf(entry, config);
    const { plan, low } = planWithRange(entry, config, options);
    const assumed = [
      options.registeredBenchmarks !== undefined ? `${options.registeredBenchmarks} registered benchmarks, the most a run takes` : '',
      options.listedSources !== undefined ? `${options.listedSources} listed sources, the most a list holds` : '',
    ].filter(Boolean);
    const c = plan.counts;
    const range = (l: number | undefined, h: number) => (l === undefined || l === h ? `${h}` : `${l}-${h}`);
    return {
      plan,
      line: `plan of a cold run of this config${low ? ` (${low.what})` : ''}${assumed.length ? ` (planned for ${assumed.join(', ')})` : ''}: ${range(low?.plan.counts.transitions, c.transitions)} state transitions, ${range(low?.plan.counts.lambdaInvocations, c.lambdaInvocations)} Lambda invocations, ${range(low?.plan.counts.batchJobs, c.batchJobs)} Batch jobs (a cached step or a failed item makes the actuals differ)`,
    };
  } catch (error) {
    if (error instanceof ConfigError) return { line: `plan: none (${error.message})` };
    throw error;
  }
}

/** A run's counters, as `runs show` prints them (local and AWS alike). */
function printUsage(usage: RunUsage, io: Io): void {
  io.out(`Lambda: ${usage.lambda.invocations} invocations, ${usage.lambda.billedMs} ms billed, ${usage.lambda.gbSeconds.toFixed(3)} GB-s`);
  io.out(`Batch: ${usage.batch.length} jobs, ${usage.batch.reduce((a, j) => a + j.seconds, 0).toFixed(1)} s`);
  for (const c of usage.claude)
    io.out(
      `Claude ${c.model}: ${c.inputTokens} input, ${c.outputTokens} output, ${c.cacheReadTokens} cache-read and ${c.cacheWriteTokens} cache-write tokens (the API's usage fields)`,
    );
}

function printCost(cost: RunCost, io: Io): void {
  for (const line of table(
    cost.lines.map((l) => ({
      item: l.item,
      quantity: Number.isInteger(l.quantity) ? l.quantity : l.quantity.toFixed(3),
      unit: l.unit,
      cost: formatUsd(l.lowUsd, l.highUsd),
    })),
    ['item', 'quantity', 'unit', 'cost'],
  ))
    io.out(line);
  for (const u of cost.unpriced) io.out(`not priced: ${u}`);
  io.out(`cost on AWS at these figures: ${formatUsd(cost.lowUsd, cost.highUsd)} (${cost.region} prices of ${cost.pricesAsOf}; free tiers not applied)`);
}

/**
 * `runs show RUN --target aws`: a run on AWS (RUN: its execution ARN), read from its history, its
 * Distributed Map children's and the Batch job descriptions (shared/cost/history-usage.ts). Its pipeline is the
 * deployed stack whose state machine ran it.
 */
export async function showAwsRun(run: string, io: Io, given?: AwsUsageClients & { readonly cfn: CloudFormationClient }): Promise<void> {
  const arn = /^arn:aws[\w-]*:states:([\w-]+):\d{12}:execution:[^:]+:[^:]+$/.exec(run);
  if (!arn) throw new ConfigError('RUN', run, 'on AWS, name the run by its execution ARN (arn:aws:states:<region>:<account>:execution:<state machine>:<name>)');
  // The run's own region, whatever the profile's default.
  const region = arn[1]!;
  const clients = given ?? {
    sfn: new SFNClient({ region }),
    batch: new BatchClient({ region }),
    lambda: new LambdaClient({ region }),
    cfn: new CloudFormationClient({ region }),
  };
  const described = await clients.sfn.send(new DescribeExecutionCommand({ executionArn: run }));
  let entry: PipelineEntry | undefined;
  for (const candidate of PIPELINES) {
    const arn = await deployedStateMachine(candidate, clients.cfn).catch((error: Error) => {
      if (error instanceof MissingDeploymentError) return undefined;
      throw error;
    });
    if (arn === described.stateMachineArn) {
      entry = candidate;
      break;
    }
  }
  if (!entry) throw new ConfigError('RUN', run, `its state machine (${described.stateMachineArn}) is not one of a deployed pipeline stack`);
  const definitions = [...jobDefinitionsOf(entry).values()];
  const lookup = jobDefinitionLookup(
    definitions.map((d) => ({ name: d.name, ...(d.resources?.instanceType ? { instanceType: d.resources.instanceType } : {}) })),
  );
  const read = await awsRunUsage(run, clients, lookup);
  const seconds = described.stopDate && described.startDate ? ((described.stopDate.getTime() - described.startDate.getTime()) / 1000).toFixed(2) : 'running';
  io.out(`${described.name} (${entry.name}, on AWS): ${described.status}, ${seconds} s`);
  io.out(`state transitions: ${read.usage.transitions}${read.children ? ` (${read.children} Distributed Map children included)` : ''}`);
  printUsage(read.usage, io);
  const planned = planOfRun(entry.name, described.input ? JSON.parse(described.input) : undefined);
  io.out(planned.line);
  printSteps(read.steps, planned.plan, io);
  for (const note of read.notes) io.out(`note: ${note}`);
  printCost(costOf(read.usage), io);
  const { saving, notes } = await awsCacheSaving(read.cacheHits, clients, lookup);
  for (const note of notes) io.out(`note: ${note}`);
  io.out(savingLine(saving));
  io.out(runCostLine(costOf(read.usage), saving));
}

/** The cache's line of `runs show`: the hits and what they saved, priced from the runs that computed them. */
function savingLine(saving: CacheSaving): string {
  return `cache: ${saving.hits} hits${saving.hits ? `, which saved recomputing ${formatUsd(saving.lowUsd, saving.highUsd)} (those steps' cost in the runs that computed them; this run still paid its own states, above${saving.priced < saving.hits ? `; ${saving.hits - saving.priced} from runs not on record` : ''})` : ''}`;
}
