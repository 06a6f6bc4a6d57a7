/**
 * The approval gate's callback task (`lambda:invoke.waitForTaskToken`): stores the task token
 * under a fresh random id and emails a signed, expiring link to the approval page
 * (requestApproval in shared/approval-gate.ts). The token goes into the table item and nowhere
 * else: not the link, the email or a log line.
 */
import type { Context } from 'aws-lambda';
import { parseApprovalRequest } from '#shared/approval.ts';
import { requestApproval } from '#shared/approval-gate.ts';
import { signingKeyLoader } from '#shared/clients/signing-key.ts';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';

const gate = {
  table: requireEnv(ENV.table),
  bucket: requireEnv(ENV.bucket),
  signingKey: signingKeyLoader(requireEnv(ENV.signingSecretArn)),
  senderEmail: requireEnv(ENV.senderEmail),
  approvalBaseUrl: requireEnv(ENV.approvalBaseUrl),
  approverEmail: optionalEnv('APPROVER_EMAIL'),
};

export async function handler(event: unknown, context?: Context): Promise<{ approvalId: string }> {
  const request = parseApprovalRequest(event);
  startInvocationLog(context, { step: 'approval-request', executionId: request.executionId, pipeline: request.pipeline });
  return requestApproval(gate, request);
}
