/**
 * The approval page (API Gateway HTTP API, payload 2.0): `GET /approvals/{id}` shows what is
 * to be approved and, while pending, two buttons; `POST /approvals/{id}` decides, once.
 * GET never decides, because mail scanners fetch links. Forged links get 403, expired ones
 * 410, replays 409, and none of them change anything (shared/approval-gate.ts).
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 as Result, Context } from 'aws-lambda';
import { parseApprovalHttpEvent } from '#shared/approval.ts';
import { approvalPage, decideApproval, openApproval } from '#shared/approval-gate.ts';
import { htmlResponse, messageResponse, renderDecisionRecorded } from '#shared/approval-page.ts';
import { signingKeyLoader } from '#shared/clients/signing-key.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';

const gate = { table: requireEnv(ENV.table), signingKey: signingKeyLoader(requireEnv(ENV.signingSecretArn)) };

export async function handler(event: APIGatewayProxyEventV2, context?: Context): Promise<Result> {
  startInvocationLog(context, { step: 'approval-api' });
  const request = parseApprovalHttpEvent(event);
  if (request.method !== 'GET' && request.method !== 'POST') return messageResponse('methodNotAllowed');
  const approval = await openApproval(gate, request);
  if ('refused' in approval) return messageResponse(approval.refused, approval.detail);
  if (request.method === 'GET') return htmlResponse(200, await approvalPage(approval));
  const decided = await decideApproval(gate, request, approval);
  if ('refused' in decided) return messageResponse(decided.refused, decided.detail);
  return htmlResponse(200, renderDecisionRecorded(decided.view));
}
