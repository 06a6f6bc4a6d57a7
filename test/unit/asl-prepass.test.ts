import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExecutionError, StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { AWS_DEFAULT_TASK_TIMEOUT_SECONDS, InvalidStateMachineDefinition, LOCAL_MAX_TIMEOUT_SECONDS, prepareAsl } from '#infra/local/asl-prepass.ts';
import { UnsupportedLocally } from '#shared/errors.ts';

const FUNCTION_ARN = 'arn:aws:lambda:us-east-1:123456789012:function:local';

function definition(value: object): StateMachineDefinition {
  return value as StateMachineDefinition;
}

/** A one-state machine whose only state has these fields. */
function single(state: object): StateMachineDefinition {
  return definition({ StartAt: 'Only', States: { Only: { ...state, End: true } } });
}

const task = (extra: object = {}) => ({ Type: 'Task', Resource: FUNCTION_ARN, ...extra });
const inlineMap = (extra: object = {}) => ({
  Type: 'Map',
  ItemProcessor: { StartAt: 'Item', States: { Item: { Type: 'Pass', End: true } } },
  ...extra,
});

/** Runs prepareAsl expecting UnsupportedLocally; returns its message. */
function rejection(asl: StateMachineDefinition): string {
  let message = '';
  assert.throws(
    () => prepareAsl(asl),
    (error: unknown) => {
      assert.ok(error instanceof UnsupportedLocally, `expected UnsupportedLocally, got ${String(error)}`);
      assert.equal(error.name, 'UnsupportedLocally');
      message = error.message;
      return true;
    },
  );
  return message;
}

describe('prepareAsl: rejects what the local engine would ignore', () => {
  const cases: Array<{ field: string; asl: StateMachineDefinition }> = [
    {
      field: '(state machine).QueryLanguage',
      asl: definition({ QueryLanguage: 'JSONata', StartAt: 'Only', States: { Only: { Type: 'Pass', End: true } } }),
    },
    { field: 'Only.QueryLanguage', asl: single({ Type: 'Pass', QueryLanguage: 'JSONata' }) },
    { field: 'Only.Arguments', asl: single(task({ Arguments: { a: '{% $states.input.a %}' } })) },
    { field: 'Only.Output', asl: single({ Type: 'Pass', Output: '{% $states.input %}' }) },
    { field: 'Only.Assign', asl: single({ Type: 'Pass', Assign: { count: 1 } }) },
    { field: 'Only.Items', asl: single(inlineMap({ Items: [1, 2] })) },
    { field: 'Only.ItemReader', asl: single(inlineMap({ ItemReader: { Resource: 'arn:aws:states:::s3:getObject' } })) },
    { field: 'Only.ItemBatcher', asl: single(inlineMap({ ItemBatcher: { MaxItemsPerBatch: 10 } })) },
    { field: 'Only.ResultWriter', asl: single(inlineMap({ ResultWriter: { Resource: 'arn:aws:states:::s3:putObject' } })) },
    { field: 'Only.ToleratedFailurePercentage', asl: single(inlineMap({ ToleratedFailurePercentage: 10 })) },
    { field: 'Only.ToleratedFailurePercentagePath', asl: single(inlineMap({ ToleratedFailurePercentagePath: '$.p' })) },
    { field: 'Only.ToleratedFailureCount', asl: single(inlineMap({ ToleratedFailureCount: 1 })) },
    { field: 'Only.ToleratedFailureCountPath', asl: single(inlineMap({ ToleratedFailureCountPath: '$.n' })) },
    {
      field: 'Only.ItemProcessor.ProcessorConfig.Mode',
      asl: single({
        Type: 'Map',
        ItemProcessor: {
          ProcessorConfig: { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' },
          StartAt: 'Item',
          States: { Item: { Type: 'Pass', End: true } },
        },
      }),
    },
    { field: 'Only.HeartbeatSecondsPath', asl: single(task({ HeartbeatSecondsPath: '$.beat' })) },
    { field: 'Only.Parameters.name.$', asl: single({ Type: 'Pass', Parameters: { 'name.$': '$$.State.Name' } }) },
    {
      field: 'Only.Parameters.tries.$',
      asl: single({ Type: 'Pass', Parameters: { 'tries.$': "States.Format('{}', $$.State.RetryCount)" } }),
    },
    {
      field: 'Only.Catch[0].Assign',
      asl: single(task({ Catch: [{ ErrorEquals: ['States.ALL'], Assign: { failed: true }, Next: 'Only' }] })),
    },
  ];

  for (const { field, asl } of cases) {
    it(`rejects ${field}`, () => {
      assert.match(rejection(asl), new RegExp(`- ${escapeRegExp(field)}: `));
    });
  }

  it('rejects a JSONata Choice Condition and a $$.State read in a Choice rule', () => {
    const message = rejection(
      definition({
        StartAt: 'Pick',
        States: {
          Pick: {
            Type: 'Choice',
            Choices: [
              { Condition: '{% $states.input.ok %}', Next: 'Done' },
              { Variable: '$$.State.RetryCount', NumericGreaterThan: 2, Next: 'Done' },
            ],
            Default: 'Done',
          },
          Done: { Type: 'Succeed' },
        },
      }),
    );
    assert.match(message, /- Pick\.Choices\[0\]\.Condition: /);
    assert.match(message, /- Pick\.Choices\[1\]\.Variable: the local engine does not provide \$\$\.State/);
  });

  it('lists every offending field of every state, nested ones included, in one error', () => {
    const message = rejection(
      definition({
        StartAt: 'Fan',
        States: {
          Fan: {
            Type: 'Map',
            ItemReader: { Resource: 'arn:aws:states:::s3:listObjectsV2' },
            ToleratedFailureCount: 2,
            ItemProcessor: {
              StartAt: 'Both',
              States: {
                Both: {
                  Type: 'Parallel',
                  Branches: [
                    { StartAt: 'Left', States: { Left: task({ HeartbeatSecondsPath: '$.t', End: true }) } },
                    {
                      StartAt: 'Right',
                      States: { Right: { Type: 'Pass', Assign: { x: 1 }, Parameters: { 'n.$': '$$.State.Name' }, End: true } },
                    },
                  ],
                  End: true,
                },
              },
            },
            Next: 'After',
          },
          After: { Type: 'Pass', Output: '{% $states.input %}', End: true },
        },
      }),
    );
    const listed = [...message.matchAll(/^ {2}- (\S+): /gm)].map((match) => match[1]);
    assert.deepEqual(listed.sort(), [
      'After.Output',
      'Fan.ItemReader',
      'Fan.ToleratedFailureCount',
      'Left.HeartbeatSecondsPath',
      'Right.Assign',
      'Right.Parameters.n.$',
    ]);
  });

  it('allows $$.Task.Token, $$.Execution, $$.StateMachine, $$.Map and literal text that mentions $$.State', () => {
    const prepared = prepareAsl(
      definition({
        StartAt: 'Fan',
        States: {
          Fan: {
            Type: 'Map',
            ItemsPath: '$.items',
            ItemSelector: { 'value.$': '$$.Map.Item.Value', 'index.$': '$$.Map.Item.Index' },
            ItemProcessor: {
              StartAt: 'Wait',
              States: {
                Wait: task({
                  Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
                  Parameters: {
                    FunctionName: FUNCTION_ARN,
                    Payload: {
                      'token.$': '$$.Task.Token',
                      'execution.$': '$$.Execution.Id',
                      'machine.$': '$$.StateMachine.Name',
                      note: 'this text mentions $$.State.Name but is not a path',
                    },
                  },
                  End: true,
                }),
              },
            },
            End: true,
          },
        },
      }),
    );
    assert.deepEqual(
      prepared.tasks.map((found) => found.name),
      ['Wait'],
    );
  });
});

describe('prepareAsl: walks nested Map and Parallel states', () => {
  const nested = definition({
    StartAt: 'Start',
    States: {
      Start: task({ Parameters: { 'x.$': '$.x' }, HeartbeatSeconds: 30, Next: 'Fan' }),
      Fan: {
        Type: 'Map',
        ItemsPath: '$.items',
        ItemProcessor: {
          StartAt: 'Both',
          States: {
            Both: {
              Type: 'Parallel',
              Branches: [
                { StartAt: 'Train', States: { Train: task({ TimeoutSeconds: 600, End: true }) } },
                { StartAt: 'Eval', States: { Eval: task({ End: true }) } },
              ],
              End: true,
            },
          },
        },
        Next: 'Legacy',
      },
      Legacy: {
        Type: 'Map',
        Iterator: { StartAt: 'Score', States: { Score: task({ End: true }) } },
        End: true,
      },
    },
  });

  it('collects every Task with its path through the enclosing Map and Parallel states', () => {
    const { tasks } = prepareAsl(nested);
    assert.deepEqual(
      tasks.map(({ path, name }) => ({ path, name })),
      [
        { path: ['Start'], name: 'Start' },
        { path: ['Fan', 'Both', 'Train'], name: 'Train' },
        { path: ['Fan', 'Both', 'Eval'], name: 'Eval' },
        { path: ['Legacy', 'Score'], name: 'Score' },
      ],
    );
    assert.deepEqual(tasks[0], {
      path: ['Start'],
      name: 'Start',
      resource: FUNCTION_ARN,
      parameters: { 'x.$': '$.x' },
      heartbeatSeconds: 30,
      timeoutSeconds: LOCAL_MAX_TIMEOUT_SECONDS,
    });
  });

  it('sets TimeoutSeconds on nested Tasks in the prepared copy', () => {
    const { asl } = prepareAsl(nested);
    const states = asl.States as Record<string, any>;
    const branches = states.Fan.ItemProcessor.States.Both.Branches;
    assert.equal(branches[0].States.Train.TimeoutSeconds, 600);
    assert.equal(branches[1].States.Eval.TimeoutSeconds, LOCAL_MAX_TIMEOUT_SECONDS);
    assert.equal(states.Legacy.Iterator.States.Score.TimeoutSeconds, LOCAL_MAX_TIMEOUT_SECONDS);
  });

  it('leaves the caller definition unchanged', () => {
    const before = structuredClone(nested);
    prepareAsl(nested);
    assert.deepEqual(nested, before);
  });

  it('reports Task names used in two scopes when validation is skipped, and rejects them when it runs', () => {
    const shared = definition({
      StartAt: 'Both',
      States: {
        Both: {
          Type: 'Parallel',
          Branches: [
            { StartAt: 'Work', States: { Work: task({ End: true }) } },
            { StartAt: 'Work', States: { Work: task({ End: true }) } },
          ],
          End: true,
        },
      },
    });
    const prepared = prepareAsl(shared, { validate: false });
    assert.deepEqual(prepared.duplicateTaskNames, ['Work']);
    assert.deepEqual(
      prepared.tasks.map((found) => found.path),
      [
        ['Both', 'Work'],
        ['Both', 'Work'],
      ],
    );
    assert.throws(() => prepareAsl(shared), /DUPLICATE_STATE_NAMES: A state with this name already exists: Work/);
    assert.deepEqual(prepareAsl(nested).duplicateTaskNames, []);
  });

  it('leaves ResultPath "$" on states and Catchers to the patched engine', () => {
    const asl = single(task({ ResultPath: '$', Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$', Next: 'Only' }] }));
    const only = (prepareAsl(asl).asl.States as Record<string, any>).Only;
    assert.equal(only.ResultPath, '$');
    assert.equal(only.Catch[0].ResultPath, '$');
  });
});

describe('prepareAsl: TimeoutSeconds', () => {
  it('gives a Task without TimeoutSeconds the AWS default, clamped to the engine timer limit', () => {
    const { asl, tasks } = prepareAsl(single(task()));
    assert.equal(AWS_DEFAULT_TASK_TIMEOUT_SECONDS, 99_999_999);
    assert.equal(LOCAL_MAX_TIMEOUT_SECONDS, 2_147_483);
    assert.equal((asl.States.Only as { TimeoutSeconds?: number }).TimeoutSeconds, 2_147_483);
    assert.equal(tasks[0]?.timeoutSeconds, 2_147_483);
  });

  it('clamps a larger Task TimeoutSeconds and HeartbeatSeconds, and keeps smaller ones', () => {
    const days30 = 30 * 24 * 3600;
    const big = prepareAsl(single(task({ TimeoutSeconds: days30, HeartbeatSeconds: days30 })));
    assert.equal((big.asl.States.Only as { TimeoutSeconds?: number }).TimeoutSeconds, 2_147_483);
    assert.equal(big.tasks[0]?.heartbeatSeconds, 2_147_483);
    const small = prepareAsl(single(task({ TimeoutSeconds: 5, HeartbeatSeconds: 2 })));
    assert.equal((small.asl.States.Only as { TimeoutSeconds?: number }).TimeoutSeconds, 5);
    assert.equal(small.tasks[0]?.heartbeatSeconds, 2);
  });

  it('keeps a Task TimeoutSecondsPath for the engine (patched to clamp it) and sets no TimeoutSeconds', () => {
    const { asl, tasks } = prepareAsl(single(task({ TimeoutSecondsPath: '$.limit' })));
    const only = asl.States.Only as { TimeoutSeconds?: number; TimeoutSecondsPath?: string };
    assert.equal(only.TimeoutSecondsPath, '$.limit');
    assert.equal('TimeoutSeconds' in only, false);
    assert.equal(tasks[0]?.timeoutSeconds, undefined);
  });

  it('clamps the execution TimeoutSeconds and leaves an absent one absent (no limit, as on AWS)', () => {
    const clamped = prepareAsl(definition({ ...single({ Type: 'Pass' }), TimeoutSeconds: 99_999_999 }));
    assert.equal(clamped.asl.TimeoutSeconds, 2_147_483);
    const kept = prepareAsl(definition({ ...single({ Type: 'Pass' }), TimeoutSeconds: 3600 }));
    assert.equal(kept.asl.TimeoutSeconds, 3600);
    assert.equal('TimeoutSeconds' in prepareAsl(single({ Type: 'Pass' })).asl, false);
  });
});

describe('prepareAsl: validation', () => {
  it('reports every asl-validator message for an invalid definition', () => {
    const broken = definition({
      StartAt: 'First',
      States: {
        First: { Type: 'Pass', Next: 'Nowhere' },
        Second: { Type: 'Pass', Next: 'AlsoNowhere' },
      },
    });
    assert.throws(
      () => prepareAsl(broken),
      (error: unknown) => {
        assert.ok(error instanceof InvalidStateMachineDefinition);
        assert.equal(error.name, 'InvalidStateMachineDefinition');
        assert.ok(
          error.problems.some((problem) => problem.includes('Nowhere')),
          error.message,
        );
        assert.ok(
          error.problems.some((problem) => problem.includes('AlsoNowhere')),
          error.message,
        );
        assert.match(error.message, /^state machine definition is invalid:\n {2}- /);
        return true;
      },
    );
  });

  it('reports a Task Resource that is not an ARN unless checkArn is off', () => {
    const local = single({ Type: 'Task', Resource: 'my-function' });
    assert.throws(() => prepareAsl(local), InvalidStateMachineDefinition);
    assert.equal(prepareAsl(local, { checkArn: false }).tasks[0]?.resource, 'my-function');
  });

  it('accepts a valid definition without adding fields asl-validator writes into its input', () => {
    const { asl } = prepareAsl(single({ Type: 'Pass' }));
    assert.deepEqual(asl, { StartAt: 'Only', States: { Only: { Type: 'Pass', End: true } } });
  });
});

describe('prepared Task timeouts on the engine', () => {
  type Handler = () => Promise<{ done: boolean }>;
  const handlerTakingMs =
    (ms: number): Handler =>
    async () => {
      await sleep(ms);
      return { done: true };
    };

  function runOnEngine(asl: StateMachineDefinition, handler: Handler): Promise<unknown> {
    const machine = new StateMachine(asl, { validationOptions: { noValidate: true } });
    return machine.run({}, { overrides: { taskResourceLocalHandlers: { Only: handler } } }).result;
  }

  async function assertTimedOut(result: Promise<unknown>): Promise<void> {
    await assert.rejects(result, (error: unknown) => {
      assert.ok(error instanceof ExecutionError);
      assert.equal((error.cause as Error).name, 'States.Timeout');
      return true;
    });
  }

  it('fails a Task with TimeoutSeconds 1 whose handler takes 3 s with States.Timeout, as on AWS', async () => {
    const { asl } = prepareAsl(single(task({ TimeoutSeconds: 1 })));
    await assertTimedOut(runOnEngine(asl, handlerTakingMs(3000)));
  });

  // The unclamped run prints Node's TimeoutOverflowWarning: that overflow is what the clamp avoids.
  it('runs a Task with TimeoutSeconds 99999999 to completion once clamped (unclamped, the timer overflows)', async () => {
    const raw = single(task({ TimeoutSeconds: AWS_DEFAULT_TASK_TIMEOUT_SECONDS }));
    await assertTimedOut(runOnEngine(raw, handlerTakingMs(50)));
    const { asl } = prepareAsl(raw);
    assert.deepEqual(await runOnEngine(asl, handlerTakingMs(50)), { done: true });
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
