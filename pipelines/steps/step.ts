/**
 * Steps: what runs (a Lambda, a Batch job) and how it is wrapped (inputs evaluated once,
 * optionally cached). Every step reads its inputs from a Parameters-style template and
 * writes its result at `resultPath`; scratch values live under `$._step` and are cleared
 * when the step ends, so state stays small (Step Functions' 256 KiB payload limit).
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import type { BatchJob } from './batch-job.ts';
import type { CodeVersion } from './code-version.ts';
import type { PipelineFunction } from './function.ts';
import { acknowledgeOnStateMachine, iam5Resource, invokeGrantFinding } from './nag-findings.ts';
import { checkStepId, stateName } from './names.ts';
import type { StepScope } from './resources.ts';
import { presignFunction } from './presign.ts';
import { MAX_PRESIGN_SECONDS, STAGING_URL_VARIABLE } from '#shared/presign.ts';
import { cachePartition } from '#shared/table.ts';

/** Where a step's scratch values live while it runs. */
export const SCRATCH = '$._step';

/**
 * The largest result.json a job step reads into the state: a bigger one fails the step with
 * `JobResultTooLarge` (catchable, unlike a state over 256 KiB). A job whose result can be larger
 * runs with `result: 'uri'` and its readers fetch it.
 */
export const MAX_JOB_RESULT_BYTES = 64 * 1024;

/** How long a sandboxed job's presigned URLs allow for its wait in the queue before it starts. */
const QUEUE_WAIT_SECONDS = 3600;

/** Errors of the Lambda service itself, worth retrying; errors our code throws are not. */
export const LAMBDA_SERVICE_ERRORS = [
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
];

/**
 * Throttling and transient errors of direct DynamoDB and S3 integrations. Step Functions names
 * an SDK integration's error `<Service>.<Name>` with "Exception" always appended.
 */
export const SERVICE_ERRORS = [
  'DynamoDb.ProvisionedThroughputExceededException',
  'DynamoDb.RequestLimitExceededException',
  'DynamoDb.ThrottlingException',
  'DynamoDb.InternalServerErrorException',
  'S3.SlowDownException',
  'S3.InternalErrorException',
  'S3.ServiceUnavailableException',
];

export function retryServiceErrors(state: sfn.TaskStateBase, errors: string[]): void {
  state.addRetry({
    errors,
    interval: Duration.seconds(1),
    maxAttempts: 4,
    backoffRate: 2,
    maxDelay: Duration.seconds(30),
    jitterStrategy: sfn.JitterType.FULL,
  });
}

/** What a step runs. `build` reads the payload at `payloadPath` and writes at `resultPath`. */
export interface StepRunner {
  /** The code version of what runs, part of the cache key. */
  readonly codeVersion: CodeVersion;
  build(scope: Construct, stepId: string, payloadPath: string, resultPath: string): sfn.Chain;
}

/**
 * Run a PipelineFunction: one invoke, service errors retried with jitter. The event is the
 * step's inputs; `payload` builds another event from them (its JSONPaths may use
 * `{inputs}`, replaced by the inputs' path), e.g. to add values that stay out of the cache key.
 */
export function invoke(fn: PipelineFunction, options: { payload?: Record<string, string> } = {}): StepRunner {
  return {
    codeVersion: fn.codeVersion,
    build(scope, stepId, payloadPath, resultPath) {
      const payload = options.payload;
      const task = new tasks.LambdaInvoke(scope, stateName(stepId, 'Invoke'), {
        lambdaFunction: fn,
        // The state's input narrowed to the payload is the event; ResultPath still merges
        // into the whole state.
        ...(payload
          ? { payload: sfn.TaskInput.fromObject(Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, v.replace('{inputs}', payloadPath)]))) }
          : { inputPath: payloadPath }),
        payloadResponseOnly: true,
        retryOnServiceExceptions: false,
        resultPath,
      });
      retryServiceErrors(task, LAMBDA_SERVICE_ERRORS);
      acknowledgeOnStateMachine(scope, [invokeGrantFinding(scope, fn.functionArn)]);
      return sfn.Chain.start(task);
    },
  };
}

/**
 * Run a Batch job with `submitJob.sync`: write its spec to S3, submit, wait, then read the
 * `result.json` the job wrote under OUTPUT_URI. Retries of user code are Batch attempts
 * (see BatchJob), never Step Functions retries. The spec is the step's inputs; `payload` builds
 * another spec from them (its JSONPaths may use `{inputs}`), e.g. to pass where a checkpoint
 * lives while only its content hash is part of the cache key.
 */
export function runJob(
  job: BatchJob,
  scope: StepScope,
  options: {
    payload?: Record<string, unknown>;
    /**
     * A JSONPath to the S3 key (in the platform bucket) of a spec document written earlier, e.g. by
     * a Lambda, copied as the job's spec: for a spec that holds what does not belong in the state
     * (a source, a long list). Instead of `payload`.
     */
    specKeyPath?: string;
    /**
     * `inline` (default): the job's result.json, at most MAX_JOB_RESULT_BYTES, is the step's
     * result. `uri`: the result is `{resultUri}` and readers fetch it, for results whose size the
     * job's input decides.
     */
    result?: 'inline' | 'uri';
    /**
     * A JSONPath (into the state's input, e.g. `$.item.timeoutSeconds`) to the job's wall-clock
     * limit in seconds, set at submit: Batch's attempt timeout (60 s at least; it replaces the
     * definition's), and locally the job's or the sandbox's wall limit.
     */
    timeoutPath?: string;
  } = {},
): StepRunner {
  for (const [field, path] of [
    ['timeoutPath', options.timeoutPath],
    ['specKeyPath', options.specKeyPath],
  ] as const) {
    if (path !== undefined && !/^\$\.[\w.]+$/.test(path)) {
      throw new ConfigError(field, path, 'must be a JSONPath starting with "$." (e.g. "$.item.specKey")');
    }
  }
  if (options.specKeyPath !== undefined && options.payload !== undefined) {
    throw new ConfigError('specKeyPath', options.specKeyPath, 'cannot be combined with payload: the spec is either copied or built');
  }
  const { bucket } = scope.resources;
  const resultMode = options.result ?? 'inline';
  return {
    codeVersion: job.codeVersion,
    build(construct, stepId, inputsPath, resultPath) {
      const payload = options.payload;
      const payloadPath = payload ? `${SCRATCH}.job.spec` : inputsPath;
      const buildSpec = payload
        ? new sfn.Pass(construct, stateName(stepId, 'Job spec'), {
            parameters: withInputsPath(payload, inputsPath) as Record<string, unknown>,
            resultPath: payloadPath,
          })
        : undefined;
      const runPrefix = `States.Format('runs/${scope.pipeline}/{}/${stepId}/{}/', $$.Execution.Name, ${SCRATCH}.job.id)`;
      const prepare = new sfn.Pass(construct, stateName(stepId, 'Job id'), {
        parameters: { 'id.$': 'States.UUID()' },
        resultPath: `${SCRATCH}.job`,
      });
      const locate = new sfn.Pass(construct, stateName(stepId, 'Job paths'), {
        parameters: {
          'id.$': `${SCRATCH}.job.id`,
          'specKey.$': `States.Format('{}spec.json', ${runPrefix})`,
          'resultKey.$': `States.Format('{}output/result.json', ${runPrefix})`,
          'specUri.$': `States.Format('s3://{}/{}spec.json', '${bucket.bucketName}', ${runPrefix})`,
          'outputUri.$': `States.Format('s3://{}/{}output/', '${bucket.bucketName}', ${runPrefix})`,
        },
        resultPath: `${SCRATCH}.job`,
      });
      const writeSpec = options.specKeyPath
        ? new tasks.CallAwsService(construct, stateName(stepId, 'Copy spec'), {
            service: 's3',
            action: 'copyObject',
            // CopyObject is authorized by s3:GetObject on the source and s3:PutObject on the copy.
            iamAction: 's3:PutObject',
            parameters: {
              Bucket: bucket.bucketName,
              Key: sfn.JsonPath.stringAt(`${SCRATCH}.job.specKey`),
              CopySource: sfn.JsonPath.format(`${bucket.bucketName}/{}`, sfn.JsonPath.stringAt(options.specKeyPath)),
            },
            iamResources: [bucket.arnForObjects('runs/*')],
            additionalIamStatements: [new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [bucket.arnForObjects(`data/${scope.pipeline}/*`)] })],
            resultPath: sfn.JsonPath.DISCARD,
          })
        : new tasks.CallAwsService(construct, stateName(stepId, 'Write spec'), {
            service: 's3',
            action: 'putObject',
            parameters: {
              Bucket: bucket.bucketName,
              Key: sfn.JsonPath.stringAt(`${SCRATCH}.job.specKey`),
              Body: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt(payloadPath)),
              ContentType: 'application/json',
            },
            iamResources: [bucket.arnForObjects('runs/*')],
            resultPath: sfn.JsonPath.DISCARD,
          });
      retryServiceErrors(writeSpec, SERVICE_ERRORS);
      // A sandboxed job holds no credentials: presigned URLs for its spec and its declared outputs,
      // in a staging document next to the spec. Only that document's URL goes to the container:
      // each URL carries the signer's session token (up to 2,000 characters), and Batch refuses
      // container overrides over 8,192 characters.
      // The output PUTs last the queue wait (an hour's margin, within the signer's session) and the run.
      const runSeconds = Math.min(job.timeoutSeconds + QUEUE_WAIT_SECONDS, MAX_PRESIGN_SECONDS);
      const presign = job.sandboxOutputs
        ? new tasks.LambdaInvoke(construct, stateName(stepId, 'Presign'), {
            lambdaFunction: presignFunction(construct, scope),
            payload: sfn.TaskInput.fromObject({
              specUri: sfn.JsonPath.stringAt(`${SCRATCH}.job.specUri`),
              outputUri: sfn.JsonPath.stringAt(`${SCRATCH}.job.outputUri`),
              outputs: [...job.sandboxOutputs],
              expiresSeconds: runSeconds,
              // The staging document and the spec are read as the container starts: the queue
              // wait, or until the last attempt may start (never longer than the outputs last).
              stagingExpiresSeconds: Math.min(QUEUE_WAIT_SECONDS + (job.attempts - 1) * job.timeoutSeconds, runSeconds),
            }),
            payloadResponseOnly: true,
            retryOnServiceExceptions: false,
            resultPath: `${SCRATCH}.job.staging`,
          })
        : undefined;
      if (presign) {
        retryServiceErrors(presign, LAMBDA_SERVICE_ERRORS);
        acknowledgeOnStateMachine(construct, [invokeGrantFinding(construct, presignFunction(construct, scope).functionArn)]);
      }
      const submit = new tasks.BatchSubmitJob(construct, stateName(stepId, 'Run job'), {
        jobName: stepId,
        jobQueueArn: job.queue.jobQueueArn,
        jobDefinitionArn: job.jobDefinition.jobDefinitionArn,
        integrationPattern: sfn.IntegrationPattern.RUN_JOB,
        containerOverrides: {
          environment: {
            JOB_SPEC_URI: sfn.JsonPath.stringAt(`${SCRATCH}.job.specUri`),
            OUTPUT_URI: sfn.JsonPath.stringAt(`${SCRATCH}.job.outputUri`),
            ...(presign ? { [STAGING_URL_VARIABLE]: sfn.JsonPath.stringAt(`${SCRATCH}.job.staging.stagingUrl`) } : {}),
          },
        },
        ...(options.timeoutPath ? { taskTimeout: sfn.Timeout.at(options.timeoutPath) } : {}),
        resultSelector: { 'jobId.$': '$.JobId', 'status.$': '$.Status' },
        resultPath: `${SCRATCH}.job.batch`,
        // No Step Functions retry: Batch attempts own user-code retries.
      });
      // Without s3:ListBucket a missing key is AccessDenied, not NoSuchKey, and the Catch below that
      // names a job without result.json would never match. No s3:prefix condition: a GetObject or
      // HeadObject request carries no prefix for S3 to test it against.
      const listBucket = new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [bucket.bucketArn] });
      const noResult = new sfn.Fail(construct, stateName(stepId, 'No result'), {
        error: 'JobResultMissing',
        cause: `The ${stepId} job exited 0 but wrote no result.json under its OUTPUT_URI`,
      });
      // The result's size is known before it is read: a result.json over the bound fails the step
      // with an error a Catch can take, where reading it would overflow the state.
      const sizeResult = new tasks.CallAwsService(construct, stateName(stepId, 'Result size'), {
        service: 's3',
        action: 'headObject',
        // HeadObject is authorized by s3:GetObject; there is no s3:HeadObject action.
        iamAction: 's3:GetObject',
        parameters: { Bucket: bucket.bucketName, Key: sfn.JsonPath.stringAt(`${SCRATCH}.job.resultKey`) },
        iamResources: [bucket.arnForObjects('runs/*')],
        additionalIamStatements: [listBucket],
        resultSelector: { 'bytes.$': '$.ContentLength' },
        resultPath: `${SCRATCH}.job.head`,
      });
      retryServiceErrors(sizeResult, SERVICE_ERRORS);
      // HeadObject has no body to name the error: a missing key is NotFound (NoSuchKey for GetObject).
      sizeResult.addCatch(noResult, { errors: ['S3.NoSuchKeyException', 'S3.NotFoundException'] });
      let delivered: sfn.IChainable & sfn.INextable;
      if (resultMode === 'uri') {
        delivered = new sfn.Pass(construct, stateName(stepId, 'Job result'), {
          parameters: {
            'resultUri.$': `States.Format('s3://{}/{}', '${bucket.bucketName}', ${SCRATCH}.job.resultKey)`,
            ...(job.sandboxOutputs ? { 'outputUri.$': `${SCRATCH}.job.outputUri` } : {}),
          },
          resultPath,
        });
        sizeResult.next(delivered);
      } else {
        const readResult = new tasks.CallAwsService(construct, stateName(stepId, 'Read result'), {
          service: 's3',
          action: 'getObject',
          parameters: { Bucket: bucket.bucketName, Key: sfn.JsonPath.stringAt(`${SCRATCH}.job.resultKey`) },
          iamResources: [bucket.arnForObjects('runs/*')],
          additionalIamStatements: [listBucket],
          resultSelector: { 'value.$': 'States.StringToJson($.Body)' },
          resultPath: `${SCRATCH}.job.result`,
        });
        retryServiceErrors(readResult, SERVICE_ERRORS);
        readResult.addCatch(noResult, { errors: ['S3.NoSuchKeyException'] });
        const tooLarge = new sfn.Fail(construct, stateName(stepId, 'Result too large'), {
          error: 'JobResultTooLarge',
          cause: `The ${stepId} job wrote a result.json over ${MAX_JOB_RESULT_BYTES} bytes; a job whose result can be larger runs with result: 'uri'`,
        });
        // A sandboxed job's result.json is the candidate's own word: it comes with the output prefix
        // the runner chose, so that trusted steps read outputs from there, never from a location
        // the job wrote.
        delivered = new sfn.Pass(construct, stateName(stepId, 'Job result'), {
          ...(job.sandboxOutputs
            ? { parameters: { 'result.$': `${SCRATCH}.job.result.value`, 'outputUri.$': `${SCRATCH}.job.outputUri` } }
            : { inputPath: `${SCRATCH}.job.result.value` }),
          resultPath,
        });
        sizeResult.next(
          new sfn.Choice(construct, stateName(stepId, 'Result fits?'))
            .when(sfn.Condition.numberGreaterThan(`${SCRATCH}.job.head.bytes`, MAX_JOB_RESULT_BYTES), tooLarge)
            .otherwise(readResult.next(delivered)),
        );
      }
      acknowledgeOnStateMachine(construct, [
        {
          id: iam5Resource(construct, bucket.arnForObjects('runs/*')),
          reason:
            'The job spec and result.json keys embed the execution name and a job id made at run time (runs/<pipeline>/<execution>/<step>/<id>/), so the grant covers the runs/ prefix.',
        },
        ...(options.specKeyPath
          ? [
              {
                id: iam5Resource(construct, bucket.arnForObjects(`data/${scope.pipeline}/*`)),
                reason: `The job's spec is copied from a content-addressed document a step of the pipeline wrote under data/${scope.pipeline}/ (its key is the sha256 of its content, known at run time); read only.`,
              },
            ]
          : []),
        {
          id: iam5Resource(construct, Stack.of(construct).formatArn({ service: 'batch', resource: 'job-definition', resourceName: '*' })),
          reason:
            "CDK's BatchSubmitJob always grants batch:SubmitJob on job-definition/* of this account and region (not configurable); a definition's ARN carries a revision that changes whenever the definition is updated.",
        },
      ]);
      const start = sfn.Chain.start(prepare).next(locate);
      const written = (buildSpec ? start.next(buildSpec) : start).next(writeSpec);
      (presign ? written.next(presign) : written).next(submit).next(sizeResult);
      // The job's scratch (its paths, and the result read) is cleared once the result is delivered.
      const done = new sfn.Pass(construct, stateName(stepId, 'Job done'), { result: sfn.Result.fromObject({}), resultPath: `${SCRATCH}.job` });
      delivered.next(done);
      return sfn.Chain.custom(prepare, [done], done);
    },
  };
}

/** A Parameters template with `{inputs}` in its JSONPath strings replaced, at any depth. */
function withInputsPath(template: unknown, inputsPath: string): unknown {
  if (typeof template === 'string') return template.replace('{inputs}', inputsPath);
  if (Array.isArray(template)) return template.map((v) => withInputsPath(v, inputsPath));
  if (template && typeof template === 'object') {
    return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, withInputsPath(v, inputsPath)]));
  }
  return template;
}

export interface StepProps {
  /** What runs. */
  readonly run: StepRunner;
  /**
   * The step's inputs as a Parameters template (`{'n.$': '$.config.n'}`). Inputs are
   * evaluated once; with caching, their JSON text is part of the key, checked at synth against
   * States.Hash's 10,000 characters from the scope's declared bounds: pass big data as S3 URIs
   * and key it by content hash.
   */
  readonly inputs: Record<string, unknown>;
  /** Where the result goes in the state, e.g. `$.steps.train`. */
  readonly resultPath: string;
  /** Cache the result in the table, keyed by (pipeline, step, code version, inputs). Default: no cache. */
  readonly cache?: CacheOptions;
}

export interface CacheOptions {
  readonly scope: StepScope;
  /** Changes the key on purpose, invalidating every cached result of this step. */
  readonly salt?: string;
}

/** A step: inputs evaluated into scratch, the runner, and (optionally) the cache around it. */
export function step(scope: Construct, stepId: string, props: StepProps): sfn.Chain {
  checkStepId(stepId);
  if (!props.resultPath.startsWith('$.') || props.resultPath.startsWith(SCRATCH)) {
    throw new ConfigError('resultPath', props.resultPath, `must be a path under "$." outside ${SCRATCH}`);
  }
  const inputs = new sfn.Pass(scope, stateName(stepId, 'Inputs'), {
    parameters: { in: props.inputs },
    resultPath: SCRATCH,
  });
  const tidy = new sfn.Pass(scope, stateName(stepId, 'Done'), { result: sfn.Result.fromObject({}), resultPath: SCRATCH });
  if (!props.cache) {
    const body = props.run.build(scope, stepId, `${SCRATCH}.in`, props.resultPath);
    return sfn.Chain.start(inputs).next(body).next(tidy);
  }
  return cachedChain(scope, stepId, props, inputs, tidy);
}

/**
 * The cache around a runner, as direct DynamoDB and S3 states (no Lambda, no container):
 * partition `CACHE#<pipeline>#<step>`, key = sha256(step | code version | inputs JSON); a hit whose
 * S3 outputs are gone is a miss. The pipeline is in the partition because step names repeat
 * across pipelines (selfplay and lm-sft both have `train`): one partition per pipeline's step
 * keeps their entries, and what `cache explain` compares, apart.
 * A runner's result may list the S3 objects it made as `s3Outputs: [{Bucket, Key}]`.
 */
function cachedChain(scope: Construct, stepId: string, props: StepProps, inputs: sfn.Pass, tidy: sfn.Pass): sfn.Chain {
  const { resources, pipeline } = props.cache!.scope;
  const table = resources.table;
  const partition = cachePartition(pipeline, stepId);
  const version = props.run.codeVersion.hash + (props.cache!.salt ? `+${props.cache!.salt}` : '');
  const s = SCRATCH;
  // States.Hash takes at most 10,000 characters and fails the run where no Catch can: the key's
  // input is bounded at synth, from the bounds the pipeline declares for what its state holds.
  const bounds = props.cache!.scope.bounds;
  if (!bounds) {
    throw new ConfigError(`${stepId}: cache.scope.bounds`, undefined, "a cached step needs the bounds of its inputs (a PipelineStack's this.bounds)");
  }
  bounds.checkCacheKey(stepId, version, props.inputs);

  const key = new sfn.Pass(scope, stateName(stepId, 'Cache key'), {
    parameters: {
      'value.$': `States.Hash(States.Format('{}|{}|{}', '${stepId}', '${version}', States.JsonToString(${s}.in)), 'SHA-256')`,
    },
    resultPath: `${s}.key`,
  });
  const lookup = new tasks.CallAwsService(scope, stateName(stepId, 'Cache lookup'), {
    service: 'dynamodb',
    action: 'getItem',
    parameters: {
      TableName: table.tableName,
      Key: { pk: { S: partition }, sk: { S: sfn.JsonPath.stringAt(`${s}.key.value`) } },
      ConsistentRead: true,
    },
    iamResources: [table.tableArn],
    resultPath: `${s}.lookup`,
  });
  retryServiceErrors(lookup, SERVICE_ERRORS);

  const hit = new sfn.Pass(scope, stateName(stepId, 'Cache hit'), {
    parameters: {
      'value.$': `States.StringToJson(${s}.lookup.Item.output.S)`,
      'outputs.$': `States.StringToJson(${s}.lookup.Item.s3Outputs.S)`,
    },
    resultPath: `${s}.hit`,
  });
  const headObject = new tasks.CallAwsService(scope, stateName(stepId, 'Output exists'), {
    service: 's3',
    action: 'headObject',
    // HeadObject is authorized by s3:GetObject; there is no s3:HeadObject action.
    iamAction: 's3:GetObject',
    parameters: { 'Bucket.$': '$.Bucket', 'Key.$': '$.Key' },
    iamResources: [resources.bucket.arnForObjects('*')],
    resultPath: sfn.JsonPath.DISCARD,
  });
  const checkOutputs = new sfn.Map(scope, stateName(stepId, 'Check outputs'), {
    itemsPath: `${s}.hit.outputs`,
    maxConcurrency: 10,
    resultPath: sfn.JsonPath.DISCARD,
  });
  checkOutputs.itemProcessor(headObject);
  acknowledgeOnStateMachine(scope, [
    {
      id: iam5Resource(scope, resources.bucket.arnForObjects('*')),
      reason:
        "A cache hit checks that the S3 outputs it lists still exist; a step's outputs may be under any prefix (data/, runs/, artifacts/), known only from the cached item at run time. The check is read-only.",
    },
  ]);
  const restore = new sfn.Pass(scope, stateName(stepId, 'Restore'), { inputPath: `${s}.hit.value`, resultPath: props.resultPath });

  const body = props.run.build(scope, stepId, `${s}.in`, `${s}.out`);
  // The outputs the result lists (none when it lists none), without copying the result itself:
  // a job's result may be tens of KiB, and every copy counts against the state's 256 KiB.
  const listed = new sfn.Pass(scope, stateName(stepId, 'Output list'), {
    parameters: { 'value.$': `${s}.out.s3Outputs` },
    resultPath: `${s}.outputs`,
  });
  const unlisted = new sfn.Pass(scope, stateName(stepId, 'No outputs'), { result: sfn.Result.fromObject({ value: [] }), resultPath: `${s}.outputs` });
  const store = new tasks.CallAwsService(scope, stateName(stepId, 'Cache store'), {
    service: 'dynamodb',
    action: 'putItem',
    parameters: {
      TableName: table.tableName,
      Item: {
        pk: { S: partition },
        sk: { S: sfn.JsonPath.stringAt(`${s}.key.value`) },
        pipeline: { S: pipeline },
        step: { S: stepId },
        codeVersion: { S: version },
        inputs: { S: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt(`${s}.in`)) },
        output: { S: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt(`${s}.out`)) },
        s3Outputs: { S: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt(`${s}.outputs.value`)) },
        executionId: { S: sfn.JsonPath.stringAt('$$.Execution.Id') },
        createdAt: { S: sfn.JsonPath.stringAt('$$.Execution.StartTime') },
      },
    },
    iamResources: [table.tableArn],
    resultPath: sfn.JsonPath.DISCARD,
  });
  retryServiceErrors(store, SERVICE_ERRORS);
  const deliver = new sfn.Pass(scope, stateName(stepId, 'Deliver'), { inputPath: `${s}.out`, resultPath: props.resultPath });

  const outputs = new sfn.Choice(scope, stateName(stepId, 'Outputs listed?'))
    .when(sfn.Condition.isPresent(`${s}.out.s3Outputs`), listed)
    .otherwise(unlisted)
    .afterwards();
  const miss = sfn.Chain.start(body).next(outputs).next(store).next(deliver).next(tidy);
  // A cached output whose S3 objects were deleted is a miss: recompute rather than hand back dangling URIs.
  checkOutputs.addCatch(miss, { errors: ['States.ALL'], resultPath: `${s}.miss` });
  const choice = new sfn.Choice(scope, stateName(stepId, 'Cached?'))
    .when(sfn.Condition.isPresent(`${s}.lookup.Item`), sfn.Chain.start(hit).next(checkOutputs).next(restore).next(tidy))
    .otherwise(miss);
  sfn.Chain.start(inputs).next(key).next(lookup).next(choice);
  return sfn.Chain.custom(inputs, [tidy], tidy);
}
