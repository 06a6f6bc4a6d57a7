/**
 * The step constructs (pipelines/steps) as graphs: the probe pipeline, which uses every step
 * kind, rendered to its ASL and checked state by state (Retry, Catch, Resource, ResultPath,
 * TimeoutSeconds), plus one "throws when ..." test per constructor validation rule.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Duration, type Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { ConfigError } from '#shared/errors.ts';
import {
  approvalGate,
  approvalRequestFunction,
  gateOutcomes,
  BatchJob,
  distributedFanOut,
  fanOut,
  invoke,
  LAMBDA_SERVICE_ERRORS,
  MAX_JOB_RESULT_BYTES,
  PipelineFunction,
  PIPELINE_META,
  publishArtifact,
  REPO_ROOT,
  S3Trigger,
  step,
} from '#pipelines/steps/index.ts';
import { lowerDistributedMaps } from '#infra/local/distributed-map.ts';
import { prepareAsl } from '#infra/local/asl-prepass.ts';
import { buildApp } from '#infra/build-app.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { definitionOf, minimalScope } from '../support/stacks.ts';

// ---- rendering ----------------------------------------------------------------------------

type State = Record<string, unknown> & { Type: string };
type Catcher = { ErrorEquals: string[]; Next: string; ResultPath?: string | null };
type Retrier = { ErrorEquals: string[]; JitterStrategy?: string; MaxAttempts?: number };
type Machine = { StartAt: string; States: Record<string, State>; TimeoutSeconds?: number } & Record<string, unknown>;

/**
 * A stand-in for each token of the definition. Pseudo parameters get real-looking values (so
 * Resource ARNs read as on AWS); a function's ARN stays an ARN (a Lambda task with
 * payloadResponseOnly names the function as its Resource); other references get a name that
 * says what they were.
 */
function placeholder(value: unknown, resources: Record<string, { Type: string }>): string {
  if (typeof value === 'string') return value;
  const token = value as Record<string, unknown>;
  if (typeof token['Ref'] === 'string') {
    const pseudo: Record<string, string> = {
      'AWS::Partition': 'aws',
      'AWS::Region': 'us-east-1',
      'AWS::AccountId': '123456789012',
      'AWS::URLSuffix': 'amazonaws.com',
    };
    return pseudo[token['Ref']] ?? `ref-${token['Ref']}`;
  }
  if (Array.isArray(token['Fn::GetAtt'])) {
    const [logicalId, attribute] = token['Fn::GetAtt'] as [string, string];
    if (resources[logicalId]?.Type === 'AWS::Lambda::Function' && attribute === 'Arn') {
      return `arn:aws:lambda:us-east-1:123456789012:function:${logicalId}`;
    }
    return `getatt-${logicalId}-${attribute}`;
  }
  if (typeof token['Fn::ImportValue'] === 'string') return `import-${token['Fn::ImportValue'].replace(/[^A-Za-z0-9]/g, '-')}`;
  if (Array.isArray(token['Fn::Join'])) {
    const [delimiter, parts] = token['Fn::Join'] as [string, unknown[]];
    return parts.map((part) => placeholder(part, resources)).join(delimiter);
  }
  throw new Error(`no placeholder for ${JSON.stringify(value)}`);
}

/** The state machine's definition as JSON, tokens replaced by placeholders. */
function renderDefinition(template: Template): Machine {
  const machines = Object.values(template.findResources('AWS::StepFunctions::StateMachine')) as {
    Metadata?: Record<string, unknown>;
    Properties: { DefinitionString: unknown };
  }[];
  const probe = machines.filter((m) => m.Metadata?.[PIPELINE_META] === PROBE_PIPELINE);
  assert.equal(probe.length, 1, 'one probe state machine');
  const resources = template.toJSON()['Resources'] as Record<string, { Type: string }>;
  return JSON.parse(placeholder(probe[0]!.Properties.DefinitionString, resources)) as Machine;
}

/** Every state by name, with the Map/Parallel states it is nested in. */
function allStates(machine: { States: Record<string, State> }, enclosing: string[] = []): Map<string, { state: State; enclosing: string[] }> {
  const found = new Map<string, { state: State; enclosing: string[] }>();
  for (const [name, state] of Object.entries(machine.States)) {
    assert.ok(!found.has(name), `state name used twice: ${name}`);
    found.set(name, { state, enclosing });
    const inner: { States: Record<string, State> }[] = [];
    if (state.Type === 'Map') inner.push((state['ItemProcessor'] ?? state['Iterator']) as { States: Record<string, State> });
    if (state.Type === 'Parallel') inner.push(...(state['Branches'] as { States: Record<string, State> }[]));
    for (const graph of inner) {
      for (const [innerName, entry] of allStates(graph, [...enclosing, name])) {
        assert.ok(!found.has(innerName), `state name used twice: ${innerName}`);
        found.set(innerName, entry);
      }
    }
  }
  return found;
}

/** The states passed through from `start` following `Next` and a Choice's `Default` (no Catch) up to `end`. */
function followNext(states: Map<string, { state: State }>, start: string, end: string): string[] {
  const path: string[] = [];
  let current: string | undefined = start;
  while (current && current !== end) {
    assert.ok(!path.includes(current), `loop at ${current}`);
    path.push(current);
    const state = states.get(current)?.state;
    current = (state?.Type === 'Choice' ? state['Default'] : state?.['Next']) as string | undefined;
  }
  assert.equal(current, end, `${start} does not lead to ${end} by Next: ${path.join(' -> ')}`);
  return path;
}

// ---- the probe pipeline ----------------------------------------------------------------

describe('step constructs, rendered: the probe pipeline', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
  const template = Template.fromStack(app.node.findChild('FrontierProbe') as Stack);
  const machine = renderDefinition(template);
  const states = allStates(machine);
  const get = (name: string): State => {
    const entry = states.get(name);
    assert.ok(entry, `no state "${name}"; states: ${[...states.keys()].join(', ')}`);
    return entry.state;
  };
  const tasks = [...states].filter(([, { state }]) => state.Type === 'Task');
  const isLambda = (state: State) => String(state['Resource']).includes(':lambda:');

  it('has the cache lookup and store of every cached step as direct DynamoDB integrations', () => {
    for (const stepId of ['prepare', 'square-item', 'sum', 'publish']) {
      const lookup = get(`${stepId}: Cache lookup`);
      assert.equal(lookup['Resource'], 'arn:aws:states:::aws-sdk:dynamodb:getItem');
      assert.deepEqual((lookup['Parameters'] as { Key: unknown }).Key, {
        pk: { S: `CACHE#probe#${stepId}` },
        sk: { 'S.$': '$._step.key.value' },
      });
      assert.equal((lookup['Parameters'] as { ConsistentRead: boolean }).ConsistentRead, true);
      const store = get(`${stepId}: Cache store`);
      assert.equal(store['Resource'], 'arn:aws:states:::aws-sdk:dynamodb:putItem');
      // Inputs -> key -> lookup -> choice: nothing runs before the cache is consulted.
      assert.deepEqual(followNext(states, `${stepId}: Inputs`, `${stepId}: Cached?`), [`${stepId}: Inputs`, `${stepId}: Cache key`, `${stepId}: Cache lookup`]);
      assert.match(String((get(`${stepId}: Cache key`)['Parameters'] as Record<string, string>)['value.$']), /^States\.Hash\(.*'SHA-256'\)$/);
    }
  });

  it('serves a cache hit without any Lambda or Batch job: lookup, output check, restore', () => {
    for (const stepId of ['prepare', 'square-item', 'sum', 'publish']) {
      const choice = get(`${stepId}: Cached?`) as State & { Choices: { Variable: string; IsPresent: boolean; Next: string }[]; Default: string };
      assert.equal(choice.Choices.length, 1);
      assert.deepEqual(
        { Variable: choice.Choices[0]!.Variable, IsPresent: choice.Choices[0]!.IsPresent },
        { Variable: '$._step.lookup.Item', IsPresent: true },
      );
      const hitPath = followNext(states, choice.Choices[0]!.Next, `${stepId}: Done`);
      assert.deepEqual(hitPath, [`${stepId}: Cache hit`, `${stepId}: Check outputs`, `${stepId}: Restore`]);
      // The only task on the hit path is the HeadObject inside the output check.
      const check = get(`${stepId}: Check outputs`);
      const inner = Object.values((check['ItemProcessor'] as { States: Record<string, State> }).States);
      assert.deepEqual(
        inner.map((s) => s['Resource']),
        ['arn:aws:states:::aws-sdk:s3:headObject'],
      );
      // A hit whose outputs are gone is a miss: the check's Catch goes to the runner.
      assert.deepEqual(
        (check['Catch'] as Catcher[]).map((c) => [c.ErrorEquals, c.Next]),
        [[['States.ALL'], choice.Default]],
      );
      // The miss path runs the step and then stores the result.
      const missPath = followNext(states, choice.Default, `${stepId}: Done`);
      assert.ok(missPath.indexOf(`${stepId}: Cache store`) > 0, `store after the runner: ${missPath.join(' -> ')}`);
      assert.equal(missPath.at(-1), `${stepId}: Deliver`);
    }
  });

  it('retries Lambda invokes on Lambda service errors only, with full jitter', () => {
    const invokes = tasks.filter(([, { state }]) => isLambda(state));
    assert.deepEqual(invokes.map(([name]) => name).sort(), [
      'approve: Wait for approval',
      'config: Invoke',
      'prepare: Invoke',
      'publish: Invoke',
      'recheck-item: Invoke',
      'square-item: Invoke',
    ]);
    // Each step invokes its own function: the Resource of a payload-only invoke is its ARN.
    for (const [stepId, fn] of [
      ['config', 'ConfigCheck'],
      ['prepare', 'Prepare'],
      ['square-item', 'Square'],
      ['publish', 'PublishArtifact'],
    ]) {
      assert.match(String(get(`${stepId}: Invoke`)['Resource']), new RegExp(`^arn:aws:lambda:us-east-1:123456789012:function:${fn}[0-9A-F]{8}$`));
    }
    for (const [name, { state }] of invokes) {
      const retry = state['Retry'] as Retrier[];
      assert.equal(retry.length, 1, `${name}: one retrier`);
      assert.deepEqual([...retry[0]!.ErrorEquals].sort(), [...LAMBDA_SERVICE_ERRORS].sort(), name);
      assert.ok(
        retry[0]!.ErrorEquals.every((e) => e.startsWith('Lambda.')),
        `${name} retries a non-service error`,
      );
      assert.equal(retry[0]!.JitterStrategy, 'FULL', name);
    }
  });

  it('runs the Batch job with submitJob.sync and no Step Functions retry', () => {
    const run = get('sum: Run job');
    assert.equal(run['Resource'], 'arn:aws:states:::batch:submitJob.sync');
    assert.equal(run['Retry'], undefined, 'Batch attempts own user-code retries');
    const environment = (run['Parameters'] as { ContainerOverrides: { Environment: { Name: string; 'Value.$': string }[] } }).ContainerOverrides.Environment;
    assert.deepEqual(environment, [
      { Name: 'JOB_SPEC_URI', 'Value.$': '$._step.job.specUri' },
      { Name: 'OUTPUT_URI', 'Value.$': '$._step.job.outputUri' },
    ]);
    // The spec is written before the job runs, the result read after it.
    assert.deepEqual(followNext(states, 'sum: Job id', 'sum: Job result'), [
      'sum: Job id',
      'sum: Job paths',
      'sum: Write spec',
      'sum: Run job',
      'sum: Result size',
      'sum: Result fits?',
      'sum: Read result',
    ]);
  });

  it('retries a spot reclaim as a Batch attempt and exits on a non-zero exit code', () => {
    const definitions = Object.values(template.findResources('AWS::Batch::JobDefinition')) as {
      Properties: { RetryStrategy: { Attempts: number; EvaluateOnExit: Record<string, string>[] } };
    }[];
    assert.equal(definitions.length, 1);
    const { Attempts, EvaluateOnExit } = definitions[0]!.Properties.RetryStrategy;
    assert.equal(Attempts, 3);
    const spot = EvaluateOnExit.findIndex((e) => e['Action'] === 'RETRY' && e['OnStatusReason'] === 'Host EC2*');
    const exit = EvaluateOnExit.findIndex((e) => e['Action'] === 'EXIT' && e['OnExitCode'] === '*');
    assert.ok(spot >= 0, `no RETRY on a spot reclaim: ${JSON.stringify(EvaluateOnExit)}`);
    assert.ok(exit >= 0, `no EXIT on a non-zero exit code: ${JSON.stringify(EvaluateOnExit)}`);
    // Batch applies the first entry that matches, so the reclaim must come first.
    assert.ok(spot < exit, 'the spot RETRY precedes the EXIT');
  });

  it('fails with JobResultMissing when the job wrote no result.json, and with JobResultTooLarge past the bound', () => {
    const head = get('sum: Result size');
    assert.equal(head['Resource'], 'arn:aws:states:::aws-sdk:s3:headObject');
    const missing = (head['Catch'] as Catcher[]).find((c) => c.ErrorEquals.includes('S3.NotFoundException'));
    assert.equal(get(missing!.Next)['Error'], 'JobResultMissing');
    const fits = get(head.Next as string) as State & { Choices: Record<string, unknown>[]; Default: string };
    assert.deepEqual(fits.Choices, [{ Variable: '$._step.job.head.bytes', NumericGreaterThan: MAX_JOB_RESULT_BYTES, Next: 'sum: Result too large' }]);
    assert.equal(get('sum: Result too large')['Error'], 'JobResultTooLarge');
    assert.equal(fits.Default, 'sum: Read result');
    const read = get('sum: Read result');
    assert.equal(read['Resource'], 'arn:aws:states:::aws-sdk:s3:getObject');
    const catcher = (read['Catch'] as Catcher[]).find((c) => c.ErrorEquals.includes('S3.NoSuchKeyException'));
    assert.ok(catcher, 'no Catch for S3.NoSuchKeyException');
    const fail = get(catcher.Next);
    assert.equal(fail.Type, 'Fail');
    assert.equal(fail['Error'], 'JobResultMissing');
    // Throttling is retried; a missing key is not.
    assert.ok((read['Retry'] as Retrier[]).every((r) => !r.ErrorEquals.includes('S3.NoSuchKeyException')));
  });

  it("records each fan-out item's failure as its result instead of failing the Map", () => {
    const map = get('square: Items');
    assert.equal(map.Type, 'Map');
    assert.equal(map['MaxConcurrency'], 4);
    const processor = map['ItemProcessor'] as { StartAt: string; States: Record<string, State> };
    const guard = processor.States[processor.StartAt]!;
    assert.equal(guard.Type, 'Parallel');
    assert.deepEqual(guard['ResultSelector'], { 'value.$': '$[0].result' });
    // The probe keeps its squares inline: the item's record is {ok, value}.
    assert.deepEqual(get(guard.Next as string)['Parameters'], { ok: true, 'value.$': '$.value' });
    assert.deepEqual(guard['Catch'], [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'square: Failure defaults' }]);
    // The cause goes to S3; the record keeps the error name, the cause's URI and the item (a number).
    const store = get('square: Store cause');
    assert.equal(store['Resource'], 'arn:aws:states:::aws-sdk:s3:putObject');
    assert.equal((store['Parameters'] as Record<string, unknown>)['Body.$'], '$.failure.value.Cause');
    const record = get('square: Item failed');
    assert.equal(record.Type, 'Pass');
    assert.equal(record['End'], true);
    assert.deepEqual(Object.keys(record['Parameters'] as object).sort(), ['causeUri.$', 'error.$', 'item', 'ok']);
    assert.deepEqual((record['Parameters'] as Record<string, unknown>)['item'], { 'item.$': '$.item' });
    assert.equal((record['Parameters'] as Record<string, unknown>)['error.$'], '$.failure.value.Error');
    // The cached per-item step runs inside the guard.
    assert.deepEqual(states.get('square-item: Invoke')?.enclosing, ['square: Items', 'square: Item']);
  });

  it('fails with FanOutFailed when more items fail than the tolerance allows', () => {
    assert.deepEqual((get('square: Count items')['Parameters'] as Record<string, string>)['maxFailures.$'], '$.config.maxFailures');
    const decide = get('square: Within tolerance?') as State & { Choices: Record<string, string>[]; Default: string };
    assert.equal(decide.Type, 'Choice');
    assert.equal(decide.Choices.length, 1);
    assert.deepEqual(decide.Choices[0], {
      Variable: '$._fanout.failed.value',
      NumericGreaterThanPath: '$._fanout.maxFailures',
      Next: 'square: Too many failures',
    });
    const fail = get('square: Too many failures');
    assert.equal(fail.Type, 'Fail');
    assert.equal(fail['Error'], 'FanOutFailed');
    // Tolerated failures make the run partial (a stack that caches runs then stores no run entry).
    assert.equal(decide.Default, 'square: Partial');
    const partial = get('square: Partial');
    assert.equal(partial['ResultPath'], '$._partial');
    assert.equal(partial['Result'], true);
    assert.equal(partial['Next'], 'square: Tolerated');
  });

  it('waits for approval with a task token, a timeout and a Catch for States.Timeout', () => {
    const wait = get('approve: Wait for approval');
    assert.equal(wait['Resource'], 'arn:aws:states:::lambda:invoke.waitForTaskToken');
    assert.equal(wait['TimeoutSeconds'], 3600);
    assert.equal((wait['Parameters'] as { Payload: Record<string, unknown> }).Payload['taskToken.$'], '$$.Task.Token');
    // The probe's gate shows the items document its config names (null: none).
    assert.equal((wait['Parameters'] as { Payload: Record<string, unknown> }).Payload['itemsUri.$'], '$.config.approvalItemsUri');
    const catcher = (wait['Catch'] as Catcher[]).find((c) => c.ErrorEquals.includes('States.Timeout'));
    assert.ok(catcher, 'no Catch for States.Timeout');
    assert.equal(get(catcher.Next).Type, 'Fail');
    assert.equal(get(catcher.Next)['Error'], 'ApprovalTimedOut');
    // The gate says what each decision does, in the probe's words.
    assert.deepEqual((wait['Parameters'] as { Payload: Record<string, unknown> }).Payload['outcomes'], {
      approve: 'Publishes the summary as the next version of the probe-summary artifact.',
      reject: 'Fails the run with ApprovalRejected; nothing is published.',
      timeout: 'Fails the run with ApprovalTimedOut; nothing is published.',
    });
    // Only when the run asks for approval.
    const gate = get('Approval required?') as State & { Choices: { Next: string }[]; Default: string };
    assert.equal(gate.Choices[0]!.Next, 'approve: Wait for approval');
    assert.equal(gate.Default, 'publish: Inputs');
  });

  it('caches the publish step, keyed without the execution id', () => {
    assert.equal(get('publish: Cache lookup')['Resource'], 'arn:aws:states:::aws-sdk:dynamodb:getItem');
    const inputs = JSON.stringify(get('publish: Inputs')['Parameters']);
    assert.ok(!inputs.includes('$$.Execution'), `the cache key inputs name the execution: ${inputs}`);
    const payload = get('publish: Invoke')['Parameters'] as Record<string, string>;
    assert.equal(payload['executionId.$'], '$$.Execution.Id');
    assert.equal(payload['request.$'], '$._step.in');
  });

  it('uses no JSONata or variables, and Distributed Map only for the S3-backed recheck fan-out', () => {
    const forbidden = ['QueryLanguage', 'Arguments', 'Output', 'Assign', 'Items', 'ItemBatcher'];
    assert.equal(machine['QueryLanguage'], undefined);
    const distributed: string[] = [];
    for (const [name, { state }] of states) {
      for (const field of forbidden) assert.equal(state[field], undefined, `${name} has ${field}`);
      if (state.Type === 'Map' && (state['ItemProcessor'] as { ProcessorConfig?: { Mode?: string } }).ProcessorConfig?.Mode === 'DISTRIBUTED') {
        distributed.push(name);
        assert.match(String((state['ItemReader'] as { Resource: string }).Resource), /:::s3:getObject$/);
        assert.deepEqual((state['ItemReader'] as { ReaderConfig: unknown }).ReaderConfig, { InputType: 'JSON' });
        assert.match(String((state['ResultWriter'] as { Parameters: { Prefix: string } }).Parameters.Prefix), /^runs\/probe\/recheck\//);
        assert.equal(state['ToleratedFailurePercentagePath'], '$.config.maxFailurePercent');
      } else {
        assert.equal(state['ItemReader'], undefined, `${name} has ItemReader`);
        assert.equal(state['ResultWriter'], undefined, `${name} has ResultWriter`);
      }
    }
    assert.deepEqual(distributed, ['recheck: Items']);
    assert.ok(!JSON.stringify(machine).includes('{%'), 'a JSONata expression');
  });

  it('keeps every state name within 80 characters', () => {
    for (const name of states.keys()) assert.ok(name.length <= 80, `${name.length} characters: ${name}`);
  });

  it('passes the local ASL pre-pass, asl-validator included', () => {
    // The runtime lowers the Distributed Map to a Task of its own and prepares its processor apart.
    const lowered = lowerDistributedMaps(machine as unknown as StateMachineDefinition);
    const prepared = prepareAsl(lowered.asl);
    const processors = [...lowered.maps.values()].map((m) => prepareAsl(m.processor));
    const names = [...prepared.tasks, ...processors.flatMap((p) => p.tasks)].map((t) => t.name);
    assert.deepEqual(names.sort(), [...tasks.map(([name]) => name), 'recheck: Items'].sort());
    assert.deepEqual(prepared.duplicateTaskNames, []);
  });
});

// ---- validation ----------------------------------------------------------------------------

const SQUARE_ENTRY = join(REPO_ROOT, 'functions', 'probe', 'square', 'handler.ts');

/** Asserts that `build` throws a ConfigError naming `field` and the value received. */
function throwsConfigError(build: () => unknown, field: string, value: string): void {
  assert.throws(build, (error: unknown) => {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    assert.equal(error.field, field);
    assert.ok(error.message.includes(field) && error.message.includes(value), error.message);
    return true;
  });
}

describe('step constructs validate their props', () => {
  const square = (stack: Stack) => invoke(new PipelineFunction(stack, 'Square', { entry: SQUARE_ENTRY }));

  it('throws when a step id is not a letter followed by letters, digits and "-" (at most 48)', () => {
    for (const bad of ['1st', 'has space', 'under_score', `a${'b'.repeat(48)}`]) {
      const { stack } = minimalScope();
      throwsConfigError(() => step(stack, bad, { run: square(stack), inputs: {}, resultPath: '$.steps.x' }), 'stepId', bad);
    }
    const { stack, steps } = minimalScope();
    throwsConfigError(
      () => fanOut(stack, 'bad id', { scope: steps, itemsPath: '$.items', iterator: (s) => new sfn.Pass(s, 'P'), resultPath: '$.r' }),
      'stepId',
      'bad id',
    );
    throwsConfigError(() => approvalGate(stack, 'bad id', { scope: steps, title: 't', detailsPath: '$.d', resultPath: '$.a' }), 'stepId', 'bad id');
    // The longest valid id is accepted.
    const ok = minimalScope();
    step(ok.stack, `a${'b'.repeat(47)}`, { run: square(ok.stack), inputs: {}, resultPath: '$.steps.x' });
  });

  it('throws when resultPath is under $._step or not under $.', () => {
    for (const bad of ['$._step', '$._step.out', 'steps.x', '$']) {
      const { stack } = minimalScope();
      throwsConfigError(() => step(stack, 'square', { run: square(stack), inputs: {}, resultPath: bad }), 'resultPath', bad);
    }
  });

  it('throws when fanOut maxConcurrency is outside 1 to 40 (the inline Map limit)', () => {
    const fan = (maxConcurrency: number) => {
      const { stack, steps } = minimalScope();
      return fanOut(stack, 'square', { scope: steps, itemsPath: '$.items', iterator: (s) => new sfn.Pass(s, 'P'), resultPath: '$.r', maxConcurrency });
    };
    throwsConfigError(() => fan(0), 'maxConcurrency', '0');
    throwsConfigError(() => fan(41), 'maxConcurrency', '41');
    throwsConfigError(() => fan(2.5), 'maxConcurrency', '2.5');
    fan(1);
    fan(40);
  });

  it('throws when the fan-out tolerance maxFailures is negative', () => {
    const fan = (maxFailures: number) => {
      const { stack, steps } = minimalScope();
      return fanOut(stack, 'square', {
        scope: steps,
        itemsPath: '$.items',
        iterator: (s) => new sfn.Pass(s, 'P'),
        resultPath: '$.r',
        tolerance: { maxFailures },
      });
    };
    throwsConfigError(() => fan(-1), 'tolerance.maxFailures', '-1');
    fan(0);
  });

  it('throws when a distributed fan-out has maxConcurrency outside 1 to 10000 or a percentage outside 0 to 100', () => {
    const fan = (props: { maxConcurrency?: number; tolerance?: { maxFailurePercentage: number } }) => {
      const { stack, steps } = minimalScope();
      return distributedFanOut(stack, 'many', { scope: steps, itemsKeyPath: '$.key', iterator: (s) => new sfn.Pass(s, 'P'), resultPath: '$.r', ...props });
    };
    throwsConfigError(() => fan({ maxConcurrency: 0 }), 'maxConcurrency', '0');
    throwsConfigError(() => fan({ maxConcurrency: 10_001 }), 'maxConcurrency', '10001');
    throwsConfigError(() => fan({ tolerance: { maxFailurePercentage: 101 } }), 'tolerance.maxFailurePercentage', '101');
    fan({ maxConcurrency: 10_000, tolerance: { maxFailurePercentage: 100 } });
  });

  it('throws when the approval timeout is under 1 minute or over 1 year', () => {
    const gate = (timeout: Duration) => {
      const { stack, steps } = minimalScope();
      return approvalGate(stack, 'approve', { scope: steps, title: 't', detailsPath: '$.d', resultPath: '$.a', timeout });
    };
    throwsConfigError(() => gate(Duration.seconds(59)), 'timeout', '59 s');
    throwsConfigError(() => gate(Duration.days(366)), 'timeout', String(366 * 24 * 3600));
    gate(Duration.minutes(1));
  });

  it('throws when an approval outcome is blank or over 300 characters', () => {
    const gate = (outcomes: { approve?: string; reject?: string; timeout?: string }) => {
      const { stack, steps } = minimalScope();
      return approvalGate(stack, 'approve', { scope: steps, title: 't', detailsPath: '$.d', resultPath: '$.a', outcomes });
    };
    throwsConfigError(() => gate({ reject: '  ' }), 'outcomes.reject', '"  "');
    throwsConfigError(() => gate({ approve: 'x'.repeat(301) }), 'outcomes.approve', 'xxx');
    gate({ approve: 'x'.repeat(300) });
  });

  it('throws when the approval itemsUriPath is not a JSONPath', () => {
    const gate = (itemsUriPath: string) => {
      const { stack, steps } = minimalScope();
      return approvalGate(stack, 'approve', { scope: steps, title: 't', detailsPath: '$.d', resultPath: '$.a', itemsUriPath });
    };
    throwsConfigError(() => gate('proposal.itemsUri'), 'itemsUriPath', 'proposal.itemsUri');
    throwsConfigError(() => gate('s3://bucket/approvals/x.json'), 'itemsUriPath', 's3://bucket/approvals/x.json');
    gate('$.proposal.itemsUri');
    gate('$$.Execution.Input.itemsUri');
  });

  it('throws when the artifact name is not lowercase letters, digits and "-"', () => {
    for (const bad of ['Probe-Summary', 'probe_summary', '-probe', 'p'.repeat(64)]) {
      const { stack, steps } = minimalScope();
      throwsConfigError(() => publishArtifact(stack, 'publish', { scope: steps, name: bad, filesPath: '$.files', resultPath: '$.p' }), 'name', bad);
    }
  });

  it('throws when the artifact eventPath is not a JSONPath', () => {
    for (const bad of ['upload', '$', "States.Format('{}', $.x)", '$.a b']) {
      const { stack, steps } = minimalScope();
      throwsConfigError(
        () => publishArtifact(stack, 'publish', { scope: steps, name: 'probe-summary', filesPath: '$.files', eventPath: bad, resultPath: '$.p' }),
        'eventPath',
        bad,
      );
    }
  });

  it('throws when the Batch job folder has no Dockerfile', () => {
    for (const job of ['common', 'no-such-job']) {
      const { stack, resources } = minimalScope();
      throwsConfigError(() => new BatchJob(stack, 'Job', { job, resources }), 'job', job);
    }
  });

  it('throws when a Batch job asks for more than 8 GPUs', () => {
    const { stack, resources } = minimalScope();
    throwsConfigError(() => new BatchJob(stack, 'Job', { job: 'probe-sum', resources, gpus: 9 }), 'gpus', '9');
    throwsConfigError(() => new BatchJob(stack, 'Job2', { job: 'probe-sum', resources, gpus: -1 }), 'gpus', '-1');
  });

  it('throws when Batch attempts are outside 1 to 10 (the Batch limit)', () => {
    const { stack, resources } = minimalScope();
    throwsConfigError(() => new BatchJob(stack, 'Job', { job: 'probe-sum', resources, attempts: 11 }), 'attempts', '11');
    throwsConfigError(() => new BatchJob(stack, 'Job2', { job: 'probe-sum', resources, attempts: 0 }), 'attempts', '0');
    new BatchJob(stack, 'Job3', { job: 'probe-sum', resources, attempts: 10 });
  });

  it('throws when the S3 trigger key pattern is not an S3 key pattern', () => {
    for (const bad of ['/checkpoints/*/manifest.json', 'checkpoints/{run}/manifest.json', 'checkpoints/a b', '']) {
      const { stack, steps } = minimalScope();
      const stateMachine = sfn.StateMachine.fromStateMachineArn(stack, 'Machine', 'arn:aws:states:us-east-1:123456789012:stateMachine:minimal');
      throwsConfigError(() => new S3Trigger(stack, 'Trigger', { scope: steps, keyPattern: bad, stateMachine }), 'keyPattern', bad);
    }
  });

  it('throws when a PipelineFunction memorySize is outside 128 to 10240 MiB', () => {
    const { stack } = minimalScope();
    throwsConfigError(() => new PipelineFunction(stack, 'Small', { entry: SQUARE_ENTRY, memorySize: 64 }), 'memorySize', '64');
    throwsConfigError(() => new PipelineFunction(stack, 'Big', { entry: SQUARE_ENTRY, memorySize: 10241 }), 'memorySize', '10241');
    new PipelineFunction(stack, 'Smallest', { entry: SQUARE_ENTRY, memorySize: 128 });
  });
});

describe('approval gate outcomes', () => {
  it('says what Reject and a timeout do from the policies when the gate does not', () => {
    assert.deepEqual(gateOutcomes({}), {
      approve: 'The run goes on past this gate.',
      reject: 'The run fails with ApprovalRejected.',
      timeout: 'The run fails with ApprovalTimedOut.',
    });
    assert.deepEqual(gateOutcomes({ onReject: 'continue', onTimeout: 'continue', outcomes: { approve: 'Measures it.' } }), {
      approve: 'Measures it.',
      reject: 'The run goes on without this step.',
      timeout: 'The run goes on as if nobody had approved.',
    });
  });
});

describe('approval gate with items', () => {
  type Statement = { Action: string | string[]; Resource: unknown; Effect: string };
  /** The gate in a state machine of a minimal stack, and the template. */
  function gateTemplate(props: { itemsUriPath?: string }) {
    const { stack, steps } = minimalScope();
    const chain = approvalGate(stack, 'approve', { scope: steps, title: 'Measure a batch', detailsPath: '$.details', resultPath: '$.approval', ...props });
    new sfn.StateMachine(stack, 'Machine', { definitionBody: sfn.DefinitionBody.fromChainable(chain) });
    const template = Template.fromStack(stack);
    const payload = (definitionOf(template).States['approve: Wait for approval']!.Parameters as { Payload: Record<string, unknown> }).Payload;
    return { template, payload };
  }

  /** The statements of the approval-request function's role policies. */
  function requestFunctionStatements(template: Template): Statement[] {
    const functions = template.findResources('AWS::Lambda::Function', {
      Properties: { Description: 'Records an approval request and emails its signed link' },
    });
    const [fnId] = Object.keys(functions);
    assert.ok(fnId, 'the approval-request function');
    const roleRef = (functions[fnId] as { Properties: { Role: { 'Fn::GetAtt': [string, string] } } }).Properties.Role['Fn::GetAtt'][0];
    const policies = Object.values(template.findResources('AWS::IAM::Policy')) as {
      Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: Statement[] } };
    }[];
    return policies.filter((p) => p.Properties.Roles.some((r) => r.Ref === roleRef)).flatMap((p) => p.Properties.PolicyDocument.Statement);
  }

  it('passes the items URI to the request Lambda only when itemsUriPath is given', () => {
    assert.equal(gateTemplate({ itemsUriPath: '$.proposal.itemsUri' }).payload['itemsUri.$'], '$.proposal.itemsUri');
    const without = gateTemplate({}).payload;
    assert.equal('itemsUri.$' in without || 'itemsUri' in without, false);
    assert.deepEqual(Object.keys(without).sort(), ['details.$', 'executionId.$', 'outcomes', 'pipeline', 'taskToken.$', 'timeoutSeconds', 'title']);
  });

  it('lets the request Lambda read approvals/* of the bucket and nothing else of it, and tells it the bucket', () => {
    const { template } = gateTemplate({ itemsUriPath: '$.proposal.itemsUri' });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Description: 'Records an approval request and emails its signed link',
      Environment: { Variables: Match.objectLike({ BUCKET_NAME: 'pipelines-bucket' }) },
    });
    const s3Statements = requestFunctionStatements(template).filter((st) => [st.Action].flat().some((a) => a.startsWith('s3:')));
    assert.deepEqual(s3Statements, [
      {
        Action: 's3:GetObject',
        Effect: 'Allow',
        Resource: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::pipelines-bucket/approvals/*']] },
      },
    ]);
  });

  it('acknowledges the approvals/* wildcard on the request Lambda with a reason', () => {
    const { stack, steps } = minimalScope();
    const fn = approvalRequestFunction(stack, steps);
    const acknowledged = fn.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>));
    const items = acknowledged.find(([id]) => id.includes('/approvals/*'));
    assert.ok(items, `no acknowledgement for approvals/*: ${acknowledged.map(([id]) => id).join(', ')}`);
    assert.match(items[0], /AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:s3:::pipelines-bucket\/approvals\/\*\]$/);
    assert.match(items[1], /content-addressed/);
  });
});
