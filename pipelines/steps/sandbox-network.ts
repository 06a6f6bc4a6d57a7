/**
 * Where untrusted code runs on AWS: a Fargate job queue in one isolated subnet of the platform VPC,
 * with no route out. The only ways out are VPC endpoints: S3 through a gateway endpoint whose
 * policy allows reading and writing job objects of the platform bucket (the job holds no
 * credentials: it uses presigned URLs for exactly its own keys) and ECR's image layers; ECR and
 * CloudWatch Logs through interface endpoints, so the image still pulls and the job still logs.
 *
 * One subnet in one Availability Zone: an interface endpoint is billed per AZ-hour (three here),
 * and this is what the platform costs at rest while the stack that uses it is deployed. Private
 * DNS of the interface endpoints applies to the whole VPC, so they admit HTTPS from the VPC's
 * CIDR: the other job queues then reach ECR and Logs through them too.
 */
import { Stack } from 'aws-cdk-lib';
import * as batch from 'aws-cdk-lib/aws-batch';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import { acknowledgeFindings } from './nag-findings.ts';

export interface SandboxNetworkProps {
  readonly vpc: ec2.IVpc;
  readonly bucket: IBucket;
  /** The isolated subnet's CIDR, inside the VPC's and unused. Default: 10.0.200.0/24. */
  readonly cidrBlock?: string;
  /** Object keys the sandboxed jobs may read and write through presigned URLs. Default: `runs/*`. */
  readonly keyPattern?: string;
  /** vCPUs of the sandbox queue at once. Default: 16. */
  readonly maxvCpus?: number;
}

export class SandboxNetwork extends Construct {
  readonly subnet: ec2.Subnet;
  readonly jobSecurityGroup: ec2.SecurityGroup;
  readonly queue: batch.JobQueue;

  constructor(scope: Construct, id: string, props: SandboxNetworkProps) {
    super(scope, id);
    const { vpc, bucket } = props;
    const cidrBlock = props.cidrBlock ?? '10.0.200.0/24';
    if (!/^\d{1,3}(\.\d{1,3}){3}\/(1[6-9]|2[0-8])$/.test(cidrBlock)) throw new ConfigError('cidrBlock', cidrBlock, 'must be an IPv4 CIDR from /16 to /28');
    const maxvCpus = props.maxvCpus ?? 16;
    if (!Number.isInteger(maxvCpus) || maxvCpus < 1) throw new ConfigError('maxvCpus', maxvCpus, 'must be a positive integer');

    // No route to an internet or NAT gateway: only the VPC itself and the S3 gateway route below.
    this.subnet = new ec2.PrivateSubnet(this, 'Subnet', {
      vpcId: vpc.vpcId,
      availabilityZone: Stack.of(this).availabilityZones[0]!,
      cidrBlock,
      mapPublicIpOnLaunch: false,
    });

    const endpoints = new ec2.SecurityGroup(this, 'EndpointSecurityGroup', {
      vpc,
      allowAllOutbound: false,
      description: 'Interface endpoints (ECR, Logs): HTTPS from inside the VPC only',
    });
    endpoints.addIngressRule(ec2.Peer.ipv4(vpc.vpcCidrBlock), ec2.Port.tcp(443), 'HTTPS from the VPC (private DNS makes every subnet use the endpoints)');
    acknowledgeFindings(endpoints, [
      {
        id: 'AwsSolutions-EC23',
        reason:
          "The only ingress rule admits HTTPS from the VPC's own CIDR block, a deploy-time value the check cannot resolve and so reads as open; nothing outside the VPC can reach interface endpoints.",
      },
    ]);
    this.jobSecurityGroup = new ec2.SecurityGroup(this, 'JobSecurityGroup', {
      vpc,
      allowAllOutbound: false,
      description: 'Sandboxed jobs: no inbound; HTTPS out, which the isolated subnet routes only to the VPC endpoints',
    });
    // The subnet's routes, not this rule, confine the traffic: 0.0.0.0/0 here reaches only the
    // endpoints (interface ENIs in the VPC, and S3's prefix list through the gateway route).
    this.jobSecurityGroup.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), 'HTTPS to the VPC endpoints (no other route exists)');

    const s3 = new ec2.GatewayVpcEndpoint(this, 'S3', {
      vpc,
      service: ec2.GatewayVpcEndpointAwsService.S3,
      subnets: [{ subnets: [this.subnet] }],
    });
    s3.addToPolicy(
      new iam.PolicyStatement({
        sid: 'JobObjectsThroughPresignedUrls',
        principals: [new iam.AnyPrincipal()],
        actions: ['s3:GetObject', 's3:PutObject'],
        resources: [bucket.arnForObjects(props.keyPattern ?? 'runs/*')],
      }),
    );
    s3.addToPolicy(
      new iam.PolicyStatement({
        sid: 'EcrImageLayers',
        principals: [new iam.AnyPrincipal()],
        actions: ['s3:GetObject'],
        resources: [`arn:${Stack.of(this).partition}:s3:::prod-${Stack.of(this).region}-starport-layer-bucket/*`],
      }),
    );
    for (const [name, service] of [
      ['EcrApi', ec2.InterfaceVpcEndpointAwsService.ECR],
      ['EcrDocker', ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER],
      ['Logs', ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS],
    ] as const) {
      new ec2.InterfaceVpcEndpoint(this, name, {
        vpc,
        service,
        subnets: { subnets: [this.subnet] },
        securityGroups: [endpoints],
        privateDnsEnabled: true,
      });
    }

    const compute = new batch.FargateComputeEnvironment(this, 'Compute', {
      vpc,
      vpcSubnets: { subnets: [this.subnet] },
      securityGroups: [this.jobSecurityGroup],
      maxvCpus,
    });
    this.queue = new batch.JobQueue(this, 'Queue', { computeEnvironments: [{ computeEnvironment: compute, order: 1 }] });
  }
}
