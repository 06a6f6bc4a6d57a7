/**
 * The sandbox network as synthesized: a VPC of its own with one isolated subnet and no route out,
 * the S3 gateway endpoint limited to job objects and ECR layers, interface endpoints for ECR and
 * Logs whose policies admit this account only, a DNS Firewall that answers only the AWS names the
 * jobs need (associated with the sandbox VPC, never the platform's), a job security group with no
 * inbound rule, and a Fargate queue there. cdk-nag runs over it; `frontier:sandbox=false` leaves
 * it (and every interface endpoint) out of the app.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { App, type CfnElement, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyNag } from '#infra/nag.ts';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { REWARDS_PIPELINE } from '#pipelines/rewards/stack.ts';
import { SandboxNetwork } from '#pipelines/steps/sandbox-network.ts';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { META } from '#pipelines/steps/function.ts';
import { definitionOf, minimalScope } from '../support/stacks.ts';
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { runJob, step } from '#pipelines/steps/step.ts';

const ACCOUNT = '123456789012';

function build(props: Partial<ConstructorParameters<typeof SandboxNetwork>[2]> = {}) {
  const app = new App();
  const stack = new Stack(app, 'Sandbox', { env: { account: ACCOUNT, region: 'us-east-1' } });
  const bucket = new Bucket(stack, 'Bucket');
  const network = new SandboxNetwork(stack, 'Sandbox', { bucket, ...props });
  return { stack, network, template: Template.fromStack(stack) };
}

type Statement = { Sid?: string; Action: string | string[]; Resource: unknown; Condition?: Record<string, Record<string, unknown>> };
type Endpoint = { Properties: { ServiceName: unknown; VpcEndpointType: string; PrivateDnsEnabled?: boolean; PolicyDocument?: { Statement: Statement[] } } };

/** Every interface VPC endpoint in a template. */
function interfaceEndpoints(template: Template): Endpoint[] {
  return Object.values(template.findResources('AWS::EC2::VPCEndpoint', { Properties: { VpcEndpointType: 'Interface' } })) as Endpoint[];
}

describe('SandboxNetwork', () => {
  it('puts the queue in a VPC of its own: one isolated subnet, no gateway out, the S3 gateway endpoint its only route', () => {
    const { template, network, stack } = build();
    template.resourceCountIs('AWS::EC2::VPC', 1);
    template.hasResourceProperties('AWS::EC2::VPC', { CidrBlock: '10.0.200.0/24' });
    template.resourceCountIs('AWS::EC2::InternetGateway', 0);
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
    template.resourceCountIs('AWS::EC2::VPCPeeringConnection', 0);
    template.resourceCountIs('AWS::EC2::Route', 0);
    template.resourceCountIs('AWS::EC2::Subnet', 1);
    template.hasResourceProperties('AWS::EC2::Subnet', { CidrBlock: '10.0.200.0/24', MapPublicIpOnLaunch: false });
    template.hasResourceProperties('AWS::EC2::FlowLog', { TrafficType: 'ALL', ResourceType: 'VPC' });
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
    const interfaces = interfaceEndpoints(template);
    assert.equal(interfaces.length, 3);
    assert.ok(interfaces.every((e) => e.Properties.PrivateDnsEnabled));
    assert.match(JSON.stringify(interfaces.map((e) => e.Properties.ServiceName)), /ecr\.api.*ecr\.dkr.*logs/);
  });

  it("gives every interface endpoint a policy that admits this account's principals only, for the calls the jobs make", () => {
    const { template } = build();
    const interfaces = interfaceEndpoints(template);
    assert.equal(interfaces.length, 3);
    for (const endpoint of interfaces) {
      const service = JSON.stringify(endpoint.Properties.ServiceName);
      const statements = endpoint.Properties.PolicyDocument?.Statement ?? [];
      assert.ok(statements.length > 0, `${service}: no endpoint policy (the default allows any principal of any account)`);
      for (const statement of statements) {
        assert.equal(statement.Condition?.['StringEquals']?.['aws:PrincipalAccount'], ACCOUNT, `${service} ${statement.Sid}: no account condition`);
        const actions = ([] as string[]).concat(statement.Action);
        assert.ok(!actions.some((a) => a.includes('*')), `${service} ${statement.Sid}: a wildcard action`);
        assert.ok(!actions.some((a) => /Put(Image|LifecyclePolicy)|Upload|Delete|Create(Repository|LogGroup)/.test(a)), `${service}: ${actions.join(', ')}`);
      }
    }
    const actionsOf = (pattern: RegExp) =>
      interfaces
        .filter((e) => pattern.test(JSON.stringify(e.Properties.ServiceName)))
        .map((e) => (e.Properties.PolicyDocument?.Statement ?? []).flatMap((s) => ([] as string[]).concat(s.Action)).sort());
    const pull = ['ecr:BatchCheckLayerAvailability', 'ecr:BatchGetImage', 'ecr:GetAuthorizationToken', 'ecr:GetDownloadUrlForLayer'];
    assert.deepEqual(actionsOf(/ecr\.(api|dkr)/), [pull, pull]);
    assert.deepEqual(actionsOf(/logs/), [['logs:CreateLogStream', 'logs:PutLogEvents']]);
    // The presigned URLs are signed by a role of this account: the job objects' statement says so;
    // ECR signs its layer URLs itself, so that statement cannot.
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      PolicyDocument: Match.objectLike({
        Statement: Match.arrayWith([
          Match.objectLike({ Sid: 'JobObjectsThroughPresignedUrls', Condition: { StringEquals: { 'aws:PrincipalAccount': ACCOUNT } } }),
        ]),
      }),
    });
  });

  it('answers only the AWS names the jobs need through a DNS Firewall on the sandbox VPC, NXDOMAIN to the rest', () => {
    const { template, stack, network } = build();
    const lists = Object.entries(template.findResources('AWS::Route53Resolver::FirewallDomainList')) as [string, { Properties: { Domains: unknown[] } }][];
    const allowedId = lists.find(([, l]) => l.Properties.Domains.length > 1)![0];
    const everythingId = lists.find(([, l]) => JSON.stringify(l.Properties.Domains) === '["*"]')![0];
    // Names are built from the partition's URL suffix: written out here as the commercial one.
    const domains = lists
      .find(([id]) => id === allowedId)![1]
      .Properties.Domains.map((d) =>
        typeof d === 'string'
          ? d
          : (d as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1].map((p) => (typeof p === 'string' ? p : 'amazonaws.com')).join(''),
      );
    assert.deepEqual(domains, [
      'api.ecr.us-east-1.amazonaws.com',
      'ecr.us-east-1.amazonaws.com',
      `${ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com`,
      'logs.us-east-1.amazonaws.com',
      's3.us-east-1.amazonaws.com',
      '*.s3.us-east-1.amazonaws.com',
      's3.amazonaws.com',
      '*.s3.amazonaws.com',
    ]);
    template.hasResourceProperties('AWS::Route53Resolver::FirewallRuleGroup', {
      FirewallRules: [
        Match.objectLike({ Priority: 100, Action: 'ALLOW', FirewallDomainListId: { 'Fn::GetAtt': [allowedId, 'Id'] } }),
        Match.objectLike({ Priority: 200, Action: 'BLOCK', BlockResponse: 'NXDOMAIN', FirewallDomainListId: { 'Fn::GetAtt': [everythingId, 'Id'] } }),
      ],
    });
    // Associated with the sandbox's own VPC, the one its queue runs in, and with nothing else.
    template.resourceCountIs('AWS::Route53Resolver::FirewallRuleGroupAssociation', 1);
    template.hasResourceProperties('AWS::Route53Resolver::FirewallRuleGroupAssociation', {
      VpcId: stack.resolve(network.vpc.vpcId),
      FirewallRuleGroupId: stack.resolve(network.dnsFirewall.attrId),
    });
    template.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      ComputeResources: Match.objectLike({ Subnets: [stack.resolve(network.subnet.subnetId)] }),
    });
  });

  it('is left out of the app, with every interface endpoint, by -c frontier:sandbox=false', () => {
    const rewards = pipelineNamed(REWARDS_PIPELINE);
    assert.equal(rewards.sandboxed, true, 'RewardSearch builds the sandbox network');
    const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [rewards], context: { 'frontier:sandbox': 'false' } });
    assert.equal(app.node.tryFindChild(rewards.stackId), undefined);
    const interfaces = app.node.findAll().filter((c) => c instanceof ec2.CfnVPCEndpoint && c.vpcEndpointType === 'Interface');
    assert.deepEqual(
      interfaces.map((c) => c.node.path),
      [],
    );
    assert.ok(!app.node.findAll().some((c) => c instanceof SandboxNetwork));
    assert.throws(
      () => buildApp({ nag: false, pipelines: [], context: { 'frontier:sandbox': 'no' } }),
      /context frontier:sandbox: must be true or false .*\(got "no"\)/,
    );
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

  it('passes the AWS Solutions checks with no acknowledgement', () => {
    const app = new App({ outdir: mkdtempSync(join(tmpdir(), 'sandbox-nag-')) });
    applyNag(app);
    const stack = new Stack(app, 'Sandbox', { env: { account: ACCOUNT, region: 'us-east-1' } });
    const bucket = new Bucket(stack, 'Bucket', { enforceSSL: true, serverAccessLogsPrefix: 'logs/' });
    const network = new SandboxNetwork(stack, 'Sandbox', { bucket });
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
    // The test's own bucket is not the construct's: only its findings count.
    const own = violations.filter((v) => (v.violatingConstructs ?? []).some((c) => c.constructPath.startsWith('Sandbox/Sandbox/')));
    assert.deepEqual(
      own.map((v) => `${v.ruleName}: ${(v.violatingConstructs ?? []).map((c) => c.constructPath).join(', ')}`),
      [],
      message,
    );
    assert.ok(existsSync(report), `the validation report was written (${message})`);
    // The endpoints admit the job security group, not a CIDR: nothing left to acknowledge.
    const acknowledged = network.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
      .flatMap((m) => Object.keys(m.data as Record<string, string>).filter((id) => id.includes('AwsSolutions')));
    assert.deepEqual(acknowledged, []);
    rmSync(app.outdir, { recursive: true, force: true });
  });

  it('runs a sandboxed job with no role, in the sandbox queue, without a public IP, through the stager', () => {
    const { stack, resources } = minimalScope();
    const network = new SandboxNetwork(stack, 'Sandbox', { bucket: resources.bucket });
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

  it('presigns the spec and the declared outputs (in a staging document) before submitting a sandboxed job, and only then', () => {
    const { stack, resources, steps } = minimalScope();
    const network = new SandboxNetwork(stack, 'Sandbox', { bucket: resources.bucket });
    const sandboxed = new BatchJob(stack, 'Train', {
      job: 'rewards-train',
      timeout: Duration.minutes(30),
      attempts: 1,
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
    assert.equal(payload['expiresSeconds'], 30 * 60 + 3600, 'the output PUTs: the queue wait and the run');
    assert.equal(payload['stagingExpiresSeconds'], 3600, 'the staging document and the spec: the queue wait');
    assert.equal(presign['Next'], 'train: Run job');
    const env = (states['train: Run job']!.Parameters as { ContainerOverrides: { Environment: { Name: string; 'Value.$': string }[] } }).ContainerOverrides
      .Environment;
    assert.deepEqual(
      env.map((e) => [e.Name, e['Value.$']]),
      [
        ['JOB_SPEC_URI', '$._step.job.specUri'],
        ['OUTPUT_URI', '$._step.job.outputUri'],
        ['JOB_STAGING_URL', '$._step.job.staging.stagingUrl'],
      ],
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
