/**
 * The approval gate's work, with its SDK calls, for its two Lambdas (functions/platform/
 * approval-request and approval-api); the logic free of SDK calls is in approval.ts, the pages
 * and the email in approval-page.ts.
 *
 * - requestApproval (the `.waitForTaskToken` task): stores the task token under a fresh random
 *   id and emails a signed, expiring link to the approval page. The token goes into the table
 *   item and nowhere else. When the request names an items document, it is read (and checked)
 *   before anything is stored, and listed in the email.
 * - openApproval, approvalPage, decideApproval (the page): a genuine, unexpired link opens its
 *   approval; GET shows it (the items document read as the page renders, so the page shows what
 *   the document holds now, or that it is gone); POST decides, once, for a signed-in member of
 *   the approvers group (or, in the link-only mode, with the page's code typed in): a conditional
 *   update from PENDING, then SendTaskSuccess or SendTaskFailure. Refusals change nothing and
 *   say why.
 */
import { SendTaskFailureCommand, SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import { SendEmailCommand } from '@aws-sdk/client-sesv2';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  approvalLink,
  approverFromClaims,
  checkItemsUri,
  checkLink,
  composeMime,
  csrfToken,
  decisionCode,
  decisionOf,
  decisionUpdate,
  newApprovalId,
  newApprovalItem,
  NO_LONGER_WAITING_ERRORS,
  normalizeDecisionCode,
  parseApprovalItem,
  parseDecisionForm,
  resolveRecipients,
  revertDecisionUpdate,
  safeEqual,
  taskResultFor,
  toApprovalView,
  type ApprovalHttpRequest,
  type ApprovalItem,
  type ApprovalRequest,
  type ApprovalSignIn,
  type ApprovalView,
  type DecidedBy,
  type Decision,
} from './approval.ts';
import { formAction, renderApprovalEmail, renderApprovalPage, type MessageKind } from './approval-page.ts';
import { approvalItemsForPage, readApprovalItems } from './clients/approval-items.ts';
import { dynamoClient, sesClient, sfnClient } from './clients/aws.ts';
import { ConfigError, errorName } from './errors.ts';
import { appendInvocationKeys, logger } from './log.ts';
import { approvalKey } from './table.ts';

/** What both functions need: the table and the link-signing key (read once per container). */
export interface ApprovalGate {
  readonly table: string;
  readonly signingKey: () => Promise<string>;
}

/** The page's function besides: who may decide. */
export interface ApprovalDesk extends ApprovalGate {
  readonly signIn: ApprovalSignIn;
}

/** The request function's settings besides: where items documents may be, and the email. */
export interface ApprovalMailer extends ApprovalGate {
  readonly bucket: string;
  readonly senderEmail: string;
  readonly approvalBaseUrl: string;
  /** Where the email goes when the request names no recipients. */
  readonly approverEmail: string | undefined;
}

/** Stores the request and emails its link; returns the approval's id. */
export async function requestApproval(gate: ApprovalMailer, request: ApprovalRequest): Promise<{ approvalId: string }> {
  const recipients = resolveRecipients(request.recipients, gate.approverEmail);
  const items = request.itemsUri === undefined ? undefined : await readApprovalItems(checkItemsUri(request.itemsUri, gate.bucket));
  const id = newApprovalId();
  const { item, exp } = newApprovalItem(request, id, new Date(), recipients, items);
  await dynamoClient().send(new PutCommand({ TableName: gate.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }));
  const link = approvalLink(gate.approvalBaseUrl, await gate.signingKey(), id, exp);
  const email = renderApprovalEmail({
    from: gate.senderEmail,
    to: recipients,
    link,
    pipeline: item.pipeline,
    title: item.title,
    details: item.details,
    items: items?.document,
    outcomes: item.outcomes,
    expiresAtIso: item.expiresAtIso,
  });
  await sesClient().send(
    new SendEmailCommand({
      FromEmailAddress: gate.senderEmail,
      Destination: { ToAddresses: recipients },
      Content: { Raw: { Data: await composeMime(email) } },
    }),
  );
  // The link is a capability too: log the id, never the link or the token.
  logger.info('approval requested', {
    approvalId: id,
    executionId: request.executionId,
    pipeline: request.pipeline,
    recipients: recipients.length,
    items: items?.document.items.length,
    expiresAt: item.expiresAtIso,
  });
  return { approvalId: id };
}

/** Why a request to the page changes nothing: the message page to answer with. */
export interface Refusal {
  readonly refused: MessageKind;
  readonly detail?: string;
}

/** An approval opened by a genuine, unexpired link. */
export interface OpenedApproval {
  readonly id: string;
  readonly item: ApprovalItem;
  readonly link: { readonly exp: number; readonly sig: string };
  /** The anti-forgery token the page's form carries back. */
  readonly csrf: string;
  /** The short code the page shows, typed back in the link-only mode. */
  readonly code: string;
}

/**
 * The approval a link names. The signature is checked before the expiry and before the table is
 * read, so a forged link learns nothing, not even whether its id exists.
 */
export async function openApproval(gate: ApprovalGate, request: ApprovalHttpRequest): Promise<OpenedApproval | Refusal> {
  const key = await gate.signingKey();
  const link = checkLink({ key, ...request, nowSeconds: Math.floor(Date.now() / 1000) });
  if (!link.ok) return { refused: link.reason };
  const found = await dynamoClient().send(new GetCommand({ TableName: gate.table, Key: approvalKey(link.id), ConsistentRead: true }));
  if (!found.Item) return { refused: 'forged' };
  const item = parseApprovalItem(found.Item);
  appendInvocationKeys({ executionId: item.executionId, pipeline: item.pipeline });
  return {
    id: link.id,
    item,
    link: { exp: link.exp, sig: link.sig },
    csrf: csrfToken(key, link.id, link.exp),
    code: decisionCode(key, link.id, link.exp),
  };
}

/**
 * The page GET shows: the approval, its decision controls while pending (sign-in, or the code to
 * type), and its items document as it is now.
 */
export async function approvalPage(desk: ApprovalDesk, approval: OpenedApproval): Promise<string> {
  const { id, item, link, csrf, code } = approval;
  const form = { action: formAction(id, link.exp, link.sig), csrf, signIn: desk.signIn, code };
  const items = item.itemsUri && item.itemsSha256 ? await approvalItemsForPage(item.itemsUri, item.itemsSha256) : undefined;
  return renderApprovalPage(toApprovalView(id, item), form, items);
}

/**
 * Who is deciding, or why nobody may: with sign-in, a member of the group named by the verified
 * token; in the link-only mode, whoever typed the page's code.
 */
function decider(desk: ApprovalDesk, request: ApprovalHttpRequest, typedCode: string | undefined, code: string): { decidedBy: DecidedBy } | Refusal {
  const { client } = request;
  if (desk.signIn.mode === 'cognito') {
    const check = approverFromClaims(request.claims, desk.signIn.group);
    if (!check.ok && check.reason === 'signedOut') return { refused: 'signInRequired' };
    if (!check.ok) {
      return { refused: 'notApprover', detail: `You are signed in as ${check.username}, who is not a member of the ${desk.signIn.group} group.` };
    }
    return { decidedBy: { ...client, via: 'sign-in', ...check.approver } };
  }
  if (typedCode === undefined || !safeEqual(normalizeDecisionCode(typedCode), code)) {
    return { refused: 'codeRequired', detail: typedCode ? 'The code typed does not match the one on the page.' : undefined };
  }
  return { decidedBy: { ...client, via: 'link-and-code' } };
}

/**
 * POST: records the decision once (a conditional update from PENDING) and tells Step Functions.
 * When Step Functions cannot be told for a reason a retry may fix, the approval goes back to
 * PENDING so the button works again.
 */
export async function decideApproval(
  desk: ApprovalDesk,
  request: ApprovalHttpRequest,
  approval: OpenedApproval,
): Promise<{ view: ApprovalView & Decision } | Refusal> {
  const { id, item, csrf } = approval;
  let form;
  try {
    form = parseDecisionForm(request.body, request.isBase64Encoded);
  } catch (error) {
    if (error instanceof ConfigError) return { refused: 'badRequest', detail: error.message };
    throw error;
  }
  if (!safeEqual(form.csrf, csrf)) return { refused: 'forged' };
  const who = decider(desk, request, form.code, approval.code);
  if ('refused' in who) return who;
  if (item.state !== 'PENDING') return { refused: 'alreadyDecided' };
  const decision = decisionOf(form, who.decidedBy, new Date());
  try {
    await dynamoClient().send(new UpdateCommand(decisionUpdate(desk.table, id, decision)));
  } catch (error) {
    if (errorName(error) === 'ConditionalCheckFailedException') return { refused: 'alreadyDecided' };
    throw error;
  }
  const result = taskResultFor(item.token, id, decision);
  const log = { approvalId: id, executionId: item.executionId, state: decision.state };
  try {
    if (result.kind === 'success') await sfnClient().send(new SendTaskSuccessCommand(result.input));
    else await sfnClient().send(new SendTaskFailureCommand(result.input));
  } catch (error) {
    logger.warn('could not tell Step Functions', { ...log, error: errorName(error) });
    if (NO_LONGER_WAITING_ERRORS.includes(errorName(error))) return { refused: 'noLongerWaiting' };
    await dynamoClient().send(new UpdateCommand(revertDecisionUpdate(desk.table, id, decision)));
    return { refused: 'tryAgain' };
  }
  // The subject identifies the person in the logs without their name or address.
  logger.info('approval decided', { ...log, via: decision.decidedBy.via, sub: decision.decidedBy.sub });
  return { view: { ...toApprovalView(id, item), ...decision } };
}
