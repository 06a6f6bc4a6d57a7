/** `frontier run --target aws`: start and follow an execution of a deployed pipeline stack. */
import { reportUriOf, runReportKey } from '#shared/cost/run-report.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, SFNClient, StartExecutionCommand, type HistoryEvent } from '@aws-sdk/client-sfn';
import { STATE_MACHINE_OUTPUT } from '#pipelines/steps/pipeline.ts';
import { MissingDeploymentError } from '#shared/errors.ts';
import { PLATFORM_STACK_ID, type PipelineEntry } from '../registry.ts';
import type { Io } from './output.ts';
import { failureLines } from './run-outcome.ts';

export interface AwsRunOptions {
  readonly name?: string;
  /** What to put in the platform bucket before the run starts (e.g. reward files' sources). */
  readonly beforeStart?: (bucket: string) => Promise<void>;
  /** Milliseconds between history polls. Default: 2000. */
  readonly pollMs?: number;
  /** Print a failure's raw cause (a Lambda's stack trace) after its one-line summary. */
  readonly verbose?: boolean;
}

/** What --target aws needs before anything else, said the same way for each missing piece. */
function awsSetupHelp(entry: PipelineEntry): string {
  return (
    'configure a region and credentials (aws configure, or AWS_PROFILE / AWS_REGION), and deploy ' +
    `the stack first: npm run deploy -- FrontierPlatform ${entry.stackId}`
  );
}

/** The deployed platform's table and bucket (the FrontierPlatform stack's outputs), or a clear error. */
export async function deployedPlatform(cfn = new CloudFormationClient({})): Promise<{ table: string; bucket: string }> {
  let outputs;
  try {
    outputs = (await cfn.send(new DescribeStacksCommand({ StackName: PLATFORM_STACK_ID }))).Stacks?.[0]?.Outputs ?? [];
  } catch (error) {
    if ((error as Error).name === 'ValidationError')
      throw new MissingDeploymentError(`the platform is not deployed (no stack ${PLATFORM_STACK_ID}); deploy it with: npx cdk deploy ${PLATFORM_STACK_ID}`);
    throw error;
  }
  const output = (key: string) => outputs.find((o) => o.OutputKey === key)?.OutputValue;
  const table = output('TableName');
  const bucket = output('BucketName');
  if (!table || !bucket) throw new MissingDeploymentError(`stack ${PLATFORM_STACK_ID} has no TableName/BucketName outputs; redeploy it`);
  return { table, bucket };
}

/** The state machine ARN of a deployed pipeline stack, or a clear error saying how to deploy it. */
export async function deployedStateMachine(entry: PipelineEntry, cfn = new CloudFormationClient({})): Promise<string> {
  // The SDK's own words for a missing region are a bare Error("Region is missing").
  const region = await cfn.config.region().catch(() => undefined);
  if (!region) throw new MissingDeploymentError(`--target aws: no AWS region is set; ${awsSetupHelp(entry)}`);
  try {
    const out = await cfn.send(new DescribeStacksCommand({ StackName: entry.stackId }));
    const arn = out.Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === STATE_MACHINE_OUTPUT)?.OutputValue;
    if (!arn)
      throw new MissingDeploymentError(
        `stack ${entry.stackId} in ${region} has no ${STATE_MACHINE_OUTPUT} output; redeploy it: npx cdk deploy ${entry.stackId}`,
      );
    return arn;
  } catch (error) {
    const e = error as Error;
    if (e instanceof MissingDeploymentError) throw e;
    if (e.name === 'ValidationError' && /does not exist/.test(e.message)) {
      throw new MissingDeploymentError(
        `pipeline ${entry.name} is not deployed in ${region} (no stack ${entry.stackId}); deploy it with: npx cdk deploy ${entry.stackId}`,
      );
    }
    if (e.name === 'CredentialsProviderError') {
      throw new MissingDeploymentError(`--target aws: no AWS credentials were found for ${region}; ${awsSetupHelp(entry)}`);
    }
    throw error;
  }
}

export async function runAws(
  entry: PipelineEntry,
  config: Record<string, unknown>,
  options: AwsRunOptions,
  io: Io,
  clients = { cfn: new CloudFormationClient({}), sfn: new SFNClient({}) },
): Promise<{ status: string; output?: unknown; error?: string; cause?: string }> {
  const stateMachineArn = await deployedStateMachine(entry, clients.cfn);
  if (options.beforeStart) await options.beforeStart((await deployedPlatform(clients.cfn)).bucket);
  const { executionArn } = await clients.sfn.send(new StartExecutionCommand({ stateMachineArn, name: options.name, input: JSON.stringify({ config }) }));
  io.out(`started ${executionArn}`);
  const followed: Followed = { mapItems: { done: 0, failed: 0 } };
  // History ids only grow: each poll prints the events after the last one shown.
  let lastShown = 0;
  for (;;) {
    let nextToken: string | undefined;
    do {
      const page = await clients.sfn.send(new GetExecutionHistoryCommand({ executionArn, nextToken, maxResults: 500 }));
      for (const event of page.events ?? []) {
        if ((event.id ?? 0) <= lastShown) continue;
        lastShown = event.id ?? lastShown;
        describeEvent(event, followed, io);
      }
      nextToken = page.nextToken;
    } while (nextToken);
    const described = await clients.sfn.send(new DescribeExecutionCommand({ executionArn }));
    if (described.status !== 'RUNNING' && described.status !== 'PENDING_REDRIVE') {
      io.out(`${described.status}`);
      const output = described.output ? JSON.parse(described.output) : undefined;
      const end = { status: described.status!, error: described.error, cause: described.cause, state: followed.lastState };
      if (end.status === 'SUCCEEDED') {
        io.out(JSON.stringify(output, null, 2).slice(0, 4000));
        io.out(runCostWhere(entry.name, executionArn!, output));
      } else for (const line of failureLines(end, options.verbose ?? false)) io.err(line);
      return { status: end.status, output, error: end.error, cause: end.cause };
    }
    await new Promise((r) => setTimeout(r, options.pollMs ?? 2000));
  }
}

/**
 * Where a succeeded run's cost line goes on AWS: the stack's run-cost function writes it, with the
 * report, once EventBridge has told it the run ended (pipelines/steps/run-cost.ts).
 */
export function runCostWhere(pipeline: string, executionArn: string, output: unknown): string {
  const reportUri = reportUriOf(output);
  const bucket = reportUri === undefined ? undefined : parseS3Uri(reportUri, 'reportUri').Bucket;
  const where = bucket
    ? `with the report at s3://${bucket}/${runReportKey(pipeline, executionArn.split(':').pop()!)}`
    : "in its log (this pipeline's runs have no report)";
  return `the run's cost and its cache's saving: the run-cost function writes them ${where} within a few minutes; npx frontier runs show ${executionArn} --target aws prints them now`;
}

/** What the history has shown so far: Map items done and failed, and the last state entered. */
interface Followed {
  readonly mapItems: { done: number; failed: number };
  /** The state a run that ends was in when it ended. */
  lastState?: string;
}

function describeEvent(event: HistoryEvent, followed: Followed, io: Io): void {
  const { mapItems } = followed;
  if (event.type?.endsWith('StateEntered') && event.stateEnteredEventDetails?.name) {
    followed.lastState = event.stateEnteredEventDetails.name;
    io.out(`  > ${event.stateEnteredEventDetails.name}`);
  } else if (event.type === 'MapIterationSucceeded') {
    io.out(`    map items: ${++mapItems.done} done${mapItems.failed ? `, ${mapItems.failed} failed` : ''}`);
  } else if (event.type === 'MapIterationFailed') {
    io.out(`    map items: ${mapItems.done} done, ${++mapItems.failed} failed`);
  }
}
