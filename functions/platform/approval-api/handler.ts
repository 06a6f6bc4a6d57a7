/**
 * The approval page (API Gateway HTTP API, payload 2.0): `GET /approvals/{id}` shows what is
 * to be approved and, while pending, the decision controls; `POST /approvals/{id}` decides, once;
 * `GET /approvals` is the page sign-in returns to. GET never decides, because mail scanners
 * fetch links (and some click buttons): by default a decision needs a signed-in member of the
 * approvers group (the JWT authorizer on the POST route checks the token, the function the
 * group); in the opt-in link-only mode it needs the code the page shows, typed in. Forged links
 * get 403, expired ones 410, replays 409, and none of them change anything
 * (shared/approval-gate.ts).
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 as Result, Context } from 'aws-lambda';
import { approvalSignInFromEnv, parseApprovalHttpEvent } from '#shared/approval.ts';
import { approvalPage, decideApproval, openApproval } from '#shared/approval-gate.ts';
import { htmlResponse, messageResponse, renderDecisionRecorded, renderSignInReturnPage } from '#shared/approval-page.ts';
import { signingKeyLoader } from '#shared/clients/signing-key.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';

const desk = {
  table: requireEnv(ENV.table),
  signingKey: signingKeyLoader(requireEnv(ENV.signingSecretArn)),
  signIn: approvalSignInFromEnv(process.env, ENV.approvalBaseUrl),
};

export async function handler(event: APIGatewayProxyEventV2, context?: Context): Promise<Result> {
  startInvocationLog(context, { step: 'approval-api' });
  const request = parseApprovalHttpEvent(event);
  if (request.method !== 'GET' && request.method !== 'POST') return messageResponse('methodNotAllowed');
  if (request.id === undefined && request.method === 'GET') {
    return desk.signIn.mode === 'cognito' ? htmlResponse(200, renderSignInReturnPage(desk.signIn), desk.signIn) : messageResponse('notFound');
  }
  const approval = await openApproval(desk, request);
  if ('refused' in approval) return messageResponse(approval.refused, approval.detail);
  if (request.method === 'GET') return htmlResponse(200, await approvalPage(desk, approval), desk.signIn);
  const decided = await decideApproval(desk, request, approval);
  if ('refused' in decided) return messageResponse(decided.refused, decided.detail);
  return htmlResponse(200, renderDecisionRecorded(decided.view, desk.signIn), desk.signIn);
}
