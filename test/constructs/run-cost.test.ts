/**
 * The run-cost function of every pipeline stack, read from the synthesized app
 * (pipelines/steps/run-cost.ts): EventBridge starts it when one of the stack's own executions
 * succeeds; it knows the instance type of each of the stack's GPU job definitions, reads the
 * histories of that state machine's executions only, and writes under runs/<pipeline>/ only.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp } from '#infra/build-app.ts';
import { PIPELINES } from '#infra/registry.ts';
import { META } from '#pipelines/steps/function.ts';
import { ENV } from '#shared/env.ts';

type Resource = { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, unknown> };

describe('the run-cost function of each pipeline', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
  const assembly = app.synth();

  for (const entry of PIPELINES) {
    it(`${entry.name}: starts on its own succeeded runs, knowing its jobs and their instance types`, () => {
      const resources = Object.entries((assembly.getStackByName(entry.stackId).template as { Resources: Record<string, Resource> }).Resources);
      const of = (type: string) => resources.filter(([, r]) => r.Type === type);
      const [machineId] = of('AWS::StepFunctions::StateMachine').find(([id]) => id.startsWith('PipelineStateMachine')) ?? [];
      assert.ok(machineId);
      const fns = of('AWS::Lambda::Function').filter(([, r]) => r.Metadata?.[META.entry] === 'functions/platform/run-cost/handler.ts');
      assert.equal(fns.length, 1, 'one run-cost function');
      const [fnId, fn] = fns[0]!;
      const env = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      assert.equal(env[ENV.pipeline], entry.name);
      // Every job definition by its logical id, a GPU one with its instance type.
      const jobs = Object.fromEntries(of('AWS::Batch::JobDefinition').map(([id, r]) => [id, r.Metadata?.[META.jobInstanceType] ?? '']));
      assert.deepEqual(JSON.parse(String(env[ENV.jobInstanceTypes])), jobs);
      const rules = of('AWS::Events::Rule').filter(([, r]) =>
        ((r.Properties.Targets as { Arn: unknown }[] | undefined) ?? []).some((t) => JSON.stringify(t.Arn).includes(fnId)),
      );
      assert.equal(rules.length, 1);
      assert.deepEqual(rules[0]![1].Properties.EventPattern, {
        source: ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        detail: { status: ['SUCCEEDED'], stateMachineArn: [{ Ref: machineId }] },
      });
      // Its policy: this state machine's executions and map runs, read only; the bucket's runs/<pipeline>/ to write.
      const policy = JSON.stringify(
        of('AWS::IAM::Policy')
          .filter(([, r]) => JSON.stringify(r.Properties.Roles).includes(fnId.replace(/[0-9A-F]{8}$/, '')))
          .map(([, r]) => r.Properties.PolicyDocument),
      );
      for (const action of [
        'states:GetExecutionHistory',
        'states:DescribeExecution',
        'states:ListExecutions',
        'batch:DescribeJobs',
        'lambda:GetFunctionConfiguration',
      ])
        assert.ok(policy.includes(action), `${action} in ${policy}`);
      assert.ok(!policy.includes('states:StartExecution') && !policy.includes('states:*'), policy);
      assert.ok(policy.includes(`{"Fn::GetAtt":["${machineId}","Name"]},":*"`), 'the executions of its own state machine');
      assert.ok(policy.includes(`/runs/${entry.name}/*`), policy);
    });
  }
});
