/**
 * SDK clients, built once per process (per Lambda container). Endpoints come from the
 * standard AWS_ENDPOINT_URL_<SERVICE> variables, which the SDK reads itself: on AWS they
 * are unset, and the embedded runtime sets them to its loopback emulators.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { errorName, NoSuchBucket, NoSuchKey } from '../errors.ts';
import { parseS3Uri } from '../s3uri.ts';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SESv2Client } from '@aws-sdk/client-sesv2';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

let dynamo: DynamoDBDocumentClient | undefined;
let s3: S3Client | undefined;
let s3Presign: S3Client | undefined;
let sfn: SFNClient | undefined;
let ses: SESv2Client | undefined;
let secrets: SecretsManagerClient | undefined;

export function dynamoClient(): DynamoDBDocumentClient {
  dynamo ??= DynamoDBDocumentClient.from(new DynamoDBClient({}), {
    marshallOptions: { removeUndefinedValues: true },
  });
  return dynamo;
}

export function s3Client(): S3Client {
  // Path-style addressing works on AWS for every bucket name this project creates
  // (no dots), and is what loopback emulators serve.
  s3 ??= new S3Client({ forcePathStyle: true });
  return s3;
}

/**
 * The client that presigns URLs: it adds a checksum only where S3 requires one. The default
 * (WHEN_SUPPORTED) signs a PUT URL with the CRC32 of the empty body it was given, which S3 then
 * compares with the body actually uploaded through the URL, and refuses.
 */
export function s3PresignClient(): S3Client {
  s3Presign ??= new S3Client({ forcePathStyle: true, requestChecksumCalculation: 'WHEN_REQUIRED' });
  return s3Presign;
}

/**
 * An object's whole body, by s3://bucket/key URI (`field` names the URI in errors). A missing
 * object is NoSuchKey and a missing bucket NoSuchBucket, as S3 names them, with a message that
 * names the field and the URI. NotFound (the SDK's name for a 404 that carries no error body, as
 * HeadObject's never does) is the same missing object.
 */
export async function readObjectBytes(uri: string, field = 'uri'): Promise<Buffer> {
  const location = parseS3Uri(uri, field);
  let out;
  try {
    out = await s3Client().send(new GetObjectCommand(location));
  } catch (error) {
    const name = errorName(error);
    if (name === 'NoSuchKey' || name === 'NotFound') throw new NoSuchKey(field, uri, { cause: error });
    if (name === 'NoSuchBucket') throw new NoSuchBucket(field, uri, { cause: error });
    throw error;
  }
  const chunks: Uint8Array[] = [];
  for await (const chunk of out.Body as AsyncIterable<Uint8Array>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Whether the object exists (HeadObject); errors other than its absence are thrown. */
export async function objectExists(bucket: string, key: string): Promise<boolean> {
  try {
    await s3Client().send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return true;
  } catch (error) {
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404 || ['NotFound', 'NoSuchKey'].includes(errorName(error))) return false;
    throw error;
  }
}

export function sfnClient(): SFNClient {
  sfn ??= new SFNClient({});
  return sfn;
}

export function sesClient(): SESv2Client {
  ses ??= new SESv2Client({});
  return ses;
}

export function secretsClient(): SecretsManagerClient {
  secrets ??= new SecretsManagerClient({});
  return secrets;
}

/**
 * Forget the clients, so the next use reads the endpoint variables again. For processes that
 * outlive an endpoint (the CLI and tests start and stop local emulators); a Lambda never needs it.
 */
export function resetClients(): void {
  dynamo = s3 = s3Presign = sfn = ses = secrets = undefined;
}
