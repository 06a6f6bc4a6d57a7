/** SES v2 SendEmail, written to the outbox as an .eml file instead of sent. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

interface SendEmailBody {
  FromEmailAddress?: string;
  Destination?: { ToAddresses?: string[] };
  Content?: {
    Raw?: { Data?: string };
    Simple?: { Subject?: { Data?: string }; Body?: { Text?: { Data?: string }; Html?: { Data?: string } } };
  };
}

export function writeEml(outboxDir: string, body: Record<string, unknown>): string {
  const email = body as SendEmailBody;
  mkdirSync(outboxDir, { recursive: true });
  const id = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomUUID().slice(0, 8)}`;
  let mime: string;
  if (email.Content?.Raw?.Data) {
    // The SDK sends raw MIME base64-encoded in the JSON body.
    mime = Buffer.from(email.Content.Raw.Data, 'base64').toString('utf8');
  } else {
    const simple = email.Content?.Simple;
    const html = simple?.Body?.Html?.Data;
    mime = [
      `From: ${email.FromEmailAddress ?? ''}`,
      `To: ${(email.Destination?.ToAddresses ?? []).join(', ')}`,
      `Subject: ${simple?.Subject?.Data ?? ''}`,
      'MIME-Version: 1.0',
      `Content-Type: ${html ? 'text/html' : 'text/plain'}; charset=utf-8`,
      '',
      html ?? simple?.Body?.Text?.Data ?? '',
    ].join('\r\n');
  }
  const file = join(outboxDir, `${id}.eml`);
  writeFileSync(file, mime);
  return file;
}

/** The approval links in an .eml file (quoted-printable decoded). */
export function linksInEml(mime: string): string[] {
  const decoded = Buffer.from(
    mime.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  ).toString('utf8');
  // Each once: the HTML part writes the link's `&` as `&amp;`, the text part as it is.
  return [...new Set((decoded.match(/https?:\/\/[^\s"'<>]+\/approvals\/[^\s"'<>]+/g) ?? []).map((l) => l.replace(/&amp;/g, '&')))];
}
