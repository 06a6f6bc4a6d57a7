/**
 * The platform stack: what every pipeline stack shares.
 *
 * 1. One S3 bucket (runs, artifacts, checkpoints, data), object events to EventBridge, with
 *    server access logs in a second bucket.
 * 2. One DynamoDB table (single-table design, see shared/table.ts).
 * 3. A VPC for the Batch compute: two AZs, public subnets only (no NAT gateway, so nothing
 *    bills while no job runs), gateway endpoints for S3 and DynamoDB.
 * 4. AWS Batch: a GPU EC2 compute environment (g6/g5, spot, scales to zero) and a Fargate
 *    CPU compute environment, each behind its own job queue.
 * 5. Secrets: the Anthropic API key (set by the user after deploy) and the approval-link
 *    signing key (generated).
 * 6. The SES v2 sender identity.
 * 7. The approval API: an HTTP API with GET and POST /approvals/{id} on one Lambda, which
 *    reads the approvals' items documents under approvals/ of the bucket.
 * 8. By default, sign-in for approvers (infra/approver-sign-in.ts): a Cognito user pool with an
 *    `approvers` group, a JWT authorizer on POST /approvals/{id}, and GET /approvals, the page
 *    sign-in returns to. `approvalSignIn: false` (context `-c approvalSignIn=false`) builds none
 *    of it: the link-only mode, where the page asks for its code to be typed instead.
 * 9. The alarm topic (infra/alarm-topic.ts): every pipeline stack's alarms and failure notices,
 *    mailed to `alarmEmail` (context `frontier:alarmEmail`) when one is set.
 *
 * Pipeline stacks receive `resources` and never create these things themselves.
 */
import { CfnOutput, type CfnResource, Duration, RemovalPolicy, SecretValue, Stack, type StackProps } from 'aws-cdk-lib';
import { HttpApi, HttpMethod, type HttpRoute, LogGroupLogDestination } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as ses from 'aws-cdk-lib/aws-ses';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { APPROVAL_ENV, APPROVAL_ITEMS_PREFIX, SIGN_IN_RETURN_PATH } from '#shared/approval.ts';
import { TABLE_KEYS } from '#shared/table.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PipelineFunction } from '#pipelines/steps/function.ts';
import { httpAccessLogFormat } from '#pipelines/steps/access-log.ts';
import { iam5Resource } from '#pipelines/steps/nag-findings.ts';
import { acknowledge } from './nag.ts';
import { booleanFlag } from '#pipelines/steps/context-flag.ts';
import { approvalSignInFromContext, ApproverSignIn } from './approver-sign-in.ts';
import { AlarmTopic } from './alarm-topic.ts';
import { ANTHROPIC_KEY_PLACEHOLDER } from '#shared/rewards/propose.ts';

/** Context keys (cdk.json) that supply the defaults of the matching props. */
export const PLATFORM_CONTEXT = {
  senderEmail: 'frontier:senderEmail',
  approverEmail: 'frontier:approverEmail',
  logRetentionDays: 'frontier:logRetentionDays',
  alarmEmail: 'frontier:alarmEmail',
  gpuSpot: 'frontier:gpuSpot',
} as const;

/** What the platform stack shares with the pipeline stacks. */
export interface PlatformResources {
  /** The one bucket: runs/, artifacts/, checkpoints/, data/. Object events go to EventBridge. */
  readonly bucket: s3.IBucket;
  /** The one table: `pk`/`sk`, TTL on `expiresAt`. */
  readonly table: dynamodb.ITableV2;
  /** The VPC the Batch compute environments run in. */
  readonly vpc: ec2.IVpc;
  /** Queue of the GPU (EC2, g6/g5, spot) compute environment. */
  readonly gpuQueue: batch.IJobQueue;
  /** Queue of the CPU (Fargate) compute environment. */
  readonly cpuQueue: batch.IJobQueue;
  /** The Anthropic API key, stored by the user after deploy. */
  readonly anthropicSecret: secretsmanager.ISecret;
  /** HMAC key that signs approval links. */
  readonly signingSecret: secretsmanager.ISecret;
  /** Verified SES sender address. */
  readonly senderEmail: string;
  /** Where approval requests are mailed. */
  readonly approverEmail: string;
  /** Base URL of the approval API (a token), without a trailing slash: links are `<url>/approvals/<id>`. */
  readonly approvalApiUrl: string;
  /** Retention of every log group the stacks create. */
  readonly logRetention: logs.RetentionDays;
  /** Where every pipeline's alarms and failure notices go (encrypted, TLS only). */
  readonly alarmTopic: sns.ITopic;
}

export interface PlatformStackProps extends StackProps {
  /** Verified SES sender. Default: context `frontier:senderEmail`. */
  readonly senderEmail?: string;
  /** Recipient of approval requests. Default: context `frontier:approverEmail`. */
  readonly approverEmail?: string;
  /**
   * Retention of every log group, in days; one of the values CloudWatch Logs accepts
   * (1, 3, 5, 7, 14, 30, 60, 90, ...). Default: context `frontier:logRetentionDays`, else 30.
   */
  readonly logRetentionDays?: number;
  /** Upper bound of the GPU compute environment, in vCPUs (4 to 4096). Default: 64. */
  readonly gpuMaxvCpus?: number;
  /** Upper bound of the Fargate compute environment, in vCPUs (1 to 4096). Default: 64. */
  readonly cpuMaxvCpus?: number;
  /**
   * Run GPU jobs on spot instances (about a third of the on-demand price; a reclaimed job is
   * retried as a Batch attempt and resumes from its last checkpoint). False runs them on
   * on-demand instances, for an account whose G and VT spot quota is 0. Switching it after the
   * first deploy replaces the GPU compute environment (wait for running GPU jobs first).
   * Default: context `frontier:gpuSpot` (`-c frontier:gpuSpot=false`), else true.
   */
  readonly gpuSpot?: boolean;
  /**
   * Deciding an approval needs a signed-in member of the approvers group (a Cognito user pool made
   * here). False is the link-only mode: whoever opens the emailed link decides, after typing the
   * short code the page shows; anyone the email reaches (forwarded, or read by a mail tool that
   * types) can decide. Default: context `approvalSignIn`, else true.
   */
  readonly approvalSignIn?: boolean;
  /**
   * Who is told when a deployed pipeline fails: an email subscription to the alarm topic (SNS
   * mails a confirmation link once). Default: context `frontier:alarmEmail`, else no subscription
   * (the alarms show in the CloudWatch console only).
   */
  readonly alarmEmail?: string;
}

/** Entry of the approval API handler. */
const APPROVAL_API_ENTRY = join(REPO_ROOT, 'functions', 'platform', 'approval-api', 'handler.ts');

const LAMBDA_BASIC_EXECUTION = 'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole';
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const RETENTION_DAYS = new Set<number>(Object.values(logs.RetentionDays).filter((v): v is number => typeof v === 'number'));

export class PlatformStack extends Stack {
  readonly resources: PlatformResources;
  /** The approvers' sign-in; absent in the link-only mode. */
  readonly approverSignIn?: ApproverSignIn;

  constructor(scope: Construct, id: string, props: PlatformStackProps = {}) {
    super(scope, id, props);
    const config = this.resolveConfig(props);
    const logRetention = config.logRetentionDays as logs.RetentionDays;

    // ---- 1. S3 -------------------------------------------------------------------------
    // SSE-S3 rather than KMS: no key policy to manage and no per-request KMS charge on the
    // many small objects the pipelines write. (The access-log bucket could not use SSE-KMS
    // anyway: S3 server access logging does not deliver to KMS-encrypted buckets.)
    const accessLogBucket = new s3.Bucket(this, 'AccessLogBucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.RETAIN,
      // Access logs are for audits and incident reviews; a year covers both and bounds cost.
      lifecycleRules: [{ expiration: Duration.days(365) }],
    });
    const bucket = new s3.Bucket(this, 'Bucket', {
      versioned: true,
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      // Checkpoint manifests start evaluation runs through EventBridge rules.
      eventBridgeEnabled: true,
      serverAccessLogsBucket: accessLogBucket,
      serverAccessLogsPrefix: 'bucket/',
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        // Versioning protects artifacts from overwrites; old versions of scratch files
        // would otherwise be kept forever.
        { noncurrentVersionExpiration: Duration.days(30) },
        { abortIncompleteMultipartUploadAfter: Duration.days(7) },
      ],
    });
    // eventBridgeEnabled is applied by a CDK-provided custom resource. Its Lambda is an L1
    // without a log group prop: point its LoggingConfig at a group with retention (else
    // Lambda creates one that keeps logs forever), and accept its managed logging policy.
    for (const child of this.node.children) {
      if (child.node.id.startsWith('BucketNotificationsHandler')) {
        const handlerLogs = new logs.LogGroup(this, 'BucketNotificationsHandlerLogs', {
          retention: logRetention,
          removalPolicy: RemovalPolicy.DESTROY,
        });
        (child.node.defaultChild as CfnResource).addPropertyOverride('LoggingConfig', {
          LogGroup: handlerLogs.logGroupName,
        });
        acknowledge(child, [
          {
            id: `AwsSolutions-IAM4[${LAMBDA_BASIC_EXECUTION}]`,
            reason: 'CDK-provided handler that turns on EventBridge delivery for the bucket; its managed policy only allows writing its own CloudWatch logs.',
          },
        ]);
      }
    }

    // ---- 2. DynamoDB -------------------------------------------------------------------
    const table = new dynamodb.TableV2(this, 'Table', {
      partitionKey: { name: TABLE_KEYS.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE_KEYS.sortKey, type: dynamodb.AttributeType.STRING },
      billing: dynamodb.Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveAttribute: TABLE_KEYS.ttlAttribute,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // ---- 3. VPC ------------------------------------------------------------------------
    const flowLogGroup = new logs.LogGroup(this, 'VpcFlowLogs', {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // No NAT gateway: one costs about 33 USD a month whether or not a job runs, and the
    // platform is meant to cost nothing at rest but storage. Jobs run in public subnets with
    // public IPs for egress (ECR, the Anthropic API); their security groups admit no inbound
    // traffic. S3 and DynamoDB traffic (checkpoints, datasets, ECR image layers, which are
    // served from S3) takes the free gateway endpoints below.
    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20 }],
      gatewayEndpoints: {
        S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
        DynamoDB: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
      },
      flowLogs: {
        // Rejected traffic is what reveals a misconfigured security group; logging ALL would
        // record every S3 transfer of every training job.
        rejected: {
          destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
          trafficType: ec2.FlowLogTrafficType.REJECT,
        },
      },
    });
    const jobSubnets: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PUBLIC };

    // ---- 4. Batch ----------------------------------------------------------------------
    // The purchase option is part of the compute environment's logical id: CloudFormation cannot
    // change a compute environment's type (SPOT, EC2) in place, so switching gpuSpot makes a new
    // environment, points the queue at it, then deletes the old one. The spot one keeps the id
    // the first deployments had.
    const gpuCompute = new batch.ManagedEc2EcsComputeEnvironment(this, config.gpuSpot ? 'GpuCompute' : 'GpuComputeOnDemand', {
      vpc,
      vpcSubnets: jobSubnets,
      instanceClasses: [ec2.InstanceClass.G6, ec2.InstanceClass.G5],
      useOptimalInstanceClasses: false,
      images: [{ imageType: batch.EcsMachineImageType.ECS_AL2023_NVIDIA }],
      // Spot: `spot: true` with the price-and-capacity-optimized strategy, which picks the
      // g6/g5 pools least likely to be reclaimed. Reclaims are handled by Batch attempts
      // (evaluateOnExit) plus checkpoint resume, not by Step Functions retries.
      spot: config.gpuSpot,
      allocationStrategy: config.gpuSpot ? batch.AllocationStrategy.SPOT_PRICE_CAPACITY_OPTIMIZED : batch.AllocationStrategy.BEST_FIT_PROGRESSIVE,
      minvCpus: 0, // scale to zero: no GPU instance runs while no job is queued
      maxvCpus: config.gpuMaxvCpus,
      updateToLatestImageVersion: true,
    });
    acknowledge(gpuCompute, [
      {
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role]',
        reason:
          'The ECS agent on Batch GPU instances needs this AWS-maintained policy to register with the cluster and pull images; a hand-written copy would drift as ECS adds permissions.',
      },
    ]);
    const gpuQueue = new batch.JobQueue(this, 'GpuQueue', {
      computeEnvironments: [{ computeEnvironment: gpuCompute, order: 1 }],
      // A job that cannot be placed sits RUNNABLE, silently, until its state machine times out
      // (days): an account whose G and VT vCPU quota is 0, the default of many, never launches
      // an instance. Batch cancels a job blocked this long at the head of the queue, and its run
      // fails with the reason, which the command line reads as the quota to check.
      jobStateTimeLimitActions: gpuQueueTimeLimits(),
    });
    const cpuCompute = new batch.FargateComputeEnvironment(this, 'CpuCompute', {
      vpc,
      vpcSubnets: jobSubnets,
      maxvCpus: config.cpuMaxvCpus,
    });
    const cpuQueue = new batch.JobQueue(this, 'CpuQueue', {
      computeEnvironments: [{ computeEnvironment: cpuCompute, order: 1 }],
    });

    // ---- 5. Secrets --------------------------------------------------------------------
    const anthropicSecret = new secretsmanager.Secret(this, 'AnthropicApiKey', {
      description: 'Anthropic API key used by the pipelines. Set after deploy with aws secretsmanager put-secret-value.',
      // A readable placeholder instead of a random string, so that an unset key is obvious.
      // CloudFormation leaves later put-secret-value versions alone while this stays the same.
      secretStringValue: SecretValue.unsafePlainText(ANTHROPIC_KEY_PLACEHOLDER),
    });
    acknowledge(anthropicSecret, [
      {
        id: 'AwsSolutions-SMG4',
        reason: 'The Anthropic API key is issued and rotated by its owner in the Anthropic console; Secrets Manager cannot mint a new one.',
      },
    ]);
    const signingSecret = new secretsmanager.Secret(this, 'ApprovalSigningKey', {
      description: 'HMAC key that signs approval links. Rotating it invalidates every outstanding link.',
      generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
    });
    acknowledge(signingSecret, [
      {
        id: 'AwsSolutions-SMG4',
        reason:
          'Rotating the approval signing key invalidates every outstanding approval link; links expire on their own, and the key is rotated by hand when needed.',
      },
    ]);

    // ---- 6. SES ------------------------------------------------------------------------
    // The sender must be verified. In the SES sandbox the approver address must be verified
    // as well (done once in the console); out of the sandbox it needs nothing.
    new ses.EmailIdentity(this, 'SenderIdentity', { identity: ses.Identity.email(config.senderEmail) });

    // ---- 7. Approval API ---------------------------------------------------------------
    const accessLogGroup = new logs.LogGroup(this, 'ApprovalApiAccessLogs', {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const httpApi = new HttpApi(this, 'ApprovalHttpApi', {
      description: 'Approval links: GET shows the request, POST decides it.',
      createDefaultStage: false,
    });
    httpApi.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      // A person clicks these links; a few requests a second is plenty and caps abuse.
      throttle: { rateLimit: 10, burstLimit: 20 },
      accessLogSettings: {
        destination: new LogGroupLogDestination(accessLogGroup),
        // $context.path carries no query string, so link signatures never reach the log; the
        // token's subject says who decided (empty on the public routes).
        format: httpAccessLogFormat(config.approvalSignIn ? { user: '$context.authorizer.claims.sub', authorizerError: '$context.authorizer.error' } : {}),
      },
    });
    // The $default stage serves at the root of the API endpoint, which has no trailing slash.
    const approvalApiUrl = httpApi.apiEndpoint;

    // ---- 8. Approver sign-in (before the function, whose environment names the client) ------
    const signIn = config.approvalSignIn ? new ApproverSignIn(this, 'ApproverSignIn', { returnUrl: `${approvalApiUrl}${SIGN_IN_RETURN_PATH}` }) : undefined;
    this.approverSignIn = signIn;
    const signInEnv: Record<string, string> = signIn
      ? {
          [APPROVAL_ENV.signIn]: 'cognito',
          [APPROVAL_ENV.authDomain]: signIn.domain.baseUrl(),
          [APPROVAL_ENV.clientId]: signIn.client.userPoolClientId,
          [APPROVAL_ENV.group]: signIn.groupName,
        }
      : { [APPROVAL_ENV.signIn]: 'link' };

    const approvalFunction = new PipelineFunction(this, 'ApprovalApi', {
      entry: APPROVAL_API_ENTRY,
      description: 'Approval page (GET) and decision (POST) for approval gates.',
      environment: {
        [ENV.table]: table.tableName,
        [ENV.signingSecretArn]: signingSecret.secretArn,
        [ENV.approvalBaseUrl]: approvalApiUrl,
        ...signInEnv,
      },
      logRetention,
    });
    table.grantReadWriteData(approvalFunction);
    signingSecret.grantRead(approvalFunction);
    // The page shows a request's items document, read as it renders: GetObject under approvals/
    // only (no List, no other prefix). SSE-S3, so no KMS grant.
    const approvalItems = bucket.arnForObjects(`${APPROVAL_ITEMS_PREFIX}*`);
    approvalFunction.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [approvalItems] }));
    // Task tokens are not resources: SendTaskSuccess/SendTaskFailure accept no resource ARN
    // narrower than "*". The token itself is the capability, and it never leaves the table.
    approvalFunction.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['states:SendTaskSuccess', 'states:SendTaskFailure'],
        resources: ['*'],
      }),
    );

    const integration = new HttpLambdaIntegration('ApprovalIntegration', approvalFunction);
    if (signIn) {
      const publicRoutes: HttpRoute[] = [
        // HEAD reaches the function, which answers 405 (Allow: GET, POST) instead of API Gateway's 404.
        ...httpApi.addRoutes({ path: '/approvals/{id}', methods: [HttpMethod.GET, HttpMethod.HEAD], integration }),
        ...httpApi.addRoutes({ path: SIGN_IN_RETURN_PATH, methods: [HttpMethod.GET], integration }),
      ];
      httpApi.addRoutes({ path: '/approvals/{id}', methods: [HttpMethod.POST], integration, authorizer: signIn.authorizer });
      for (const route of publicRoutes) {
        acknowledge(route, [
          {
            id: 'AwsSolutions-APIG4',
            reason:
              'The approval page is opened from a mail client, which cannot present a token: GET is authorised by the HMAC signature in the link, shows the request and never decides; GET /approvals is the static page sign-in returns to. Deciding (POST) goes through the JWT authorizer.',
          },
        ]);
      }
    } else {
      httpApi.addRoutes({ path: '/approvals/{id}', methods: [HttpMethod.GET, HttpMethod.HEAD, HttpMethod.POST], integration });
      acknowledge(httpApi, [
        {
          id: 'AwsSolutions-APIG4',
          reason:
            'Deployed in the link-only mode on purpose (approvalSignIn=false): each request is authorised by the HMAC signature in the link, and a POST decides only with the page anti-forgery token and the short code the page shows typed in.',
        },
      ]);
    }
    acknowledge(approvalFunction, [
      {
        id: `AwsSolutions-IAM4[${LAMBDA_BASIC_EXECUTION}]`,
        reason: 'AWSLambdaBasicExecutionRole only allows writing to CloudWatch Logs, which every function needs.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'states:SendTaskSuccess and states:SendTaskFailure do not support resource-level permissions: a task token is not an ARN, so the only valid resource is "*".',
      },
      {
        id: iam5Resource(approvalFunction, approvalItems),
        reason:
          'Approval items documents are written content-addressed by each pipeline (approvals/<pipeline>/<sha256>.json), so their keys are known only at run time; the grant is GetObject under the approvals/ prefix only.',
      },
      {
        id: 'AwsSolutions-L1',
        reason:
          'nodejs22.x is pinned on purpose: the embedded runtime runs the same handler modules in-process on Node 22, so local and deployed behaviour match.',
      },
    ]);

    // ---- 9. Alarm topic ----------------------------------------------------------------
    const alarms = new AlarmTopic(this, 'Alarms', { email: config.alarmEmail });

    // ---- Outputs -----------------------------------------------------------------------
    new CfnOutput(this, 'BucketName', { value: bucket.bucketName, description: 'The pipelines bucket.' });
    new CfnOutput(this, 'TableName', { value: table.tableName, description: 'The pipelines table.' });
    new CfnOutput(this, 'ApprovalApiUrl', { value: approvalApiUrl, description: 'Base URL of approval links.' });
    if (signIn) {
      new CfnOutput(this, 'ApproverUserPoolId', {
        value: signIn.userPool.userPoolId,
        description: `Create approvers with aws cognito-idp admin-create-user, then admin-add-user-to-group --group-name ${signIn.groupName}.`,
      });
    }
    new CfnOutput(this, 'AnthropicApiKeyArn', {
      value: anthropicSecret.secretArn,
      description: 'Store the Anthropic API key here with aws secretsmanager put-secret-value.',
    });

    this.resources = {
      bucket,
      table,
      vpc,
      gpuQueue,
      cpuQueue,
      anthropicSecret,
      signingSecret,
      senderEmail: config.senderEmail,
      approverEmail: config.approverEmail,
      approvalApiUrl,
      logRetention,
      alarmTopic: alarms.topic,
    };
  }

  /** Props over context over defaults, each value validated. */
  private resolveConfig(props: PlatformStackProps) {
    const fromContext = (key: string): unknown => this.node.tryGetContext(key);
    const senderEmail = requireEmail('senderEmail', props.senderEmail ?? fromContext(PLATFORM_CONTEXT.senderEmail));
    const approverEmail = requireEmail('approverEmail', props.approverEmail ?? fromContext(PLATFORM_CONTEXT.approverEmail));
    const alarmEmailGiven = props.alarmEmail ?? fromContext(PLATFORM_CONTEXT.alarmEmail);
    const alarmEmail = alarmEmailGiven === undefined ? undefined : requireEmail('alarmEmail', alarmEmailGiven);
    const logRetentionDays = requireRetention('logRetentionDays', props.logRetentionDays ?? fromContext(PLATFORM_CONTEXT.logRetentionDays) ?? 30);
    const gpuMaxvCpus = requireIntegerIn('gpuMaxvCpus', props.gpuMaxvCpus ?? 64, 4, 4096);
    const cpuMaxvCpus = requireIntegerIn('cpuMaxvCpus', props.cpuMaxvCpus ?? 64, 1, 4096);
    const approvalSignIn = props.approvalSignIn ?? approvalSignInFromContext(this);
    if (typeof approvalSignIn !== 'boolean') throw new ConfigError('approvalSignIn', approvalSignIn, 'must be true or false');
    const gpuSpot = booleanFlag('gpuSpot', props.gpuSpot ?? fromContext(PLATFORM_CONTEXT.gpuSpot), true, 'prop gpuSpot or context frontier:gpuSpot');
    return { senderEmail, approverEmail, alarmEmail, logRetentionDays, gpuMaxvCpus, cpuMaxvCpus, gpuSpot, approvalSignIn };
  }
}

function requireEmail(field: string, value: unknown): string {
  if (typeof value !== 'string' || !EMAIL.test(value)) {
    throw new ConfigError(field, value, `must be an email address such as pipelines@example.com (prop ${field} or context frontier:${field})`);
  }
  return value;
}

function requireRetention(field: string, value: unknown): number {
  // Context given on the command line (-c frontier:logRetentionDays=14) arrives as a string.
  const days = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof days !== 'number' || !RETENTION_DAYS.has(days)) {
    throw new ConfigError(field, value, `must be one of ${[...RETENTION_DAYS].sort((a, b) => a - b).join(', ')}`);
  }
  return days;
}

/**
 * When the GPU queue gives up on a job that cannot be placed. Capacity (no spot capacity, or a
 * vCPU quota that admits no instance: EC2 reports both as failed launches) gets an hour, since
 * spot capacity often returns within one; a misconfiguration (a job larger than any instance
 * type or than the environment's maxvCpus) never fixes itself and gets the shortest time Batch
 * allows.
 */
export function gpuQueueTimeLimits(): batch.JobStateTimeLimitAction[] {
  return [
    { reason: batch.JobStateTimeLimitActionsReason.INSUFFICIENT_INSTANCE_CAPACITY, maxTime: Duration.hours(1) },
    { reason: batch.JobStateTimeLimitActionsReason.COMPUTE_ENVIRONMENT_MAX_RESOURCE, maxTime: Duration.minutes(10) },
    { reason: batch.JobStateTimeLimitActionsReason.JOB_RESOURCE_REQUIREMENT, maxTime: Duration.minutes(10) },
  ].map((limit) => ({ ...limit, state: batch.JobStateTimeLimitActionsState.RUNNABLE, action: batch.JobStateTimeLimitActionsAction.CANCEL }));
}

function requireIntegerIn(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(field, value, `must be an integer from ${min} to ${max}`);
  }
  return value;
}
