/**
 * How local code reaches the emulators: the environment of local Lambdas and Batch jobs (the
 * variables they get on AWS where they matter, region and credentials, plus the emulators'
 * endpoints through the SDK's AWS_ENDPOINT_URL_<SERVICE> variables, so handlers build their
 * clients exactly as on AWS), and the runtime's own S3 and DynamoDB clients.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { LOCAL_REGION } from './resolve.ts';
import type { SdkClients } from './sdk-tasks.ts';
import type { LocalCredentials } from './sigv4.ts';

/** The endpoint variables for the emulators and for the AWS API the runtime serves. */
export function localEndpoints(urls: { dynamodb: string; s3: string; awsApi: string }): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_DYNAMODB: urls.dynamodb,
    AWS_ENDPOINT_URL_S3: urls.s3,
    AWS_ENDPOINT_URL_SFN: urls.awsApi,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: urls.awsApi,
    AWS_ENDPOINT_URL_SESV2: urls.awsApi,
    AWS_ENDPOINT_URL_SQS: urls.awsApi,
    AWS_ENDPOINT_URL_LAMBDA: urls.awsApi,
  };
}

/** The runtime's own clients of s3rver and dynalite. */
export function localClients(urls: { dynamodb: string; s3: string }, credentials: LocalCredentials): SdkClients {
  return {
    s3: new S3Client({ forcePathStyle: true, endpoint: urls.s3, region: LOCAL_REGION, credentials }),
    dynamodb: new DynamoDBClient({ endpoint: urls.dynamodb, region: LOCAL_REGION, credentials }),
  };
}

/**
 * What every local Lambda and Batch job gets, and this process too (the CLI, a test): the
 * runtime's credentials among them (a sandboxed job gets none of this, only presigned URLs).
 */
export function baseEnvironment(endpoints: Record<string, string>, credentials: LocalCredentials): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: process.env.LANG ?? 'C.UTF-8',
    TZ: 'UTC',
    AWS_REGION: LOCAL_REGION,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...endpoints,
  };
}

/**
 * Claude: the real API when ANTHROPIC_API_KEY is set here, or the tests' fake server through
 * ANTHROPIC_BASE_URL; Lambdas only (a job never gets the key).
 */
export function claudeEnvironment(): Record<string, string> {
  return Object.fromEntries(['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])));
}
