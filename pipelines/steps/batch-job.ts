/**
 * BatchJob: one container job of batch-jobs/<name>/ as an AWS Batch job definition.
 * The image is built from batch-jobs/ (so the job's Dockerfile can copy batch-jobs/common),
 * user-code retries are Batch attempts (spot reclaims retried, application errors not),
 * and the metadata lets the embedded runtime run the same entrypoint as a child process.
 *
 * A Node job (the `entry` prop: a TypeScript file in the job folder) is built from the
 * repository root instead, because its image bundles shared/ with the package files; the image
 * runs the bundle (`node main.mjs`), the embedded runtime runs the entry itself under tsx.
 */
import { Duration, Size } from 'aws-cdk-lib';
import {
  Action,
  EcsEc2ContainerDefinition,
  EcsFargateContainerDefinition,
  EcsJobDefinition,
  type IJobQueue,
  Reason,
  RetryStrategy,
  type CfnJobDefinition,
} from 'aws-cdk-lib/aws-batch';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { ContainerImage } from 'aws-cdk-lib/aws-ecs';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { RemovalPolicy } from 'aws-cdk-lib';
import { LogDrivers } from 'aws-cdk-lib/aws-ecs';
import { Construct } from 'constructs';
import { existsSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import { jobCodeVersion, nodeJobCodeVersion, REPO_ROOT, type CodeVersion } from './code-version.ts';
import { META } from './function.ts';
import { acknowledgeFindings, s3GrantFindings } from './nag-findings.ts';
import type { StepResources } from './resources.ts';
import type { SandboxNetwork } from './sandbox-network.ts';
import { checkFitsInstance, DEFAULT_GPU_INSTANCE, defaultGpuJobMemoryMiB, type GpuInstanceType } from './gpu-instances.ts';

export interface BatchJobProps {
  /** Folder name under batch-jobs/. */
  readonly job: string;
  /** Command run in the image's working directory. Default: `python3 main.py`. Not with `entry`. */
  readonly command?: string[];
  /**
   * Makes this a Node job: its TypeScript entry, relative to the job folder (e.g. `main.ts`).
   * The image is built from the repository root with the job's Dockerfile, which must bundle
   * the entry to `main.mjs` in its working directory; the container runs `node main.mjs`, the
   * embedded runtime `node --import tsx <entry>` in the job folder. The code version covers
   * every file the entry bundles (shared/ included) and the job folder. Default: a Python job.
   */
  readonly entry?: string;
  /**
   * A Node job's native packages (e.g. onnxruntime-node): left out of its bundle, shipped beside
   * it by its build.ts, and counted in its code version by package version. Default: none.
   */
  readonly nativePackages?: readonly string[];
  /** GPUs per job; 0 runs on the Fargate (CPU) queue. Default: 0. */
  readonly gpus?: number;
  /** vCPUs per job. Default: 2 (CPU) or 4 (GPU). */
  readonly vcpus?: number;
  /**
   * Memory per job. Default: 4 GiB (CPU); for a GPU job, what its instance type registers for
   * jobs, rounded down to 512 MiB (15,360 MiB on a g6.xlarge; see gpu-instances.ts).
   */
  readonly memory?: Size;
  /**
   * A GPU job: the instance type it is sized for. The synth fails when its vCPUs, memory or GPUs
   * would not fit what that type registers (Batch would launch a larger, dearer one).
   * Default: g6.xlarge (4 vCPUs, 1 GPU, 16 GiB).
   */
  readonly instanceType?: GpuInstanceType;
  /** Wall-clock limit per attempt. Default: 2 hours. */
  readonly timeout?: Duration;
  /** Batch attempts for spot reclaims and host failures. Default: 3. */
  readonly attempts?: number;
  /** Extra environment variables. */
  readonly environment?: Record<string, string>;
  /** Changes the code version on purpose, invalidating cached results of this job. */
  readonly salt?: string;
  /**
   * Runs untrusted code (a Python job): on AWS in the sandbox network's queue (no route out but
   * the VPC endpoints) with no job role at all, so the container holds no AWS credentials; its
   * image's `sandbox_entry.py` (batch-jobs/common) stages the spec in and the declared outputs out
   * through presigned URLs for exactly this job's keys. Locally, in bubblewrap with the same
   * staging done by the runtime. The job's main.py must take `--spec FILE --output-dir DIR`.
   */
  readonly sandbox?: SandboxJobOptions;
  readonly resources: StepResources;
}

export interface SandboxJobOptions {
  /** Where it runs on AWS. */
  readonly network: SandboxNetwork;
  /** File names the job hands back besides result.json (e.g. policy.json). */
  readonly outputs: readonly string[];
  /**
   * The untrusted half of the job, a Python script in the job folder (e.g. reward_channel.py),
   * run apart from the job and joined to it by one socket: `<script> --socket FD` beside
   * `<job command> --reward-socket FD`. On AWS the stager runs it as another user than the job
   * (no access to the job's files or memory); locally it gets its own sandbox.
   */
  readonly worker?: string;
  /**
   * Local sandbox limits. The wall limit is the job's timeout, on AWS and locally: the
   * definition's, or the one set at submit (runJob's `timeoutPath`).
   */
  readonly limits?: { readonly cpuSeconds?: number; readonly memoryBytes?: number; readonly maxProcesses?: number };
}

export class BatchJob extends Construct {
  readonly jobDefinition: EcsJobDefinition;
  readonly queue: IJobQueue;
  readonly codeVersion: CodeVersion;
  readonly jobDir: string;
  /** Wall-clock limit per attempt, in seconds. */
  readonly timeoutSeconds: number;
  /** Batch attempts (spot reclaims and failed pulls are retried). */
  readonly attempts: number;
  /** The longest the job can keep its state machine waiting: every attempt to its timeout. */
  readonly worstCaseSeconds: number;
  /** A sandboxed job's declared outputs (besides result.json); undefined for a trusted job. */
  readonly sandboxOutputs?: readonly string[];

  constructor(scope: Construct, id: string, props: BatchJobProps) {
    super(scope, id);
    const jobDir = join(REPO_ROOT, 'batch-jobs', props.job);
    if (!existsSync(join(jobDir, 'Dockerfile'))) {
      throw new ConfigError('job', props.job, `batch-jobs/${props.job}/Dockerfile does not exist`);
    }
    const gpus = props.gpus ?? 0;
    const attempts = props.attempts ?? 3;
    if (!Number.isInteger(gpus) || gpus < 0 || gpus > 8) throw new ConfigError('gpus', gpus, 'must be an integer from 0 to 8');
    if (!Number.isInteger(attempts) || attempts < 1 || attempts > 10) {
      throw new ConfigError('attempts', attempts, 'must be an integer from 1 to 10 (the Batch limit)');
    }
    if (props.entry !== undefined) checkEntry(props.job, jobDir, props.entry, props.command);
    if (gpus === 0 && props.instanceType !== undefined) {
      throw new ConfigError('instanceType', props.instanceType, `job ${props.job} has no GPU: it runs on Fargate, which picks no instance type`);
    }
    const instanceType = props.instanceType ?? DEFAULT_GPU_INSTANCE;
    const gpuMemory = props.memory ?? Size.mebibytes(defaultGpuJobMemoryMiB(instanceType));
    if (gpus > 0) checkFitsInstance(props.job, instanceType, { vcpus: props.vcpus ?? 4, memoryMiB: gpuMemory.toMebibytes(), gpus });
    if (props.sandbox && (props.entry !== undefined || gpus > 0)) {
      throw new ConfigError('sandbox', props.job, 'a sandboxed job is a Python job on the CPU queue (no entry, no GPU)');
    }
    if (props.sandbox) {
      const worker = props.sandbox.worker;
      if (worker !== undefined && (!/^[\w-]+\.py$/.test(worker) || !existsSync(join(jobDir, worker)))) {
        throw new ConfigError('sandbox.worker', worker, `must be a Python script in batch-jobs/${props.job}/`);
      }
      for (const name of props.sandbox.outputs) {
        if (!/^[\w.-]{1,100}$/.test(name) || name === 'result.json' || name.startsWith('.')) {
          throw new ConfigError('sandbox.outputs', name, 'must be plain file names other than result.json');
        }
      }
    }
    this.jobDir = jobDir;
    this.timeoutSeconds = (props.timeout ?? Duration.hours(2)).toSeconds();
    this.attempts = attempts;
    this.worstCaseSeconds = this.timeoutSeconds * attempts;
    this.sandboxOutputs = props.sandbox ? [...props.sandbox.outputs] : undefined;
    this.codeVersion =
      props.entry === undefined ? jobCodeVersion(jobDir, props.salt) : nodeJobCodeVersion(jobDir, join(jobDir, props.entry), props.salt, props.nativePackages);
    const baseCommand = props.entry === undefined ? (props.command ?? ['python3', 'main.py']) : [...NODE_JOB_COMMAND];
    // A sandboxed job's container starts the stager, which runs the job's own command.
    const command = props.sandbox
      ? ['python3', 'sandbox_entry.py', ...(props.sandbox.worker ? ['--worker', props.sandbox.worker, '--'] : []), ...baseCommand]
      : baseCommand;
    // What the embedded runtime runs in the job folder: the same entrypoint, unbundled for Node jobs.
    const localCommand = props.entry === undefined ? baseCommand : ['node', '--import', 'tsx', props.entry];
    const { resources } = props;

    // A sandboxed job gets no role: no credentials exist in its container to steal.
    const jobRole = props.sandbox ? undefined : new Role(this, 'JobRole', { assumedBy: new ServicePrincipal('ecs-tasks.amazonaws.com') });
    if (jobRole) {
      resources.bucket.grantReadWrite(jobRole);
      acknowledgeFindings(
        jobRole,
        s3GrantFindings(
          jobRole,
          resources.bucket,
          ['read', 'put', 'delete'],
          '*',
          'A job reads its spec and inputs and writes outputs and checkpoints under keys that embed the execution and a fresh job id (runs/<pipeline>/<execution>/..., checkpoints/<run>/...), unknown at synth.',
        ),
      );
    }
    const logGroup = new LogGroup(this, 'Logs', {
      retention: resources.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const common = {
      image:
        props.entry === undefined
          ? ContainerImage.fromAsset(join(REPO_ROOT, 'batch-jobs'), { file: `${props.job}/Dockerfile`, platform: JOB_IMAGE_PLATFORM })
          : ContainerImage.fromAsset(REPO_ROOT, {
              file: `batch-jobs/${props.job}/Dockerfile`,
              exclude: nodeJobContextExcludes(props.job),
              platform: JOB_IMAGE_PLATFORM,
            }),
      command,
      ...(jobRole ? { jobRole } : {}),
      environment: props.sandbox
        ? { PYTHONUNBUFFERED: '1', ...props.environment }
        : props.entry === undefined
          ? { [ENV.bucket]: resources.bucket.bucketName, PYTHONUNBUFFERED: '1', ...props.environment }
          : { [ENV.bucket]: resources.bucket.bucketName, ...props.environment },
      logging: LogDrivers.awsLogs({ streamPrefix: props.job, logGroup }),
    };
    const container =
      gpus > 0
        ? new EcsEc2ContainerDefinition(this, 'Container', {
            ...common,
            gpu: gpus,
            cpu: props.vcpus ?? 4,
            memory: gpuMemory,
          })
        : new EcsFargateContainerDefinition(this, 'Container', {
            ...common,
            cpu: props.vcpus ?? 2,
            memory: props.memory ?? Size.gibibytes(4),
            // The platform's job subnets are public (no NAT gateway billing at rest): egress
            // to ECR and outside APIs needs a public IP; the security group admits no inbound.
            // The sandbox subnet has no route out at all, and no public IP.
            assignPublicIp: !props.sandbox,
          });
    this.jobDefinition = new EcsJobDefinition(this, 'Definition', {
      container,
      timeout: props.timeout ?? Duration.hours(2),
      retryAttempts: attempts,
      retryStrategies: [
        // A reclaimed spot instance is worth another attempt (the job resumes from its checkpoint);
        // an application error is not: it would fail the same way again.
        RetryStrategy.of(Action.RETRY, Reason.SPOT_INSTANCE_RECLAIMED),
        RetryStrategy.of(Action.RETRY, Reason.CANNOT_PULL_CONTAINER),
        RetryStrategy.of(Action.EXIT, Reason.NON_ZERO_EXIT_CODE),
      ],
    });
    acknowledgeFindings(container.executionRole, [
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ecr:GetAuthorizationToken, granted by CDK so the ECS agent can pull the job image, supports no resource-level permissions; the image pull itself is scoped to the asset repository.',
      },
    ]);
    this.queue = props.sandbox ? props.sandbox.network.queue : gpus > 0 ? resources.gpuQueue : resources.cpuQueue;
    const cfn = this.jobDefinition.node.defaultChild as CfnJobDefinition;
    cfn.addMetadata(META.jobDir, relative(REPO_ROOT, jobDir).split(sep).join('/'));
    cfn.addMetadata(META.jobCommand, localCommand);
    if (props.sandbox) {
      cfn.addMetadata(META.jobSandbox, {
        outputs: [...props.sandbox.outputs],
        limits: props.sandbox.limits ?? {},
        ...(props.sandbox.worker ? { worker: props.sandbox.worker } : {}),
      });
    }
    if (gpus > 0) cfn.addMetadata(META.jobInstanceType, instanceType);
    cfn.addMetadata(META.codeVersion, this.codeVersion.hash);
  }
}

/** The container command of every Node job: its Dockerfile bundles the entry to main.mjs. */
/**
 * Every image is built for x86-64, whatever machine runs `cdk deploy` (an Apple Silicon or
 * Graviton laptop would build arm64 by default): the compute environments run x86-64 instances
 * (g5/g6 GPUs, Fargate's default X86_64), where an arm64 image fails with "exec format error".
 */
export const JOB_IMAGE_PLATFORM = Platform.LINUX_AMD64;

export const NODE_JOB_COMMAND: readonly string[] = ['node', 'main.mjs'];

/**
 * Docker ignore patterns for a Node job's build context (the repository root): everything except
 * the package files, shared/ and the job's own folder. An allow-list keeps the context small
 * (no node_modules, .git, .local, cdk.out, test data or bench results) and keeps the image's
 * asset hash from changing when an unrelated file does. CDK adds the Dockerfile back itself.
 */
export function nodeJobContextExcludes(job: string): string[] {
  return ['*', '!package.json', '!package-lock.json', '!shared', `!batch-jobs/${job}`, '**/node_modules', '**/.DS_Store'];
}

function checkEntry(job: string, jobDir: string, entry: string, command: readonly string[] | undefined): void {
  if (!/^[\w-]+(?:\/[\w-]+)*\.ts$/.test(entry)) {
    throw new ConfigError('entry', entry, 'must be a .ts file inside the job folder, relative to it (e.g. "main.ts")');
  }
  if (!existsSync(join(jobDir, entry))) throw new ConfigError('entry', entry, `batch-jobs/${job}/${entry} does not exist`);
  if (command !== undefined) {
    throw new ConfigError(
      'command',
      command,
      `a Node job (entry ${JSON.stringify(entry)}) always runs ${JSON.stringify(NODE_JOB_COMMAND)}; set one or the other`,
    );
  }
}
