/**
 * Creates what the synthesized templates declare, in the emulators: tables in dynalite,
 * buckets in s3rver, secret values (generated ones kept in <dataDir>/secrets.json so they
 * survive restarts). Idempotent: a restart finds everything in place.
 */
import { CreateTableCommand, type DynamoDBClient, type KeySchemaElement, waitUntilTableExists } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TemplateResolver } from './resolve.ts';

export interface Provisioned {
  readonly tables: string[];
  /** Buckets that send object events to EventBridge (the platform's). */
  readonly eventBridgeBuckets: string[];
  /** Buckets with versioning on: each PUT gets a new version id, as on S3. */
  readonly versionedBuckets: string[];
  /** Secret ARN -> value. */
  readonly secrets: Map<string, string>;
}

export async function provision(resolver: TemplateResolver, clients: { dynamodb: DynamoDBClient; s3: S3Client }, dataDir: string): Promise<Provisioned> {
  const out: Provisioned = { tables: [], eventBridgeBuckets: [], versionedBuckets: [], secrets: new Map() };
  for (const { stack, logicalId, resource } of [
    ...resolver.resourcesOfType('AWS::DynamoDB::GlobalTable'),
    ...resolver.resourcesOfType('AWS::DynamoDB::Table'),
  ]) {
    const p = resource.Properties as { KeySchema: KeySchemaElement[]; AttributeDefinitions: { AttributeName: string; AttributeType: 'S' | 'N' | 'B' }[] };
    const name = resolver.refOf(stack, logicalId, resource);
    out.tables.push(name);
    try {
      await clients.dynamodb.send(
        new CreateTableCommand({ TableName: name, KeySchema: p.KeySchema, AttributeDefinitions: p.AttributeDefinitions, BillingMode: 'PAY_PER_REQUEST' }),
      );
    } catch (error) {
      if ((error as Error).name !== 'ResourceInUseException') throw error;
    }
    // dynalite marks a new table ACTIVE from a timer; wait for it, or a stop right after
    // start would close the database under that write.
    await waitUntilTableExists({ client: clients.dynamodb, maxWaitTime: 30, minDelay: 0.05, maxDelay: 0.2 }, { TableName: name });
  }
  // EventBridge notifications: a bucket property, or (as CDK does it) a notifications custom resource.
  const eventBridge = new Set<string>();
  for (const { stack, resource } of resolver.resourcesOfType('Custom::S3BucketNotifications')) {
    const props = resolver.resolve(stack, resource.Properties ?? {}) as {
      BucketName?: string;
      NotificationConfiguration?: { EventBridgeConfiguration?: unknown };
    };
    if (props.BucketName && props.NotificationConfiguration?.EventBridgeConfiguration) eventBridge.add(props.BucketName);
  }
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::S3::Bucket')) {
    const name = resolver.refOf(stack, logicalId, resource);
    const props = (resource.Properties ?? {}) as {
      NotificationConfiguration?: { EventBridgeConfiguration?: { EventBridgeEnabled?: boolean } };
      VersioningConfiguration?: { Status?: string };
    };
    if (props.VersioningConfiguration?.Status === 'Enabled') out.versionedBuckets.push(name);
    if (props.NotificationConfiguration?.EventBridgeConfiguration?.EventBridgeEnabled || eventBridge.has(name)) out.eventBridgeBuckets.push(name);
    try {
      await clients.s3.send(new HeadBucketCommand({ Bucket: name }));
    } catch {
      await clients.s3.send(new CreateBucketCommand({ Bucket: name }));
    }
  }
  const secretsFile = join(dataDir, 'secrets.json');
  const stored: Record<string, string> = existsSync(secretsFile) ? JSON.parse(readFileSync(secretsFile, 'utf8')) : {};
  for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::SecretsManager::Secret')) {
    const arn = resolver.refOf(stack, logicalId, resource);
    const props = (resource.Properties ?? {}) as { SecretString?: string; GenerateSecretString?: { PasswordLength?: number } };
    stored[arn] ??=
      props.SecretString ??
      randomBytes(48)
        .toString('base64url')
        .slice(0, props.GenerateSecretString?.PasswordLength ?? 64);
    out.secrets.set(arn, stored[arn]!);
  }
  writeFileSync(secretsFile, JSON.stringify(stored, null, 2), { mode: 0o600 });
  return out;
}
