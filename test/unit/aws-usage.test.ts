/**
 * `runs show --target aws`: a run's usage read back from AWS (the execution history, its
 * Distributed Map children's, the Batch job descriptions, the functions' memory sizes), priced as
 * a local run's counters are. AWS is mocked at the SDK (aws-sdk-client-mock); the reading and the
 * pricing are ours.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BatchClient, DescribeJobsCommand } from '@aws-sdk/client-batch';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, type HistoryEvent, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { pipelineNamed } from '#infra/cli/config.ts';
import { awsCacheSaving, awsRunUsage } from '#shared/cost/history-usage.ts';
import { showAwsRun } from '#infra/cli/inspect.ts';
import { jobDefinitionsOf } from '#infra/cli/plan.ts';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';
import { costOf, usageOfStep } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';

const REGION = 'us-east-1';
const MACHINE = `arn:aws:states:${REGION}:123456789012:stateMachine:StateMachine2E01A3A5-abc`;
const RUN = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:run-1`;
const MAP_RUN = `arn:aws:states:${REGION}:123456789012:mapRun:StateMachine2E01A3A5-abc/recheck:run-1`;
const CHILD = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc/recheck:child-0`;
const THROTTLED = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc/recheck:child-1`;
const FN = `arn:aws:lambda:${REGION}:123456789012:function:Probe-Prepare`;
const T0 = Date.parse('2026-12-01T10:00:00Z');
const at = (ms: number) => new Date(T0 + ms);
const usage = { model: DEFAULT_CLAUDE_MODEL, inputTokens: 1200, outputTokens: 300, cacheReadTokens: 4000, cacheWriteTokens: 0 };

/**
 * A Task state's events from id `first` on: its StateEntered, then each event `[type, ms after
 * entering, details]`, each linked to the one before (previousEventId), as a history links them.
 */
function taskEvents(first: number, state: string, events: readonly [type: string, ms: number, details?: Partial<HistoryEvent>][]): HistoryEvent[] {
  const entered: HistoryEvent = { id: first, timestamp: at(first * 10), type: 'TaskStateEntered', stateEnteredEventDetails: { name: state } };
  return [
    entered,
    ...events.map(
      ([type, ms, details], i) => ({ id: first + 1 + i, previousEventId: first + i, timestamp: at(first * 10 + ms), type, ...details }) as HistoryEvent,
    ),
  ];
}

const task = (resourceType: string, resource: string) => ({ resourceType, resource });

/** A Lambda invoked through the optimized integration, `ms` long, its response `payload`. */
const lambdaTask = (first: number, state: string, ms: number, payload: unknown) =>
  taskEvents(first, state, [
    [
      'TaskScheduled',
      0,
      { taskScheduledEventDetails: { ...task('lambda', 'invoke'), region: REGION, parameters: JSON.stringify({ FunctionName: FN, Payload: {} }) } },
    ],
    ['TaskStarted', 5, { taskStartedEventDetails: task('lambda', 'invoke') }],
    ['TaskSucceeded', 5 + ms, { taskSucceededEventDetails: { ...task('lambda', 'invoke'), output: JSON.stringify({ StatusCode: 200, Payload: payload }) } }],
  ]);

/** A Lambda task failed `failures` times (5 ms each) and retried, then answered in `ms`. */
const retriedLambda = (first: number, state: string, failures: number, ms: number, payload: unknown) => {
  const scheduled: [string, number, Partial<HistoryEvent>] = [
    'TaskScheduled',
    0,
    { taskScheduledEventDetails: { ...task('lambda', 'invoke'), region: REGION, parameters: JSON.stringify({ FunctionName: FN, Payload: {} }) } },
  ];
  const attempts = Array.from({ length: failures }, (_, k): [string, number, Partial<HistoryEvent>][] => [
    [scheduled[0], 100 * k, scheduled[2]],
    ['TaskStarted', 100 * k + 1, { taskStartedEventDetails: task('lambda', 'invoke') }],
    ['TaskFailed', 100 * k + 6, { taskFailedEventDetails: { ...task('lambda', 'invoke'), error: 'Lambda.TooManyRequestsException' } }],
  ]).flat();
  return taskEvents(first, state, [
    ...attempts,
    [scheduled[0], 100 * failures, scheduled[2]],
    ['TaskStarted', 100 * failures + 1, { taskStartedEventDetails: task('lambda', 'invoke') }],
    [
      'TaskSucceeded',
      100 * failures + 1 + ms,
      { taskSucceededEventDetails: { ...task('lambda', 'invoke'), output: JSON.stringify({ StatusCode: 200, Payload: payload }) } },
    ],
  ]);
};

/** A Lambda as the Task's resource (what `payloadResponseOnly` makes): LambdaFunction* events. */
const directLambda = (first: number, state: string, ms: number, response: unknown) =>
  taskEvents(first, state, [
    ['LambdaFunctionScheduled', 0, { lambdaFunctionScheduledEventDetails: { resource: FN } }],
    ['LambdaFunctionStarted', 3],
    ['LambdaFunctionSucceeded', 3 + ms, { lambdaFunctionSucceededEventDetails: { output: JSON.stringify(response) } }],
  ]);

/** An approval gate: the invoke behind a task token returns in `ms`, the approver answers an hour later. */
const tokenTask = (first: number, ms: number) =>
  taskEvents(first, 'approve: Wait for approval', [
    [
      'TaskScheduled',
      0,
      { taskScheduledEventDetails: { ...task('lambda', 'invoke.waitForTaskToken'), region: REGION, parameters: JSON.stringify({ FunctionName: FN }) } },
    ],
    ['TaskStarted', 2, { taskStartedEventDetails: task('lambda', 'invoke.waitForTaskToken') }],
    [
      'TaskSubmitted',
      2 + ms,
      { taskSubmittedEventDetails: { ...task('lambda', 'invoke.waitForTaskToken'), output: JSON.stringify({ StatusCode: 200, Payload: { sent: true } }) } },
    ],
    ['TaskSucceeded', 3_600_000, { taskSucceededEventDetails: { ...task('lambda', 'invoke.waitForTaskToken'), output: JSON.stringify({ approved: true }) } }],
  ]);

/** A Batch job run to its end: its JobId in TaskSubmitted, as submitJob.sync records it. */
const batchTask = (first: number, jobId: string) =>
  taskEvents(first, 'sum: Run job', [
    ['TaskScheduled', 0, { taskScheduledEventDetails: { ...task('batch', 'submitJob.sync'), region: REGION, parameters: '{}' } }],
    ['TaskStarted', 1, { taskStartedEventDetails: task('batch', 'submitJob.sync') }],
    ['TaskSubmitted', 2, { taskSubmittedEventDetails: { ...task('batch', 'submitJob.sync'), output: JSON.stringify({ JobId: jobId, JobName: 'sum' }) } }],
    ['TaskSucceeded', 95_000, { taskSucceededEventDetails: { ...task('batch', 'submitJob.sync'), output: JSON.stringify({ JobId: jobId }) } }],
  ]);

describe('a run on AWS, read back', () => {
  const sfn = mockClient(SFNClient);
  const batch = mockClient(BatchClient);
  const lambda = mockClient(LambdaClient);
  const cfn = mockClient(CloudFormationClient);
  const sumDefinition = [...jobDefinitionsOf(pipelineNamed('probe')).values()][0]!;

  beforeEach(() => {
    for (const m of [sfn, batch, lambda, cfn]) m.reset();
    const parent: HistoryEvent[] = [
      { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
      ...lambdaTask(2, 'prepare: Invoke', 250, { items: [1, 2], claudeUsage: [usage] }),
      ...batchTask(10, 'job-fargate'),
      ...batchTask(20, 'job-gone'),
      { id: 30, timestamp: at(300_000), type: 'MapStateEntered', stateEnteredEventDetails: { name: 'recheck: Items' } },
      { id: 31, previousEventId: 30, timestamp: at(300_001), type: 'MapRunStarted', mapRunStartedEventDetails: { mapRunArn: MAP_RUN } },
      ...directLambda(40, 'report: Invoke', 70, { reportUri: 's3://b/r.html', claudeUsage: [usage] }),
      ...tokenTask(50, 30),
      { id: 60, timestamp: at(400_000), type: 'SucceedStateEntered', stateEnteredEventDetails: { name: 'Done' } },
      { id: 61, timestamp: at(400_001), type: 'ExecutionSucceeded' },
    ];
    const child: HistoryEvent[] = [{ id: 1, timestamp: at(0), type: 'ExecutionStarted' }, ...lambdaTask(2, 'recheck-item: Invoke', 40, { square: 4 })];
    // Two pages for the parent, as GetExecutionHistory pages a long history.
    sfn
      .on(GetExecutionHistoryCommand, { executionArn: RUN, nextToken: undefined })
      .resolves({ events: parent.slice(0, 8), nextToken: 'page-2' })
      .on(GetExecutionHistoryCommand, { executionArn: RUN, nextToken: 'page-2' })
      .resolves({ events: parent.slice(8) })
      .on(GetExecutionHistoryCommand, { executionArn: CHILD })
      .resolves({ events: child })
      .on(GetExecutionHistoryCommand, { executionArn: THROTTLED })
      .rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }))
      .on(ListExecutionsCommand, { mapRunArn: MAP_RUN })
      .resolves({
        executions: [
          { executionArn: CHILD, stateMachineArn: MACHINE, name: 'child-0', status: 'SUCCEEDED', startDate: at(0) },
          { executionArn: THROTTLED, stateMachineArn: MACHINE, name: 'child-1', status: 'SUCCEEDED', startDate: at(0) },
        ],
      })
      .on(DescribeExecutionCommand, { executionArn: RUN })
      .resolves({
        executionArn: RUN,
        stateMachineArn: MACHINE,
        name: 'run-1',
        status: 'SUCCEEDED',
        startDate: at(0),
        stopDate: at(400_001),
        input: JSON.stringify({ config: { items: [1, 2] } }),
      });
    lambda.on(GetFunctionConfigurationCommand, { FunctionName: FN }).resolves({ MemorySize: 512 });
    batch.on(DescribeJobsCommand).resolves({
      jobs: [
        {
          jobId: 'job-fargate',
          jobName: 'sum',
          jobQueue: 'cpu',
          status: 'SUCCEEDED',
          startedAt: T0 + 1000,
          jobDefinition: `arn:aws:batch:${REGION}:123456789012:job-definition/${sumDefinition.name}-k3b9x:4`,
          platformCapabilities: ['FARGATE'],
          // A retried job: both attempts are billed.
          attempts: [
            { startedAt: T0 + 1000, stoppedAt: T0 + 31_000 },
            { startedAt: T0 + 40_000, stoppedAt: T0 + 100_000 },
          ],
          container: {
            resourceRequirements: [
              { type: 'VCPU', value: '1' },
              { type: 'MEMORY', value: '2048' },
            ],
          },
        },
      ],
    });
    cfn.on(DescribeStacksCommand).callsFake((input: { StackName: string }) => {
      if (input.StackName !== pipelineNamed('probe').stackId) {
        throw Object.assign(new Error(`Stack with id ${input.StackName} does not exist`), { name: 'ValidationError' });
      }
      return {
        Stacks: [
          {
            StackName: input.StackName,
            CreationTime: at(0),
            StackStatus: 'CREATE_COMPLETE',
            Outputs: [{ OutputKey: 'StateMachineArn', OutputValue: MACHINE }],
          },
        ],
      };
    });
  });
  afterEach(() => {
    for (const m of [sfn, batch, lambda, cfn]) m.reset();
  });

  const clients = () => ({
    sfn: new SFNClient({ region: REGION }),
    batch: new BatchClient({ region: REGION }),
    lambda: new LambdaClient({ region: REGION }),
    cfn: new CloudFormationClient({ region: REGION }),
  });

  it('counts the transitions, Lambda time, Batch attempts and Claude tokens, children included', async () => {
    const read = await awsRunUsage(RUN, clients(), (name) => (name.startsWith(`${sumDefinition.name}-`) ? { name: sumDefinition.name } : undefined));
    const { usage: u } = read;
    // A child that cannot be read (throttled past the SDK's retries) is a note; the rest is priced.
    assert.equal(read.children, 2);
    // prepare, two jobs, the Map, report, the approval, the Succeed state; and the child's one state.
    assert.equal(u.transitions, 8);
    // The approval's invoke is its 30 ms, not the hour its approver took.
    assert.equal(u.lambda.invocations, 4);
    assert.equal(u.lambda.billedMs, 250 + 40 + 70 + 30);
    assert.ok(Math.abs(u.lambda.gbSeconds - 0.39 * 0.5) < 1e-12, String(u.lambda.gbSeconds));
    assert.deepEqual(u.batch, [{ job: sumDefinition.name, platform: 'FARGATE', vcpus: 1, memoryMiB: 2048, gpus: 0, seconds: 90 }]);
    // prepare's and report's responses, summed by model.
    assert.deepEqual(u.claude, [
      { ...usage, inputTokens: 2 * usage.inputTokens, outputTokens: 2 * usage.outputTokens, cacheReadTokens: 2 * usage.cacheReadTokens },
    ]);
    assert.deepEqual(read.notes.toSorted(), [
      "Batch job job-gone: not found (Batch keeps a job's description for 7 days after it ends); not priced",
      `child execution ${THROTTLED}: not read (ThrottlingException: Rate exceeded); not priced`,
    ]);
    // Priced as a local run is: the transitions, the Lambda, the Fargate job's billed seconds, the tokens.
    const cost = costOf(u);
    assert.ok(cost.lines.some((l) => l.item.startsWith('Claude ') && l.lowUsd > 0));
    assert.ok(cost.lowUsd > 0 && cost.lowUsd <= cost.highUsd);
  });

  it('runs show --target aws finds the pipeline by its state machine and prints the run beside its plan', async () => {
    const lines: string[] = [];
    await showAwsRun(RUN, { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) }, clients());
    const text = lines.join('\n');
    assert.match(text, /^run-1 \(probe, on AWS\): SUCCEEDED, 400\.00 s/);
    assert.match(text, /state transitions: 8 \(2 Distributed Map children included\)/);
    assert.match(text, /Lambda: 4 invocations, 390 ms billed/);
    assert.match(text, /Batch: 1 jobs, 90\.0 s/);
    assert.match(text, new RegExp(`Claude ${DEFAULT_CLAUDE_MODEL}: 2400 input, 600 output, 8000 cache-read`));
    assert.match(text, /plan of a cold run of this config: \d+ state transitions/);
    assert.match(text, /^by step \(actual \/ planned for a cold run\):$/m);
    assert.match(text, /note: Batch job job-gone: not found/);
    assert.match(text, /cost on AWS at these figures: \$/);
    assert.match(text, /^cache: 0 hits$/m);
  });

  it("prices the cache's hits from the histories of the runs that computed them, a run not on record noted", async () => {
    const hitRun = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:rerun`;
    const cold = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:cold`;
    const gone = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:long-ago`;
    const stale = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:last-month`;
    const restore = (id: number, computedBy: string): HistoryEvent => ({
      id,
      timestamp: at(id),
      type: 'PassStateEntered',
      stateEnteredEventDetails: { name: 'sum: Restore', input: JSON.stringify({ _step: { lookup: { Item: { executionId: { S: computedBy } } } } }) },
    });
    sfn
      .on(GetExecutionHistoryCommand, { executionArn: hitRun })
      .resolves({ events: [{ id: 1, timestamp: at(0), type: 'ExecutionStarted' }, restore(2, cold), restore(3, gone), restore(4, stale)] })
      // The cold run: the sum step's check (throttled three times, then answered: each attempt's
      // events chain through the ones before), its job, its store; and a step that no hit restores.
      .on(GetExecutionHistoryCommand, { executionArn: cold })
      .resolves({
        events: [
          { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
          ...retriedLambda(2, 'sum: Check cache', 3, 20, { hit: false }),
          ...batchTask(20, 'job-fargate'),
          { id: 30, timestamp: at(300), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'sum: Cache store' } },
          ...lambdaTask(40, 'report: Invoke', 900, { claudeUsage: [usage] }),
        ],
      })
      // A run whose job Batch no longer describes: its step's cost, and so the saving, is not known.
      .on(GetExecutionHistoryCommand, { executionArn: stale })
      .resolves({
        events: [
          { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
          ...batchTask(2, 'job-gone'),
          { id: 10, timestamp: at(100), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'sum: Cache store' } },
        ],
      })
      .on(GetExecutionHistoryCommand, { executionArn: gone })
      .rejects(Object.assign(new Error('Execution Does Not Exist'), { name: 'ExecutionDoesNotExist' }));
    const lookup = (name: string) => (name.startsWith(`${sumDefinition.name}-`) ? { name: sumDefinition.name } : undefined);
    const read = await awsRunUsage(hitRun, clients(), lookup);
    assert.deepEqual(read.cacheHits, [
      { step: 'sum', executionArn: cold },
      { step: 'sum', executionArn: gone },
      { step: 'sum', executionArn: stale },
    ]);
    const coldRun = await awsRunUsage(cold, clients(), lookup);
    assert.deepEqual(Object.keys(coldRun.steps).toSorted(), ['report', 'sum']);
    const sum = coldRun.steps.sum!;
    // Four invocations (three throttled, 5 ms each, then 20 ms), all the sum step's.
    assert.deepEqual([sum.transitions, sum.stores, sum.lambdaInvocations, sum.lambdaBilledMs, sum.batch.length], [3, 1, 4, 35, 1]);
    assert.equal(coldRun.steps.report!.claude?.[0]?.outputTokens, usage.outputTokens);

    const { saving, notes } = await awsCacheSaving(read.cacheHits, clients(), lookup);
    // The saving is the sum step's cost in the cold run: its 3 states, its check's 4 attempts and its job, not the report.
    const sumOnly = costOf({ transitions: 3, lambda: { invocations: 4, billedMs: 35, gbSeconds: 0.035 * 0.5 }, batch: sum.batch, claude: [] });
    assert.deepEqual([saving.hits, saving.priced], [3, 1]);
    assert.ok(Math.abs(saving.lowUsd - sumOnly.lowUsd) < 1e-12 && Math.abs(saving.highUsd - sumOnly.highUsd) < 1e-12, JSON.stringify(saving));
    assert.ok(saving.lowUsd < costOf(coldRun.usage).lowUsd, "less than the cold run's whole cost");
    assert.deepEqual(notes.toSorted(), [
      `cache hits on entries of ${stale}: Batch job job-gone: not found (Batch keeps a job's description for 7 days after it ends); not priced`,
      `cache hits on entries of ${gone}: that run could not be read (ExecutionDoesNotExist: Execution Does Not Exist); not priced`,
    ]);
  });

  it("prices a run cache hit from the storing run's history: every step but its config check and the run cache's own", async () => {
    const rerun = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:rerun-whole`;
    const cold = `arn:aws:states:${REGION}:123456789012:execution:StateMachine2E01A3A5-abc:cold-whole`;
    const entered = (id: number, name: string, input?: unknown): HistoryEvent => ({
      id,
      timestamp: at(id),
      type: name.endsWith(': Cache store') ? 'TaskStateEntered' : 'PassStateEntered',
      stateEnteredEventDetails: { name, ...(input ? { input: JSON.stringify(input) } : {}) },
    });
    sfn
      .on(GetExecutionHistoryCommand, { executionArn: rerun })
      .resolves({
        events: [
          { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
          ...lambdaTask(2, 'config: Invoke', 40, {}),
          entered(10, 'run: Cached?'),
          entered(11, 'run: Restore', { _run: { key: 'k', hit: { output: { n: 1 }, executionId: cold } } }),
        ],
      })
      .on(GetExecutionHistoryCommand, { executionArn: cold })
      .resolves({
        events: [
          { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
          ...lambdaTask(2, 'config: Invoke', 40, {}),
          entered(10, 'run: Miss'),
          ...batchTask(20, 'job-fargate'),
          ...lambdaTask(40, 'report: Invoke', 900, { claudeUsage: [usage] }),
          entered(60, 'run: Cache store'),
          entered(61, 'run: Output'),
        ],
      });
    const lookup = (name: string) => (name.startsWith(`${sumDefinition.name}-`) ? { name: sumDefinition.name } : undefined);
    const read = await awsRunUsage(rerun, clients(), lookup);
    assert.deepEqual(read.cacheHits, [{ step: 'run', executionArn: cold }]);
    const coldRun = await awsRunUsage(cold, clients(), lookup);
    assert.equal(coldRun.steps.run?.stores, 1);
    const { saving } = await awsCacheSaving(read.cacheHits, clients(), lookup);
    const skipped = Object.entries(coldRun.steps)
      .filter(([step]) => step !== 'config' && step !== 'run')
      .reduce((n, [, step]) => n + costOf(usageOfStep(step)).lowUsd, 0);
    assert.deepEqual([saving.hits, saving.priced], [1, 1]);
    assert.ok(skipped > 0 && Math.abs(saving.lowUsd - skipped) < 1e-12, `${saving.lowUsd} against ${skipped}`);
    assert.ok(saving.lowUsd < costOf(coldRun.usage).lowUsd, 'less than the cold run: its config check and run-cache states are not in it');
  });

  it('names a run on AWS by its execution ARN, and says so', async () => {
    await assert.rejects(
      showAwsRun('run-1', { out: () => undefined, err: () => undefined }, clients()),
      (e: unknown) => e instanceof ConfigError && e.field === 'RUN' && /execution ARN/.test(e.message),
    );
  });
});
