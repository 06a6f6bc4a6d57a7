/**
 * The sandbox network as synthesized: an isolated subnet with no route out, the S3 gateway
 * endpoint limited to job objects and ECR layers, interface endpoints for ECR and Logs, a job
 * security group with no inbound rule, and a Fargate queue there. cdk-nag runs over it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { App, type CfnElement, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyNag } from '#infra/nag.ts';
import { SandboxNetwork } from '#pipelines/steps/sandbox-network.ts';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { META } from '#pipelines/steps/function.ts';
import { definitionOf, minimalScope } from '../support/stacks.ts';
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { runJob, step } from '#pipelines/steps/step.ts';

function build(props: Partial<ConstructorParameters<typeof SandboxNetwork>[2]> = {}) {
  const app = new App();
  const stack = new Stack(app, 'Sandbox', { env: { account: '123456789012', region: 'us-east-1' } });
  const vpc = new ec2.Vpc(stack, 'Vpc', {
    maxAzs: 2,
    natGateways: 0,
    subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 }],
  });
  const bucket = new Bucket(stack, 'Bucket');
  const network = new SandboxNetwork(stack, 'Sandbox', { vpc, bucket, ...props });
  return { stack, network, template: Template.fromStack(stack) };
}

describe('SandboxNetwork', () => {
  it('puts the queue in one subnet whose only routes are the VPC and the S3 gateway endpoint', () => {
    const { template, network, stack } = build();
    const routes = Object.values(template.findResources('AWS::EC2::Route')) as { Properties: Record<string, unknown> }[];
    const subnetTable = stack.resolve(network.subnet.routeTable.routeTableId) as unknown;
    const own = routes.filter((r) => JSON.stringify(stack.resolve(r.Properties.RouteTableId)) === JSON.stringify(subnetTable));
    assert.deepEqual(own, [], 'no route to an internet or NAT gateway');
    template.hasResourceProperties('AWS::EC2::Subnet', { CidrBlock: '10.0.200.0/24', MapPublicIpOnLaunch: false });
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      RouteTableIds: [stack.resolve(network.subnet.routeTable.routeTableId)],
      PolicyDocument: Match.objectLike({
        Statement: Match.arrayWith([
          Match.objectLike({ Sid: 'JobObjectsThroughPresignedUrls', Action: ['s3:GetObject', 's3:PutObject'] }),
          Match.objectLike({ Sid: 'EcrImageLayers', Action: 's3:GetObject' }),
        ]),
      }),
    });
    assert.match(JSON.stringify(template.toJSON()), /:s3:::prod-us-east-1-starport-layer-bucket\/\*/);
    const interfaces = Object.values(template.findResources('AWS::EC2::VPCEndpoint', { Properties: { VpcEndpointType: 'Interface' } })) as {
      Properties: { ServiceName: unknown; PrivateDnsEnabled: boolean };
    }[];
    assert.equal(interfaces.length, 3);
    assert.ok(interfaces.every((e) => e.Properties.PrivateDnsEnabled));
    assert.match(JSON.stringify(interfaces.map((e) => e.Properties.ServiceName)), /ecr\.api.*ecr\.dkr.*logs/);
  });

  it('lets the jobs accept nothing and send only HTTPS, and runs them on Fargate there', () => {
    const { template, stack, network } = build();
    const groups = template.findResources('AWS::EC2::SecurityGroup');
    const job = groups[stack.getLogicalId(network.jobSecurityGroup.node.defaultChild as ec2.CfnSecurityGroup)] as {
      Properties: { SecurityGroupIngress?: unknown[]; SecurityGroupEgress: { IpProtocol: string; FromPort: number; ToPort: number }[] };
    };
    assert.equal(job.Properties.SecurityGroupIngress, undefined);
    assert.deepEqual(
      job.Properties.SecurityGroupEgress.map((e) => [e.IpProtocol, e.FromPort, e.ToPort]),
      [['tcp', 443, 443]],
    );
    template.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      ComputeResources: Match.objectLike({ Type: 'FARGATE', Subnets: [stack.resolve(network.subnet.subnetId)] }),
    });
    template.resourceCountIs('AWS::Batch::JobQueue', 1);
  });

  it('passes the AWS Solutions checks (one acknowledgement: the VPC CIDR reads as open)', () => {
    const app = new App({ outdir: mkdtempSync(join(tmpdir(), 'sandbox-nag-')) });
    applyNag(app);
    const stack = new Stack(app, 'Sandbox', { env: { account: '123456789012', region: 'us-east-1' } });
    const vpc = new ec2.Vpc(stack, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 }],
    });
    const bucket = new Bucket(stack, 'Bucket', { enforceSSL: true, serverAccessLogsPrefix: 'logs/' });
    new SandboxNetwork(stack, 'Sandbox', { vpc, bucket });
    let message = '';
    try {
      app.synth();
    } catch (error) {
      message = (error as Error).message;
    }
    const report = join(app.outdir, 'validation-report.json');
    const violations = existsSync(report)
      ? (
          JSON.parse(readFileSync(report, 'utf8')) as {
            pluginReports: { violations: { ruleName: string; violatingConstructs?: { constructPath: string }[] }[] }[];
          }
        ).pluginReports.flatMap((p) => p.violations)
      : [];
    // The test's own VPC (no flow log) and bucket are not the construct's: only its findings count.
    const own = violations.filter((v) => (v.violatingConstructs ?? []).some((c) => c.constructPath.startsWith('Sandbox/Sandbox/')));
    assert.deepEqual(
      own.map((v) => `${v.ruleName}: ${(v.violatingConstructs ?? []).map((c) => c.constructPath).join(', ')}`),
      [],
      message,
    );
    assert.ok(existsSync(report), `the validation report was written (${message})`);
    rmSync(app.outdir, { recursive: true, force: true });
  });

  it('runs a sandboxed job with no role, in the sandbox queue, without a public IP, through the stager', () => {
    const { stack, resources } = minimalScope();
    const vpc = new ec2.Vpc(stack, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 }],
    });
    const network = new SandboxNetwork(stack, 'Sandbox', { vpc, bucket: resources.bucket });
    const job = new BatchJob(stack, 'Train', {
      job: 'rewards-train',
      sandbox: { network, outputs: ['policy.json', 'curves.json'], limits: { cpuSeconds: 600 } },
      resources,
    });
    assert.equal(job.queue, network.queue);
    const paired = new BatchJob(stack, 'Paired', {
      job: 'rewards-train',
      sandbox: { network, outputs: ['policy.json'], worker: 'reward_channel.py' },
      resources,
    });
    assert.throws(
      () => new BatchJob(stack, 'NoWorker', { job: 'rewards-train', sandbox: { network, outputs: ['policy.json'], worker: 'missing.py' }, resources }),
      /sandbox\.worker: must be a Python script in batch-jobs\/rewards-train\/ \(got "missing\.py"\)/,
    );
    const template = Template.fromStack(stack);
    const definitions = template.findResources('AWS::Batch::JobDefinition');
    const [definition] = [definitions[stack.getLogicalId(job.jobDefinition.node.defaultChild as CfnElement)]] as {
      Metadata: Record<string, unknown>;
      Properties: {
        ContainerProperties: { Command: string[]; JobRoleArn?: unknown; NetworkConfiguration: { AssignPublicIp: string }; Environment?: { Name: string }[] };
      };
    }[];
    const container = definition!.Properties.ContainerProperties;
    assert.equal(container.JobRoleArn, undefined, 'no job role: no credentials in the container');
    assert.equal(container.NetworkConfiguration.AssignPublicIp, 'DISABLED');
    assert.deepEqual(container.Command, ['python3', 'sandbox_entry.py', 'python3', 'main.py']);
    assert.ok(!(container.Environment ?? []).some((e) => e.Name === 'BUCKET_NAME'));
    assert.deepEqual(definition!.Metadata[META.jobCommand], ['python3', 'main.py']);
    assert.deepEqual(definition!.Metadata[META.jobSandbox], { outputs: ['policy.json', 'curves.json'], limits: { cpuSeconds: 600 } });
    assert.ok(job.codeVersion.components['batch-jobs/common/sandbox_entry.py'], 'the stager is part of the code version');
    // With a worker (the untrusted half), the stager runs it apart from the job.
    const pairedDefinition = template.toJSON().Resources[stack.getLogicalId(paired.jobDefinition.node.defaultChild as CfnElement)] as typeof definition;
    assert.deepEqual(pairedDefinition!.Properties.ContainerProperties.Command, [
      'python3',
      'sandbox_entry.py',
      '--worker',
      'reward_channel.py',
      '--',
      'python3',
      'main.py',
    ]);
    assert.deepEqual(pairedDefinition!.Metadata[META.jobSandbox], { outputs: ['policy.json'], limits: {}, worker: 'reward_channel.py' });

    assert.throws(
      () => new BatchJob(stack, 'Bad', { job: 'rewards-train', sandbox: { network, outputs: ['result.json'] }, resources }),
      /sandbox\.outputs: must be plain file names other than result\.json/,
    );
  });

  it('presigns the spec and the declared outputs before submitting a sandboxed job, and only then', () => {
    const { stack, resources, steps } = minimalScope();
    const vpc = new ec2.Vpc(stack, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 }],
    });
    const network = new SandboxNetwork(stack, 'Sandbox', { vpc, bucket: resources.bucket });
    const sandboxed = new BatchJob(stack, 'Train', {
      job: 'rewards-train',
      timeout: Duration.minutes(30),
      sandbox: { network, outputs: ['policy.json'] },
      resources,
    });
    const trusted = new BatchJob(stack, 'Plain', { job: 'rewards-train', resources });
    const chain = step(stack, 'train', { run: runJob(sandboxed, steps), inputs: { 'seed.$': '$.seed' }, resultPath: '$.train' }).next(
      step(stack, 'plain', { run: runJob(trusted, steps), inputs: { 'seed.$': '$.seed' }, resultPath: '$.plain' }),
    );
    new sfn.StateMachine(stack, 'Machine', { definitionBody: sfn.DefinitionBody.fromChainable(chain) });
    const states = definitionOf(Template.fromStack(stack)).States;
    const presign = states['train: Presign']!;
    // payloadResponseOnly: the Parameters are the event itself.
    const payload = presign.Parameters as Record<string, unknown>;
    assert.deepEqual(payload['outputs'], ['policy.json']);
    assert.equal(payload['expiresSeconds'], 30 * 60 + 3600);
    assert.equal(presign['Next'], 'train: Run job');
    const env = (states['train: Run job']!.Parameters as { ContainerOverrides: { Environment: { Name: string; 'Value.$': string }[] } }).ContainerOverrides
      .Environment;
    assert.deepEqual(
      env.map((e) => e.Name),
      ['JOB_SPEC_URI', 'OUTPUT_URI', 'JOB_SPEC_URL', 'JOB_OUTPUT_URLS'],
    );
    assert.equal(states['plain: Presign'], undefined);
    const plainEnv = (states['plain: Run job']!.Parameters as { ContainerOverrides: { Environment: { Name: string }[] } }).ContainerOverrides.Environment;
    assert.deepEqual(
      plainEnv.map((e) => e.Name),
      ['JOB_SPEC_URI', 'OUTPUT_URI'],
    );
  });

  it('names a bad CIDR', () => {
    assert.throws(() => build({ cidrBlock: '10.0.0.0' }), /cidrBlock: must be an IPv4 CIDR from \/16 to \/28 \(got "10\.0\.0\.0"\)/);
  });
});
