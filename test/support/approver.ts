/**
 * A signed-in approver against the embedded runtime, whose Cognito stand-in serves the sign-in
 * (infra/local/http-api.ts): tokens at once from `POST /_local/sign-in` for tests without a
 * browser, or the sign-in page clicked through in Chromium as a person does it. Both sign in to
 * the approval page's app client, as a member of the approvers group unless told otherwise.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { APPROVERS_GROUP } from '#shared/approval.ts';

export interface ApproverSession {
  readonly username: string;
  readonly idToken: string;
  /** The header the approval page's script sends with a decision. */
  readonly authorization: string;
}

export interface ApproverOptions {
  /** Default: "alice". */
  readonly username?: string;
  /** Default: the approvers group. */
  readonly groups?: readonly string[];
}

/** The approval page's app client, from the settings of the page sign-in returns to (`GET /approvals`). */
export async function approvalClientId(baseUrl: string): Promise<string> {
  const page = await (await fetch(`${new URL(baseUrl).origin}/approvals`)).text();
  const config = /<script type="application\/json" id="approval-config">([^<]*)<\/script>/.exec(page)?.[1];
  assert.ok(config, `GET /approvals serves the sign-in return page:\n${page.slice(0, 300)}`);
  const clientId = (JSON.parse(config) as { signIn?: { clientId?: string } }).signIn?.clientId;
  assert.ok(clientId, 'sign-in is on: the page names its app client');
  return clientId;
}

/** Tokens for the approval page's client from the runtime at `baseUrl` (an approval link's origin will do). */
export async function approverSession(baseUrl: string, options: ApproverOptions = {}): Promise<ApproverSession> {
  const username = options.username ?? 'alice';
  const groups = options.groups ?? [APPROVERS_GROUP];
  const clientId = await approvalClientId(baseUrl);
  const response = await fetch(`${new URL(baseUrl).origin}/_local/sign-in`, { method: 'POST', body: JSON.stringify({ username, groups, clientId }) });
  const body = (await response.json()) as { id_token?: string; message?: string };
  assert.equal(response.status, 200, `local sign-in as ${username}: ${body.message}`);
  assert.ok(body.id_token, 'the local sign-in returns an ID token');
  return { username, idToken: body.id_token, authorization: `Bearer ${body.id_token}` };
}

/** The anti-forgery token of the page an approval link opens. */
export async function csrfOfPage(link: string): Promise<string> {
  const page = await (await fetch(link)).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  assert.ok(csrf, `the approval page has a form:\n${page.slice(0, 500)}`);
  return csrf;
}

/**
 * POSTs a decision to an approval link as the page's script does: the form's fields (the token
 * read from the page unless given) and, when signed in, the ID token as a bearer token.
 */
export async function postDecision(
  link: string,
  decision: 'approve' | 'reject',
  options: { session?: ApproverSession; csrf?: string; code?: string; comment?: string } = {},
): Promise<Response> {
  const fields: Record<string, string> = { decision, csrf: options.csrf ?? (await csrfOfPage(link)) };
  if (options.code !== undefined) fields.code = options.code;
  if (options.comment !== undefined) fields.comment = options.comment;
  return fetch(link, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(options.session ? { authorization: options.session.authorization } : {}),
    },
    body: new URLSearchParams(fields).toString(),
  });
}

/**
 * Opens the link in `page` and signs in through the local sign-in page: the user name typed, the
 * groups ticked, Sign in pressed; back on the approval page, waits for the script to show the
 * person signed in.
 */
export async function signInOnPage(page: Page, link: string, options: ApproverOptions = {}): Promise<void> {
  const username = options.username ?? 'alice';
  const groups = options.groups ?? [APPROVERS_GROUP];
  if (page.url() !== link) await page.goto(link);
  await page.click('#sign-in');
  await page.waitForSelector('#local-sign-in');
  await page.fill('#username', username);
  for (const group of groups) await page.check(`input[name="groups"][value="${group}"]`);
  await Promise.all([page.waitForURL(link), page.click('#local-sign-in')]);
  await page.waitForSelector('#signed-in:not([hidden])');
  assert.match((await page.locator('#who').textContent()) ?? '', new RegExp(`Signed in as ${username}`));
}
