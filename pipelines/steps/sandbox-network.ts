/**
 * Where untrusted code runs on AWS: a Fargate job queue in a VPC of its own, one isolated subnet
 * in one Availability Zone. What it promises:
 *
 * 1. No route out. The VPC has no internet gateway, NAT gateway or peering. Its only ways out are
 *    VPC endpoints: S3 (gateway), and ECR api, ECR dkr and CloudWatch Logs (interface), so the
 *    image still pulls and the job still logs. The job holds no credentials: it moves its spec
 *    and outputs through presigned URLs for exactly its own keys.
 * 2. The endpoints serve this account only. Every endpoint policy allows only the calls the jobs
 *    need, only on this account's resources and only by principals of this account
 *    (`aws:PrincipalAccount`): credentials of another account, brought in by the candidate's
 *    code, reach nothing through them, so they cannot carry data to that account.
 * 3. No DNS out. A Route 53 Resolver DNS Firewall rule group answers the few AWS names the jobs
 *    need and NXDOMAIN to every other name, so a query cannot carry data to a name server
 *    someone else runs (the resolver would otherwise forward `<data>.example.com` to it).
 *
 * Why a VPC of its own, not a subnet of the platform's: a firewall rule group association, like
 * the private DNS of an interface endpoint, applies to a whole VPC. In the platform VPC the
 * block-everything rule would also answer NXDOMAIN to the trusted jobs, which egress through
 * public IPs to the Anthropic API, ECR and, on the GPU hosts, the ECS and EC2 endpoints their
 * agents need at boot. An allow list wide enough for them would be one more thing to keep in
 * step with every job, and a miss fails a job at DNS. A VPC costs nothing by itself, and the
 * trusted jobs keep the platform VPC as its comment describes it.
 *
 * What it costs while deployed: an interface endpoint is billed per AZ-hour, so one AZ and three
 * endpoints (about 22 USD a month in us-east-1); the DNS Firewall bills a fraction of a cent for
 * its domain lists and per query, and the flow log per GB, both only while jobs run. The stacks
 * that build it are left out of the app with `-c frontier:sandbox=false` (infra/build-app.ts).
 */
import { ArnFormat, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as resolver from 'aws-cdk-lib/aws-route53resolver';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';

export interface SandboxNetworkProps {
  readonly bucket: IBucket;
  /** The sandbox VPC's CIDR, which its one subnet spans (/16 to /28). Default: 10.0.200.0/24. */
  readonly cidrBlock?: string;
  /** Object keys the sandboxed jobs may read and write through presigned URLs. Default: `runs/*`. */
  readonly keyPattern?: string;
  /** vCPUs of the sandbox queue at once. Default: 16. */
  readonly maxvCpus?: number;
  /** Retention of the VPC's flow log (every connection the jobs open). Default: one month. */
  readonly logRetention?: logs.RetentionDays;
}

/** The actions ECS's task execution role policy grants for pulling from ECR. */
const ECR_PULL_ACTIONS = ['ecr:BatchCheckLayerAvailability', 'ecr:GetDownloadUrlForLayer', 'ecr:BatchGetImage'];
/** What the awslogs driver calls (the job's log group exists: the driver never creates one). */
const LOG_ACTIONS = ['logs:CreateLogStream', 'logs:PutLogEvents'];

/**
 * The names the jobs resolve, for a stack's region and account. ECR's API answers as
 * `api.ecr.<region>` and `ecr.<region>`; images come from this account's registry
 * (`<account>.dkr.ecr.<region>`); presigned URLs are path-style on `s3.<region>`; ECR hands out
 * image layers on virtual-hosted names of its layer bucket, regional or (in us-east-1) global.
 * A wildcard under an AWS name leaks nothing: AWS's own name servers answer those names.
 */
export function sandboxDomains(stack: Stack): string[] {
  const { region, account, urlSuffix } = stack;
  return [
    `api.ecr.${region}.${urlSuffix}`,
    `ecr.${region}.${urlSuffix}`,
    `${account}.dkr.ecr.${region}.${urlSuffix}`,
    `logs.${region}.${urlSuffix}`,
    `s3.${region}.${urlSuffix}`,
    `*.s3.${region}.${urlSuffix}`,
    `s3.${urlSuffix}`,
    `*.s3.${urlSuffix}`,
  ];
}

export class SandboxNetwork extends Construct {
  /** The sandbox's own VPC: no internet gateway, no NAT gateway, no peering. */
  readonly vpc: ec2.Vpc;
  readonly subnet: ec2.ISubnet;
  readonly jobSecurityGroup: ec2.SecurityGroup;
  readonly queue: batch.JobQueue;
  /** The interface endpoints (ECR api, ECR dkr, Logs), each with a policy for this account only. */
  readonly interfaceEndpoints: readonly ec2.InterfaceVpcEndpoint[];
  /** The DNS Firewall rule group associated with the sandbox VPC (and with nothing else). */
  readonly dnsFirewall: resolver.CfnFirewallRuleGroup;

  constructor(scope: Construct, id: string, props: SandboxNetworkProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const { bucket } = props;
    const cidrBlock = props.cidrBlock ?? '10.0.200.0/24';
    const cidr = /^\d{1,3}(\.\d{1,3}){3}\/(1[6-9]|2[0-8])$/.exec(cidrBlock);
    if (!cidr) throw new ConfigError('cidrBlock', cidrBlock, 'must be an IPv4 CIDR from /16 to /28');
    const maxvCpus = props.maxvCpus ?? 16;
    if (!Number.isInteger(maxvCpus) || maxvCpus < 1) throw new ConfigError('maxvCpus', maxvCpus, 'must be a positive integer');

    const flowLogs = new logs.LogGroup(this, 'FlowLogs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Isolated subnets only, so CDK makes no internet gateway. The flow log records ALL traffic,
    // not only rejected: the security group accepts HTTPS to any address and it is the routes
    // that drop what is not an endpoint, so a log of rejections would miss an attempt to get out.
    // The jobs open few connections (image, logs, spec, outputs), so the log stays small.
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(cidrBlock),
      maxAzs: 1,
      natGateways: 0,
      subnetConfiguration: [{ name: 'sandbox', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: Number(cidr[2]) }],
      flowLogs: {
        all: { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs), trafficType: ec2.FlowLogTrafficType.ALL },
      },
    });
    const vpc = this.vpc;
    this.subnet = vpc.isolatedSubnets[0]!;

    this.jobSecurityGroup = new ec2.SecurityGroup(this, 'JobSecurityGroup', {
      vpc,
      allowAllOutbound: false,
      description: 'Sandboxed jobs: no inbound; HTTPS out, which the isolated subnet routes only to the VPC endpoints',
    });
    // The subnet's routes, not this rule, confine the traffic: 0.0.0.0/0 here reaches only the
    // endpoints (interface ENIs in the VPC, and S3's prefix list through the gateway route).
    this.jobSecurityGroup.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), 'HTTPS to the VPC endpoints (no other route exists)');
    const endpointSecurityGroup = new ec2.SecurityGroup(this, 'EndpointSecurityGroup', {
      vpc,
      allowAllOutbound: false,
      description: 'Interface endpoints (ECR, Logs): HTTPS from the sandboxed jobs only',
    });
    endpointSecurityGroup.addIngressRule(this.jobSecurityGroup, ec2.Port.tcp(443), 'HTTPS from the sandboxed jobs');

    // Principals of this account only. Every legitimate caller is one: the jobs' execution role
    // (image pulls by the Fargate agent, the awslogs driver) and the role that presigns the jobs'
    // URLs (a presigned request is made as its signer). The job itself has no role at all.
    const thisAccount = { StringEquals: { 'aws:PrincipalAccount': stack.account } };

    const s3 = new ec2.GatewayVpcEndpoint(this, 'S3', {
      vpc,
      service: ec2.GatewayVpcEndpointAwsService.S3,
      subnets: [{ subnets: [this.subnet] }],
    });
    // The resource already confines this to the platform bucket, which grants no other account
    // anything; the account condition says the same of the signer, should that bucket policy
    // ever change.
    s3.addToPolicy(
      new iam.PolicyStatement({
        sid: 'JobObjectsThroughPresignedUrls',
        principals: [new iam.AnyPrincipal()],
        actions: ['s3:GetObject', 's3:PutObject'],
        resources: [bucket.arnForObjects(props.keyPattern ?? 'runs/*')],
        conditions: thisAccount,
      }),
    );
    // No account condition here: ECR presigns its layer URLs itself, so the principal is ECR's
    // own, and the bucket is AWS's. Reading from it needs such a URL, which only ECR's API gives,
    // and that API answers the sandbox only for this account (below).
    s3.addToPolicy(
      new iam.PolicyStatement({
        sid: 'EcrImageLayers',
        principals: [new iam.AnyPrincipal()],
        actions: ['s3:GetObject'],
        resources: [`arn:${stack.partition}:s3:::prod-${stack.region}-starport-layer-bucket/*`],
      }),
    );

    const ecrPolicy = [
      // GetAuthorizationToken has no resource; the token it returns is for the caller's own
      // registry, which the condition makes this account's.
      new iam.PolicyStatement({
        sid: 'EcrTokenForThisAccount',
        principals: [new iam.AnyPrincipal()],
        actions: ['ecr:GetAuthorizationToken'],
        resources: ['*'],
        conditions: thisAccount,
      }),
      // Pulls only, from this account's repositories (the stack's job images): nothing can be
      // pushed through the sandbox, even with this account's credentials.
      new iam.PolicyStatement({
        sid: 'EcrPullFromThisAccount',
        principals: [new iam.AnyPrincipal()],
        actions: ECR_PULL_ACTIONS,
        resources: [stack.formatArn({ service: 'ecr', resource: 'repository', resourceName: '*' })],
        conditions: thisAccount,
      }),
    ];
    const logsPolicy = [
      new iam.PolicyStatement({
        sid: 'JobLogsInThisAccount',
        principals: [new iam.AnyPrincipal()],
        actions: LOG_ACTIONS,
        resources: [stack.formatArn({ service: 'logs', resource: 'log-group', resourceName: '*', arnFormat: ArnFormat.COLON_RESOURCE_NAME })],
        conditions: thisAccount,
      }),
    ];
    const interfaces: [string, ec2.InterfaceVpcEndpointAwsService, iam.PolicyStatement[]][] = [
      ['EcrApi', ec2.InterfaceVpcEndpointAwsService.ECR, ecrPolicy],
      ['EcrDocker', ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER, ecrPolicy],
      ['Logs', ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS, logsPolicy],
    ];
    this.interfaceEndpoints = interfaces.map(([name, service, statements]) => {
      const endpoint = new ec2.InterfaceVpcEndpoint(this, name, {
        vpc,
        service,
        subnets: { subnets: [this.subnet] },
        securityGroups: [endpointSecurityGroup],
        // Not `open`, which would admit the whole VPC's CIDR: only the jobs' group, above.
        open: false,
        privateDnsEnabled: true,
      });
      for (const statement of statements) endpoint.addToPolicy(statement);
      return endpoint;
    });

    // DNS: allow the names above, then NXDOMAIN to everything else. TRUST_REDIRECTION_DOMAIN: an
    // allowed name's CNAME chain (S3's names are CNAMEs to AWS hosts) is answered whole, instead
    // of each target having to be listed. The firewall fails closed by default: while it is
    // unavailable the sandbox resolves nothing.
    const allowed = new resolver.CfnFirewallDomainList(this, 'AllowedDomains', { domains: sandboxDomains(stack) });
    const everything = new resolver.CfnFirewallDomainList(this, 'AllDomains', { domains: ['*'] });
    this.dnsFirewall = new resolver.CfnFirewallRuleGroup(this, 'DnsFirewall', {
      firewallRules: [
        {
          priority: 100,
          firewallDomainListId: allowed.attrId,
          action: 'ALLOW',
          firewallDomainRedirectionAction: 'TRUST_REDIRECTION_DOMAIN',
        },
        { priority: 200, firewallDomainListId: everything.attrId, action: 'BLOCK', blockResponse: 'NXDOMAIN' },
      ],
    });
    new resolver.CfnFirewallRuleGroupAssociation(this, 'DnsFirewallAssociation', {
      firewallRuleGroupId: this.dnsFirewall.attrId,
      vpcId: vpc.vpcId,
      priority: 1000,
    });

    const compute = new batch.FargateComputeEnvironment(this, 'Compute', {
      vpc,
      vpcSubnets: { subnets: [this.subnet] },
      securityGroups: [this.jobSecurityGroup],
      maxvCpus,
    });
    this.queue = new batch.JobQueue(this, 'Queue', { computeEnvironments: [{ computeEnvironment: compute, order: 1 }] });
  }
}
