/**
 * Fan-out: an inline Map whose iterations each catch their own error and record it as that
 * item's result, so no failure is silently dropped. After the Map, the pipeline's tolerance
 * decides: more failures than tolerated fails the state with `FanOutFailed`.
 *
 * The Map's results stay bounded whatever the items do: each item's value goes to S3 (its record
 * is `{ok: true, uri}`) unless the pipeline keeps values inline because its own code bounds them,
 * and a failure's cause (up to 32,768 characters on AWS, a candidate's message in it) always goes
 * to S3: its record is `{ok: false, error, causeUri}` plus the few item fields the pipeline names.
 * shared/fan-out.ts reads the records back as `{ok, value}` and `{ok, error, cause}`.
 *
 * Inline Map runs at most 40 iterations at once, and every iteration adds history events:
 * chunk large item lists so a run stays far below the 25,000-event history limit.
 */
import { Aws } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import { RUN_PARTIAL_PATH } from '#shared/run-cache.ts';
import { checkStepId, stateName } from './names.ts';
import { acknowledgeOnStateMachine, iam5Resource } from './nag-findings.ts';
import type { StepScope } from './resources.ts';
import { retryServiceErrors, SERVICE_ERRORS } from './step.ts';

export type FailureTolerance =
  /** At most this many failed items. */
  | { readonly maxFailures: number }
  /** At most the number found at this path of the state (a pipeline that builds its items can compute it). */
  | { readonly maxFailuresPath: string };

export interface FanOutProps {
  /** The pipeline and platform: values and failure causes go to its bucket, under runs/<pipeline>/. */
  readonly scope: StepScope;
  /** Path of the item array in the state. */
  readonly itemsPath: string;
  /**
   * Each iteration's input, as an ItemSelector template. Default: `{ item, index }` from
   * `$$.Map.Item.Value` and `$$.Map.Item.Index`.
   */
  readonly itemSelector?: Record<string, unknown>;
  /** Builds the states run for each item. They must end with the item's result at `$.result`. */
  readonly iterator: (scope: Construct) => sfn.IChainable;
  /**
   * Where the list of item records goes: `{ok: true, uri}` (or `{ok: true, value}` with inline
   * values) and `{ok: false, error, causeUri}` (plus `item` when `failureItem` is set).
   */
  readonly resultPath: string;
  /**
   * `s3` (default): each item's value is written to S3 and its record holds the URI. `inline`: the
   * value stays in the record; only for values the pipeline's own code bounds (a few numbers), so
   * that the whole list stays far below 256 KiB at the largest item count the config allows.
   */
  readonly values?: 'inline' | 's3';
  /**
   * What of the iteration's input a failure record keeps as `item` (a Parameters template over
   * it, e.g. `{'pairId.$': '$.item.pairId'}`): bounded fields only, never a source or a document.
   * Default: nothing (records are in item order, so the item list names them).
   */
  readonly failureItem?: Record<string, unknown>;
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

  const { bucket } = props.scope.resources;
  const runPrefix = `runs/${props.scope.pipeline}/{}/${stepId}`;
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
  const inline = props.values === 'inline';
  const guard = new sfn.Parallel(scope, stateName(stepId, 'Item'), {
    resultSelector: { 'value.$': '$[0].result' },
    resultPath: inline ? '$' : '$.outcome',
  });
  guard.branch(props.iterator(scope));
  const putObject = (id: string, keyPath: string, body: string) => {
    const put = new tasks.CallAwsService(scope, stateName(stepId, id), {
      service: 's3',
      action: 'putObject',
      parameters: { Bucket: bucket.bucketName, Key: sfn.JsonPath.stringAt(keyPath), Body: body },
      iamResources: [bucket.arnForObjects(`runs/${props.scope.pipeline}/*`)],
      resultPath: sfn.JsonPath.DISCARD,
    });
    retryServiceErrors(put, SERVICE_ERRORS);
    return put;
  };
  const key = (id: string, folder: string, extension: string) =>
    new sfn.Pass(scope, stateName(stepId, id), {
      parameters: { 'key.$': `States.Format('${runPrefix}/${folder}/{}.${extension}', $$.Execution.Name, States.UUID())` },
      resultPath: '$.stored',
    });
  const uriOf = "States.Format('s3://{}/{}', '" + bucket.bucketName + "', $.stored.key)";
  if (inline) {
    const ok = new sfn.Pass(scope, stateName(stepId, 'Item done'), { parameters: { ok: true, 'value.$': '$.value' } });
    guard.next(ok);
  } else {
    const done = new sfn.Pass(scope, stateName(stepId, 'Item done'), { parameters: { ok: true, 'uri.$': uriOf } });
    guard
      .next(key('Value key', 'items', 'json'))
      .next(putObject('Store value', '$.stored.key', sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt('$.outcome.value'))))
      .next(done);
  }
  // A failure's Error is at most 256 characters on AWS; its Cause (up to 32,768) goes to S3. A
  // Fail state may give no Cause: the defaults make both fields present before they are read.
  const failureDefaults = new sfn.Pass(scope, stateName(stepId, 'Failure defaults'), {
    result: sfn.Result.fromObject({ Error: 'States.TaskFailed', Cause: '' }),
    resultPath: '$.failureDefaults',
  });
  const failureFields = new sfn.Pass(scope, stateName(stepId, 'Failure fields'), {
    parameters: { 'value.$': 'States.JsonMerge($.failureDefaults, $.failure, false)' },
    resultPath: '$.failure',
  });
  const recordFailure = new sfn.Pass(scope, stateName(stepId, 'Item failed'), {
    parameters: {
      ok: false,
      'error.$': '$.failure.value.Error',
      'causeUri.$': uriOf,
      ...(props.failureItem ? { item: props.failureItem } : {}),
    },
  });
  failureDefaults
    .next(failureFields)
    .next(key('Cause key', 'failures', 'txt'))
    .next(putObject('Store cause', '$.stored.key', sfn.JsonPath.stringAt('$.failure.value.Cause')))
    .next(recordFailure);
  guard.addCatch(failureDefaults, { errors: ['States.ALL'], resultPath: '$.failure' });
  map.itemProcessor(guard);
  acknowledgeOnStateMachine(scope, [
    {
      id: iam5Resource(scope, bucket.arnForObjects(`runs/${props.scope.pipeline}/*`)),
      reason:
        "A fan-out writes each item's value and each failure's cause under runs/<pipeline>/<execution>/<step>/, keys made at run time (the execution's name and a UUID).",
    },
  ]);

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
  // Failed items the pipeline tolerates make the run partial: the run cache does not store it, so
  // a rerun of its config retries them, as it would if only the steps' entries were there.
  const partial = new sfn.Pass(scope, stateName(stepId, 'Partial'), { result: sfn.Result.fromBoolean(true), resultPath: RUN_PARTIAL_PATH });
  const decide = new sfn.Choice(scope, stateName(stepId, 'Within tolerance?'))
    .when(sfn.Condition.numberGreaterThanJsonPath('$._fanout.failed.value', '$._fanout.maxFailures'), fail)
    .otherwise(partial.next(done));
  const checkAny = new sfn.Choice(scope, stateName(stepId, 'Failures?'))
    .when(sfn.Condition.booleanEquals('$._fanout.any.value', true), countFailed.next(decide))
    .otherwise(done);
  const checkEmpty = new sfn.Choice(scope, stateName(stepId, 'Empty?'))
    .when(sfn.Condition.numberEquals('$._fanout.total', 0), done)
    .otherwise(anyFailed.next(checkAny));
  sfn.Chain.start(map).next(count).next(checkEmpty);
  return sfn.Chain.custom(map, [done], done);
}

export type DistributedTolerance = { readonly maxFailurePercentage: number } | { readonly maxFailurePercentagePath: string } | { readonly maxFailures: number };

export interface DistributedFanOutProps {
  readonly scope: StepScope;
  /** Path of the S3 key (in the platform bucket) of a JSON array: the items. */
  readonly itemsKeyPath: string;
  /**
   * Each child run's input, as an ItemSelector template (`$` is this state's input,
   * `$$.Map.Item.Value` the item). Default: `{ item, index }`.
   */
  readonly itemSelector?: Record<string, unknown>;
  /** Builds the states each child run executes. */
  readonly iterator: (scope: Construct) => sfn.IChainable;
  /** Where `{ manifest: {Bucket, Key} }` goes: the ResultWriter's manifest listing SUCCEEDED and FAILED files. */
  readonly resultPath: string;
  /** Child runs at once. Default: 100. At most 10,000 (the Distributed Map limit). */
  readonly maxConcurrency?: number;
  /** Default: no failure tolerated. */
  readonly tolerance?: DistributedTolerance;
}

/**
 * Fan-out over thousands of items: a Distributed Map reading its items from S3 and writing
 * every child's result (failed ones with their error) to S3, so neither the items nor the
 * results pass through the state (256 KiB limit) or the parent's history (25,000 events).
 * Past the tolerance the state fails with `States.ExceedToleratedFailureThreshold`.
 */
export function distributedFanOut(scope: Construct, stepId: string, props: DistributedFanOutProps): sfn.Chain {
  checkStepId(stepId);
  const maxConcurrency = props.maxConcurrency ?? 100;
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 1 || maxConcurrency > 10_000) {
    throw new ConfigError('maxConcurrency', maxConcurrency, 'must be an integer from 1 to 10000 (the Distributed Map limit)');
  }
  const tolerance = props.tolerance ?? { maxFailures: 0 };
  if ('maxFailurePercentage' in tolerance && !(tolerance.maxFailurePercentage >= 0 && tolerance.maxFailurePercentage <= 100)) {
    throw new ConfigError('tolerance.maxFailurePercentage', tolerance.maxFailurePercentage, 'must be from 0 to 100');
  }
  if ('maxFailures' in tolerance && (!Number.isInteger(tolerance.maxFailures) || tolerance.maxFailures < 0)) {
    throw new ConfigError('tolerance.maxFailures', tolerance.maxFailures, 'must be a non-negative integer');
  }
  const { bucket } = props.scope.resources;
  const map = new sfn.DistributedMap(scope, stateName(stepId, 'Items'), {
    itemReader: new sfn.S3JsonItemReader({ bucket, key: sfn.JsonPath.stringAt(props.itemsKeyPath) }),
    resultWriterV2: new sfn.ResultWriterV2({ bucket, prefix: `runs/${props.scope.pipeline}/${stepId}/map-runs` }),
    itemSelector: props.itemSelector ?? { 'item.$': '$$.Map.Item.Value', 'index.$': '$$.Map.Item.Index' },
    maxConcurrency,
    ...('maxFailurePercentage' in tolerance ? { toleratedFailurePercentage: tolerance.maxFailurePercentage } : {}),
    ...('maxFailurePercentagePath' in tolerance ? { toleratedFailurePercentagePath: tolerance.maxFailurePercentagePath } : {}),
    ...('maxFailures' in tolerance ? { toleratedFailureCount: tolerance.maxFailures } : {}),
    resultSelector: { 'manifest.$': '$.ResultWriterDetails' },
    resultPath: props.resultPath,
  });
  map.itemProcessor(props.iterator(scope));
  acknowledgeOnStateMachine(scope, [
    {
      // CDK builds the Distributed Map's S3 grants from the bucket name, not its ARN.
      id: iam5Resource(scope, `arn:${Aws.PARTITION}:s3:::${bucket.bucketName}/*`),
      reason:
        'The ItemReader reads an items file and the ResultWriter writes result files whose keys are made at run time (execution and map-run ids), so the state machine reads and writes objects of the platform bucket by wildcard.',
    },
  ]);
  return sfn.Chain.start(map);
}
