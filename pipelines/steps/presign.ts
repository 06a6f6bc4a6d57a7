/**
 * The presign Lambda of a stack: presigned URLs for sandboxed jobs, which hold no credentials
 * (shared/presign.ts), written to a staging document next to the job's spec. It can sign only
 * what its own role may do: read and write job objects.
 */
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction, stackSingleton } from './function.ts';
import { acknowledgeFindings, s3GrantFindings } from './nag-findings.ts';
import type { StepScope } from './resources.ts';

export function presignFunction(scope: Construct, steps: StepScope): PipelineFunction {
  return stackSingleton(scope, 'PresignJob', (stack) => {
    const { bucket } = steps.resources;
    const fn = new PipelineFunction(stack, 'PresignJob', {
      entry: join(REPO_ROOT, 'functions/platform/presign-job/handler.ts'),
      description: "Writes a sandboxed job's staging document (spec GET, output PUTs) and presigns its GET",
      environment: { [ENV.bucket]: bucket.bucketName },
      logRetention: steps.resources.logRetention,
    });
    bucket.grantRead(fn, 'runs/*');
    bucket.grantPut(fn, 'runs/*');
    acknowledgeFindings(fn, [
      ...s3GrantFindings(
        fn,
        bucket,
        ['read', 'put'],
        'runs/*',
        "A presigned URL carries its signer's permissions: the job's spec, staging document and outputs live under runs/<pipeline>/<execution>/<step>/<job id>/, keys made at run time.",
      ),
    ]);
    return fn;
  });
}
