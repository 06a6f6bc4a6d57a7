/**
 * Fan-out: an inline Map whose iterations each catch their own error and record it as that
 * item's result, so no failure is silently dropped. After the Map, the pipeline's tolerance
 * decides: more failures than tolerated fails the state with `FanOutFailed`.
 *
 * Inline Map runs at most 40 iterations at once, and every iteration adds history events:
 * chunk large item lists so a run stays far below the 25,000-event history limit.
 */
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import { checkStepId, stateName } from './names.ts';

export type FailureTolerance =
  /** At most this many failed items. */
  | { readonly maxFailures: number }
  /** At most the number found at this path of the state (a pipeline that builds its items can compute it). */
  | { readonly maxFailuresPath: string };

export interface FanOutProps {
  /** Path of the item array in the state. */
  readonly itemsPath: string;
  /**
   * Each iteration's input, as an ItemSelector template. Default: `{ item, index }` from
   * `$$.Map.Item.Value` and `$$.Map.Item.Index`.
   */
  readonly itemSelector?: Record<string, unknown>;
  /** Builds the states run for each item. They must end with the item's result at `$.result`. */
  readonly iterator: (scope: Construct) => sfn.IChainable;
  /** Where the list of item results goes: `{ok: true, value}` or `{ok: false, item, error, cause}`. */
  readonly resultPath: string;
  /** Iterations at once. Default: 10. Inline Map caps this at 40. */
  readonly maxConcurrency?: number;
  /** Default: no failure tolerated. */
  readonly tolerance?: FailureTolerance;
}

export function fanOut(scope: Construct, stepId: string, props: FanOutProps): sfn.Chain {
  checkStepId(stepId);
  const maxConcurrency = props.maxConcurrency ?? 10;
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 1 || maxConcurrency > 40) {
    throw new ConfigError('maxConcurrency', maxConcurrency, 'must be an integer from 1 to 40 (inline Map runs at most 40 at once)');
  }
  const tolerance = props.tolerance ?? { maxFailures: 0 };
  if ('maxFailures' in tolerance && (!Number.isInteger(tolerance.maxFailures) || tolerance.maxFailures < 0)) {
    throw new ConfigError('tolerance.maxFailures', tolerance.maxFailures, 'must be a non-negative integer');
  }

  const map = new sfn.Map(scope, stateName(stepId, 'Items'), {
    itemsPath: props.itemsPath,
    itemSelector: props.itemSelector ?? {
      'item.$': '$$.Map.Item.Value',
      'index.$': '$$.Map.Item.Index',
    },
    maxConcurrency,
    resultPath: props.resultPath,
  });
  // A one-branch Parallel gives the whole iteration one Catch, however many states it has.
  const guard = new sfn.Parallel(scope, stateName(stepId, 'Item'), {
    resultSelector: { ok: true, 'value.$': '$[0].result' },
  });
  guard.branch(props.iterator(scope));
  const recordFailure = new sfn.Pass(scope, stateName(stepId, 'Item failed'), {
    parameters: {
      ok: false,
      'item.$': '$',
      'error.$': '$.failure.Error',
      'cause.$': '$.failure.Cause',
    },
  });
  guard.addCatch(recordFailure, { errors: ['States.ALL'], resultPath: '$.failure' });
  map.itemProcessor(guard);

  // Counting takes three small states because a JSONPath filter that matches nothing is an
  // error ("does not point to a value"): the filter runs only once a failure is known to exist.
  const results = props.resultPath;
  const count = new sfn.Pass(scope, stateName(stepId, 'Count items'), {
    parameters: {
      'total.$': `States.ArrayLength(${results})`,
      ...('maxFailures' in tolerance ? { maxFailures: tolerance.maxFailures } : { 'maxFailures.$': tolerance.maxFailuresPath }),
    },
    resultPath: '$._fanout',
  });
  const anyFailed = new sfn.Pass(scope, stateName(stepId, 'Any failed?'), {
    parameters: { 'value.$': `States.ArrayContains(${results}[*].ok, false)` },
    resultPath: '$._fanout.any',
  });
  const countFailed = new sfn.Pass(scope, stateName(stepId, 'Count failures'), {
    parameters: { 'value.$': `States.ArrayLength(${results}[?(@.ok == false)])` },
    resultPath: '$._fanout.failed',
  });
  const fail = new sfn.Fail(scope, stateName(stepId, 'Too many failures'), {
    error: 'FanOutFailed',
    cause: `More items of ${stepId} failed than the pipeline tolerates; the failed items are in the Map results`,
  });
  const done = new sfn.Pass(scope, stateName(stepId, 'Tolerated'), { result: sfn.Result.fromObject({}), resultPath: '$._fanout' });
  const decide = new sfn.Choice(scope, stateName(stepId, 'Within tolerance?'))
    .when(sfn.Condition.numberGreaterThanJsonPath('$._fanout.failed.value', '$._fanout.maxFailures'), fail)
    .otherwise(done);
  const checkAny = new sfn.Choice(scope, stateName(stepId, 'Failures?'))
    .when(sfn.Condition.booleanEquals('$._fanout.any.value', true), countFailed.next(decide))
    .otherwise(done);
  const checkEmpty = new sfn.Choice(scope, stateName(stepId, 'Empty?'))
    .when(sfn.Condition.numberEquals('$._fanout.total', 0), done)
    .otherwise(anyFailed.next(checkAny));
  sfn.Chain.start(map).next(count).next(checkEmpty);
  return sfn.Chain.custom(map, [done], done);
}
