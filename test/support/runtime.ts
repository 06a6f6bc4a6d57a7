/**
 * Helpers for end-to-end tests on the embedded runtime: a runtime in a fresh data directory,
 * waiting for an email and reading it as a mail client would (MIME parts, quoted-printable),
 * polling for a condition, and recording what the process writes to stdout and stderr.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRuntime, type RuntimeOptions } from '#infra/local/runtime.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';

export { captureOutput, logLines, type LogLine, type OutputCapture } from './output.ts';

/** Starts a runtime in a new temporary data directory; retries wait 1 ms so failures are quick. */
export async function startTestRuntime(options: Omit<RuntimeOptions, 'dataDir'> = {}): Promise<LocalRuntime> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fp-test-'));
  try {
    return await LocalRuntime.start({ retryDelayMs: 1, ...options, dataDir });
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/** Stops the runtime and deletes its data directory (kept when KEEP_TEST_DATA is set, to debug). */
export async function stopTestRuntime(runtime: LocalRuntime | undefined): Promise<void> {
  if (!runtime) return;
  await runtime.stop();
  if (!process.env.KEEP_TEST_DATA) rmSync(runtime.dataDir, { recursive: true, force: true });
}

/** Rejects after `ms` with a message naming what was awaited, so a hang fails clearly. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `probe` until it returns something other than undefined/false. */
export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The path of the next .eml the runtime writes to its outbox. Call it before the action that sends. */
export function nextEmail(runtime: LocalRuntime, timeoutMs = 30_000): Promise<string> {
  return within(new Promise<string>((resolve) => runtime.once('email', ({ file }: { file: string }) => resolve(file))), timeoutMs, 'an email in the outbox');
}

/**
 * The path of the next .eml the runtime writes, or undefined once `done` settles first. Leaves no
 * listener or timer behind, so a test process exits as soon as its work is done.
 */
export function nextEmailOrEnd(runtime: LocalRuntime, done: Promise<unknown>): Promise<string | undefined> {
  return new Promise((resolve) => {
    const onEmail = ({ file }: { file: string }) => {
      runtime.off('email', onEmail);
      resolve(file);
    };
    runtime.on('email', onEmail);
    void done.finally(() => {
      runtime.off('email', onEmail);
      resolve(undefined);
    });
  });
}

export interface ParsedEmail {
  /** Header names lower-cased, folded lines unfolded. */
  readonly headers: Record<string, string>;
  /** The file as written, still encoded. */
  readonly raw: string;
  /** The decoded text/plain part ('' when absent). */
  readonly text: string;
  /** The decoded text/html part ('' when absent). */
  readonly html: string;
}

/** Quoted-printable (RFC 2045): `=` at a line end is a soft break, `=XX` a byte. */
export function decodeQuotedPrintable(body: string): string {
  const joined = body.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < joined.length; i++) {
    const hex = joined.slice(i + 1, i + 3);
    if (joined[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(joined[i]!, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

function splitEntity(entity: string): { headers: Record<string, string>; body: string } {
  const at = entity.search(/\r?\n\r?\n/);
  const head = at < 0 ? entity : entity.slice(0, at);
  const body = at < 0 ? '' : entity.slice(at).replace(/^\r?\n\r?\n/, '');
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { headers, body };
}

function decodeBody(headers: Record<string, string>, body: string): string {
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase();
  if (encoding === 'quoted-printable') return decodeQuotedPrintable(body);
  if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return body;
}

/** Reads an .eml: a single part or one level of multipart (what the approval email is). */
export function readEml(file: string): ParsedEmail {
  const raw = readFileSync(file, 'utf8');
  const { headers, body } = splitEntity(raw);
  const type = headers['content-type'] ?? 'text/plain';
  const parts: { type: string; content: string }[] = [];
  const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1];
  if (type.toLowerCase().startsWith('multipart/') && boundary) {
    const sections = body.split(`--${boundary}`).slice(1);
    for (const section of sections) {
      if (section.startsWith('--')) break; // the closing delimiter
      const part = splitEntity(section.replace(/^\r?\n/, ''));
      parts.push({ type: part.headers['content-type'] ?? 'text/plain', content: decodeBody(part.headers, part.body.replace(/\r?\n$/, '')) });
    }
  } else {
    parts.push({ type, content: decodeBody(headers, body) });
  }
  const part = (mime: string) => parts.find((p) => p.type.toLowerCase().startsWith(mime))?.content ?? '';
  return { headers, raw, text: part('text/plain'), html: part('text/html') };
}

/** The approval link in a decoded text: `<base>/approvals/<id>?exp=<n>&sig=<s>`. */
export function approvalLinkIn(text: string): string {
  const match = /https?:\/\/[^\s"<>]+\/approvals\/[A-Za-z0-9_-]+\?exp=\d+&sig=[A-Za-z0-9_-]+/.exec(text);
  if (!match) throw new Error(`no approval link in:\n${text}`);
  return match[0];
}

/** The probe pipeline's input; every field given, so the config is what the test says. */
export function probeInput(overrides: Record<string, unknown> = {}): { config: Record<string, unknown> } {
  // Through the schema, as the CLI does: defaults filled in for every field.
  return { config: ProbeConfig.parse({ items: [1, 2, 3], label: 'test', ...overrides }) };
}
