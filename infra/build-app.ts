/** Builds the whole app: the platform stack and one stack per pipeline. */
import { App, type Environment } from 'aws-cdk-lib';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Construct } from 'constructs';
import { contextFlag } from '#pipelines/steps/context-flag.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { applyNag } from './nag.ts';
import { PlatformStack } from './platform-stack.ts';
import { PIPELINES, PLATFORM_STACK_ID, type PipelineEntry } from './registry.ts';

export interface BuildAppOptions {
  /** Output folder. Default: CDK's (cdk.out, or CDK_OUTDIR). */
  readonly outdir?: string;
  /** Skip asset bundling (the embedded runtime runs handlers from source). Default: false. */
  readonly skipBundling?: boolean;
  /** Run cdk-nag's AwsSolutions checks. Default: true. */
  readonly nag?: boolean;
  /** Skip CDK's built-in template validation (1.4 s and 300 MB per synth). Default: false. */
  readonly fastSynth?: boolean;
  /** Extra context on top of cdk.json's. */
  readonly context?: Record<string, unknown>;
  readonly env?: Environment;
  /** The pipelines to build. Default: every registered pipeline. */
  readonly pipelines?: readonly PipelineEntry[];
}

/**
 * CDK context flag: `-c frontier:sandbox=false` leaves out every pipeline that runs untrusted code
 * in the sandbox network (`sandboxed` in the registry: RewardSearch), and with them the app's only
 * interface endpoints, billed by the hour while deployed. It applies to any pipeline list, the
 * default or one given. Default: true.
 */
export const SANDBOX_CONTEXT = 'frontier:sandbox';

/** The `frontier:sandbox` flag as a boolean: true/false, or the strings `-c` passes; else throws. */
export function sandboxFromContext(scope: Construct): boolean {
  return contextFlag(scope, SANDBOX_CONTEXT, true, 'cdk deploy -c frontier:sandbox=false leaves out the sandboxed pipelines');
}

/** The context cdk.json gives, which an in-process App does not load by itself. */
export function cdkJsonContext(): Record<string, unknown> {
  const json = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return json.context ?? {};
}

export function buildApp(options: BuildAppOptions = {}): { app: App; platform: PlatformStack } {
  const app = new App({
    outdir: options.outdir,
    ...(options.fastSynth ? { builtinCloudFormationValidation: false } : {}),
    context: {
      ...cdkJsonContext(),
      ...options.context,
      ...(options.skipBundling ? { 'aws:cdk:bundling-stacks': [] } : {}),
    },
  });
  const env = options.env ?? {
    account: process.env.CDK_DEFAULT_ACCOUNT,
    region: process.env.CDK_DEFAULT_REGION,
  };
  const sandbox = sandboxFromContext(app);
  const platform = new PlatformStack(app, PLATFORM_STACK_ID, { env, description: 'frontier-pipelines: shared platform' });
  for (const pipeline of (options.pipelines ?? PIPELINES).filter((p) => sandbox || !p.sandboxed)) {
    pipeline.create(app, pipeline.stackId, {
      env,
      resources: platform.resources,
      description: `frontier-pipelines: ${pipeline.description}`,
    });
  }
  if (options.nag ?? true) applyNag(app);
  return { app, platform };
}
