/**
 * The Step Functions API the runtime serves on loopback (through aws-api.ts), for handlers
 * that call it with the real SDK: StartExecution, DescribeExecution, and the task callbacks
 * SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat. Errors carry Step Functions' own
 * names, so a handler's error handling works the same locally and on AWS.
 */
import { ApiError } from './aws-api.ts';
import { CallbackError, type CallbackRegistry } from './callbacks.ts';
import type { ExecutionRecord } from './execution-records.ts';

export interface SfnApiDeps {
  readonly callbacks: CallbackRegistry;
  hasStateMachine(arn: string): boolean;
  executionRecord(executionArn: string): ExecutionRecord | undefined;
  startExecution(stateMachineArn: string, input: unknown, options: { name?: string }): { executionArn: string; record: ExecutionRecord };
}

export type SfnApi = (action: string, body: Record<string, unknown>) => Promise<unknown>;

export function sfnApi(deps: SfnApiDeps): SfnApi {
  const { callbacks } = deps;
  const wrap = (fn: () => void) => {
    try {
      fn();
      return {};
    } catch (error) {
      if (error instanceof CallbackError) throw new ApiError(error.name, error.message);
      throw error;
    }
  };
  return async (action, body) => {
    switch (action) {
      case 'StartExecution': {
        const arn = String(body.stateMachineArn);
        if (!deps.hasStateMachine(arn)) throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
        let input: unknown;
        try {
          input = JSON.parse(String(body.input ?? '{}'));
        } catch (error) {
          throw new ApiError('InvalidExecutionInput', `Invalid State Machine Execution Input: '${(error as Error).message}'`);
        }
        const name = body.name === undefined ? undefined : String(body.name);
        if (name !== undefined) {
          // As Step Functions: the same name and input as a running execution returns that execution.
          const existing = deps.executionRecord(`${arn.replace(':stateMachine:', ':execution:')}:${name}`);
          if (existing?.status === 'RUNNING' && JSON.stringify(existing.input) === JSON.stringify(input)) {
            return { executionArn: existing.executionArn, startDate: Date.parse(existing.startDate) / 1000 };
          }
        }
        const execution = deps.startExecution(arn, input, { name });
        return { executionArn: execution.executionArn, startDate: Date.parse(execution.record.startDate) / 1000 };
      }
      case 'DescribeExecution': {
        const record = deps.executionRecord(String(body.executionArn));
        if (!record) throw new ApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${body.executionArn}'`);
        return {
          executionArn: record.executionArn,
          stateMachineArn: record.stateMachineArn,
          name: record.name,
          status: record.status,
          startDate: Date.parse(record.startDate) / 1000,
          ...(record.stopDate ? { stopDate: Date.parse(record.stopDate) / 1000 } : {}),
          input: JSON.stringify(record.input),
          ...(record.output !== undefined ? { output: JSON.stringify(record.output) } : {}),
          ...(record.error ? { error: record.error, cause: record.cause } : {}),
        };
      }
      case 'SendTaskSuccess': {
        let output: unknown;
        try {
          output = JSON.parse(String(body.output));
        } catch (error) {
          throw new ApiError('InvalidOutput', `Invalid task output: '${(error as Error).message}'`);
        }
        return wrap(() => callbacks.sendSuccess(String(body.taskToken), output));
      }
      case 'SendTaskFailure':
        return wrap(() => callbacks.sendFailure(String(body.taskToken), String(body.error ?? ''), String(body.cause ?? '')));
      case 'SendTaskHeartbeat':
        return wrap(() => callbacks.sendHeartbeat(String(body.taskToken)));
      default:
        throw new ApiError('UnknownOperationException', `the local Step Functions API has no ${action}`);
    }
  };
}
