/**
 * The approval gate's logic, free of SDK calls: request parsing, ids, link signatures,
 * anti-forgery tokens, the stored item, the MIME message, and the request shapes for a
 * decision. approval-gate.ts makes the calls, for the two handlers in functions/platform/.
 *
 * The task token is the capability to resume a run, so it lives only in the table item: never
 * in the link, the email, a log line or an error message. The link carries a random id and an
 * HMAC over (id, expiry) instead.
 *
 * The link opens the page; it does not decide. By default deciding needs a signed-in approver:
 * a Cognito ID token, checked by API Gateway's JWT authorizer on the POST route, whose
 * `cognito:groups` holds the approvers group (`approverFromClaims`). Where sign-in is turned off
 * (CDK context `approvalSignIn=false`), the POST must carry the short code the page shows
 * (`decisionCode`), which a scanner that only clicks buttons never types.
 *
 * A request may name an items document (a batch: rows of values, each with an optional
 * drawing) in S3. The item stores its URI and the sha256 of the bytes read when the request
 * was made, never the items themselves (a DynamoDB item holds at most 400 KB), and both go into
 * the digest, so what is approved is that exact document.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import type { SendTaskFailureCommandInput, SendTaskSuccessCommandInput } from '@aws-sdk/client-sfn';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { z } from 'zod';
import { ApprovalRejected, ConfigError } from './errors.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { valueAt } from './schema.ts';
import { parseS3Uri } from './s3uri.ts';
import { type CognitoPageSignIn, cognitoSignInFromEnv } from './sign-in.ts';
import { approvalKey } from './table.ts';

/** Kept after expiry so the CLI and the page can still show what happened. */
export const RETAIN_AFTER_EXPIRY_SECONDS = 30 * 24 * 3600;
/** A Standard workflow runs at most one year; a longer wait could never be answered. */
export const MAX_TIMEOUT_SECONDS = 365 * 24 * 3600;
export const MAX_COMMENT_CHARS = 500;
/** The error name a rejected approval fails its task with; pipelines Catch on it. */
export const APPROVAL_REJECTED = ApprovalRejected.name;
/** 128 random bits in base64url, no padding. */
export const APPROVAL_ID_PATTERN = /^[A-Za-z0-9_-]{22}$/;

export type ApprovalState = 'PENDING' | 'APPROVED' | 'REJECTED' | 'EXPIRED';
export type DetailValue = string | number | boolean;
/** The longest text a gate may give for one outcome (a sentence or two). */
export const MAX_OUTCOME_CHARS = 300;

/**
 * What each decision does, in the pipeline's words, shown beside the buttons: e.g. for a batch
 * of molecules, Approve measures it, Reject ends the loop keeping what was measured.
 */
export const approvalOutcomesSchema = z.strictObject({
  approve: z.string().min(1).max(MAX_OUTCOME_CHARS),
  reject: z.string().min(1).max(MAX_OUTCOME_CHARS),
  /** What happens when nobody decides before the link expires. */
  timeout: z.string().min(1).max(MAX_OUTCOME_CHARS).optional(),
});
export type ApprovalOutcomes = z.infer<typeof approvalOutcomesSchema>;

// ---------------------------------------------------------------------------------------
// The request from Step Functions

export const approvalRequestSchema = z.object({
  taskToken: z.string().min(1),
  executionId: z.string().min(1),
  pipeline: z.string().min(1),
  title: z.string().min(1).max(200),
  details: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  timeoutSeconds: z.number().int().positive().max(MAX_TIMEOUT_SECONDS),
  recipients: z.array(z.email()).min(1).optional(),
  /** What Approve, Reject and a timeout do; absent in requests made before gates said so. */
  outcomes: approvalOutcomesSchema.optional(),
  /**
   * s3://bucket/approvals/... of an items document (see approvalItemsSchema). Null means none,
   * so that a pipeline can point the gate at a field it sets only in some runs.
   */
  itemsUri: z.preprocess(
    (value) => (value === null ? undefined : value),
    z
      .string()
      .regex(/^s3:\/\/[^/]+\/.+$/, 'expected s3://bucket/key')
      .optional(),
  ),
});
export type ApprovalRequest = z.infer<typeof approvalRequestSchema>;

/** Parses the task input; the error names the field (and never echoes the token). */
export function parseApprovalRequest(event: unknown): ApprovalRequest {
  const result = approvalRequestSchema.safeParse(event);
  if (result.success) return result.data;
  throw configErrorFromZod(result.error, event, 'approval request');
}

// ---------------------------------------------------------------------------------------
// Signatures

export function newApprovalId(): string {
  return randomBytes(16).toString('base64url');
}

function hmacBase64Url(key: string, message: string): string {
  return createHmac('sha256', key).update(message).digest('base64url');
}

/** Signature carried in the link's `sig`: HMAC over `<id>.<exp>`. */
export function linkSignature(key: string, id: string, exp: number): string {
  return hmacBase64Url(key, `${id}.${exp}`);
}

/**
 * The page's anti-forgery token. Only a page we rendered holds it, so a scanner that follows
 * the link cannot decide, and a form posted from elsewhere cannot either. The `decide.` prefix
 * keeps it from ever equalling a link signature.
 */
export function csrfToken(key: string, id: string, exp: number): string {
  return hmacBase64Url(key, `decide.${id}.${exp}`);
}

/** Letters and digits a person reads and types without confusing them (no 0/O, 1/I/L). */
const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
export const DECISION_CODE_LENGTH = 6;

/**
 * The short code the page shows and the link-only mode asks the person to type before deciding.
 * It is no secret from whoever sees the page: it makes deciding a deliberate act that a scanner
 * clicking buttons does not perform. An HMAC like the other tokens, so it is fixed per link.
 */
export function decisionCode(key: string, id: string, exp: number): string {
  const digest = createHmac('sha256', key).update(`code.${id}.${exp}`).digest();
  let code = '';
  for (let i = 0; i < DECISION_CODE_LENGTH; i++) code += CODE_ALPHABET[digest[i]! % CODE_ALPHABET.length];
  return code;
}

/** A typed code as compared: case, spaces and hyphens do not matter. */
export function normalizeDecisionCode(typed: string): string {
  return typed.replace(/[\s-]+/g, '').toUpperCase();
}

/** Constant-time string comparison (lengths are not secret: both are fixed-size HMACs). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

export function approvalLink(baseUrl: string, key: string, id: string, exp: number): string {
  const base = baseUrl.replace(/\/+$/, '');
  return `${base}/approvals/${id}?exp=${exp}&sig=${linkSignature(key, id, exp)}`;
}

export type LinkCheck = { ok: true; id: string; exp: number; sig: string } | { ok: false; reason: 'forged' | 'expired' };

/**
 * Checks a link's parts as they arrive from the query string. The signature is checked before
 * the expiry, so a forged link learns nothing, not even whether its id exists.
 */
export function checkLink(input: { key: string; id: string | undefined; exp: string | undefined; sig: string | undefined; nowSeconds: number }): LinkCheck {
  const { key, id, exp, sig, nowSeconds } = input;
  if (!id || !APPROVAL_ID_PATTERN.test(id) || !exp || !/^\d{1,12}$/.test(exp) || !sig) {
    return { ok: false, reason: 'forged' };
  }
  const expSeconds = Number(exp);
  if (!safeEqual(sig, linkSignature(key, id, expSeconds))) return { ok: false, reason: 'forged' };
  if (nowSeconds >= expSeconds) return { ok: false, reason: 'expired' };
  return { ok: true, id, exp: expSeconds, sig };
}

// ---------------------------------------------------------------------------------------
// Who may decide

/** The Cognito group whose members may decide, unless the platform names another. */
export const APPROVERS_GROUP = 'approvers';
/** Path of the page the sign-in returns to (the app client's callback and sign-out URL). */
export const SIGN_IN_RETURN_PATH = '/approvals';
/** Scopes the page asks for: `openid` for the ID token, `email` and `profile` for who the person is. */
export const APPROVAL_SCOPES: readonly string[] = ['openid', 'email', 'profile'];

/** Environment variables the platform stack sets on the approval API function. */
export const APPROVAL_ENV = {
  /** 'cognito' (deciding needs a signed-in approver) or 'link' (the opt-in link-only mode). */
  signIn: 'APPROVAL_SIGN_IN',
  /** Base URL of the user pool's managed-login domain, https://<prefix>.auth.<region>.amazoncognito.com. */
  authDomain: 'APPROVAL_AUTH_DOMAIN',
  /** The page's app client (public: no secret, PKCE). */
  clientId: 'APPROVAL_CLIENT_ID',
  /** The group whose members may decide. */
  group: 'APPROVAL_GROUP',
} as const;

/** Sign-in with the approvers group (the redirect URI is `<api>/approvals`), or the link-only mode. */
export type ApprovalSignIn = (CognitoPageSignIn & { readonly group: string }) | { readonly mode: 'link' };

/** The sign-in settings from the function's environment; throws naming a bad or missing variable. */
export function approvalSignInFromEnv(env: Record<string, string | undefined>, baseUrlVariable: string): ApprovalSignIn {
  const settings = cognitoSignInFromEnv(
    env,
    {
      mode: APPROVAL_ENV.signIn,
      off: 'link',
      authDomain: APPROVAL_ENV.authDomain,
      clientId: APPROVAL_ENV.clientId,
      more: { baseUrl: baseUrlVariable, group: APPROVAL_ENV.group },
    },
    'the platform stack',
  );
  if (!settings) return { mode: 'link' };
  return {
    mode: 'cognito',
    domain: settings.domain,
    clientId: settings.clientId,
    redirectUri: `${settings.baseUrl.replace(/\/+$/, '')}${SIGN_IN_RETURN_PATH}`,
    scopes: APPROVAL_SCOPES,
    group: settings.group,
  };
}

/** The signed-in person, from the token's claims. */
export interface Approver {
  readonly sub: string;
  readonly username: string;
  readonly email?: string;
}

export type ApproverCheck = { ok: true; approver: Approver } | { ok: false; reason: 'signedOut' } | { ok: false; reason: 'notApprover'; username: string };

/**
 * The groups claim as API Gateway hands it to the function: a JSON array becomes its items in
 * brackets joined by spaces ("[approvers admins]"); a JSON array string or a bare name also read.
 */
export function groupsOfClaim(value: string | undefined): string[] {
  if (value === undefined) return [];
  const text = value.trim();
  if (text.startsWith('[') && text.endsWith(']')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (Array.isArray(parsed)) return parsed.map(String);
    } catch {
      // API Gateway's own form, not JSON.
    }
    return text
      .slice(1, -1)
      .split(/[\s,]+/)
      .filter(Boolean);
  }
  return text ? [text] : [];
}

/**
 * Whether the claims API Gateway verified (signature, issuer, audience, expiry) are those of a
 * member of `group`. No claims means the route had no authorizer or no token reached it: signed out.
 */
export function approverFromClaims(claims: Record<string, string> | undefined, group: string): ApproverCheck {
  const sub = claims?.sub;
  if (!claims || !sub) return { ok: false, reason: 'signedOut' };
  const username = claims['cognito:username'] || claims.username || sub;
  if (!groupsOfClaim(claims['cognito:groups']).includes(group)) return { ok: false, reason: 'notApprover', username };
  return { ok: true, approver: { sub, username, ...(claims.email ? { email: claims.email } : {}) } };
}

// ---------------------------------------------------------------------------------------
// The HTTP request (API Gateway HTTP API, payload format 2.0)

const approvalHttpEventSchema = z.object({
  requestContext: z.object({
    http: z.object({ method: z.string(), sourceIp: z.string().default(''), userAgent: z.string().default('') }),
    /** Present on the JWT-authorized route: the token's claims, each flattened to a string. */
    authorizer: z.object({ jwt: z.object({ claims: z.record(z.string(), z.unknown()).default({}) }).optional() }).nullish(),
  }),
  pathParameters: z.record(z.string(), z.string().optional()).nullish(),
  queryStringParameters: z.record(z.string(), z.string().optional()).nullish(),
  body: z.string().nullish(),
  isBase64Encoded: z.boolean().default(false),
});

export interface ApprovalHttpRequest {
  method: string;
  id: string | undefined;
  exp: string | undefined;
  sig: string | undefined;
  body: string | undefined;
  isBase64Encoded: boolean;
  /** The network address and browser of the request. */
  client: { sourceIp: string; userAgent: string };
  /** The verified token's claims, when the route has a JWT authorizer and a token passed it. */
  claims: Record<string, string> | undefined;
}

export function parseApprovalHttpEvent(event: unknown): ApprovalHttpRequest {
  const result = approvalHttpEventSchema.safeParse(event);
  if (!result.success) throw configErrorFromZod(result.error, event, 'HTTP event');
  const { requestContext, pathParameters, queryStringParameters, body, isBase64Encoded } = result.data;
  return {
    method: requestContext.http.method.toUpperCase(),
    id: pathParameters?.id,
    exp: queryStringParameters?.exp,
    sig: queryStringParameters?.sig,
    body: body ?? undefined,
    isBase64Encoded,
    client: { sourceIp: requestContext.http.sourceIp, userAgent: requestContext.http.userAgent },
    claims: claimsOf(requestContext.authorizer?.jwt?.claims),
  };
}

function claimsOf(claims: Record<string, unknown> | undefined): Record<string, string> | undefined {
  if (!claims || Object.keys(claims).length === 0) return undefined;
  return Object.fromEntries(Object.entries(claims).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)]));
}

// ---------------------------------------------------------------------------------------
// The stored item

/**
 * What the person is asked to approve, hashed so a later reader can tell it was not altered.
 * The items document enters as its URI and the sha256 of its bytes; a request without one
 * hashes exactly as before items existed, so older digests still check.
 */
export function approvalDigest(subject: {
  pipeline: string;
  title: string;
  details: Record<string, DetailValue>;
  itemsUri?: string;
  itemsSha256?: string;
}): string {
  const { pipeline, title, details, itemsUri, itemsSha256 } = subject;
  return sha256Hex(canonicalJson({ pipeline, title, details, ...(itemsUri === undefined ? {} : { itemsUri, itemsSha256 }) }));
}

/**
 * Who decided. With sign-in: the token's subject, user name and (when the token has it) email,
 * `via: 'sign-in'`. In the link-only mode: `via: 'link-and-code'`, and the network address and
 * browser are all that is known. Items decided before either existed have neither `via` nor a name.
 */
export const decidedBySchema = z.object({
  sourceIp: z.string(),
  userAgent: z.string(),
  via: z.enum(['sign-in', 'link-and-code']).optional(),
  sub: z.string().optional(),
  username: z.string().optional(),
  email: z.string().optional(),
});
export type DecidedBy = z.infer<typeof decidedBySchema>;

export const approvalItemSchema = z
  .object({
    pk: z.string(),
    sk: z.string(),
    token: z.string().min(1),
    executionId: z.string(),
    pipeline: z.string(),
    title: z.string(),
    details: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    digest: z.string(),
    state: z.enum(['PENDING', 'APPROVED', 'REJECTED', 'EXPIRED']),
    createdAt: z.string(),
    expiresAtIso: z.string(),
    expiresAt: z.number(),
    recipients: z.array(z.string()),
    decidedAt: z.string().optional(),
    decidedBy: decidedBySchema.optional(),
    comment: z.string().optional(),
    /** What each decision does, as the gate said when the request was made. */
    outcomes: approvalOutcomesSchema.optional(),
    /** The items document, when the request named one: where it is, and the sha256 of what was read. */
    itemsUri: z.string().optional(),
    itemsSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
  })
  .refine((item) => (item.itemsUri === undefined) === (item.itemsSha256 === undefined), {
    path: ['itemsSha256'],
    message: 'itemsUri and itemsSha256 go together',
  });
export type ApprovalItem = z.infer<typeof approvalItemSchema>;
/** Everything a page may show: the item without its token. */
export type ApprovalView = Omit<ApprovalItem, 'token' | 'pk' | 'sk'> & { id: string };

export function toApprovalView(id: string, item: ApprovalItem): ApprovalView {
  const { token: _token, pk: _pk, sk: _sk, ...rest } = item;
  return { id, ...rest };
}

/** Reads an item from GetItem; a malformed one is an error naming the field, without values. */
export function parseApprovalItem(item: unknown): ApprovalItem {
  const result = approvalItemSchema.safeParse(item);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new ConfigError(`approval item.${issue.path.join('.')}`, '(not shown)', issue.message);
}

/**
 * Builds the item for a new request; `exp` (epoch seconds) is the link's expiry. `items` is the
 * document read for `request.itemsUri` (its sha256 is what the approval binds to).
 */
export function newApprovalItem(
  request: ApprovalRequest,
  id: string,
  now: Date,
  recipients: string[],
  items?: { sha256: string },
): { item: ApprovalItem; exp: number } {
  if ((request.itemsUri === undefined) !== (items === undefined)) {
    throw new ConfigError('itemsUri', request.itemsUri, 'the items document and its URI go together');
  }
  const exp = Math.floor(now.getTime() / 1000) + request.timeoutSeconds;
  const bound = request.itemsUri === undefined ? {} : { itemsUri: request.itemsUri, itemsSha256: items!.sha256 };
  const item: ApprovalItem = {
    ...approvalKey(id),
    token: request.taskToken,
    executionId: request.executionId,
    pipeline: request.pipeline,
    title: request.title,
    details: request.details,
    digest: approvalDigest({ ...request, ...bound }),
    state: 'PENDING',
    createdAt: now.toISOString(),
    expiresAtIso: new Date(exp * 1000).toISOString(),
    expiresAt: exp + RETAIN_AFTER_EXPIRY_SECONDS,
    recipients,
    ...(request.outcomes === undefined ? {} : { outcomes: request.outcomes }),
    ...bound,
  };
  return { item, exp };
}

/** The request's own recipients, else the configured approver; one of them must exist. */
export function resolveRecipients(requested: string[] | undefined, fallback: string | undefined): string[] {
  if (requested && requested.length > 0) return requested;
  if (fallback) return [fallback];
  throw new ConfigError('recipients', requested, 'no recipients in the request and APPROVER_EMAIL is not set');
}

// ---------------------------------------------------------------------------------------
// The items document

/** Where items documents live in the bucket; both approval Lambdas may read this prefix only. */
export const APPROVAL_ITEMS_PREFIX = 'approvals/';
/** Rows in one document: a batch a person can still review one by one. */
export const MAX_APPROVAL_ITEMS = 100;
export const MAX_APPROVAL_COLUMNS = 20;
/** One drawing, in UTF-8 bytes. An RDKit structure drawing is a few KB. */
export const MAX_ITEM_SVG_BYTES = 100 * 1024;
export const MAX_ITEM_VALUE_CHARS = 1000;
/** Bounds the read before parsing: every drawing at its limit, plus the values. */
export const MAX_ITEMS_DOCUMENT_BYTES = MAX_APPROVAL_ITEMS * MAX_ITEM_SVG_BYTES + 1024 * 1024;

/** An SVG document: an optional XML declaration, doctype or comments, then the svg element. */
const SVG_START = /^\s*(<\?xml[^>]*\?>\s*)?(<!--[\s\S]*?-->\s*|<!DOCTYPE[^>]*>\s*)*<svg[\s>]/i;

const itemValueSchema = z.union([z.string().max(MAX_ITEM_VALUE_CHARS), z.number(), z.boolean()]);

/**
 * The items document a request may name: columns (a key and a heading each), then one row per
 * item with its values by column key and an optional drawing (an SVG document, shown as an
 * image, never inlined). Example:
 *
 *   { "caption": "Round 3 batch",
 *     "columns": [{ "key": "smiles", "label": "SMILES" }, { "key": "predicted", "label": "Predicted gap" }],
 *     "items": [{ "values": { "smiles": "c1ccccc1O", "predicted": "1.42 ± 0.10 eV" }, "svg": "<svg ...>" }] }
 */
export const approvalItemsSchema = z
  .strictObject({
    caption: z.string().min(1).max(500).optional(),
    columns: z
      .array(z.strictObject({ key: z.string().min(1).max(64), label: z.string().min(1).max(100) }))
      .min(1)
      .max(MAX_APPROVAL_COLUMNS),
    items: z
      .array(
        z.strictObject({
          values: z.record(z.string(), itemValueSchema),
          svg: z
            .string()
            .refine((svg) => SVG_START.test(svg), 'must be an SVG document (<svg ...> after an optional XML declaration)')
            .refine((svg) => Buffer.byteLength(svg, 'utf8') <= MAX_ITEM_SVG_BYTES, `must be at most ${MAX_ITEM_SVG_BYTES} bytes (100 KB)`)
            .optional(),
        }),
      )
      .max(MAX_APPROVAL_ITEMS),
  })
  .superRefine((doc, ctx) => {
    const keys = doc.columns.map((column) => column.key);
    keys.forEach((key, index) => {
      if (keys.indexOf(key) !== index) {
        ctx.addIssue({ code: 'custom', path: ['columns', index, 'key'], input: key, message: `repeats column ${keys.indexOf(key)}` });
      }
    });
    doc.items.forEach((item, index) => {
      for (const key of Object.keys(item.values)) {
        if (!keys.includes(key)) {
          ctx.addIssue({
            code: 'custom',
            path: ['items', index, 'values', key],
            input: item.values[key],
            message: `is not a column (columns: ${keys.join(', ')})`,
          });
        }
      }
    });
  });
export type ApprovalItems = z.infer<typeof approvalItemsSchema>;

/** Checks that a request's items URI is under approvals/ of the pipelines bucket, the only place the Lambdas may read. */
export function checkItemsUri(uri: string, bucket: string): string {
  const { Bucket, Key } = parseS3Uri(uri, 'itemsUri');
  if (Bucket !== bucket || !Key.startsWith(APPROVAL_ITEMS_PREFIX)) {
    throw new ConfigError('itemsUri', uri, `must be under s3://${bucket}/${APPROVAL_ITEMS_PREFIX}`);
  }
  return uri;
}

/**
 * Parses the bytes of an items document. Errors name the field in the document, its value,
 * and the document's URI.
 */
export function parseApprovalItems(bytes: Uint8Array, uri: string): ApprovalItems {
  if (bytes.byteLength > MAX_ITEMS_DOCUMENT_BYTES) {
    throw new ConfigError(`items document ${uri}`, `${bytes.byteLength} bytes`, `must be at most ${MAX_ITEMS_DOCUMENT_BYTES} bytes`);
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (error) {
    throw new ConfigError(`items document ${uri}`, Buffer.from(bytes.subarray(0, 120)).toString('utf8'), `is not JSON: ${(error as Error).message}`);
  }
  const result = approvalItemsSchema.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.map(String);
  throw new ConfigError(`approval items.${path.join('.') || '(root)'}`, valueAt(json, path), `${issue.message} (in ${uri})`);
}

/** What the approval page shows of an items document, read again when the page renders. */
export type ApprovalItemsView =
  | { status: 'shown'; uri: string; document: ApprovalItems }
  /** The object is gone (deleted, or expired by a lifecycle rule). */
  | { status: 'missing'; uri: string }
  /** The object's bytes are not those the request was made with: showing them would mislead. */
  | { status: 'changed'; uri: string }
  /** It could not be read or parsed; `reason` says why (an S3 error name, or the parse error). */
  | { status: 'unreadable'; uri: string; reason: string };

/** The page's view of the bytes now at `uri` (undefined: no such object), checked against the request's sha256. */
export function approvalItemsView(uri: string, expectedSha256: string, bytes: Uint8Array | undefined): ApprovalItemsView {
  if (bytes === undefined) return { status: 'missing', uri };
  if (sha256Hex(bytes) !== expectedSha256) return { status: 'changed', uri };
  try {
    return { status: 'shown', uri, document: parseApprovalItems(bytes, uri) };
  } catch (error) {
    // Valid when requested (its hash matches), so only a later, stricter schema gets here.
    if (error instanceof ConfigError) return { status: 'unreadable', uri, reason: error.message };
    throw error;
  }
}

// ---------------------------------------------------------------------------------------
// The email

export interface ApprovalEmail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string;
}

/** A raw MIME message for SES v2's `Content.Raw.Data`. */
export async function composeMime(email: ApprovalEmail): Promise<Buffer> {
  const composer = new MailComposer({
    from: email.from,
    to: email.to,
    subject: email.subject,
    // MIME lines end in CRLF; the text is written with LF.
    text: email.text.replace(/\r?\n/g, '\r\n'),
    html: email.html.replace(/\r?\n/g, '\r\n'),
    // Fixed so that readers of the .eml files (the local outbox, tests) know how to decode it.
    textEncoding: 'quoted-printable',
  });
  return composer.compile().build();
}

// ---------------------------------------------------------------------------------------
// The decision

export const decisionFormSchema = z.object({
  decision: z.enum(['approve', 'reject']),
  csrf: z.string().min(1),
  /** The page's short code as typed (link-only mode); ignored with sign-in. */
  code: z.string().max(64).optional(),
  comment: z
    .string()
    .max(MAX_COMMENT_CHARS)
    .optional()
    .transform((value) => (value?.trim() ? value.trim() : undefined)),
});
export type DecisionForm = z.infer<typeof decisionFormSchema>;

/** Parses the POSTed form (API Gateway may hand it over base64-encoded). */
export function parseDecisionForm(body: string | undefined, isBase64Encoded: boolean): DecisionForm {
  const text = isBase64Encoded ? Buffer.from(body ?? '', 'base64').toString('utf8') : (body ?? '');
  const fields = Object.fromEntries(new URLSearchParams(text));
  const result = decisionFormSchema.safeParse(fields);
  if (result.success) return result.data;
  throw configErrorFromZod(result.error, fields, 'form');
}

export interface Decision {
  state: 'APPROVED' | 'REJECTED';
  decidedAt: string;
  decidedBy: DecidedBy;
  comment?: string;
}

export function decisionOf(form: DecisionForm, decidedBy: DecidedBy, now: Date): Decision {
  // Bounded: the browser string and the token's names are the person's to choose.
  const bounded = Object.fromEntries(Object.entries(decidedBy).map(([key, value]) => [key, String(value).slice(0, 300)])) as DecidedBy;
  return {
    state: form.decision === 'approve' ? 'APPROVED' : 'REJECTED',
    decidedAt: now.toISOString(),
    decidedBy: bounded,
    comment: form.comment,
  };
}

/** The once-only transition: the condition makes a replayed or concurrent POST fail. */
export function decisionUpdate(tableName: string, id: string, decision: Decision): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: approvalKey(id),
    ConditionExpression: '#state = :pending',
    UpdateExpression: `SET #state = :state, #decidedAt = :decidedAt, #decidedBy = :decidedBy${decision.comment === undefined ? '' : ', #comment = :comment'}`,
    ExpressionAttributeNames: {
      '#state': 'state',
      '#decidedAt': 'decidedAt',
      '#decidedBy': 'decidedBy',
      ...(decision.comment === undefined ? {} : { '#comment': 'comment' }),
    },
    ExpressionAttributeValues: {
      ':pending': 'PENDING',
      ':state': decision.state,
      ':decidedAt': decision.decidedAt,
      ':decidedBy': decision.decidedBy,
      ...(decision.comment === undefined ? {} : { ':comment': decision.comment }),
    },
  };
}

/**
 * Undoes this decision (and only this one) when Step Functions could not be told for a reason
 * that a retry may fix, so the person can press the button again.
 */
export function revertDecisionUpdate(tableName: string, id: string, decision: Decision): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: approvalKey(id),
    ConditionExpression: '#state = :state AND #decidedAt = :decidedAt',
    UpdateExpression: 'SET #state = :pending REMOVE #decidedAt, #decidedBy, #comment',
    ExpressionAttributeNames: {
      '#state': 'state',
      '#decidedAt': 'decidedAt',
      '#decidedBy': 'decidedBy',
      '#comment': 'comment',
    },
    ExpressionAttributeValues: { ':pending': 'PENDING', ':state': decision.state, ':decidedAt': decision.decidedAt },
  };
}

export type TaskResult = { kind: 'success'; input: SendTaskSuccessCommandInput } | { kind: 'failure'; input: SendTaskFailureCommandInput };

/** What Step Functions hears: the task's output on approval, ApprovalRejected otherwise. */
export function taskResultFor(token: string, id: string, decision: Decision): TaskResult {
  const summary = { approvalId: id, decidedAt: decision.decidedAt, comment: decision.comment ?? null };
  if (decision.state === 'APPROVED') {
    return { kind: 'success', input: { taskToken: token, output: JSON.stringify({ approved: true, ...summary }) } };
  }
  return {
    kind: 'failure',
    input: { taskToken: token, error: APPROVAL_REJECTED, cause: JSON.stringify({ approved: false, ...summary }) },
  };
}

/** SendTask* errors meaning the run stopped waiting (timed out, stopped, or long gone). */
export const NO_LONGER_WAITING_ERRORS: readonly string[] = ['TaskTimedOut', 'InvalidToken', 'TaskDoesNotExist'];

// ---------------------------------------------------------------------------------------
// Small helpers

/** Checks the signing secret without ever putting its value in a message. */
export function signingKeyFromSecret(secretString: string | undefined): string {
  if (secretString === undefined || secretString.length < 16) {
    throw new ConfigError(
      'SecretString',
      secretString === undefined ? undefined : `${secretString.length} characters`,
      'the signing secret must be a string of at least 16 characters',
    );
  }
  return secretString;
}

/** Caches a value for the life of the container; a failed load is retried on the next call. */
export function memoizeAsync<T>(load: () => Promise<T>): () => Promise<T> {
  let cached: Promise<T> | undefined;
  return () => {
    cached ??= load().catch((error: unknown) => {
      cached = undefined;
      throw error;
    });
    return cached;
  };
}

/** Like parseOrThrow in schema.ts, but a bad task token is named and never shown. */
function configErrorFromZod(error: z.ZodError, input: unknown, what: string): ConfigError {
  const issue = error.issues[0]!;
  const path = issue.path.map(String);
  const value = path[0] === 'taskToken' ? '(not shown)' : valueAt(input, path);
  return new ConfigError(`${what}.${path.join('.') || '(root)'}`, value, issue.message);
}
