/**
 * PipelineFunction: every Lambda of the project. A NodejsFunction on nodejs22.x, bundled by
 * the local esbuild (no Docker), with its own log group, its code version computed at synth,
 * and metadata that lets the embedded runtime run the same handler module in-process.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Architecture, Runtime, type CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat, type ICommandHooks } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { relative, sep } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH } from '#shared/refinery/language-model.ts';
import { handlerCodeVersion, REPO_ROOT, type CodeVersion } from './code-version.ts';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { acknowledgeFindings, LAMBDA_BASIC_EXECUTION_FINDING, s3GrantFindings } from './nag-findings.ts';

/** Metadata keys the embedded runtime reads from the synthesized template. */
export const META = {
  entry: 'frontier:entry',
  handler: 'frontier:handler',
  codeVersion: 'frontier:codeVersion',
  jobDir: 'frontier:jobDir',
  jobCommand: 'frontier:jobCommand',
  /** A sandboxed job's declared outputs and local limits. */
  jobSandbox: 'frontier:jobSandbox',
  /** The GPU instance type a GPU job is sized for (pipelines/steps/gpu-instances.ts). */
  jobInstanceType: 'frontier:jobInstanceType',
} as const;

/** onnxruntime-node and what it needs at run time (adm-zip and global-agent serve only its installer). */
const ONNX_PACKAGES = ['onnxruntime-node', 'onnxruntime-common'] as const;

/**
 * RDKit's WebAssembly build: its loader finds RDKit_minimal.wasm beside the script that loads it
 * (emscripten's scriptDirectory, from __dirname, which an ESM bundle does not define), so the
 * package ships unbundled next to the bundle, as a module of its own.
 */
const RDKIT_PACKAGES = ['@rdkit/rdkit'] as const;

/** fastText's lid.176 model (the refinery's language rule): where it is, and its name beside the bundle. */
export { LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH };

/** Copies shipped packages and files next to the bundle, keeping only what Lambda (linux-x64) runs. */
function shippedPackageHooks(packages: readonly string[], files: readonly { readonly from: string; readonly to: string }[] = []): ICommandHooks {
  return {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (_inputDir: string, outputDir: string) => [
      ...packages.map((p) => `mkdir -p "${outputDir}/node_modules/${p}" && cp -R "${REPO_ROOT}/node_modules/${p}/." "${outputDir}/node_modules/${p}/"`),
      ...files.map(({ from, to }) => `cp "${REPO_ROOT}/${from}" "${outputDir}/${to}"`),
      // Lambda runs linux-x64 here (Architecture.X86_64): every other platform's binary is dead weight.
      ...(packages.includes('onnxruntime-node')
        ? [
            `find "${outputDir}/node_modules/onnxruntime-node/bin" -mindepth 2 -maxdepth 2 ! -name linux -exec rm -rf {} +`,
            `find "${outputDir}/node_modules/onnxruntime-node/bin" -mindepth 3 -maxdepth 3 -path '*/linux/*' ! -name x64 -exec rm -rf {} +`,
          ]
        : []),
    ],
  };
}

export interface PipelineFunctionProps {
  /** Absolute path of the handler's TypeScript module. */
  readonly entry: string;
  /** Exported handler name. Default: `handler`. */
  readonly handler?: string;
  /** Environment variables. Grants that go with them are the caller's to add. */
  readonly environment?: Record<string, string>;
  /** Default: 60 seconds. */
  readonly timeout?: Duration;
  /** Default: 512 MiB. */
  readonly memorySize?: number;
  /** Log retention. Default: one month. */
  readonly logRetention?: RetentionDays;
  /**
   * Ship onnxruntime-node (a native module esbuild cannot bundle) next to the bundle, copied
   * from the repository's node_modules with only its linux-x64 binaries: the package carries
   * every platform's (288 MB), over Lambda's 250 MB unzipped limit. Default: false.
   */
  readonly onnxRuntime?: boolean;
  /** Ship RDKit's WebAssembly build (@rdkit/rdkit, 7 MB) next to the bundle. Default: false. */
  readonly rdkit?: boolean;
  /**
   * Ship fastText's lid.176 model (0.9 MB) next to the bundle, for a function that runs the
   * refinery's language rule: the rule reads it on first use from beside the running module.
   * Default: false.
   */
  readonly languageModel?: boolean;
  /** Changes the code version on purpose, invalidating cached results of this function. */
  readonly salt?: string;
  /** Description shown in the console. */
  readonly description?: string;
  /**
   * Where Lambda puts an asynchronous invocation's event once its retries have failed (the
   * event unchanged as the body; CDK grants the function sqs:SendMessage). Default: none, and
   * such an event is dropped.
   */
  readonly deadLetterQueue?: IQueue;
}

export class PipelineFunction extends NodejsFunction {
  /** Code version of the bundle, used in cache keys. */
  readonly codeVersion: CodeVersion;

  constructor(scope: Construct, id: string, props: PipelineFunctionProps) {
    const memorySize = props.memorySize ?? 512;
    if (memorySize < 128 || memorySize > 10240) {
      throw new ConfigError('memorySize', memorySize, 'must be between 128 and 10240 MiB');
    }
    const shipped = [...(props.onnxRuntime ? ONNX_PACKAGES : []), ...(props.rdkit ? RDKIT_PACKAGES : [])];
    const files = props.languageModel ? [{ from: `node_modules/${LANGUAGE_MODEL_PACKAGE_PATH}`, to: LANGUAGE_MODEL_FILE }] : [];
    const logGroup = new LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    super(scope, id, {
      entry: props.entry,
      handler: props.handler ?? 'handler',
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.X86_64,
      memorySize,
      timeout: props.timeout ?? Duration.seconds(60),
      environment: { NODE_OPTIONS: '--enable-source-maps', ...props.environment },
      description: props.description,
      deadLetterQueue: props.deadLetterQueue,
      logGroup,
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}/package-lock.json`,
      bundling: {
        format: OutputFormat.ESM,
        target: 'node22',
        sourceMap: true,
        // Class names survive bundling: a named error's `name` (what Step Functions' ErrorEquals
        // and the fan-out's records match) comes from its class, and esbuild renames a class
        // whose name another bundled module also uses unless told to keep names.
        keepNames: true,
        // The SDK is bundled at the pinned versions rather than taken from the runtime.
        externalModules: shipped,
        commandHooks: shipped.length || files.length ? shippedPackageHooks(shipped, files) : undefined,
        mainFields: ['module', 'main'],
        banner: "import { createRequire as __createRequire } from 'module'; const require = __createRequire(import.meta.url);",
        forceDockerBundling: false,
      },
    });
    this.codeVersion = handlerCodeVersion(props.entry, props.salt, shipped);
    const cfn = this.node.defaultChild as CfnFunction;
    cfn.addMetadata(META.entry, relative(REPO_ROOT, props.entry).split(sep).join('/'));
    cfn.addMetadata(META.handler, props.handler ?? 'handler');
    cfn.addMetadata(META.codeVersion, this.codeVersion.hash);
    acknowledgeFindings(this, [
      {
        id: LAMBDA_BASIC_EXECUTION_FINDING,
        reason: 'AWSLambdaBasicExecutionRole only allows creating log streams and writing log events, which every function needs to report errors.',
      },
      {
        id: 'AwsSolutions-L1',
        reason:
          'nodejs22.x is pinned on purpose: the embedded runtime runs the same handler modules in-process on Node 22, so local and deployed behaviour match.',
      },
    ]);
  }
}

/** A construct created once per stack (at its root, under `id`) and shared by every step that needs it. */
export function stackSingleton<T extends Construct>(scope: Construct, id: string, create: (stack: Stack) => T): T {
  const stack = Stack.of(scope);
  return (stack.node.tryFindChild(id) as T | undefined) ?? create(stack);
}

export interface DocumentFunctionProps extends PipelineFunctionProps {
  readonly bucket: IBucket;
  /** Why it reads any key of the bucket: documents and job outputs whose keys are made at run time. */
  readonly readsWhy: string;
  /** The prefixes it may write (`data/<pipeline>/*`), each with why. */
  readonly writes: readonly { readonly prefix: string; readonly why: string }[];
}

/**
 * A pipeline Lambda that reads the pipeline bucket anywhere and writes only under `writes`: the
 * grants, and the cdk-nag findings they raise acknowledged with the reasons given.
 */
export function documentFunction(scope: Construct, id: string, props: DocumentFunctionProps): PipelineFunction {
  const { bucket, readsWhy, writes, ...functionProps } = props;
  const fn = new PipelineFunction(scope, id, functionProps);
  bucket.grantRead(fn);
  for (const write of writes) bucket.grantPut(fn, write.prefix);
  acknowledgeFindings(fn, [
    ...s3GrantFindings(fn, bucket, ['read'], '*', readsWhy),
    ...writes.flatMap((write) => s3GrantFindings(fn, bucket, ['put'], write.prefix, write.why)),
  ]);
  return fn;
}
