/**
 * Answering approval emails in end-to-end tests as the approver would: follow the link, read
 * the page's form, sign in as a member of the approvers group, post the decision.
 */
import assert from 'node:assert/strict';
import type { Execution, ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { approverSession, postDecision } from './approver.ts';
import { approvalLinkIn, nextEmailOrEnd, readEml, waitFor, type ParsedEmail } from './runtime.ts';

/** Follows the email's link as the approver would, signs in, and posts the decision from the page's form. */
export async function decide(email: ParsedEmail, decision: 'approve' | 'reject'): Promise<string> {
  const link = approvalLinkIn(email.text);
  const page = await (await fetch(link)).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  assert.ok(csrf, `the approval page has a form:\n${page.slice(0, 500)}`);
  const posted = await postDecision(link, decision, { csrf, session: await approverSession(link) });
  assert.equal(posted.status, 200, await posted.clone().text());
  return page;
}

/**
 * Runs an execution, answering each approval email with `answer(round email, index)` until it ends.
 * Returns the record and the emails it sent, with what was seen while each gate waited.
 */
export async function runAnswering(
  rt: LocalRuntime,
  execution: Execution,
  answer: (email: ParsedEmail, index: number) => Promise<void>,
): Promise<{ record: ExecutionRecord; emails: ParsedEmail[] }> {
  const emails: ParsedEmail[] = [];
  for (;;) {
    const next = await nextEmailOrEnd(rt, execution.done);
    if (next === undefined) break;
    await waitFor('the run to wait at the gate', () => rt.pendingCallbacks(execution.executionArn) === 1);
    const email = readEml(next);
    emails.push(email);
    await answer(email, emails.length - 1);
  }
  return { record: await execution.done, emails };
}
