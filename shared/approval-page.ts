/**
 * HTML for the approval gate: the page behind the emailed link, the short message pages, and
 * the email's text and HTML parts. Every value from the request or the item is escaped; the
 * pages need no JavaScript, and their Content-Security-Policy allows none.
 *
 * Item drawings are SVG documents whose text may come from user files (a molecule pool), so
 * they are never inlined: each becomes an `<img>` with a base64 data: URI. An SVG loaded as an
 * image runs no script and loads nothing, and base64 leaves nothing to escape.
 */
import { createHash } from 'node:crypto';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { ApprovalEmail, ApprovalItems, ApprovalItemsView, ApprovalView, DetailValue } from './approval.ts';

const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}',
  'main{max-width:44rem;margin:2rem auto;padding:1.5rem 2rem;background:#fff;border:1px solid #d8dde3;border-radius:8px}',
  'h1{font-size:1.4rem;margin-top:0}',
  'table{border-collapse:collapse;width:100%;margin:1rem 0}',
  'th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #e5e8ec;vertical-align:top;word-break:break-word}',
  'th{width:35%;font-weight:600}',
  'dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}',
  'dt{font-weight:600}dd{margin:0}',
  'code{font-size:.85em;word-break:break-all}',
  'textarea{width:100%;min-height:4rem;box-sizing:border-box}',
  '.buttons{display:flex;gap:1rem;margin-top:1rem}',
  'button{font-size:1rem;padding:.5rem 1.5rem;border-radius:6px;border:1px solid #888;cursor:pointer}',
  '#approve{background:#1f7a3a;color:#fff;border-color:#1f7a3a}',
  '#reject{background:#b42318;color:#fff;border-color:#b42318}',
  '.state{font-weight:600}',
  '.items-wrap{overflow-x:auto}',
  '.items th{width:auto}',
  '.items caption{text-align:left;font-weight:600;padding:.35rem 0}',
  '.items img{display:block;max-width:240px;height:auto}',
  '.notice{padding:.5rem .75rem;background:#fff4e5;border:1px solid #f0b35a;border-radius:6px}',
].join('');

const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

/**
 * No script source at all; the one inline stylesheet is allowed by its hash, and images only
 * as data: URIs (the item drawings), so the page loads nothing from anywhere. `form-action`
 * keeps the form posting to this site only; `frame-ancestors` blocks clickjacking.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `style-src 'sha256-${STYLE_HASH}'`,
  'img-src data:',
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
};

export function escapeHtml(value: DetailValue | undefined): string {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

export function htmlResponse(statusCode: number, html: string): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: { ...PAGE_HEADERS }, body: html };
}

function layout(title: string, body: string): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex, nofollow">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head><body><main>',
    body,
    '</main></body></html>',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------
// Message pages

export type MessageKind = 'forged' | 'expired' | 'notFound' | 'methodNotAllowed' | 'badRequest' | 'alreadyDecided' | 'noLongerWaiting' | 'tryAgain';

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
  const extra = detail ? `\n<p>${escapeHtml(detail)}</p>` : '';
  return htmlResponse(message.status, layout(message.title, `<h1>${escapeHtml(message.title)}</h1>\n<p>${escapeHtml(message.text)}</p>${extra}`));
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
      return `<h2>Items</h2>\n<div class="items-wrap">${itemsTableHtml(items.document, { table: '', img: '' })}</div>\n<p>From ${where}</p>`;
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
}

/** Relative, so it resolves against wherever the API is mounted (a stage prefix, loopback). */
export function formAction(id: string, exp: number, sig: string): string {
  return `${encodeURIComponent(id)}?exp=${exp}&sig=${encodeURIComponent(sig)}`;
}

function detailsTable(details: Record<string, DetailValue>): string {
  const keys = Object.keys(details).sort();
  if (keys.length === 0) return '<p>No details were given.</p>';
  const rows = keys.map((key) => `<tr><th scope="row">${escapeHtml(key)}</th><td>${escapeHtml(details[key])}</td></tr>`);
  return `<table class="details"><tbody>\n${rows.join('\n')}\n</tbody></table>`;
}

function decisionBlock(view: ApprovalView): string {
  if (view.state === 'PENDING') return '';
  if (view.state === 'EXPIRED') return '<p id="decision">Nobody decided before the approval expired.</p>';
  const verb = view.state === 'APPROVED' ? 'Approved' : 'Rejected';
  const by = view.decidedBy ? ` from ${escapeHtml(view.decidedBy.sourceIp)} (${escapeHtml(view.decidedBy.userAgent || 'unknown browser')})` : '';
  const comment = view.comment ? `\n<blockquote id="comment">${escapeHtml(view.comment)}</blockquote>` : '';
  return `<p id="decision">${verb} at ${escapeHtml(view.decidedAt)}${by}.</p>${comment}`;
}

function decisionForm(form: DecisionFormView): string {
  return [
    `<form method="post" action="${escapeHtml(form.action)}">`,
    `<input type="hidden" name="csrf" value="${escapeHtml(form.csrf)}">`,
    '<label for="comment-input">Comment (optional)</label>',
    '<textarea id="comment-input" name="comment" maxlength="500"></textarea>',
    '<div class="buttons">',
    '<button id="approve" type="submit" name="decision" value="approve">Approve</button>',
    '<button id="reject" type="submit" name="decision" value="reject">Reject</button>',
    '</div>',
    '</form>',
  ].join('\n');
}

/**
 * The GET page. The form appears only while the approval is pending and `form` is given;
 * `items` is the request's items document as read for this page, when it named one.
 */
export function renderApprovalPage(view: ApprovalView, form: DecisionFormView | undefined, items?: ApprovalItemsView): string {
  const body = [
    `<h1>${escapeHtml(view.title)}</h1>`,
    `<p>Pipeline <strong id="pipeline">${escapeHtml(view.pipeline)}</strong>, run <code>${escapeHtml(view.executionId)}</code></p>`,
    detailsTable(view.details),
    items ? itemsSection(items) : '',
    '<dl>',
    `<dt>State</dt><dd class="state" id="state">${escapeHtml(view.state)}</dd>`,
    `<dt>Requested</dt><dd>${escapeHtml(view.createdAt)}</dd>`,
    `<dt>Expires</dt><dd id="expires">${escapeHtml(view.expiresAtIso)}</dd>`,
    `<dt>Digest</dt><dd><code>${escapeHtml(view.digest)}</code></dd>`,
    '</dl>',
    decisionBlock(view),
    view.state === 'PENDING' && form ? decisionForm(form) : '',
  ];
  return layout(`Approval: ${view.title}`, body.filter(Boolean).join('\n'));
}

/** The page after a POST that recorded the decision and told Step Functions. */
export function renderDecisionRecorded(view: ApprovalView): string {
  const verb = view.state === 'APPROVED' ? 'Approved' : 'Rejected';
  return layout(
    `${verb}: ${view.title}`,
    [
      `<h1>${verb}</h1>`,
      `<p>Your decision on <strong>${escapeHtml(view.title)}</strong> (pipeline ${escapeHtml(view.pipeline)}) was recorded and the run was told.</p>`,
      decisionBlock(view),
    ].join('\n'),
  );
}

// ---------------------------------------------------------------------------------------
// The email

export function renderApprovalEmail(input: {
  from: string;
  to: string[];
  link: string;
  pipeline: string;
  title: string;
  details: Record<string, DetailValue>;
  /** The request's items document, when it named one. */
  items?: ApprovalItems;
  expiresAtIso: string;
}): ApprovalEmail {
  const keys = Object.keys(input.details).sort();
  const text = [
    `Pipeline ${input.pipeline} is waiting for an approval: ${input.title}`,
    '',
    ...keys.map((key) => `  ${key}: ${String(input.details[key])}`),
    '',
    ...(input.items ? [...itemsText(input.items), ''] : []),
    `Review and decide (the link expires at ${input.expiresAtIso}):`,
    input.link,
    '',
    'Opening the link decides nothing; only the buttons on the page do.',
  ].join('\n');
  const rows = keys.map((key) => `<tr><th align="left">${escapeHtml(key)}</th><td>${escapeHtml(input.details[key])}</td></tr>`);
  const html = [
    '<!doctype html><html><body>',
    `<p>Pipeline <strong>${escapeHtml(input.pipeline)}</strong> is waiting for an approval: <strong>${escapeHtml(input.title)}</strong></p>`,
    rows.length ? `<table>${rows.join('')}</table>` : '',
    input.items ? itemsEmailHtml(input.items) : '',
    `<p><a href="${escapeHtml(input.link)}">Review and decide</a> (the link expires at ${escapeHtml(input.expiresAtIso)}).</p>`,
    '<p>Opening the link decides nothing; only the buttons on the page do.</p>',
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
