/**
 * EventBridge target for S3 "Object Created" events: starts the pipeline's state machine at
 * most once per object. EventBridge's own Step Functions target cannot name the execution,
 * hence this Lambda. 1. record the event in the ledger (conditional put); 2. start the
 * execution under a name derived from the object; 3. if the start fails, drop the ledger
 * entry so a redelivery can try again.
 */
import { StartExecutionCommand } from '@aws-sdk/client-sfn';
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { dynamoClient, sfnClient } from '#shared/clients/aws.ts';
import { requireEnv } from '#shared/env.ts';
import { ENV } from '#shared/table.ts';
import {
  executionInput, executionNameFor, ledgerItem, ledgerKeyFor, parseObjectCreatedEvent, type TriggerResult,
} from '#shared/trigger.ts';

const TABLE = requireEnv(ENV.table);
const STATE_MACHINE_ARN = requireEnv(ENV.stateMachineArn);
const PIPELINE = requireEnv(ENV.pipeline);

const errorName = (error: unknown) => (error instanceof Error ? error.name : '');

export async function handler(event: unknown): Promise<TriggerResult> {
  const object = parseObjectCreatedEvent(event);
  const name = executionNameFor(object);
  const log = { pipeline: PIPELINE, bucket: object.bucket, key: object.key, eventId: object.eventId, executionName: name };
  try {
    await dynamoClient().send(new PutCommand({
      TableName: TABLE, Item: ledgerItem(object, name, PIPELINE, new Date()), ConditionExpression: 'attribute_not_exists(pk)',
    }));
  } catch (error) {
    if (errorName(error) !== 'ConditionalCheckFailedException') throw error;
    console.log(JSON.stringify({ message: 'duplicate event: already in the ledger, not started', ...log }));
    return { started: false, duplicate: true, executionName: name };
  }
  try {
    const { executionArn } = await sfnClient().send(
      new StartExecutionCommand({ stateMachineArn: STATE_MACHINE_ARN, name, input: executionInput(object) }),
    );
    console.log(JSON.stringify({ message: 'execution started', ...log, executionArn }));
    return { started: true, executionName: name, executionArn: executionArn ?? '' };
  } catch (error) {
    if (errorName(error) === 'ExecutionAlreadyExists') {
      console.log(JSON.stringify({ message: 'duplicate event: execution already exists', ...log }));
      return { started: false, duplicate: true, executionName: name };
    }
    await dynamoClient().send(new DeleteCommand({ TableName: TABLE, Key: ledgerKeyFor(object) })).catch((deleteError: unknown) => {
      console.error(JSON.stringify({ message: 'could not remove the ledger entry', ...log, error: errorName(deleteError) }));
    });
    throw error;
  }
}
