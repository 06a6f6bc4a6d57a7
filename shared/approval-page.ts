/**
 * HTML for the approval gate: the page behind the emailed link, the page sign-in returns to,
 * the short message pages, and the email's text and HTML parts. Every value from the request or
 * the item is escaped.
 *
 * The page puts the decision where a person sees it first: what Approve, Reject and a timeout
 * each do (the gate's own words), then the decision controls, then the details and the items.
 * Detail keys are shown as words ("knownFromEarlierRuns" as "Known from earlier runs"), table
 * cells never break a word (a wide batch scrolls sideways instead), and every time is shown in
 * UTC and, by the page's one script, in the reader's own time zone.
 *
 * With sign-in (the default), the script signs in with the authorization-code flow and PKCE
 * against the user pool's managed login (a public client: no secret; the embedded runtime serves
 * the same endpoints on loopback), keeps the ID token in sessionStorage (one tab, gone when it
 * closes), shows the buttons only to a member of the approvers group, and posts the decision with
 * the token as a bearer token, which API Gateway's JWT authorizer checks. In the link-only mode
 * the form posts as plain HTML and carries the code the person typed.
 *
 * The settings travel as a JSON data block, which the Content-Security-Policy does not treat as
 * script; the script and the stylesheet are allowed by their hashes and nothing else runs.
 *
 * Item drawings are SVG documents whose text may come from user files (a molecule pool), so
 * they are never inlined: each becomes an `<img>` with a base64 data: URI. An SVG loaded as an
 * image runs no script and loads nothing, and base64 leaves nothing to escape.
 */
import { createHash } from 'node:crypto';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { ApprovalEmail, ApprovalItems, ApprovalItemsView, ApprovalOutcomes, ApprovalSignIn, ApprovalView, DecidedBy, DetailValue } from './approval.ts';

const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}',
  'main{max-width:60rem;margin:1.5rem auto;padding:1.25rem 1.75rem;background:#fff;border:1px solid #d8dde3;border-radius:8px}',
  'h1{font-size:1.4rem;margin:0 0 .4rem}',
  'h2{font-size:1.1rem;margin:1.4rem 0 .4rem}',
  '.meta{color:#4a535e;margin:0 0 .75rem}',
  // A cell grows to its longest word and never splits one; a table wider than the page scrolls.
  'table{border-collapse:collapse;margin:.5rem 0}',
  'th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e5e8ec;vertical-align:top;word-break:normal;overflow-wrap:normal;hyphens:manual}',
  'th{font-weight:600}',
  '.table-wrap{overflow-x:auto;max-width:100%}',
  'dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}',
  'dt{font-weight:600}dd{margin:0}',
  'code{font-size:.85em;overflow-wrap:anywhere}',
  '#decide{border:1px solid #c9d3de;background:#f8fafc;border-radius:8px;padding:.75rem 1rem;margin:.75rem 0 1rem}',
  '#decide h2{margin-top:0}',
  '.outcomes{margin:.25rem 0 .75rem;padding-left:1.2rem}',
  '.outcomes li{margin:.15rem 0}',
  'label{display:block;margin:.5rem 0 .2rem}',
  '#code-input{font-size:1.1rem;letter-spacing:.15em;width:9rem;text-transform:uppercase}',
  '.code{font-family:ui-monospace,monospace;font-size:1.1rem;letter-spacing:.15em;background:#eef1f5;padding:.05rem .35rem;border-radius:4px}',
  'textarea{width:100%;min-height:2.5rem;box-sizing:border-box}',
  '.buttons{display:flex;gap:1rem;margin-top:.75rem;flex-wrap:wrap}',
  'button{font-size:1rem;padding:.5rem 1.5rem;border-radius:6px;border:1px solid #888;cursor:pointer;background:#fff}',
  'button:disabled{cursor:default;opacity:.5}',
  '#approve{background:#1f7a3a;color:#fff;border-color:#1f7a3a}',
  '#reject{background:#b42318;color:#fff;border-color:#b42318}',
  '.state{font-weight:600}',
  // An item's values (a SMILES string, "1.42 ± 0.10 eV") read as one unit: never wrapped.
  '.items td[data-column]{white-space:nowrap}',
  '.items caption{text-align:left;font-weight:600;padding:.35rem 0}',
  '.items img{display:block;max-width:220px;height:auto}',
  '.notice{padding:.5rem .75rem;background:#fff4e5;border:1px solid #f0b35a;border-radius:6px}',
  '.muted{color:#5b6470}',
  '[hidden]{display:none!important}',
].join('');

// The page's one script, written without backticks or "${" so it sits in this template literal as
// it is. It shows times in the reader's zone everywhere; with sign-in it also signs in and decides.
const SCRIPT = String.raw`(() => {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const config = JSON.parse(($('approval-config') || {}).textContent || '{}');

  function localTimes(root) {
    let zone = '';
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) { zone = ''; }
    const format = new Intl.DateTimeFormat(undefined, { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
    for (const time of root.querySelectorAll('time[datetime]')) {
      const local = time.querySelector('.local');
      const at = new Date(time.getAttribute('datetime'));
      if (!local || isNaN(at.getTime())) continue;
      local.textContent = format.format(at) + ' your time' + (zone ? ' (' + zone + ')' : '') + ', ';
      local.hidden = false;
    }
  }
  localTimes(document);

  const signIn = config.signIn;
  if (!signIn || signIn.mode !== 'cognito') return;
  const SESSION_KEY = 'approval.session', PKCE_KEY = 'approval.pkce', RETURN_KEY = 'approval.return';
  const base64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const randomString = () => base64url(crypto.getRandomValues(new Uint8Array(32)));

  function claimsOf(token) {
    try {
      const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(decodeURIComponent(escape(atob(part))));
    } catch (e) { return {}; }
  }
  function session() {
    try {
      const saved = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
      return saved && saved.expiresAt > Date.now() ? saved : null;
    } catch (e) { return null; }
  }
  /** Only an approval page of this site is a place to return to. */
  function approvalPage(url) {
    try {
      const target = new URL(url, location.href);
      return target.origin === location.origin && /\/approvals\/[A-Za-z0-9_-]{22}$/.test(target.pathname) ? target.href : null;
    } catch (e) { return null; }
  }
  function showError(text) {
    const box = $('decide-error');
    if (box) { box.textContent = text; box.hidden = !text; }
  }

  async function startSignIn() {
    const verifier = randomString();
    const state = randomString();
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
    sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state, returnTo: location.href }));
    const query = new URLSearchParams({
      response_type: 'code', client_id: signIn.clientId, redirect_uri: signIn.redirectUri,
      scope: signIn.scopes.join(' '), state, code_challenge: base64url(new Uint8Array(digest)), code_challenge_method: 'S256',
    });
    location.assign(signIn.domain + '/oauth2/authorize?' + query);
  }

  /** Back from the sign-in page with ?code&state (or ?error): exchange the code, return to the approval. */
  async function finishSignIn(params) {
    const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) || 'null');
    sessionStorage.removeItem(PKCE_KEY);
    if (params.has('error')) throw new Error('Sign-in failed: ' + (params.get('error_description') || params.get('error')));
    if (!saved || saved.state !== params.get('state')) throw new Error('This sign-in was not started from this tab: open the link from the approval email again.');
    const response = await fetch(signIn.domain + '/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', client_id: signIn.clientId, code: params.get('code'),
        redirect_uri: signIn.redirectUri, code_verifier: saved.verifier,
      }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok || !body.id_token) throw new Error('Sign-in failed: ' + (body.error_description || body.error || 'HTTP ' + response.status));
    // A minute early, so a token never expires between this check and the request.
    const expiresAt = Date.now() + (Number(body.expires_in) || 3600) * 1000 - 60000;
    sessionStorage.setItem(SESSION_KEY, JSON.stringify({ idToken: body.id_token, expiresAt }));
    return approvalPage(saved.returnTo);
  }

  const returnStatus = $('sign-in-return');
  if (returnStatus) {
    const params = new URLSearchParams(location.search);
    if (params.has('code') || params.has('error')) {
      finishSignIn(params)
        .then((back) => {
          if (back) location.replace(back);
          else returnStatus.textContent = 'Signed in. Open the link from the approval email to decide.';
        })
        .catch((error) => { returnStatus.textContent = error.message; });
    } else {
      const back = approvalPage(sessionStorage.getItem(RETURN_KEY) || '');
      sessionStorage.removeItem(RETURN_KEY);
      if (back) location.replace(back);
      else returnStatus.textContent = 'You are signed out. Open the link from the approval email to decide.';
    }
    return;
  }

  const form = $('decision-form');
  if (!form) return;
  function render() {
    const saved = session();
    const claims = saved ? claimsOf(saved.idToken) : {};
    const groups = Array.isArray(claims['cognito:groups']) ? claims['cognito:groups'] : [];
    const approver = !!saved && groups.indexOf(signIn.group) >= 0;
    const name = claims['cognito:username'] || claims.username || claims.sub || '';
    $('signed-out').hidden = !!saved;
    $('signed-in').hidden = !saved;
    $('who').textContent = saved ? 'Signed in as ' + name + (claims.email && claims.email !== name ? ' (' + claims.email + ')' : '') : '';
    $('not-approver').hidden = !saved || approver;
    form.hidden = !approver;
  }
  $('sign-in').addEventListener('click', () => startSignIn().catch((error) => showError(error.message)));
  $('sign-out').addEventListener('click', () => {
    sessionStorage.removeItem(SESSION_KEY);
    sessionStorage.setItem(RETURN_KEY, location.href);
    location.assign(signIn.domain + '/logout?' + new URLSearchParams({ client_id: signIn.clientId, logout_uri: signIn.redirectUri }));
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const saved = session();
    // Nothing is sent without a signed-in approver: a click on a hidden button only redraws.
    if (!saved || form.hidden) { render(); return; }
    const body = new URLSearchParams(new FormData(form));
    if (event.submitter && event.submitter.name) body.set(event.submitter.name, event.submitter.value);
    for (const button of form.querySelectorAll('button')) button.disabled = true;
    showError('');
    try {
      const response = await fetch(form.getAttribute('action'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Bearer ' + saved.idToken },
        body,
        credentials: 'omit',
      });
      if (response.status === 401) {
        sessionStorage.removeItem(SESSION_KEY);
        render();
        showError('Your sign-in has ended: sign in again, then decide.');
        return;
      }
      if (!(response.headers.get('content-type') || '').startsWith('text/html')) throw new Error('The decision could not be sent (HTTP ' + response.status + ').');
      const doc = new DOMParser().parseFromString(await response.text(), 'text/html');
      const main = doc.querySelector('main');
      if (!main) throw new Error('The decision could not be sent (HTTP ' + response.status + ').');
      document.title = doc.title;
      document.querySelector('main').replaceWith(document.importNode(main, true));
      localTimes(document);
      document.body.setAttribute('data-outcome', String(response.status));
    } catch (error) {
      showError(error.message);
    } finally {
      for (const button of form.querySelectorAll('button')) button.disabled = false;
    }
  });
  render();
})();`;

/** The script as the pages carry it, for tests that look past it for anything else. */
export const PAGE_SCRIPT = SCRIPT;

const hash = (text: string) => createHash('sha256').update(text).digest('base64');
const STYLE_HASH = hash(STYLE);
const SCRIPT_HASH = hash(SCRIPT);

/**
 * The page's script and inline stylesheet are allowed by their hashes, images only as data: URIs
 * (the item drawings), so the page loads nothing from anywhere. With sign-in the script may also
 * reach this site (the decision) and the Cognito domain (the token exchange). `form-action`
 * keeps the form posting to this site only; `frame-ancestors` blocks clickjacking.
 */
export function contentSecurityPolicy(signIn?: ApprovalSignIn): string {
  const connect = signIn?.mode === 'cognito' ? [`connect-src 'self' ${new URL(signIn.domain).origin}`] : [];
  return [
    "default-src 'none'",
    `script-src 'sha256-${SCRIPT_HASH}'`,
    `style-src 'sha256-${STYLE_HASH}'`,
    'img-src data:',
    ...connect,
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** The policy of every page that signs nobody in (message pages, the link-only mode). */
export const CONTENT_SECURITY_POLICY = contentSecurityPolicy();

export function pageHeaders(signIn?: ApprovalSignIn): Record<string, string> {
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': contentSecurityPolicy(signIn),
  };
}

export const PAGE_HEADERS: Readonly<Record<string, string>> = pageHeaders();

export function escapeHtml(value: DetailValue | undefined): string {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

export function htmlResponse(statusCode: number, html: string, signIn?: ApprovalSignIn): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: pageHeaders(signIn), body: html };
}

/** A JSON data block's text: `<` escaped, so no value can close the element or open a comment. */
function jsonForHtml(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

function layout(title: string, body: string, signIn?: ApprovalSignIn): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex, nofollow">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style>`,
    `<script type="application/json" id="approval-config">${jsonForHtml({ signIn: signIn ?? { mode: 'link' } })}</script>`,
    '</head><body><main>',
    body,
    '</main>',
    `<script>${SCRIPT}</script>`,
    '</body></html>',
  ].join('\n');
}

/**
 * A detail key as a person reads it: camelCase, snake_case and kebab-case split into words,
 * sentence case, acronyms kept ("knownFromEarlierRuns" -> "Known from earlier runs",
 * "maxRPS" -> "Max RPS").
 */
export function humanLabel(key: string): string {
  const words = key
    .replace(/[_\-.]+/g, ' ')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  return words
    .map((word, i) => {
      if (/^[A-Z0-9]{2,}s?$/.test(word)) return word;
      const lower = word.toLowerCase();
      return i === 0 ? lower.charAt(0).toUpperCase() + lower.slice(1) : lower;
    })
    .join(' ');
}

/** "2027-01-01 10:00 UTC": an ISO time as UTC, to the minute (seconds when they are not zero). */
export function utcText(iso: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const text = at.toISOString();
  const seconds = text.slice(17, 19);
  return `${text.slice(0, 10)} ${text.slice(11, 16)}${seconds === '00' ? '' : `:${seconds}`} UTC`;
}

/** A time in UTC; the page's script puts the reader's local time before it. */
function timeHtml(iso: string, id?: string): string {
  return `<time${id ? ` id="${id}"` : ''} datetime="${escapeHtml(iso)}"><span class="local" hidden></span><span class="utc">${escapeHtml(utcText(iso))}</span></time>`;
}

// ---------------------------------------------------------------------------------------
// Message pages

export type MessageKind =
  | 'forged'
  | 'expired'
  | 'notFound'
  | 'methodNotAllowed'
  | 'badRequest'
  | 'signInRequired'
  | 'notApprover'
  | 'codeRequired'
  | 'alreadyDecided'
  | 'noLongerWaiting'
  | 'tryAgain';

const MESSAGES: Record<MessageKind, { status: number; title: string; text: string }> = {
  forged: {
    status: 403,
    title: 'This link is not valid',
    text: 'The link is incomplete or has been altered. Open the link from the approval email again.',
  },
  expired: {
    status: 410,
    title: 'This link has expired',
    text: 'The time allowed for this approval has passed. Nothing was changed; the pipeline applies its timeout policy.',
  },
  notFound: { status: 404, title: 'Not found', text: 'There is no page at this address.' },
  methodNotAllowed: { status: 405, title: 'Method not allowed', text: 'Only GET and POST are accepted here.' },
  badRequest: { status: 400, title: 'The form was not valid', text: 'Go back, reload the page and try again.' },
  signInRequired: {
    status: 401,
    title: 'Sign in to decide',
    text: 'Deciding needs a signed-in approver. Nothing was changed. Open the link from the approval email again and sign in.',
  },
  notApprover: {
    status: 403,
    title: 'You are not an approver',
    text: 'Only members of the approvers group can decide, so nothing was changed. Ask an administrator to add you to the group.',
  },
  codeRequired: {
    status: 400,
    title: 'Type the code shown on the page',
    text: 'Nothing was decided: a decision counts only with the code shown beside the buttons typed in. Go back, type it and press the button again.',
  },
  alreadyDecided: {
    status: 409,
    title: 'This approval was already decided',
    text: 'A decision was recorded before this one, so nothing was changed. Open the link again to see it.',
  },
  noLongerWaiting: {
    status: 409,
    title: 'The pipeline run is no longer waiting',
    text: 'Your decision was recorded, but the run had already stopped waiting for it (it timed out or was stopped).',
  },
  tryAgain: {
    status: 503,
    title: 'The decision could not be delivered',
    text: 'Nothing was changed. Please try again in a minute.',
  },
};

export function messageResponse(kind: MessageKind, detail?: string): APIGatewayProxyStructuredResultV2 {
  const message = MESSAGES[kind];
  const extra = detail ? `\n<p id="detail">${escapeHtml(detail)}</p>` : '';
  const response = htmlResponse(
    message.status,
    layout(message.title, `<h1>${escapeHtml(message.title)}</h1>\n<p id="message" data-kind="${kind}">${escapeHtml(message.text)}</p>${extra}`),
  );
  // A 405 names the methods the route takes, as HTTP asks.
  return kind === 'methodNotAllowed' ? { ...response, headers: { ...response.headers, allow: 'GET, POST' } } : response;
}

// ---------------------------------------------------------------------------------------
// Items

/**
 * An SVG document as a data: URI for `<img src>`. Characters outside ASCII become XML character
 * references first: RDKit declares its SVG iso-8859-1 while a JavaScript string is UTF-16, and
 * ASCII reads the same under every declared encoding.
 */
export function svgDataUri(svg: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the class is every non-ASCII character, so it names the ASCII range from 0
  const ascii = svg.replace(/[^\x00-\x7f]/gu, (char) => `&#${char.codePointAt(0)};`);
  return `data:image/svg+xml;base64,${Buffer.from(ascii, 'ascii').toString('base64')}`;
}

/** One line of plain text: a value with a line break could otherwise fake lines (a link) in the text part. */
function oneLine(value: DetailValue | undefined): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is removed
  return String(value ?? '').replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ');
}

function drawingAlt(doc: ApprovalItems, index: number): string {
  const first = doc.items[index]!.values[doc.columns[0]!.key];
  return `Drawing of item ${index + 1}${first === undefined ? '' : `: ${oneLine(first)}`}`;
}

/** The items as a table: a "#" column, a drawing column when any item has one, then the document's columns. */
function itemsTableHtml(doc: ApprovalItems, style: { table: string; img: string }): string {
  if (doc.items.length === 0) return '<p id="items-notice">The items document lists no items.</p>';
  const withDrawings = doc.items.some((item) => item.svg !== undefined);
  const headings = ['#', ...(withDrawings ? ['Drawing'] : []), ...doc.columns.map((column) => column.label)];
  const rows = doc.items.map((item, index) => {
    const drawing = item.svg === undefined ? '' : `<img alt="${escapeHtml(drawingAlt(doc, index))}" src="${svgDataUri(item.svg)}"${style.img}>`;
    const cells = [
      `<td>${index + 1}</td>`,
      ...(withDrawings ? [`<td class="drawing">${drawing}</td>`] : []),
      ...doc.columns.map((column) => `<td data-column="${escapeHtml(column.key)}">${escapeHtml(item.values[column.key])}</td>`),
    ];
    return `<tr data-item-index="${index}">${cells.join('')}</tr>`;
  });
  return [
    `<table id="items" class="items"${style.table}>`,
    doc.caption === undefined ? '' : `<caption>${escapeHtml(doc.caption)}</caption>`,
    `<thead><tr>${headings.map((heading) => `<th scope="col">${escapeHtml(heading)}</th>`).join('')}</tr></thead>`,
    `<tbody>\n${rows.join('\n')}\n</tbody></table>`,
  ].join('');
}

/** The items section of the page: the table, or why it cannot be shown. */
function itemsSection(items: ApprovalItemsView): string {
  const where = `<code id="items-uri">${escapeHtml(items.uri)}</code>`;
  const notice = (text: string) => `<h2>Items</h2>\n<p class="notice" id="items-notice">${text}</p>`;
  switch (items.status) {
    case 'shown':
      return `<h2>Items</h2>\n<div class="table-wrap items-wrap">${itemsTableHtml(items.document, { table: '', img: '' })}</div>\n<p class="muted">From ${where}</p>`;
    case 'missing':
      return notice(
        `The items of this approval cannot be shown: their document ${where} is gone (deleted or expired). Approving would approve a batch that cannot be reviewed here.`,
      );
    case 'changed':
      return notice(
        `The items of this approval cannot be shown: their document ${where} has changed since the request was made, so it is not what this approval is for.`,
      );
    case 'unreadable':
      return notice(`The items document ${where} could not be read (${escapeHtml(items.reason)}). Reload the page to try again.`);
  }
}

// ---------------------------------------------------------------------------------------
// The approval page

export interface DecisionFormView {
  /** Relative URL of this same page, keeping `exp` and `sig`. */
  action: string;
  csrf: string;
  /** Who may decide; default: the link-only mode. */
  signIn?: ApprovalSignIn;
  /** The short code to type in the link-only mode. */
  code?: string;
}

/** Relative, so it resolves against wherever the API is mounted (a stage prefix, loopback). */
export function formAction(id: string, exp: number, sig: string): string {
  return `${encodeURIComponent(id)}?exp=${exp}&sig=${encodeURIComponent(sig)}`;
}

function detailsTable(details: Record<string, DetailValue>): string {
  const keys = Object.keys(details).sort();
  if (keys.length === 0) return '<p>No details were given.</p>';
  const rows = keys.map(
    (key) => `<tr data-key="${escapeHtml(key)}"><th scope="row">${escapeHtml(humanLabel(key))}</th><td>${escapeHtml(details[key])}</td></tr>`,
  );
  return `<div class="table-wrap"><table class="details"><tbody>\n${rows.join('\n')}\n</tbody></table></div>`;
}

/** What a request made before gates described their outcomes is told. */
const GENERIC_OUTCOMES: ApprovalOutcomes = {
  approve: 'The run goes on past this gate.',
  reject: 'The run does not go on past this gate.',
};

/** What each decision does, in the gate's words, with the expiry. */
function outcomesList(view: ApprovalView): string {
  const outcomes = view.outcomes ?? GENERIC_OUTCOMES;
  const timeout = outcomes.timeout ?? 'the pipeline applies its timeout policy.';
  return [
    '<ul class="outcomes" id="outcomes">',
    `<li id="outcome-approve"><strong>Approve</strong>: ${escapeHtml(outcomes.approve)}</li>`,
    `<li id="outcome-reject"><strong>Reject</strong>: ${escapeHtml(outcomes.reject)}</li>`,
    `<li id="outcome-timeout"><strong>No decision</strong> by ${timeHtml(view.expiresAtIso, 'expires')}: ${escapeHtml(timeout)}</li>`,
    '</ul>',
  ].join('\n');
}

/** "alice (alice@example.com)", or the network address and browser where nobody signed in. */
function decidedByText(by: DecidedBy): string {
  if (by.via === 'sign-in') {
    const name = by.username ?? by.sub ?? 'a signed-in approver';
    return ` by ${escapeHtml(name)}${by.email && by.email !== name ? ` (${escapeHtml(by.email)})` : ''}`;
  }
  const how = by.via === 'link-and-code' ? ' with the link and its code' : '';
  return `${how} from ${escapeHtml(by.sourceIp)} (${escapeHtml(by.userAgent || 'unknown browser')})`;
}

function decisionBlock(view: ApprovalView): string {
  if (view.state === 'PENDING') return '';
  if (view.state === 'EXPIRED') return '<p id="decision">Nobody decided before the approval expired.</p>';
  const verb = view.state === 'APPROVED' ? 'Approved' : 'Rejected';
  const by = view.decidedBy ? decidedByText(view.decidedBy) : '';
  const at = view.decidedAt ? ` at ${timeHtml(view.decidedAt, 'decided-at')}` : '';
  const comment = view.comment ? `\n<blockquote id="comment">${escapeHtml(view.comment)}</blockquote>` : '';
  return `<p id="decision">${verb}${by}${at}.</p>${comment}`;
}

/**
 * The controls. With sign-in: a sign-in button, and the form hidden until the script finds a
 * member of the group signed in (a button in the hidden form sends nothing, and a POST without a
 * token is refused by the JWT authorizer). In the link-only mode: the code to type, required.
 */
function decisionControls(form: DecisionFormView): string {
  const signIn = form.signIn ?? { mode: 'link' };
  const cognito = signIn.mode === 'cognito';
  const code =
    !cognito && form.code
      ? [
          `<p>This link works without sign-in. To decide, type the code <strong class="code" id="decision-code">${escapeHtml(form.code)}</strong> into the box, then press a button.</p>`,
          '<label for="code-input">Code</label>',
          `<input id="code-input" name="code" required autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="${form.code.length + 4}">`,
        ]
      : [];
  const signInPanel = cognito
    ? [
        `<div id="signed-out"><p>Deciding needs you to sign in as a member of the <strong>${escapeHtml(signIn.group)}</strong> group.</p>`,
        '<button id="sign-in" type="button">Sign in to decide</button></div>',
        '<noscript><p class="notice">Signing in needs JavaScript; turn it on for this page.</p></noscript>',
        '<p id="signed-in" hidden><span id="who"></span> <button id="sign-out" type="button">Sign out</button></p>',
        `<p id="not-approver" class="notice" hidden>You are not a member of the ${escapeHtml(signIn.group)} group, so you cannot decide. Ask an administrator to add you, then sign in again.</p>`,
      ]
    : [];
  return [
    ...signInPanel,
    `<form id="decision-form" method="post" action="${escapeHtml(form.action)}"${cognito ? ' hidden' : ''}>`,
    `<input type="hidden" name="csrf" value="${escapeHtml(form.csrf)}">`,
    ...code,
    '<label for="comment-input">Comment (optional)</label>',
    '<textarea id="comment-input" name="comment" maxlength="500" rows="2"></textarea>',
    '<div class="buttons">',
    '<button id="approve" type="submit" name="decision" value="approve">Approve</button>',
    '<button id="reject" type="submit" name="decision" value="reject">Reject</button>',
    '</div>',
    '</form>',
    '<p id="decide-error" class="notice" role="alert" hidden></p>',
  ].join('\n');
}

/**
 * The GET page: the title, what each decision does and the controls first, then the details,
 * the items and the record. The controls appear only while the approval is pending and `form` is
 * given; `items` is the request's items document as read for this page, when it named one.
 */
export function renderApprovalPage(view: ApprovalView, form: DecisionFormView | undefined, items?: ApprovalItemsView): string {
  const pending = view.state === 'PENDING' && form !== undefined;
  const body = [
    `<h1>${escapeHtml(view.title)}</h1>`,
    `<p class="meta">Pipeline <strong id="pipeline">${escapeHtml(view.pipeline)}</strong>, run <code>${escapeHtml(view.executionId)}</code></p>`,
    '<section id="decide" aria-labelledby="decide-heading">',
    `<h2 id="decide-heading">${pending ? 'Decide' : 'Decision'}</h2>`,
    outcomesList(view),
    decisionBlock(view),
    pending ? decisionControls(form) : '',
    '</section>',
    '<h2>Details</h2>',
    detailsTable(view.details),
    items ? itemsSection(items) : '',
    '<h2>Record</h2>',
    '<dl>',
    `<dt>State</dt><dd class="state" id="state">${escapeHtml(view.state)}</dd>`,
    `<dt>Requested</dt><dd>${timeHtml(view.createdAt, 'requested')}</dd>`,
    `<dt>Digest</dt><dd><code>${escapeHtml(view.digest)}</code></dd>`,
    '</dl>',
  ];
  return layout(`Approval: ${view.title}`, body.filter(Boolean).join('\n'), form?.signIn);
}

/** The page after a POST that recorded the decision and told Step Functions. */
export function renderDecisionRecorded(view: ApprovalView, signIn?: ApprovalSignIn): string {
  const verb = view.state === 'APPROVED' ? 'Approved' : 'Rejected';
  const outcomes = view.outcomes ?? GENERIC_OUTCOMES;
  return layout(
    `${verb}: ${view.title}`,
    [
      `<h1>${verb}</h1>`,
      `<p>Your decision on <strong>${escapeHtml(view.title)}</strong> (pipeline ${escapeHtml(view.pipeline)}) was recorded and the run was told.</p>`,
      decisionBlock(view),
      `<p id="outcome">${escapeHtml(view.state === 'APPROVED' ? outcomes.approve : outcomes.reject)}</p>`,
    ].join('\n'),
    signIn,
  );
}

/**
 * The page the sign-in returns to (`GET /approvals`, the app client's callback and sign-out URL):
 * its script exchanges the code and goes back to the approval the person came from.
 */
export function renderSignInReturnPage(signIn: ApprovalSignIn): string {
  return layout(
    'Approval sign-in',
    [
      '<h1>Approval sign-in</h1>',
      '<p id="sign-in-return" role="status">Signing in…</p>',
      '<noscript><p class="notice">Signing in needs JavaScript.</p></noscript>',
    ].join('\n'),
    signIn,
  );
}

// ---------------------------------------------------------------------------------------
// The email

/** The email's last line: what the link does and does not do. */
const NOT_BY_OPENING = 'Opening the link decides nothing: the page asks you to sign in as an approver (or, where sign-in is off, to type its code) first.';

export function renderApprovalEmail(input: {
  from: string;
  to: string[];
  link: string;
  pipeline: string;
  title: string;
  details: Record<string, DetailValue>;
  /** The request's items document, when it named one. */
  items?: ApprovalItems;
  /** What each decision does, when the gate said. */
  outcomes?: ApprovalOutcomes;
  expiresAtIso: string;
}): ApprovalEmail {
  const keys = Object.keys(input.details).sort();
  const expires = utcText(input.expiresAtIso);
  const outcomes = input.outcomes ? [`Approve: ${oneLine(input.outcomes.approve)}`, `Reject: ${oneLine(input.outcomes.reject)}`] : [];
  const text = [
    `Pipeline ${input.pipeline} is waiting for an approval: ${input.title}`,
    '',
    ...keys.map((key) => `  ${oneLine(humanLabel(key))}: ${String(input.details[key])}`),
    '',
    ...(input.items ? [...itemsText(input.items), ''] : []),
    ...(outcomes.length ? [...outcomes, ''] : []),
    `Review and decide (the link expires at ${expires}):`,
    input.link,
    '',
    NOT_BY_OPENING,
  ].join('\n');
  const rows = keys.map((key) => `<tr><th align="left">${escapeHtml(humanLabel(key))}</th><td>${escapeHtml(input.details[key])}</td></tr>`);
  const html = [
    '<!doctype html><html><body>',
    `<p>Pipeline <strong>${escapeHtml(input.pipeline)}</strong> is waiting for an approval: <strong>${escapeHtml(input.title)}</strong></p>`,
    rows.length ? `<table>${rows.join('')}</table>` : '',
    input.items ? itemsEmailHtml(input.items) : '',
    outcomes.length ? `<ul>${outcomes.map((line) => `<li>${escapeHtml(line)}</li>`).join('')}</ul>` : '',
    `<p><a href="${escapeHtml(input.link)}">Review and decide</a> (the link expires at ${escapeHtml(expires)}).</p>`,
    `<p>${escapeHtml(NOT_BY_OPENING)}</p>`,
    '</body></html>',
  ].join('\n');
  // A header cannot hold a line break; a title with one would otherwise break the message.
  const subject = `Approval needed: ${input.title}`.replace(/[\r\n]+/g, ' ');
  return { from: input.from, to: input.to, subject, text, html };
}

/** The text part's items: a heading, then one line per item with its column values. */
function itemsText(doc: ApprovalItems): string[] {
  const heading = `Items (${doc.items.length})${doc.caption === undefined ? '' : `: ${oneLine(doc.caption)}`}`;
  const lines = doc.items.map(
    (item, index) => `  ${index + 1}. ${doc.columns.map((column) => `${oneLine(column.label)}: ${oneLine(item.values[column.key])}`).join(' | ')}`,
  );
  return [heading, ...lines];
}

/** The HTML part's items: the page's table, with attributes for mail clients that drop stylesheets. */
function itemsEmailHtml(doc: ApprovalItems): string {
  return itemsTableHtml(doc, {
    table: ' border="1" cellpadding="4" cellspacing="0" style="border-collapse:collapse"',
    img: ' style="display:block;max-width:240px;height:auto"',
  });
}
