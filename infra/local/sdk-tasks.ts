/**
 * Direct service integrations (`arn:aws:states:::aws-sdk:<service>:<action>` and the
 * optimized `arn:aws:states:::dynamodb:<action>`), performed with the real SDK against the
 * emulators. Errors are named as Step Functions names them: `<Service>.<Name>Exception`.
 */
import * as ddb from '@aws-sdk/client-dynamodb';
import * as s3 from '@aws-sdk/client-s3';
import { TaskError } from './lambda-host.ts';

const SERVICE_PREFIX: Record<string, string> = { s3: 'S3', dynamodb: 'DynamoDb' };

export interface SdkClients {
  readonly s3: s3.S3Client;
  readonly dynamodb: ddb.DynamoDBClient;
}

/** Parses a Task resource into service and action, or undefined if it is not a direct integration. */
export function sdkIntegration(resource: string): { service: string; action: string } | undefined {
  const m = /^arn:aws:states:::(?:aws-sdk:)?(s3|dynamodb):([a-zA-Z]+)$/.exec(resource);
  return m ? { service: m[1]!, action: m[2]! } : undefined;
}

export async function callSdk(clients: SdkClients, service: string, action: string, input: Record<string, unknown>): Promise<unknown> {
  const commandName = `${action[0]!.toUpperCase()}${action.slice(1)}Command`;
  const module = (service === 's3' ? s3 : ddb) as unknown as Record<string, new (input: unknown) => unknown>;
  const Command = module[commandName];
  if (!Command) throw new TaskError('States.Runtime', `the local runtime has no ${service}:${action}`);
  const client = (service === 's3' ? clients.s3 : clients.dynamodb) as { send(c: unknown): Promise<Record<string, unknown>> };
  try {
    const { $metadata: _m, ...out } = await client.send(new Command(input));
    if (service === 's3' && action === 'getObject' && out.Body) {
      // The Step Functions integration returns the body as a string.
      out.Body = await (out.Body as { transformToString(): Promise<string> }).transformToString();
    }
    return JSON.parse(JSON.stringify(out));
  } catch (error) {
    if (error instanceof TaskError) throw error;
    const e = error as { name?: string; message?: string };
    const base = (e.name ?? 'Unknown').replace(/Exception$/, '');
    throw new TaskError(`${SERVICE_PREFIX[service]}.${base}Exception`, e.message ?? String(error));
  }
}
