/**
 * The approval gate's callback task (`lambda:invoke.waitForTaskToken`): stores the task token
 * under a fresh random id and emails a signed, expiring link to the approval page. The token
 * goes into the table item and nowhere else. When the request names an items document, it is
 * read (and checked) before anything is stored, and listed in the email.
 */
import { SendEmailCommand } from '@aws-sdk/client-sesv2';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  approvalLink, checkItemsUri, composeMime, newApprovalId, newApprovalItem, parseApprovalRequest,
  resolveRecipients,
} from '#shared/approval.ts';
import { renderApprovalEmail } from '#shared/approval-page.ts';
import { readApprovalItems } from '#shared/clients/approval-items.ts';
import { dynamoClient, sesClient } from '#shared/clients/aws.ts';
import { signingKeyLoader } from '#shared/clients/signing-key.ts';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';

const TABLE = requireEnv(ENV.table);
const BUCKET = requireEnv(ENV.bucket);
const SIGNING_SECRET_ARN = requireEnv(ENV.signingSecretArn);
const SENDER_EMAIL = requireEnv(ENV.senderEmail);
const APPROVAL_BASE_URL = requireEnv(ENV.approvalBaseUrl);
const APPROVER_EMAIL = optionalEnv('APPROVER_EMAIL');

const signingKey = signingKeyLoader(SIGNING_SECRET_ARN);

export async function handler(event: unknown): Promise<{ approvalId: string }> {
  const request = parseApprovalRequest(event);
  const recipients = resolveRecipients(request.recipients, APPROVER_EMAIL);
  const items = request.itemsUri === undefined ? undefined : await readApprovalItems(checkItemsUri(request.itemsUri, BUCKET));
  const id = newApprovalId();
  const { item, exp } = newApprovalItem(request, id, new Date(), recipients, items);
  await dynamoClient().send(
    new PutCommand({ TableName: TABLE, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }),
  );
  const link = approvalLink(APPROVAL_BASE_URL, await signingKey(), id, exp);
  const email = renderApprovalEmail({
    from: SENDER_EMAIL, to: recipients, link, pipeline: item.pipeline, title: item.title, details: item.details,
    items: items?.document, expiresAtIso: item.expiresAtIso,
  });
  await sesClient().send(
    new SendEmailCommand({
      FromEmailAddress: SENDER_EMAIL,
      Destination: { ToAddresses: recipients },
      Content: { Raw: { Data: await composeMime(email) } },
    }),
  );
  // The link is a capability too: log the id, never the link or the token.
  console.log(JSON.stringify({ message: 'approval requested', approvalId: id, executionId: request.executionId, pipeline: request.pipeline, recipients: recipients.length, items: items?.document.items.length, expiresAt: item.expiresAtIso }));
  return { approvalId: id };
}
