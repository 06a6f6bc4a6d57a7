/**
 * Synthesis and template loading: the CDK app synthesized in-process (bundling skipped, the
 * handlers run from source), and what the runtime takes from its templates, tokens resolved to
 * local names: the Lambda functions, the Batch job definitions, the EventBridge rules, and each
 * pipeline's state machine, lowered and checked before any run so that an unsupported Task
 * fails at start rather than halfway through an execution.
 */
import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { REPO_ROOT, type CodeVersion } from '#pipelines/steps/code-version.ts';
import { META, PipelineFunction } from '#pipelines/steps/function.ts';
import { PIPELINE_META } from '#pipelines/steps/pipeline.ts';
import { UnsupportedLocally } from '#shared/errors.ts';
import { buildApp } from '../build-app.ts';
import type { PipelineEntry } from '../registry.ts';
import { prepareAsl, type TaskRef } from './asl-prepass.ts';
import type { LocalJobDefinition, LocalSandbox } from './batch-host.ts';
import { lowerDistributedMaps, prepareDistributedMaps, type LocalDistributedMap } from './distributed-map.ts';
import type { LocalFunction } from './lambda-host.ts';
import { LOCAL_ACCOUNT, LOCAL_REGION, type SynthStack, type TemplateResolver } from './resolve.ts';
import type { EventRule } from './s3-events.ts';
import { taskRoute } from './task-dispatch.ts';

export interface LocalMachine {
  readonly pipeline: string;
  readonly arn: string;
  readonly asl: StateMachineDefinition;
  readonly engine: StateMachine;
  readonly tasks: TaskRef[];
  /** Lowered Distributed Maps by state name, each with an engine for its item processor. */
  readonly distributed: Map<string, LocalDistributedMap>;
}

export interface Synthesized {
  stacks: SynthStack[];
  codeVersions: CodeVersion[];
}

const synthesized = new Map<readonly PipelineEntry[] | undefined, Map<string, Synthesized>>();

/**
 * Synthesizes the app in-process, bundling skipped (handlers run from source), with `context`
 * over cdk.json's (as `-c key=value` does). Once per process for the same pipelines and context:
 * a runtime restarted in the same process (tests, the CLI) reuses the templates.
 */
export function synthesize(pipelines?: readonly PipelineEntry[], context: Record<string, unknown> = {}): Synthesized {
  const byContext = synthesized.get(pipelines) ?? new Map<string, Synthesized>();
  synthesized.set(pipelines, byContext);
  const key = JSON.stringify(context);
  let result = byContext.get(key);
  if (!result) {
    result = synthesizeNow(pipelines, context);
    byContext.set(key, result);
  }
  return result;
}

function synthesizeNow(pipelines: readonly PipelineEntry[] | undefined, context: Record<string, unknown>): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), 'frontier-synth-'));
  try {
    const { app } = buildApp({
      outdir,
      skipBundling: true,
      nag: false,
      fastSynth: true,
      env: { account: LOCAL_ACCOUNT, region: LOCAL_REGION },
      pipelines,
      context,
    });
    const assembly = app.synth();
    const codeVersions = app.node
      .findAll()
      .filter((c): c is PipelineFunction | BatchJob => c instanceof PipelineFunction || c instanceof BatchJob)
      .map((c) => c.codeVersion);
    return { stacks: assembly.stacks.map((s) => ({ stackName: s.stackName, template: s.template })), codeVersions };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * Keeps the components of every code version synthesized here, so `cache explain` can name
 * the files that changed between the version a cache entry was made with and today's.
 */
export function saveCodeVersions(dataDir: string, versions: CodeVersion[]): void {
  const dir = join(dataDir, 'code-versions');
  mkdirSync(dir, { recursive: true });
  for (const v of versions) {
    const file = join(dir, `${v.hash}.json`);
    if (!existsSync(file)) writeFileSync(file, JSON.stringify(v.components, null, 1));
  }
}

/** The pipelines' Lambda functions, each under both its name and its ARN. */
export function loadFunctions(resolver: TemplateResolver): Map<string, LocalFunction> {
  const functions = new Map<string, LocalFunction>();
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::Lambda::Function')) {
    const entry = resource.Metadata?.[META.entry];
    if (typeof entry !== 'string') continue; // CDK's own helper functions: never invoked by a pipeline
    const props = (resource.Properties ?? {}) as { Environment?: { Variables?: unknown }; Timeout?: number; MemorySize?: number };
    const name = resolver.refOf(stack, logicalId, resource);
    const env = (resolver.resolve(stack, props.Environment?.Variables ?? {}) ?? {}) as Record<string, unknown>;
    const fn: LocalFunction = {
      name,
      arn: resolver.attrOf(stack, logicalId, resource, 'Arn')!,
      entry: join(REPO_ROOT, entry),
      handler: String(resource.Metadata?.[META.handler] ?? 'handler'),
      environment: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])),
      timeoutSeconds: props.Timeout ?? 3,
      memoryMb: props.MemorySize ?? 128,
    };
    functions.set(fn.name, fn);
    functions.set(fn.arn, fn);
  }
  return functions;
}

/** The pipelines' Batch job definitions, by ARN. */
export function loadJobDefinitions(resolver: TemplateResolver): Map<string, LocalJobDefinition> {
  const jobDefinitions = new Map<string, LocalJobDefinition>();
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::Batch::JobDefinition')) {
    const jobDir = resource.Metadata?.[META.jobDir];
    if (typeof jobDir !== 'string') continue;
    const props = resolver.resolve(stack, resource.Properties ?? {}) as {
      ContainerProperties?: { Environment?: { Name: string; Value: string }[]; ResourceRequirements?: { Type: string; Value: string }[] };
      Timeout?: { AttemptDurationSeconds?: number };
      PlatformCapabilities?: string[];
      RetryStrategy?: { Attempts?: number };
    };
    const arn = resolver.refOf(stack, logicalId, resource);
    const requirement = (type: string) => Number(props.ContainerProperties?.ResourceRequirements?.find((r) => r.Type === type)?.Value ?? 0);
    const instanceType = resource.Metadata?.[META.jobInstanceType];
    jobDefinitions.set(arn, {
      arn,
      name: logicalId,
      jobDir,
      command: resource.Metadata?.[META.jobCommand] as string[],
      environment: Object.fromEntries((props.ContainerProperties?.Environment ?? []).map((e) => [e.Name, String(e.Value)])),
      timeoutSeconds: props.Timeout?.AttemptDurationSeconds ?? 7200,
      attempts: props.RetryStrategy?.Attempts ?? 1,
      resources: {
        platform: props.PlatformCapabilities?.includes('FARGATE') ? 'FARGATE' : 'EC2',
        vcpus: requirement('VCPU'),
        memoryMiB: requirement('MEMORY'),
        gpus: requirement('GPU'),
        ...(typeof instanceType === 'string' ? { instanceType } : {}),
      },
      ...(resource.Metadata?.[META.jobSandbox] ? { sandbox: resource.Metadata[META.jobSandbox] as LocalSandbox } : {}),
    });
  }
  return jobDefinitions;
}

/** The enabled EventBridge rules that have an event pattern. */
export function loadRules(resolver: TemplateResolver): EventRule[] {
  const rules: EventRule[] = [];
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::Events::Rule')) {
    const props = resolver.resolve(stack, resource.Properties ?? {}) as {
      EventPattern?: Record<string, unknown>;
      State?: string;
      Targets?: { Arn: string; Input?: string; DeadLetterConfig?: { Arn?: string } }[];
    };
    if (!props.EventPattern || props.State === 'DISABLED') continue;
    rules.push({
      arn: resolver.attrOf(stack, logicalId, resource, 'Arn')!,
      pattern: props.EventPattern,
      targets: (props.Targets ?? []).map((t) => ({
        arn: t.Arn,
        input: t.Input ? JSON.parse(t.Input) : undefined,
        ...(t.DeadLetterConfig?.Arn ? { deadLetterArn: t.DeadLetterConfig.Arn } : {}),
      })),
    });
  }
  return rules;
}

/**
 * Each pipeline's state machine, by pipeline name: Distributed Maps lowered, the ASL
 * pre-pass applied, and every Task checked against what the local runtime can run.
 */
export function loadMachines(resolver: TemplateResolver, functions: ReadonlyMap<string, LocalFunction>): Map<string, LocalMachine> {
  const machines = new Map<string, LocalMachine>();
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::StepFunctions::StateMachine')) {
    const pipeline = resource.Metadata?.[PIPELINE_META];
    if (typeof pipeline !== 'string') continue;
    const definition = JSON.parse(String(resolver.resolve(stack, resource.Properties!.DefinitionString))) as StateMachineDefinition;
    const lowered = lowerDistributedMaps(definition);
    const prepared = prepareAsl(lowered.asl);
    if (prepared.duplicateTaskNames.length) {
      // Local handlers are keyed by state name: two Tasks of one name would share one.
      throw new UnsupportedLocally(`${pipeline}: Task names used twice: ${prepared.duplicateTaskNames.join(', ')}`);
    }
    const maps = prepareDistributedMaps(lowered.maps);
    const tasks = [...prepared.tasks, ...maps.tasks];
    for (const task of tasks) {
      if (!taskRoute(task.resource, functions)) {
        throw new UnsupportedLocally(`${pipeline}: state "${task.name}" uses ${task.resource}, which the local runtime cannot run`);
      }
    }
    machines.set(pipeline, {
      pipeline,
      arn: resolver.refOf(stack, logicalId, resource),
      asl: prepared.asl,
      engine: new StateMachine(prepared.asl, { validationOptions: { noValidate: true } }),
      tasks,
      distributed: maps.distributed,
    });
  }
  return machines;
}

/** The cached steps of a state machine and the code version each is keyed with. */
export function cachedStepsOf(asl: StateMachineDefinition): { step: string; codeVersion: string }[] {
  const found: { step: string; codeVersion: string }[] = [];
  const walk = (states: Record<string, unknown>) => {
    for (const [name, state] of Object.entries(states)) {
      const st = state as {
        Parameters?: { Item?: { codeVersion?: { S?: string } } };
        ItemProcessor?: { States: Record<string, unknown> };
        Iterator?: { States: Record<string, unknown> };
        Branches?: { States: Record<string, unknown> }[];
      };
      const m = /^(.+): Cache store$/.exec(name);
      if (m && st.Parameters?.Item?.codeVersion?.S) found.push({ step: m[1]!, codeVersion: st.Parameters.Item.codeVersion.S });
      if (st.ItemProcessor) walk(st.ItemProcessor.States);
      if (st.Iterator) walk(st.Iterator.States);
      for (const b of st.Branches ?? []) walk(b.States);
    }
  };
  walk(asl.States as Record<string, unknown>);
  return found;
}
