/**
 * Regression tests for patches/aws-local-stepfunctions+3.0.0.patch: one test per patched
 * behaviour, each asserting what AWS Step Functions does. Each "engine patch" test fails on the
 * unpatched 3.0.0 engine, so an engine upgrade that changes one of these shows up. Also here: the
 * Promise.withResolvers polyfill (infra/local/polyfill.ts) and the error wrapping the runtime
 * relies on.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { ExecutionError, StateMachine, type RunOptions, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { installPromiseWithResolvers } from '#infra/local/polyfill.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const FUNCTION_ARN = 'arn:aws:lambda:us-east-1:123456789012:function:local';

/**
 * Runs a definition through the engine with its own validation on. `checkPaths: false` is for
 * literals holding `\\`: asl-path-validator 0.16 rejects that escape (its grammar's escaped
 * character class is `[^\\n]`, meant as "not a newline"), although the States Language defines
 * `\\` as a backslash.
 */
async function run(definition: object, input: Json, options?: RunOptions, checkPaths = true): Promise<unknown> {
  const machine = new StateMachine(definition as StateMachineDefinition, {
    validationOptions: { checkArn: true, checkPaths },
  });
  return machine.run(input, options).result;
}

/** A one-state machine whose only state is a Pass with these fields. */
function singlePass(fields: Record<string, unknown>): object {
  return { StartAt: 'Only', States: { Only: { Type: 'Pass', ...fields, End: true } } };
}

/** Evaluates one intrinsic-function expression against `input` and returns its value. */
async function intrinsic(expression: string, input: Json, checkPaths = true): Promise<unknown> {
  const definition = singlePass({ Parameters: { 'value.$': expression } });
  const output = (await run(definition, input, undefined, checkPaths)) as { value: unknown };
  return output.value;
}

class LocalTaskFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LocalTaskFailure';
  }
}

describe('engine patch: Pass Result that is falsy', () => {
  for (const result of [0, false, '', null]) {
    it(`outputs Result ${JSON.stringify(result)} instead of passing the input through`, async () => {
      const output = await run(singlePass({ Result: result }), { keep: 1 });
      assert.deepEqual(output, result);
    });
  }
});

describe('engine patch: ResultPath "$"', () => {
  it('replaces the state input with the result on a state', async () => {
    const output = await run(singlePass({ Result: { fresh: true }, ResultPath: '$' }), { keep: 1 });
    assert.deepEqual(output, { fresh: true });
  });

  it('replaces the state input with the error output on a Catch', async () => {
    const definition = {
      StartAt: 'Fails',
      States: {
        Fails: {
          Type: 'Task',
          Resource: FUNCTION_ARN,
          Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$', Next: 'Handled' }],
          End: true,
        },
        Handled: { Type: 'Pass', End: true },
      },
    };
    const output = await run(
      definition,
      { keep: 1 },
      {
        overrides: {
          taskResourceLocalHandlers: {
            Fails: async () => {
              throw new LocalTaskFailure('disk full');
            },
          },
        },
      },
    );
    assert.deepEqual(output, { Error: 'LocalTaskFailure', Cause: 'disk full' });
  });
});

describe('engine patch: intrinsic functions keep backslashes and unescape literals', () => {
  it('States.JsonToString of a string holding quotes round-trips through States.StringToJson', async () => {
    const value = { q: 'say "hi"', path: 'C:\\tmp', line: 'a\nb' };
    const definition = {
      StartAt: 'ToString',
      States: {
        ToString: { Type: 'Pass', Parameters: { 's.$': 'States.JsonToString($.v)' }, Next: 'Back' },
        Back: { Type: 'Pass', Parameters: { 's.$': '$.s', 'back.$': 'States.StringToJson($.s)' }, End: true },
      },
    };
    const output = (await run(definition, { v: value })) as { s: string; back: unknown };
    assert.equal(output.s, JSON.stringify(value));
    assert.deepEqual(output.back, value);
  });

  it('States.Format keeps backslashes that come from the input', async () => {
    assert.equal(await intrinsic("States.Format('dir={}', $.p)", { p: 'C:\\tmp\\new' }), 'dir=C:\\tmp\\new');
  });

  it("unescapes \\' and \\\\ in string literals", async () => {
    // ASL text: States.Format('it\'s {} in C:\\data', $.x)
    assert.equal(await intrinsic(String.raw`States.Format('it\'s {} in C:\\data', $.x)`, { x: 'here' }, false), "it's here in C:\\data");
  });

  it('ends a string literal at a quote that follows an escaped backslash', async () => {
    // ASL text: States.Format('{}\\', $.x): the quote after \\ closes the literal.
    assert.equal(await intrinsic(String.raw`States.Format('{}\\', $.x)`, { x: 'dir' }, false), 'dir\\');
  });

  it('States.Format treats \\{ and \\} as literal braces, not a placeholder', async () => {
    // ASL text: States.Format('\{\} holds \{{}\}', $.p). The backslash in the value stays.
    assert.equal(await intrinsic(String.raw`States.Format('\{\} holds \{{}\}', $.p)`, { p: 'C:\\tmp' }), '{} holds {C:\\tmp}');
  });

  it('States.Format fills a placeholder that follows an escaped backslash', async () => {
    // ASL text: States.Format('C:\\{}', $.x): a backslash, then the placeholder.
    assert.equal(await intrinsic(String.raw`States.Format('C:\\{}', $.x)`, { x: 'data' }, false), 'C:\\data');
  });
});

describe('engine patch: States.Base64Encode and Base64Decode use UTF-8', () => {
  it('encodes non-ASCII text as its UTF-8 bytes', async () => {
    assert.equal(await intrinsic('States.Base64Encode($.s)', { s: 'ü✓' }), Buffer.from('ü✓').toString('base64'));
  });

  it('round-trips non-ASCII text', async () => {
    const definition = {
      StartAt: 'Encode',
      States: {
        Encode: { Type: 'Pass', Parameters: { 'b64.$': 'States.Base64Encode($.s)' }, Next: 'Decode' },
        Decode: { Type: 'Pass', Parameters: { 's.$': 'States.Base64Decode($.b64)' }, End: true },
      },
    };
    assert.deepEqual(await run(definition, { s: 'ü✓ naïve' }), { s: 'ü✓ naïve' });
  });
});

describe('engine patch: $$.Execution inside a Map iteration', () => {
  it('gives the original execution input and the caller-supplied Execution fields', async () => {
    const definition = {
      StartAt: 'Fan',
      States: {
        Fan: {
          Type: 'Map',
          ItemsPath: '$.items',
          ItemProcessor: {
            ProcessorConfig: { Mode: 'INLINE' },
            StartAt: 'Look',
            States: {
              Look: {
                Type: 'Pass',
                Parameters: {
                  'item.$': '$',
                  'original.$': '$$.Execution.Input',
                  'id.$': '$$.Execution.Id',
                },
                End: true,
              },
            },
          },
          End: true,
        },
      },
    };
    const input = { items: [1, 2], tag: 'run-1' };
    const id = 'arn:aws:states:us-east-1:123456789012:execution:local:run-1';
    const output = await run(definition, input, { context: { Execution: { Input: input, Id: id } } });
    assert.deepEqual(output, [
      { item: 1, original: input, id },
      { item: 2, original: input, id },
    ]);
  });
});

describe('engine patch: States.Hash digests match AWS (node:crypto)', () => {
  // The bundled SHA-256 gave one digest for every 84-character "step|<64 hex>|{json}" string,
  // which made every cache key of a Map's items equal.
  const version = 'a4fd216a35fd153c93c531d1b8f1517cc125520599c7d1c27f8445c9f7ee6718';
  for (const algorithm of ['MD5', 'SHA-1', 'SHA-256', 'SHA-384', 'SHA-512'] as const) {
    it(`${algorithm} of strings of every length from 0 to 200 equals node:crypto's`, async () => {
      const inputs = Array.from({ length: 201 }, (_, n) => 'é'.repeat(n % 7) + 'x'.repeat(n - (n % 7)));
      const definition = singlePass({
        Parameters: Object.fromEntries(inputs.map((_, i) => [`h${i}.$`, `States.Hash($.s[${i}], '${algorithm}')`])),
      });
      const output = (await run(definition, { s: inputs })) as Record<string, string>;
      const node = { MD5: 'md5', 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' }[algorithm];
      inputs.forEach((text, i) => {
        assert.equal(output[`h${i}`], createHash(node).update(text, 'utf8').digest('hex'), `length ${text.length}`);
      });
    });
  }

  it('gives different keys for cache-key strings that differ only at the end', async () => {
    const expression = `States.Hash(States.Format('{}|{}|{}', 'square-item', '${version}', States.JsonToString($.in)), 'SHA-256')`;
    const one = await intrinsic(expression, { in: { x: 1 } });
    const two = await intrinsic(expression, { in: { x: 2 } });
    assert.notEqual(one, two);
    assert.equal(one, createHash('sha256').update(`square-item|${version}|{"x":1}`).digest('hex'));
  });
});

describe('polyfill: Promise.withResolvers (missing on Node 20)', () => {
  it('lets a Task state run where Promise.withResolvers is missing', async () => {
    const definition = { StartAt: 'Work', States: { Work: { Type: 'Task', Resource: FUNCTION_ARN, End: true } } };
    const options: RunOptions = { overrides: { taskResourceLocalHandlers: { Work: async () => ({ done: true }) } } };
    const native = Object.getOwnPropertyDescriptor(Promise, 'withResolvers');
    try {
      // Node 22 has it natively: remove it to stand in for Node 20.
      delete (Promise as { withResolvers?: unknown }).withResolvers;
      await assert.rejects(run(definition, {}, options), /withResolvers is not a function/);
      assert.equal(installPromiseWithResolvers(), true);
      assert.deepEqual(await run(definition, {}, options), { done: true });
      assert.equal(installPromiseWithResolvers(), false);
    } finally {
      if (native) Object.defineProperty(Promise, 'withResolvers', native);
    }
  });
});

describe('engine: errors reach the caller as ExecutionError', () => {
  // Not a patch: pins the wrapper the tests above and the runtime rely on.
  it('wraps a failed Task error in ExecutionError with the error as cause', async () => {
    const definition = { StartAt: 'Fails', States: { Fails: { Type: 'Task', Resource: FUNCTION_ARN, End: true } } };
    const failing = run(
      definition,
      {},
      {
        overrides: {
          taskResourceLocalHandlers: {
            Fails: async () => {
              throw new LocalTaskFailure('no');
            },
          },
        },
      },
    );
    await assert.rejects(failing, (error: unknown) => {
      assert.ok(error instanceof ExecutionError);
      assert.equal((error.cause as Error).name, 'LocalTaskFailure');
      return true;
    });
  });
});

describe('engine patch: Task TimeoutSecondsPath read from the state input, beyond the timer limit', () => {
  // Parameters build a task input without `limit`: as on AWS, the path reads the state's input.
  const definition = {
    StartAt: 'Wait',
    States: { Wait: { Type: 'Task', Resource: FUNCTION_ARN, Parameters: { 'n.$': '$.n' }, TimeoutSecondsPath: '$.limit', End: true } },
  };
  const slow = (ms: number) => ({
    overrides: { taskResourceLocalHandlers: { Wait: () => new Promise<Json>((resolve) => setTimeout(() => resolve({ done: true }), ms)) } },
  });

  it('waits for a task whose timeout, read from the input, is above 2^31 - 1 ms (AWS: up to a year)', async () => {
    // Unpatched, 99,999,999 s overflows setTimeout and the task times out after 1 ms.
    assert.deepEqual(await run(definition, { limit: 99_999_999, n: 1 }, slow(50)), { done: true });
  });

  it('still times out when the input says so', async () => {
    await assert.rejects(run(definition, { limit: 1, n: 1 }, slow(1500)), (error: Error) =>
      /States\.Timeout/.test(`${error.name} ${error.message} ${String((error as { cause?: unknown }).cause)}`),
    );
  });
});
