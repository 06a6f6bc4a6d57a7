/**
 * Publish artifact: copy the step's files under artifacts/<name>/<version>/ and write the
 * version's index entry (lineage, metrics, card). Cached like any step, keyed by the files
 * and metadata (not the execution), so a fully cached rerun publishes nothing new; with
 * `eventPath`, also by the event the version records, so each event publishes its own version.
 */
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ARTIFACT_NAME } from '#shared/artifacts.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction, stackSingleton } from './function.ts';
import { acknowledgeFindings, s3GrantFindings } from './nag-findings.ts';
import type { StepScope } from './resources.ts';
import { invoke, step } from './step.ts';

export interface PublishArtifactProps {
  readonly scope: StepScope;
  /** Artifact name: lowercase letters, digits and "-". */
  readonly name?: string;
  /** Path of the artifact name in the state, when it is known only at run time (e.g. per training run). */
  readonly namePath?: string;
  /** Path of `[{uri, name}]`: the files to publish. */
  readonly filesPath?: string;
  /**
   * Or the path of an s3:// URI of a JSON document listing them (`[{uri, name}]`, at most
   * MAX_ARTIFACT_FILES): for a file list whose length the data decides, which must not pass
   * through the state. Give it a content-addressed URI: the URI is what the cache key holds.
   */
  readonly filesUriPath?: string;
  /** Path of a flat metrics object. Default: none. */
  readonly metricsPath?: string;
  /** Path of `[{name, version}]`: the artifact versions this one was made from. Default: none. */
  readonly lineagePath?: string;
  /** Path of the report's S3 URI, indexed as the artifact's card. Default: none. */
  readonly cardUriPath?: string;
  /**
   * Path of a small value naming the event this version records (e.g. the upload that started
   * the run), made part of the cache key: another event publishes a new version even of the same
   * files and metadata, so the latest version is the latest event's. Default: none, and the same
   * files and metadata published again return the version already published, which may not be
   * the latest.
   */
  readonly eventPath?: string;
  /** Where `{name, version, uri, sha256}` goes. */
  readonly resultPath: string;
}

function publishFunction(scope: Construct, steps: StepScope): PipelineFunction {
  return stackSingleton(scope, 'PublishArtifact', (stack) => {
    const { resources } = steps;
    const fn = new PipelineFunction(stack, 'PublishArtifact', {
      entry: join(REPO_ROOT, 'functions/platform/publish-artifact/handler.ts'),
      description: 'Copies artifact files to their version folder and indexes the version',
      environment: { [ENV.table]: resources.table.tableName, [ENV.bucket]: resources.bucket.bucketName },
      logRetention: resources.logRetention,
    });
    resources.table.grantReadWriteData(fn);
    resources.bucket.grantReadWrite(fn);
    acknowledgeFindings(
      fn,
      s3GrantFindings(
        fn,
        resources.bucket,
        ['read', 'put', 'delete'],
        '*',
        'Publishing copies files from wherever a step wrote them (runs/, checkpoints/, data/) to artifacts/<name>/<version>/, so it reads any key and writes keys that embed a version allocated at run time.',
      ),
    );
    return fn;
  });
}

export function publishArtifact(scope: Construct, stepId: string, props: PublishArtifactProps): sfn.Chain {
  if ((props.name === undefined) === (props.namePath === undefined)) {
    throw new ConfigError('name', props.name ?? props.namePath, 'give exactly one of name and namePath');
  }
  if (props.name !== undefined && !ARTIFACT_NAME.test(props.name)) {
    throw new ConfigError('name', props.name, 'must be lowercase letters, digits and "-", at most 63 characters');
  }
  if (props.eventPath !== undefined && !/^\$\$?\.[\w.]+$/.test(props.eventPath)) {
    throw new ConfigError('eventPath', props.eventPath, 'must be a JSONPath into the state or the context, e.g. "$.upload" or "$$.Execution.Name"');
  }
  if ((props.filesPath === undefined) === (props.filesUriPath === undefined)) {
    throw new ConfigError('filesPath', props.filesPath ?? props.filesUriPath, 'give exactly one of filesPath and filesUriPath');
  }
  const fn = publishFunction(scope, props.scope);
  // The execution id is lineage, not part of what is published: it stays out of the cache key.
  const runner = invoke(fn, { payload: { 'request.$': '{inputs}', 'executionId.$': '$$.Execution.Id' } });
  const inputs: Record<string, unknown> = {
    ...(props.name !== undefined ? { name: props.name } : { 'name.$': props.namePath }),
    pipeline: props.scope.pipeline,
    ...(props.filesPath !== undefined ? { 'files.$': props.filesPath } : { 'filesUri.$': props.filesUriPath }),
  };
  if (props.metricsPath) inputs['metrics.$'] = props.metricsPath;
  if (props.lineagePath) inputs['lineage.$'] = props.lineagePath;
  if (props.cardUriPath) inputs['cardUri.$'] = props.cardUriPath;
  // Part of the key only: the publish request's schema drops it.
  if (props.eventPath) inputs['event.$'] = props.eventPath;
  return step(scope, stepId, { run: runner, inputs, resultPath: props.resultPath, cache: { scope: props.scope } });
}
