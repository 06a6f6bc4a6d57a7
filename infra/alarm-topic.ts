/**
 * The alarm topic: the one SNS topic every pipeline stack's alarms and failure notices go to
 * (pipelines/steps/monitoring.ts), with an email subscription when an address is configured.
 *
 * - Encrypted with a customer-managed KMS key (rotated yearly). The AWS-managed `alias/aws/sns`
 *   key would not do: its policy cannot be changed, and CloudWatch alarms and EventBridge can
 *   publish to an encrypted topic only when the key's policy lets their service principals use it.
 * - TLS only: the topic policy denies any publish or subscribe over plain HTTP.
 * - Only CloudWatch (alarm actions) and EventBridge (the Batch job rules) of this account may
 *   publish, besides the account's own principals that IAM allows. The topic policy replaces
 *   SNS's default one, so both services are named in it.
 * - The subscription is an email address that must confirm it (SNS mails a link once, after the
 *   first deploy); none is made without an address, and the alarms then show in the console only.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';

export interface AlarmTopicProps {
  /** Who is told: an email subscription to the topic. Default: none (alarms show in the console only). */
  readonly email?: string;
}

/** The services that publish to the topic: CloudWatch alarm actions and EventBridge rule targets. */
const PUBLISHERS = ['cloudwatch.amazonaws.com', 'events.amazonaws.com'] as const;

export class AlarmTopic extends Construct {
  readonly topic: sns.Topic;
  readonly key: kms.Key;
  /** The email subscription; absent when no address is configured. */
  readonly subscription?: sns.Subscription;

  constructor(scope: Construct, id: string, props: AlarmTopicProps = {}) {
    super(scope, id);
    const stack = Stack.of(this);
    this.key = new kms.Key(this, 'Key', {
      description: 'Encrypts the frontier-pipelines alarm topic',
      enableKeyRotation: true,
      // The key protects notices in flight only (SNS keeps no message once delivered): nothing
      // stored depends on it, so it goes with the stack, after the shortest waiting period.
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    // Publishing to an encrypted topic needs the publisher to generate and read data keys.
    this.key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'AlarmPublishers',
        principals: PUBLISHERS.map((service) => new iam.ServicePrincipal(service)),
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
      }),
    );
    this.topic = new sns.Topic(this, 'Topic', {
      displayName: 'frontier-pipelines alarms',
      masterKey: this.key,
      enforceSSL: true,
    });
    this.topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'AlarmPublishers',
        principals: PUBLISHERS.map((service) => new iam.ServicePrincipal(service)),
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        // Only this account's alarms and rules: another account's could not name this topic in
        // an action and reach it through the service (the confused-deputy case).
        conditions: { StringEquals: { 'aws:SourceAccount': stack.account } },
      }),
    );
    if (props.email !== undefined) this.subscription = this.topic.addSubscription(new subscriptions.EmailSubscription(props.email));
  }
}
