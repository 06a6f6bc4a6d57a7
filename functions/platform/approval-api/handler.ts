/**
 * The approval page (API Gateway HTTP API, payload 2.0): `GET /approvals/{id}` shows what is
 * to be approved and, while pending, two buttons; `POST /approvals/{id}` decides, once.
 * GET never decides, because mail scanners fetch links. Forged links get 403, expired ones
 * 410, replays 409, and none of them change anything. A request's items document is read
 * from S3 each time the page renders; one that is gone or changed is said so on the page.
 */
import { SendTaskFailureCommand, SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 as Result } from 'aws-lambda';
import {
  checkLink, csrfToken, decisionOf, decisionUpdate, NO_LONGER_WAITING_ERRORS, parseApprovalHttpEvent,
  parseApprovalItem, parseDecisionForm, revertDecisionUpdate, safeEqual, taskResultFor,
  toApprovalView, type ApprovalItem, type ApprovalHttpRequest,
} from '#shared/approval.ts';
import { formAction, htmlResponse, messageResponse, renderApprovalPage, renderDecisionRecorded } from '#shared/approval-page.ts';
import { approvalItemsForPage } from '#shared/clients/approval-items.ts';
import { dynamoClient, sfnClient } from '#shared/clients/aws.ts';
import { signingKeyLoader } from '#shared/clients/signing-key.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { ConfigError, errorName } from '#shared/errors.ts';
import { approvalKey } from '#shared/table.ts';

const TABLE = requireEnv(ENV.table);
const SIGNING_SECRET_ARN = requireEnv(ENV.signingSecretArn);

const signingKey = signingKeyLoader(SIGNING_SECRET_ARN);

export async function handler(event: APIGatewayProxyEventV2): Promise<Result> {
  const request = parseApprovalHttpEvent(event);
  if (request.method !== 'GET' && request.method !== 'POST') return messageResponse('methodNotAllowed');
  const key = await signingKey();
  const link = checkLink({ key, ...request, nowSeconds: Math.floor(Date.now() / 1000) });
  if (!link.ok) return messageResponse(link.reason);
  const found = await dynamoClient().send(new GetCommand({ TableName: TABLE, Key: approvalKey(link.id), ConsistentRead: true }));
  if (!found.Item) return messageResponse('forged');
  const item = parseApprovalItem(found.Item);
  const csrf = csrfToken(key, link.id, link.exp);
  if (request.method === 'GET') {
    const form = { action: formAction(link.id, link.exp, link.sig), csrf };
    // Read as the page renders, so the page shows what the document holds now, or that it is gone.
    const items = item.itemsUri && item.itemsSha256 ? await approvalItemsForPage(item.itemsUri, item.itemsSha256) : undefined;
    return htmlResponse(200, renderApprovalPage(toApprovalView(link.id, item), form, items));
  }
  return decide(request, link.id, item, csrf);
}

async function decide(request: ApprovalHttpRequest, id: string, item: ApprovalItem, csrf: string): Promise<Result> {
  let form;
  try {
    form = parseDecisionForm(request.body, request.isBase64Encoded);
  } catch (error) {
    if (error instanceof ConfigError) return messageResponse('badRequest', error.message);
    throw error;
  }
  if (!safeEqual(form.csrf, csrf)) return messageResponse('forged');
  if (item.state !== 'PENDING') return messageResponse('alreadyDecided');
  const decision = decisionOf(form, request.decidedBy, new Date());
  try {
    await dynamoClient().send(new UpdateCommand(decisionUpdate(TABLE, id, decision)));
  } catch (error) {
    if (errorName(error) === 'ConditionalCheckFailedException') return messageResponse('alreadyDecided');
    throw error;
  }
  const result = taskResultFor(item.token, id, decision);
  const log = { approvalId: id, executionId: item.executionId, state: decision.state };
  try {
    if (result.kind === 'success') await sfnClient().send(new SendTaskSuccessCommand(result.input));
    else await sfnClient().send(new SendTaskFailureCommand(result.input));
  } catch (error) {
    console.warn(JSON.stringify({ message: 'could not tell Step Functions', ...log, error: errorName(error) }));
    if (NO_LONGER_WAITING_ERRORS.includes(errorName(error))) return messageResponse('noLongerWaiting');
    // Anything else may pass on a retry: put the approval back to PENDING so the button works again.
    await dynamoClient().send(new UpdateCommand(revertDecisionUpdate(TABLE, id, decision)));
    return messageResponse('tryAgain');
  }
  console.log(JSON.stringify({ message: 'approval decided', ...log }));
  return htmlResponse(200, renderDecisionRecorded({ ...toApprovalView(id, item), ...decision }));
}
