/**
 * The whole app (the platform stack and every registered pipeline stack) under cdk-nag's AWS
 * Solutions checks: synth passes with no unacknowledged finding, every acknowledgement has a
 * real reason, and the findings fixed by configuration stay fixed. Also pins how the step
 * constructs compute the exact finding ids that cdk-nag v3 matches acknowledgements by.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type Environment, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigError } from '#shared/errors.ts';
import { PipelineFunction } from '#pipelines/steps/function.ts';
import { acknowledgeFindings, iam5Resource } from '#pipelines/steps/nag-findings.ts';
import { PIPELINE_META } from '#pipelines/steps/pipeline.ts';
import { buildApp } from '#infra/build-app.ts';
import { PIPELINES, PLATFORM_STACK_ID } from '#infra/registry.ts';

type Violation = { ruleName: string; severity: string; violatingConstructs?: { constructPath: string }[] };
type ValidationReport = { pluginReports: { pluginName: string; violations: Violation[] }[] };

/** Builds and synthesizes the app with cdk-nag on; returns the findings, or fails listing them by rule. */
function synthWithNag(env: Environment | undefined): { app: App; violations: Violation[]; stackNames: string[] } {
  const outdir = mkdtempSync(join(tmpdir(), 'app-nag-'));
  try {
    // Bundling skipped: the checks read templates and construct metadata, not asset contents.
    const { app } = buildApp({ outdir, skipBundling: true, fastSynth: true, nag: true, env });
    let failure: Error | undefined;
    let stackNames: string[] = [];
    try {
      stackNames = app.synth().stacks.map((s) => s.stackName);
    } catch (error) {
      failure = error as Error;
    }
    let report: ValidationReport | undefined;
    try {
      report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as ValidationReport;
    } catch {
      // No report: synth failed before validation, and its message says why.
    }
    if (failure) {
      const findings = report
        ? report.pluginReports
            .flatMap((p) => p.violations)
            .map((v) => `${v.severity} ${v.ruleName}: ${(v.violatingConstructs ?? []).map((c) => c.constructPath).join(', ')}`)
            .join('\n')
        : failure.message;
      assert.fail(`synth failed:\n${findings}`);
    }
    return { app, violations: report?.pluginReports.flatMap((p) => p.violations) ?? [], stackNames };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** Every acknowledgement in the app as [construct path, rule id, reason]. */
function acknowledgementsOf(app: App): [string, string, unknown][] {
  return app.node
    .findAll()
    .flatMap((c) =>
      c.node.metadata
        .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
        .flatMap((m) => Object.entries(m.data as Record<string, unknown>).map(([id, reason]): [string, string, unknown] => [c.node.path, id, reason])),
    );
}

const EXPECTED_STACKS = [PLATFORM_STACK_ID, ...PIPELINES.map((p) => p.stackId)];

describe('the whole app under cdk-nag (AwsSolutions)', () => {
  // Finding ids embed ARNs: with an environment they carry the region and account, without
  // one the pseudo parameters. Both must be clean.
  const variants: [string, Environment | undefined][] = [
    ['environment-agnostic', undefined],
    ['with an account and region', { account: '123456789012', region: 'eu-west-1' }],
  ];
  for (const [label, env] of variants) {
    it(`synthesizes every stack with no unacknowledged finding (${label})`, (t) => {
      const { violations, stackNames } = synthWithNag(env);
      assert.deepEqual([...stackNames].sort(), [...EXPECTED_STACKS].sort(), 'the platform and every registered pipeline');
      for (const v of violations) t.diagnostic(`${v.severity} ${v.ruleName}`);
      // A clean run leaves no violation at all, not even a warning.
      assert.deepEqual(
        violations.map((v) => `${v.severity} ${v.ruleName}`),
        [],
      );
    });
  }

  it('gives every acknowledgement a reason of at least 20 characters', () => {
    const { app } = synthWithNag(undefined);
    const acknowledgements = acknowledgementsOf(app);
    for (const [path, id, reason] of acknowledgements) {
      assert.ok(typeof reason === 'string' && reason.trim().length >= 20, `${id} on ${path} has no real reason: ${JSON.stringify(reason)}`);
    }
    // The pipeline stacks acknowledge their own findings; the platform's are not enough.
    for (const { stackId } of PIPELINES) {
      const own = acknowledgementsOf(app).filter(([path]) => path === stackId || path.startsWith(`${stackId}/`));
      assert.ok(own.length > 0, `${stackId} acknowledges nothing`);
      // Every function of the stack is a PipelineFunction, which accepts the basic execution
      // role and the pinned runtime itself.
      const inStack = app.node.findChild(stackId).node.findAll();
      const functions = inStack.filter((c) => c instanceof CfnFunction);
      const pipelineFunctions = inStack.filter((c): c is PipelineFunction => c instanceof PipelineFunction);
      assert.equal(pipelineFunctions.length, functions.length, `${stackId}: a Lambda that is not a PipelineFunction`);
      const acknowledgedL1 = new Set(own.filter(([, id]) => id.endsWith('::AwsSolutions-L1')).map(([path]) => path));
      for (const fn of pipelineFunctions) assert.ok(acknowledgedL1.has(fn.node.path), `${fn.node.path}: no L1 acknowledgement`);
    }
  });

  it('logs every state machine transition without execution data and traces it (SF1, SF2 fixed by configuration)', () => {
    const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
    for (const { stackId } of PIPELINES) {
      const template = Template.fromStack(app.node.findChild(stackId) as Stack);
      const machines = Object.values(template.findResources('AWS::StepFunctions::StateMachine')) as {
        Metadata?: Record<string, unknown>;
        Properties: { LoggingConfiguration?: { Level: string; IncludeExecutionData: boolean }; TracingConfiguration?: { Enabled: boolean } };
      }[];
      assert.ok(machines.length > 0, `${stackId} has no state machine`);
      for (const machine of machines) {
        assert.ok(machine.Metadata?.[PIPELINE_META], 'a PipelineStateMachine');
        assert.equal(machine.Properties.LoggingConfiguration?.Level, 'ALL');
        assert.equal(machine.Properties.LoggingConfiguration?.IncludeExecutionData, false);
        assert.equal(machine.Properties.TracingConfiguration?.Enabled, true);
      }
    }
  });
});

describe('iam5Resource', () => {
  const lambdaRole = (scope: Stack) => new Role(scope, 'Role', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });

  /** The IAM5 finding ids cdk-nag itself reports for the app (nothing acknowledged). */
  function reportedIam5(app: App): string[] {
    const report = new AwsSolutionsChecks().validateScope(app);
    return report.violations.map((v) => v.ruleName).filter((name) => name.startsWith('AwsSolutions-IAM5[Resource::'));
  }

  it("matches the rule's text for a grant on a bucket of the same stack", () => {
    const app = new App();
    const stack = new Stack(app, 'Same');
    const bucket = new Bucket(stack, 'Bucket');
    const role = lambdaRole(stack);
    bucket.grantRead(role, 'runs/*');
    assert.ok(reportedIam5(app).includes(iam5Resource(role, bucket.arnForObjects('runs/*'))));
    assert.match(iam5Resource(role, bucket.arnForObjects('runs/*')), /^AwsSolutions-IAM5\[Resource::<Bucket[0-9A-F]{8}\.Arn>\/runs\/\*\]$/);
  });

  it("matches the rule's text for a grant on another stack's bucket (the export's name)", () => {
    const app = new App({ builtinCloudFormationValidation: false });
    const platform = new Stack(app, 'Platform');
    const bucket = new Bucket(platform, 'Bucket');
    const pipeline = new Stack(app, 'Pipeline');
    const role = lambdaRole(pipeline);
    bucket.grantRead(role, '*');
    const id = iam5Resource(role, bucket.arnForObjects('*'));
    assert.match(id, /^AwsSolutions-IAM5\[Resource::Platform:ExportsOutputFnGetAttBucket[0-9A-F]{8}Arn[0-9A-F]{8}\/\*\]$/);
    // The export is the one CDK makes for the reference: one output, and the rule reports this text.
    app.synth();
    assert.equal(Object.keys(Template.fromStack(platform).findOutputs('*')).length, 1);
    assert.ok(reportedIam5(app).includes(id), `${id} not among ${reportedIam5(app).join(', ')}`);
  });

  it('keeps pseudo parameters as the rule writes them in an environment-agnostic stack', () => {
    const stack = new Stack(new App(), 'Agnostic');
    const arn = stack.formatArn({ service: 'batch', resource: 'job-definition', resourceName: '*' });
    assert.equal(iam5Resource(stack, arn), 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job-definition/*]');
  });
});

describe('acknowledgeFindings', () => {
  it('throws when a reason is shorter than 20 characters', () => {
    const stack = new Stack(new App(), 'Scope');
    assert.throws(
      () => acknowledgeFindings(stack, [{ id: 'AwsSolutions-L1', reason: 'pinned' }]),
      (error: unknown) => error instanceof ConfigError && /acknowledge\.reason/.test(error.field),
    );
  });

  it('records each rule id once per construct', () => {
    const stack = new Stack(new App(), 'Scope');
    const finding = { id: 'AwsSolutions-L1', reason: 'The runtime is pinned to match the local one.' };
    acknowledgeFindings(stack, [finding]);
    acknowledgeFindings(stack, [finding]);
    const entries = stack.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY);
    assert.equal(entries.length, 1);
  });
});
