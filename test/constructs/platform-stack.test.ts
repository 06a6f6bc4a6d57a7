/**
 * The platform stack as a template: storage, table, network, Batch, secrets, SES, the
 * approval API, log retention, prop validation, and a clean cdk-nag run.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { ConfigError } from '#shared/errors.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import type { StepResources } from '#pipelines/steps/resources.ts';
import { acknowledge, applyNag } from '#infra/nag.ts';
import { PlatformStack, type PlatformStackProps } from '#infra/platform-stack.ts';

const CDK_CONTEXT = (JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;

/** An app with the project's context; bundling skipped (asset-size.test.ts bundles). */
function newApp(options: { outdir?: string; context?: Record<string, unknown> } = {}): App {
  return new App({
    outdir: options.outdir,
    builtinCloudFormationValidation: false,
    context: { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [], ...options.context },
  });
}

function synthPlatform(props?: PlatformStackProps): { stack: PlatformStack; template: Template } {
  const stack = new PlatformStack(newApp(), 'Platform', props);
  return { stack, template: Template.fromStack(stack) };
}

type Resource = { Type: string; Properties?: Record<string, unknown> };
const resourcesOf = (template: Template, type: string) => Object.values(template.findResources(type)) as Resource[];

describe('PlatformStack template', () => {
  const { stack, template } = synthPlatform();

  it('satisfies the StepResources interface the pipeline steps consume', () => {
    // A compile-time check as much as a runtime one: tsc rejects this line if they drift.
    const steps: StepResources = stack.resources;
    assert.equal(steps.senderEmail, CDK_CONTEXT['frontier:senderEmail']);
    assert.equal(steps.approverEmail, CDK_CONTEXT['frontier:approverEmail']);
    assert.equal(steps.logRetention, CDK_CONTEXT['frontier:logRetentionDays']);
  });

  it('has a versioned, encrypted, private, TLS-only bucket that sends events to EventBridge and logs access', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      VersioningConfiguration: { Status: 'Enabled' },
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
      },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      LoggingConfiguration: { DestinationBucketName: Match.anyValue() },
    });
    template.hasResource('AWS::S3::Bucket', {
      Properties: Match.objectLike({ VersioningConfiguration: { Status: 'Enabled' } }),
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
    });
    // EventBridge delivery is switched on by CDK's notifications custom resource.
    template.hasResourceProperties('Custom::S3BucketNotifications', {
      NotificationConfiguration: { EventBridgeConfiguration: {} },
    });
    // Both buckets refuse plain HTTP.
    const policies = resourcesOf(template, 'AWS::S3::BucketPolicy');
    assert.equal(policies.length, 2);
    for (const policy of policies) {
      const statements = (policy.Properties!['PolicyDocument'] as { Statement: Record<string, unknown>[] }).Statement;
      assert.ok(
        statements.some((s) => s['Effect'] === 'Deny' && JSON.stringify(s['Condition']) === JSON.stringify({ Bool: { 'aws:SecureTransport': 'false' } })),
        `bucket policy without a TLS-only statement: ${JSON.stringify(statements)}`,
      );
    }
  });

  it('has one table keyed pk/sk, on demand, with point-in-time recovery and TTL on expiresAt', () => {
    template.resourceCountIs('AWS::DynamoDB::GlobalTable', 1);
    template.hasResource('AWS::DynamoDB::GlobalTable', {
      Properties: Match.objectLike({
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        AttributeDefinitions: Match.arrayWith([
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
        ]),
        BillingMode: 'PAY_PER_REQUEST',
        TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
        Replicas: [Match.objectLike({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } })],
      }),
      DeletionPolicy: 'Retain',
    });
  });

  it('has a two-AZ VPC with no NAT gateway (nothing bills at rest), S3 and DynamoDB endpoints and flow logs', () => {
    template.resourceCountIs('AWS::EC2::VPC', 1);
    template.resourceCountIs('AWS::EC2::Subnet', 2);
    template.resourceCountIs('AWS::EC2::NatGateway', 0);
    template.resourceCountIs('AWS::EC2::VPCEndpoint', 2);
    template.resourceCountIs('AWS::EC2::FlowLog', 1);
  });

  it('has a GPU compute environment on g6/g5 spot that scales to zero, in the public subnets', () => {
    template.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      Type: 'managed',
      ComputeResources: Match.objectLike({
        Type: 'SPOT',
        AllocationStrategy: 'SPOT_PRICE_CAPACITY_OPTIMIZED',
        InstanceTypes: ['g6', 'g5'],
        MinvCpus: 0,
        MaxvCpus: 64,
        Ec2Configuration: [{ ImageType: 'ECS_AL2023_NVIDIA' }],
        Subnets: [{ Ref: Match.stringLikeRegexp('^VpcpublicSubnet1') }, { Ref: Match.stringLikeRegexp('^VpcpublicSubnet2') }],
      }),
    });
  });

  it('has a Fargate compute environment and one job queue per compute environment', () => {
    template.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      ComputeResources: Match.objectLike({ Type: 'FARGATE', MaxvCpus: 64 }),
    });
    template.resourceCountIs('AWS::Batch::ComputeEnvironment', 2);
    const queues = resourcesOf(template, 'AWS::Batch::JobQueue');
    assert.equal(queues.length, 2);
    const environments = queues.map((q) =>
      JSON.stringify((q.Properties!['ComputeEnvironmentOrder'] as { ComputeEnvironment: unknown }[])[0]!.ComputeEnvironment),
    );
    assert.equal(new Set(environments).size, 2, 'each queue has its own compute environment');
  });

  it('honours gpuMaxvCpus, cpuMaxvCpus and gpuSpot', () => {
    const { template: custom } = synthPlatform({ gpuMaxvCpus: 16, cpuMaxvCpus: 8, gpuSpot: false });
    custom.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      ComputeResources: Match.objectLike({ Type: 'EC2', AllocationStrategy: 'BEST_FIT_PROGRESSIVE', MaxvCpus: 16 }),
    });
    custom.hasResourceProperties('AWS::Batch::ComputeEnvironment', {
      ComputeResources: Match.objectLike({ Type: 'FARGATE', MaxvCpus: 8 }),
    });
  });

  it('cancels a GPU job blocked RUNNABLE at the head of the queue instead of leaving it there for days', () => {
    const [gpuQueue] = resourcesOf(template, 'AWS::Batch::JobQueue').filter((q) => q.Properties!['JobStateTimeLimitActions']);
    assert.ok(gpuQueue, 'the GPU queue has time limits');
    const limits = gpuQueue.Properties!['JobStateTimeLimitActions'] as { Action: string; State: string; Reason: string; MaxTimeSeconds: number }[];
    assert.deepEqual(limits.map((l) => [l.Reason, l.MaxTimeSeconds]).sort(), [
      ['CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY', 3600],
      ['MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE', 600],
      ['MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT', 600],
    ]);
    for (const limit of limits) assert.deepEqual([limit.State, limit.Action], ['RUNNABLE', 'CANCEL']);
  });

  it('runs GPU jobs on demand with context frontier:gpuSpot=false, in an environment of its own', () => {
    const app = newApp({ context: { 'frontier:gpuSpot': 'false' } });
    const onDemand = Template.fromStack(new PlatformStack(app, 'Platform'));
    const gpuEnvironments = (t: Template) =>
      Object.entries(t.findResources('AWS::Batch::ComputeEnvironment'))
        .map(([id, r]) => [id, (r as Resource).Properties!['ComputeResources'] as { Type: string }] as const)
        .filter(([, c]) => c.Type !== 'FARGATE');
    const [[spotId, spot]] = gpuEnvironments(template) as [readonly [string, { Type: string }]];
    const [[onDemandId, ec2]] = gpuEnvironments(onDemand) as [readonly [string, { Type: string }]];
    assert.deepEqual([spot.Type, ec2.Type], ['SPOT', 'EC2']);
    // CloudFormation cannot change a compute environment's type in place: switching must
    // create another resource (a new logical id) for the queue to move to.
    assert.notEqual(spotId, onDemandId);
    assert.throws(
      () => new PlatformStack(newApp({ context: { 'frontier:gpuSpot': 'no' } }), 'Platform'),
      (e: unknown) => e instanceof ConfigError && e.field === 'gpuSpot' && /"no"/.test(e.message),
    );
  });

  it('has the Anthropic key secret and a generated 64-character signing key', () => {
    template.resourceCountIs('AWS::SecretsManager::Secret', 2);
    template.hasResourceProperties('AWS::SecretsManager::Secret', {
      SecretString: Match.stringLikeRegexp('put-secret-value'),
    });
    template.hasResourceProperties('AWS::SecretsManager::Secret', {
      GenerateSecretString: Match.objectLike({ PasswordLength: 64 }),
    });
  });

  it('verifies the sender address with SES', () => {
    template.resourceCountIs('AWS::SES::EmailIdentity', 1);
    template.hasResourceProperties('AWS::SES::EmailIdentity', {
      EmailIdentity: CDK_CONTEXT['frontier:senderEmail'],
    });
  });

  it('serves GET and POST /approvals/{id} and GET /approvals from the approval Lambda, throttled and access-logged', () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Api', 1);
    template.hasResourceProperties('AWS::ApiGatewayV2::Api', { ProtocolType: 'HTTP' });
    const routeKeys = resourcesOf(template, 'AWS::ApiGatewayV2::Route')
      .map((r) => r.Properties!['RouteKey'])
      .sort();
    // HEAD reaches the function, which answers 405 rather than API Gateway's 404.
    assert.deepEqual(routeKeys, ['GET /approvals', 'GET /approvals/{id}', 'HEAD /approvals/{id}', 'POST /approvals/{id}']);
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingBurstLimit: 20, ThrottlingRateLimit: 10 },
      AccessLogSettings: {
        DestinationArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ApprovalApiAccessLogs'), 'Arn'] },
        Format: Match.stringLikeRegexp('\\$context\\.requestId'),
      },
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs22.x',
      Environment: {
        Variables: Match.objectLike({
          TABLE_NAME: { Ref: Match.stringLikeRegexp('^Table') },
          SIGNING_SECRET_ARN: { Ref: Match.stringLikeRegexp('^ApprovalSigningKey') },
        }),
      },
    });
    // Task tokens are not resources, so the callback actions can only be granted on "*".
    const statements = resourcesOf(template, 'AWS::IAM::Policy').flatMap(
      (p) => (p.Properties!['PolicyDocument'] as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement,
    );
    const callback = statements.find((s) => [s.Action].flat().includes('states:SendTaskSuccess'));
    assert.deepEqual([callback?.Action].flat().sort(), ['states:SendTaskFailure', 'states:SendTaskSuccess']);
    assert.equal(callback?.Resource, '*');
  });

  it('lets the approval Lambda read the items documents under approvals/ of the bucket, and nothing else there', () => {
    const functions = template.findResources('AWS::Lambda::Function', {
      Properties: { Description: 'Approval page (GET) and decision (POST) for approval gates.' },
    });
    const [fn] = Object.values(functions) as { Properties: { Role: { 'Fn::GetAtt': [string, string] } } }[];
    assert.ok(fn, 'the approval API function');
    const role = fn.Properties.Role['Fn::GetAtt'][0];
    type Policy = { Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } } };
    const statements = (Object.values(template.findResources('AWS::IAM::Policy')) as Policy[])
      .filter((p) => p.Properties.Roles.some((r) => r.Ref === role))
      .flatMap((p) => p.Properties.PolicyDocument.Statement);
    const s3 = statements.filter((st) => [st.Action].flat().some((action) => action.startsWith('s3:')));
    assert.equal(s3.length, 1, JSON.stringify(s3));
    assert.equal(s3[0]!.Action, 's3:GetObject');
    const bucketId = Object.keys(template.findResources('AWS::S3::Bucket')).find((id) => /^Bucket[0-9A-F]{8}$/.test(id));
    assert.ok(bucketId, 'the pipelines bucket');
    assert.deepEqual(s3[0]!.Resource, { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/approvals/*']] });
  });

  it('sets a retention on every log group, and gives every Lambda a log group', () => {
    const groups = template.findResources('AWS::Logs::LogGroup');
    assert.ok(Object.keys(groups).length >= 4, 'flow logs, access logs, two function log groups');
    for (const [id, group] of Object.entries(groups) as [string, Resource][]) {
      assert.equal(group.Properties?.['RetentionInDays'], CDK_CONTEXT['frontier:logRetentionDays'], `log group ${id}`);
    }
    for (const [id, fn] of Object.entries(template.findResources('AWS::Lambda::Function')) as [string, Resource][]) {
      const logGroup = (fn.Properties?.['LoggingConfig'] as { LogGroup?: { Ref?: string } } | undefined)?.LogGroup;
      assert.ok(logGroup?.Ref && logGroup.Ref in groups, `function ${id} logs to a log group of this stack`);
    }
  });

  it('takes the log retention from the prop over the context', () => {
    const { template: custom } = synthPlatform({ logRetentionDays: 7 });
    for (const group of resourcesOf(custom, 'AWS::Logs::LogGroup')) {
      assert.equal(group.Properties?.['RetentionInDays'], 7);
    }
  });

  it('outputs the bucket name, the table name and the approval API URL', () => {
    template.hasOutput('BucketName', { Value: { Ref: Match.stringLikeRegexp('^Bucket') } });
    template.hasOutput('TableName', { Value: { Ref: Match.stringLikeRegexp('^Table') } });
    template.hasOutput('ApprovalApiUrl', {
      Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ApprovalHttpApi'), 'ApiEndpoint'] },
    });
  });
});

/** The route with this key, and the authorizer it names (if any). */
function routeOf(template: Template, routeKey: string): { AuthorizationType?: string; AuthorizerId?: { Ref: string } } {
  const route = resourcesOf(template, 'AWS::ApiGatewayV2::Route').find((r) => r.Properties!['RouteKey'] === routeKey);
  assert.ok(route, `route ${routeKey}`);
  return route.Properties as { AuthorizationType?: string; AuthorizerId?: { Ref: string } };
}

describe('PlatformStack: approvers sign in by default', () => {
  const { stack, template } = synthPlatform();
  const env = () => {
    const fns = template.findResources('AWS::Lambda::Function', { Properties: { Description: 'Approval page (GET) and decision (POST) for approval gates.' } });
    return (Object.values(fns)[0] as { Properties: { Environment: { Variables: Record<string, unknown> } } }).Properties.Environment.Variables;
  };

  it('has a user pool without self sign-up, with an approvers group', () => {
    template.resourceCountIs('AWS::Cognito::UserPool', 1);
    template.hasResourceProperties('AWS::Cognito::UserPool', {
      AdminCreateUserConfig: Match.objectLike({ AllowAdminCreateUserOnly: true }),
      Policies: { PasswordPolicy: Match.objectLike({ MinimumLength: 12, RequireSymbols: true }) },
    });
    template.hasResourceProperties('AWS::Cognito::UserPoolGroup', {
      GroupName: 'approvers',
      UserPoolId: { Ref: Match.stringLikeRegexp('^ApproverSignInUsers') },
    });
    assert.equal(stack.approverSignIn?.groupName, 'approvers');
  });

  it('has a public PKCE client that returns to GET /approvals, and a managed-login domain', () => {
    template.hasResourceProperties('AWS::Cognito::UserPoolClient', {
      GenerateSecret: false,
      AllowedOAuthFlows: ['code'],
      AllowedOAuthScopes: ['openid', 'email', 'profile'],
      CallbackURLs: [{ 'Fn::Join': ['', [{ 'Fn::GetAtt': [Match.stringLikeRegexp('^ApprovalHttpApi'), 'ApiEndpoint'] }, '/approvals']] }],
      LogoutURLs: [{ 'Fn::Join': ['', [{ 'Fn::GetAtt': [Match.stringLikeRegexp('^ApprovalHttpApi'), 'ApiEndpoint'] }, '/approvals']] }],
    });
    template.resourceCountIs('AWS::Cognito::UserPoolDomain', 1);
    template.hasResourceProperties('AWS::Cognito::UserPoolDomain', { ManagedLoginVersion: 2 });
  });

  it('puts a JWT authorizer for that client on POST only; the page and the sign-in return stay open', () => {
    const post = routeOf(template, 'POST /approvals/{id}');
    assert.equal(post.AuthorizationType, 'JWT');
    const authorizers = template.findResources('AWS::ApiGatewayV2::Authorizer');
    const authorizer = authorizers[post.AuthorizerId!.Ref] as Resource;
    assert.ok(authorizer, 'the POST route names an authorizer of the stack');
    const jwt = authorizer.Properties!['JwtConfiguration'] as { Audience: unknown[]; Issuer: unknown };
    const [clientId] = Object.keys(template.findResources('AWS::Cognito::UserPoolClient'));
    assert.deepEqual(jwt.Audience, [{ Ref: clientId }]);
    assert.match(JSON.stringify(jwt.Issuer), /cognito-idp\./);
    for (const key of ['GET /approvals/{id}', 'HEAD /approvals/{id}', 'GET /approvals']) assert.notEqual(routeOf(template, key).AuthorizationType, 'JWT', key);
  });

  it('tells the function how to sign in and which group may decide', () => {
    const variables = env();
    assert.equal(variables['APPROVAL_SIGN_IN'], 'cognito');
    assert.equal(variables['APPROVAL_GROUP'], 'approvers');
    assert.deepEqual(variables['APPROVAL_CLIENT_ID'], { Ref: Object.keys(template.findResources('AWS::Cognito::UserPoolClient'))[0] });
    assert.match(JSON.stringify(variables['APPROVAL_AUTH_DOMAIN']), /auth\./);
    const [apiId] = Object.keys(template.findResources('AWS::ApiGatewayV2::Api'));
    assert.deepEqual(variables['APPROVAL_BASE_URL'], { 'Fn::GetAtt': [apiId, 'ApiEndpoint'] });
  });

  it('outputs the pool id, saying how to add an approver', () => {
    template.hasOutput('ApproverUserPoolId', {
      Value: { Ref: Match.stringLikeRegexp('^ApproverSignInUsers') },
      Description: Match.stringLikeRegexp('admin-add-user-to-group --group-name approvers'),
    });
  });
});

describe('PlatformStack: the link-only mode (approvalSignIn=false)', () => {
  for (const [how, make] of [
    ['prop', () => new PlatformStack(newApp(), 'Platform', { approvalSignIn: false })],
    ['context string', () => new PlatformStack(newApp({ context: { approvalSignIn: 'false' } }), 'Platform')],
  ] as const) {
    it(`builds no user pool and no authorizer, and tells the function so (${how})`, () => {
      const stack = make();
      const template = Template.fromStack(stack);
      assert.equal(stack.approverSignIn, undefined);
      template.resourceCountIs('AWS::Cognito::UserPool', 0);
      template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 0);
      const routeKeys = resourcesOf(template, 'AWS::ApiGatewayV2::Route')
        .map((r) => r.Properties!['RouteKey'])
        .sort();
      assert.deepEqual(routeKeys, ['GET /approvals/{id}', 'HEAD /approvals/{id}', 'POST /approvals/{id}']);
      template.hasResourceProperties('AWS::Lambda::Function', {
        Description: 'Approval page (GET) and decision (POST) for approval gates.',
        Environment: { Variables: Match.objectLike({ APPROVAL_SIGN_IN: 'link' }) },
      });
      assert.deepEqual(template.findOutputs('ApproverUserPoolId'), {});
    });
  }

  it('throws naming the context flag when it is neither true nor false', () => {
    assert.throws(
      () => new PlatformStack(newApp({ context: { approvalSignIn: 'off' } }), 'Platform'),
      (error: unknown) => error instanceof ConfigError && error.field === 'context approvalSignIn' && /"off"/.test(error.message),
    );
  });
});

describe('PlatformStack validation', () => {
  const throwsConfigError = (props: PlatformStackProps, field: string, context?: Record<string, unknown>) =>
    assert.throws(
      () => new PlatformStack(newApp({ context }), 'Platform', props),
      (error: unknown) => error instanceof ConfigError && error.field === field && error.message.includes(field),
    );

  it('throws when senderEmail is not an email address', () => {
    throwsConfigError({ senderEmail: 'pipelines.example.com' }, 'senderEmail');
  });

  it('throws when the senderEmail context is not an email address', () => {
    throwsConfigError({}, 'senderEmail', { 'frontier:senderEmail': 'not an email' });
  });

  it('throws when approverEmail is not an email address', () => {
    throwsConfigError({ approverEmail: 'approver@' }, 'approverEmail');
  });

  it('throws when logRetentionDays is not a CloudWatch Logs retention', () => {
    throwsConfigError({ logRetentionDays: 31 }, 'logRetentionDays');
  });

  it('throws when gpuMaxvCpus is below one GPU instance or not an integer', () => {
    throwsConfigError({ gpuMaxvCpus: 2 }, 'gpuMaxvCpus');
    throwsConfigError({ gpuMaxvCpus: 8.5 }, 'gpuMaxvCpus');
  });

  it('throws when cpuMaxvCpus is out of range', () => {
    throwsConfigError({ cpuMaxvCpus: 0 }, 'cpuMaxvCpus');
  });

  it('names the value received in the message', () => {
    assert.throws(() => new PlatformStack(newApp(), 'Platform', { senderEmail: 'nobody' }), /senderEmail.*"nobody"/);
  });

  it('accepts a retention given on the command line as a string', () => {
    const stack = new PlatformStack(newApp({ context: { 'frontier:logRetentionDays': '14' } }), 'Platform');
    assert.equal(stack.resources.logRetention, 14);
  });
});

describe('PlatformStack under cdk-nag (AwsSolutions)', () => {
  for (const approvalSignIn of [true, false]) {
    it(`synthesizes with no unacknowledged finding, each acknowledgement with a real reason (approvalSignIn ${approvalSignIn})`, (t) => {
      const outdir = mkdtempSync(join(tmpdir(), 'platform-nag-'));
      try {
        const app = newApp({ outdir });
        new PlatformStack(app, 'Platform', { approvalSignIn });
        applyNag(app);

        let failure: Error | undefined;
        try {
          app.synth();
        } catch (error) {
          failure = error as Error;
        }
        // On failure cdk-nag's findings are in validation-report.json; show them by rule.
        if (failure) {
          let findings = failure.message;
          try {
            const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
              pluginReports: { violations: { ruleName: string; severity: string; violatingConstructs?: { constructPath: string }[] }[] }[];
            };
            findings = report.pluginReports
              .flatMap((p) => p.violations)
              .map((v) => `${v.severity} ${v.ruleName}: ${(v.violatingConstructs ?? []).map((c) => c.constructPath).join(', ')}`)
              .join('\n');
          } catch {
            // No report: the failure happened before validation, and its message says why.
          }
          assert.fail(`synth failed:\n${findings}`);
        }
        // Synth passes with warnings too; list them, and make sure no error slipped through.
        // (A clean run leaves pluginReports empty; acknowledged findings are not listed.)
        const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
          pluginReports: { pluginName: string; violations: { ruleName: string; severity: string }[] }[];
        };
        const violations = report.pluginReports.flatMap((p) => p.violations);
        for (const v of violations) t.diagnostic(`${v.severity} ${v.ruleName}`);
        assert.deepEqual(
          violations.filter((v) => v.severity === 'error' || v.severity === 'fatal'),
          [],
        );

        // Acknowledgements live in construct metadata under Validations' key as { id: reason }.
        const acknowledgements = app.node
          .findAll()
          .flatMap((c) => c.node.metadata)
          .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
          .flatMap((m) => Object.entries(m.data as Record<string, string>));
        assert.ok(acknowledgements.length >= 8, `expected the stack's acknowledgements, got ${acknowledgements.length}`);
        for (const [id, reason] of acknowledgements) {
          assert.ok(typeof reason === 'string' && reason.trim().length >= 20, `acknowledgement ${id} has no real reason: ${JSON.stringify(reason)}`);
        }
      } finally {
        rmSync(outdir, { recursive: true, force: true });
      }
    });
  }
});

describe('applyNag', () => {
  it('fails synth on an unacknowledged finding and names the rule', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'nag-control-'));
    try {
      const app = newApp({ outdir });
      // A secret without rotation: AwsSolutions-SMG4, an error-level rule.
      new Secret(new Stack(app, 'Control'), 'Unrotated');
      applyNag(app);
      assert.throws(() => app.synth(), /Validation failed/);
      const report = readFileSync(join(outdir, 'validation-report.json'), 'utf8');
      assert.match(report, /AwsSolutions-SMG4/);
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});

describe('acknowledge', () => {
  const scope = () => new Stack(new App(), 'Scope');

  it('records the rule id and reason where the rule pack looks for them', () => {
    const stack = scope();
    acknowledge(stack, [{ id: 'AwsSolutions-SMG4', reason: 'The key is issued and rotated by its owner.' }]);
    const data = stack.node.metadata.find((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)?.data as Record<string, string> | undefined;
    assert.ok(data, 'no acknowledgement metadata');
    assert.deepEqual(Object.values(data), ['The key is issued and rotated by its owner.']);
    assert.match(Object.keys(data)[0]!, /AwsSolutions-SMG4$/);
  });

  it('throws when the reason is shorter than 20 characters', () => {
    assert.throws(
      () => acknowledge(scope(), [{ id: 'AwsSolutions-SMG4', reason: 'not needed' }]),
      (error: unknown) => error instanceof ConfigError && /acknowledge\.reason/.test(error.field),
    );
  });

  it('throws when the id is not a rule id', () => {
    assert.throws(
      () => acknowledge(scope(), [{ id: 'SMG4', reason: 'The key is issued and rotated by its owner.' }]),
      (error: unknown) => error instanceof ConfigError && error.field === 'acknowledge.id',
    );
  });
});
