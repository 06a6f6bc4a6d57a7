/**
 * A run's cost line and its report's copy (shared/cost/run-report.ts), and the AWS function that
 * writes them when an execution succeeds (shared/cost/aws-run-report.ts). AWS is mocked at the
 * SDK (aws-sdk-client-mock); the reading, the pricing and the writing are ours. The expected
 * figures are computed here from the price table, not by the code under test.
 */
import { beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BatchClient, DescribeJobsCommand } from '@aws-sdk/client-batch';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, type HistoryEvent, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { awsRunCost, instanceTypesOf } from '#shared/cost/aws-run-report.ts';
import { PRICES } from '#shared/cost/prices.ts';
import { runCostLine, withCostLine } from '#shared/cost/run-report.ts';
import { costOf, EMPTY_USAGE, formatUsd } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';

const REGION = 'us-east-1';
const ACCOUNT = '123456789012';
const MACHINE = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:Pipeline-abc`;
const RUN = `arn:aws:states:${REGION}:${ACCOUNT}:execution:Pipeline-abc:rerun-7`;
const COLD = `arn:aws:states:${REGION}:${ACCOUNT}:execution:Pipeline-abc:cold-1`;
const GONE = `arn:aws:states:${REGION}:${ACCOUNT}:execution:Pipeline-abc:long-ago`;
const FN = `arn:aws:lambda:${REGION}:${ACCOUNT}:function:Sae-Report`;
const T0 = Date.parse('2026-12-03T10:00:00Z');
const at = (ms: number) => new Date(T0 + ms);
const REPORT = 's3://platform-bucket/data/sae/reports/0f0e/report.html';
const HTML = '<!doctype html>\n<html><head><title>SAE</title></head>\n<body class="report">\n<h1>Sparse autoencoders</h1>\n</body></html>\n';

const entered = (id: number, name: string, input?: unknown): HistoryEvent => ({
  id,
  timestamp: at(id * 10),
  type: 'TaskStateEntered',
  stateEnteredEventDetails: { name, ...(input === undefined ? {} : { input: JSON.stringify(input) }) },
});
const next = (id: number, ms: number, type: string, details: Partial<HistoryEvent> = {}): HistoryEvent =>
  ({ id, previousEventId: id - 1, timestamp: at(ms), type, ...details }) as HistoryEvent;
const restoreInput = (executionArn: string) => ({ _step: { lookup: { Item: { executionId: { S: executionArn } } } } });

describe('the cost line', () => {
  it('says the run cost and, with hits, what they saved; hits from runs gone are said, not priced', () => {
    const cost = costOf({ ...EMPTY_USAGE, transitions: 100 });
    assert.equal(
      runCostLine(cost, { hits: 0, priced: 0, lowUsd: 0, highUsd: 0 }),
      'This run cost $0.0025 on AWS (us-east-1 prices of 2026-12-02); it hit no cache entry.',
    );
    assert.equal(
      runCostLine(cost, { hits: 3, priced: 2, lowUsd: 1.5, highUsd: 4.25 }),
      "This run cost $0.0025 on AWS (us-east-1 prices of 2026-12-02); its 3 cache hits saved $1.50-$4.25 (1 of them from runs no longer on record, not priced), those steps' cost in the runs that computed them.",
    );
    assert.match(
      runCostLine(cost, { hits: 0, priced: 0, lowUsd: 0, highUsd: 0 }, 2),
      /it hit no cache entry\. Not all of it could be read \(2 notes in cost\.json\): the figures are at least these\.$/,
    );
    const unpriced = costOf({
      ...EMPTY_USAGE,
      transitions: 1,
      claude: [{ model: 'claude-unknown', inputTokens: 5, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 }],
    });
    assert.match(
      runCostLine(unpriced, { hits: 1, priced: 1, lowUsd: 0.002, highUsd: 0.002 }),
      /leaving out 1 item the price table has no price for\); its 1 cache hit saved \$0\.0020,/,
    );
  });

  it('goes first in the body, escaped, and changes nothing else of the report', () => {
    const line = 'This run cost <$1> & "more"';
    const out = withCostLine(HTML, line);
    assert.equal(
      out,
      HTML.replace('<body class="report">', '<body class="report">\n<p class="run-cost" role="note">This run cost &#60;$1&#62; &#38; &#34;more&#34;</p>'),
    );
    // A page without a body tag gets it at the top.
    assert.equal(withCostLine('<h1>x</h1>', 'y'), '<p class="run-cost" role="note">y</p>\n<h1>x</h1>');
  });
});

describe('the run-cost function on AWS', () => {
  const sfn = mockClient(SFNClient);
  const batch = mockClient(BatchClient);
  const lambda = mockClient(LambdaClient);
  const s3 = mockClient(S3Client);
  const clients = () => ({ sfn: new SFNClient({ region: REGION }), batch: new BatchClient({ region: REGION }), lambda: new LambdaClient({ region: REGION }) });
  const event = (status = 'SUCCEEDED', output: string | null = JSON.stringify({ reportUri: REPORT })) => ({
    version: '0',
    source: 'aws.states',
    'detail-type': 'Step Functions Execution Status Change',
    detail: { executionArn: RUN, stateMachineArn: MACHINE, name: 'rerun-7', status, output },
  });
  const instanceTypes = instanceTypesOf(JSON.stringify({ TrainJobDefinition12AB: 'g6.xlarge', HarvestJobDefinition77: '' }));

  beforeEach(() => {
    for (const m of [sfn, batch, lambda, s3]) m.reset();
    // The rerun: one report Lambda (250 ms, 1024 MB), one GPU job (10 min), and two hits: one on
    // the cold run's `harvest` entry, one on a run whose history is gone.
    const rerun: HistoryEvent[] = [
      { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
      entered(2, 'harvest: Restore', restoreInput(COLD)),
      entered(3, 'grid: Restore', restoreInput(GONE)),
      entered(4, 'train: Run job'),
      next(5, 50, 'TaskScheduled', { taskScheduledEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', region: REGION, parameters: '{}' } }),
      next(6, 51, 'TaskStarted', { taskStartedEventDetails: { resourceType: 'batch', resource: 'submitJob.sync' } }),
      next(7, 52, 'TaskSubmitted', {
        taskSubmittedEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', output: JSON.stringify({ JobId: 'gpu-1' }) },
      }),
      next(8, 600_100, 'TaskSucceeded', { taskSucceededEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', output: '{}' } }),
      entered(9, 'report: Invoke'),
      next(10, 600_200, 'TaskScheduled', {
        taskScheduledEventDetails: { resourceType: 'lambda', resource: 'invoke', region: REGION, parameters: JSON.stringify({ FunctionName: FN }) },
      }),
      next(11, 600_210, 'TaskStarted', { taskStartedEventDetails: { resourceType: 'lambda', resource: 'invoke' } }),
      next(12, 600_460, 'TaskSucceeded', {
        taskSucceededEventDetails: { resourceType: 'lambda', resource: 'invoke', output: JSON.stringify({ Payload: { reportUri: REPORT } }) },
      }),
      { id: 13, timestamp: at(600_500), type: 'ExecutionSucceeded' },
    ];
    // The cold run's harvest: a Fargate job of 30 s (billed its minute) and one store.
    const cold: HistoryEvent[] = [
      { id: 1, timestamp: at(0), type: 'ExecutionStarted' },
      entered(2, 'harvest: Run job'),
      next(3, 21, 'TaskScheduled', { taskScheduledEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', region: REGION, parameters: '{}' } }),
      next(4, 22, 'TaskSubmitted', {
        taskSubmittedEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', output: JSON.stringify({ JobId: 'cpu-1' }) },
      }),
      next(5, 30_100, 'TaskSucceeded', { taskSucceededEventDetails: { resourceType: 'batch', resource: 'submitJob.sync', output: '{}' } }),
      entered(6, 'harvest: Cache store'),
      { id: 7, timestamp: at(40_000), type: 'ExecutionSucceeded' },
    ];
    sfn
      .on(GetExecutionHistoryCommand, { executionArn: RUN })
      .resolves({ events: rerun })
      .on(GetExecutionHistoryCommand, { executionArn: COLD })
      .resolves({ events: cold })
      .on(GetExecutionHistoryCommand, { executionArn: GONE })
      .rejects(Object.assign(new Error('Execution Does Not Exist'), { name: 'ExecutionDoesNotExist' }))
      .on(DescribeExecutionCommand, { executionArn: RUN })
      .resolves({ executionArn: RUN, stateMachineArn: MACHINE, status: 'SUCCEEDED', startDate: at(0), output: JSON.stringify({ reportUri: REPORT }) });
    lambda.on(GetFunctionConfigurationCommand, { FunctionName: FN }).resolves({ MemorySize: 1024 });
    batch.on(DescribeJobsCommand).callsFake((input: { jobs: string[] }) => ({
      jobs: [
        {
          jobId: 'gpu-1',
          jobName: 'train',
          jobQueue: 'gpu',
          status: 'SUCCEEDED',
          startedAt: T0,
          jobDefinition: `arn:aws:batch:${REGION}:${ACCOUNT}:job-definition/TrainJobDefinition12AB-x9y8:3`,
          platformCapabilities: ['EC2'],
          attempts: [{ startedAt: T0 + 100, stoppedAt: T0 + 600_100 }],
          container: {
            resourceRequirements: [
              { type: 'GPU', value: '1' },
              { type: 'VCPU', value: '4' },
              { type: 'MEMORY', value: '15000' },
            ],
          },
        },
        {
          jobId: 'cpu-1',
          jobName: 'harvest',
          jobQueue: 'cpu',
          status: 'SUCCEEDED',
          startedAt: T0,
          jobDefinition: `arn:aws:batch:${REGION}:${ACCOUNT}:job-definition/HarvestJobDefinition77-z1:1`,
          platformCapabilities: ['FARGATE'],
          attempts: [{ startedAt: T0, stoppedAt: T0 + 30_000 }],
          container: {
            resourceRequirements: [
              { type: 'VCPU', value: '2' },
              { type: 'MEMORY', value: '4096' },
            ],
          },
        },
      ].filter((j) => input.jobs.includes(j.jobId)),
    }));
    s3.on(GetObjectCommand, { Bucket: 'platform-bucket', Key: 'data/sae/reports/0f0e/report.html' }).resolves({
      Body: { transformToString: async () => HTML } as never,
    });
    s3.on(PutObjectCommand).resolves({});
  });

  it("prices the run from its history, its hits from the runs that computed them, and writes the report's copy", async () => {
    const result = await awsRunCost(event(), { clients: clients(), s3: new S3Client({ region: REGION }), pipeline: 'sae', instanceTypes });
    assert.ok(result?.written);
    const p = PRICES.aws;
    const gpu = PRICES.ec2['g6.xlarge']!;
    // The rerun: 4 states entered; one request of 250 ms at 1 GB; 600 s on a g6.xlarge.
    const lambdaUsd = p.lambdaPerRequest.usd + 0.25 * p.lambdaPerGbSecond.usd;
    const onDemand = (600 / 3600) * gpu.onDemandPerHour.usd;
    const low = 4 * p.stepFunctionsPerTransition.usd + lambdaUsd + onDemand * (1 - gpu.spotDiscountMax);
    const high = 4 * p.stepFunctionsPerTransition.usd + lambdaUsd + onDemand;
    // The hit on the cold run saved its harvest step: 2 states and a minute of 2 vCPU, 4 GB on Fargate.
    const saved = 2 * p.stepFunctionsPerTransition.usd + (60 / 3600) * (2 * p.fargatePerVcpuHour.usd + 4 * p.fargatePerGbHour.usd);
    assert.equal(
      result.line,
      `This run cost ${formatUsd(low, high)} on AWS (us-east-1 prices of ${PRICES.asOf}); its 2 cache hits saved ${formatUsd(saved)} (1 of them from runs no longer on record, not priced), those steps' cost in the runs that computed them.`,
    );
    assert.ok(
      result.notes.some((n) => n.includes(GONE) && n.includes('ExecutionDoesNotExist')),
      result.notes.join('\n'),
    );
    const puts = s3.commandCalls(PutObjectCommand).map((c) => c.args[0].input);
    const report = puts.find((put) => put.Key === 'runs/sae/rerun-7/report.html')!;
    assert.equal(report.Bucket, 'platform-bucket');
    assert.equal(report.Body, withCostLine(HTML, result.line));
    assert.equal(result.written.reportUri, 's3://platform-bucket/runs/sae/rerun-7/report.html');
    const figures = JSON.parse(String(puts.find((put) => put.Key === 'runs/sae/rerun-7/cost.json')!.Body));
    assert.ok(Math.abs(figures.cost.lowUsd - low) < 1e-12 && Math.abs(figures.cost.highUsd - high) < 1e-12, JSON.stringify(figures.cost));
    assert.ok(Math.abs(figures.saving.lowUsd - saved) < 1e-12);
    assert.equal(figures.usage.transitions, 4);
  });

  it('reads the output from the execution when the event leaves it out, and writes nothing for a run that did not succeed', async () => {
    const deps = { clients: clients(), s3: new S3Client({ region: REGION }), pipeline: 'sae', instanceTypes };
    const result = await awsRunCost(event('SUCCEEDED', null), deps);
    assert.equal(result?.written?.reportUri, 's3://platform-bucket/runs/sae/rerun-7/report.html');
    assert.equal(sfn.commandCalls(DescribeExecutionCommand).length, 1);
    s3.resetHistory();
    assert.equal(await awsRunCost(event('FAILED'), deps), undefined);
    assert.equal(s3.commandCalls(PutObjectCommand).length, 0);
  });

  it('still says the line when the report cannot be copied, and reads an execution in another partition', async () => {
    const deps = { clients: clients(), s3: new S3Client({ region: REGION }), pipeline: 'sae', instanceTypes };
    s3.on(GetObjectCommand).rejects(Object.assign(new Error('Access Denied'), { name: 'AccessDenied' }));
    const result = await awsRunCost(event(), deps);
    assert.match(result!.line, /^This run cost \$/);
    assert.equal(result!.written, undefined);
    assert.match(result!.error!, /could not be copied with its cost line: AccessDenied: Access Denied/);
    const china = event();
    china.detail.executionArn = RUN.replace('arn:aws:', 'arn:aws-cn:');
    sfn
      .on(GetExecutionHistoryCommand, { executionArn: china.detail.executionArn })
      .resolves({ events: [{ id: 1, timestamp: at(0), type: 'ExecutionStarted' }] });
    assert.match((await awsRunCost(china, deps))!.line, /it hit no cache entry\.$/);
  });

  it('refuses an event that is not an execution status change, and a malformed instance-type map, naming the field', async () => {
    const deps = { clients: clients(), s3: new S3Client({ region: REGION }), pipeline: 'sae', instanceTypes };
    await assert.rejects(
      awsRunCost({ 'detail-type': 'Object Created', detail: {} }, deps),
      (e: Error) => e instanceof ConfigError && /detail-type/.test(e.message),
    );
    assert.equal(s3.commandCalls(PutObjectCommand).length, 0);
    assert.throws(
      () => instanceTypesOf('{not json'),
      (e: Error) => e instanceof ConfigError && /JOB_INSTANCE_TYPES/.test(e.message),
    );
    assert.throws(
      () => instanceTypesOf('{"A": 3}'),
      (e: Error) => e instanceof ConfigError,
    );
  });
});
