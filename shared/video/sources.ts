/**
 * Source lists: every entry checked on its own, so one bad entry is refused with its reason and
 * the others proceed. An entry needs an id, a video URI (s3:// or https://) and a complete
 * licence record that allows adaptations (licence.ts); anything else is refused before any
 * video is fetched.
 */
import { MAX_SOURCES } from '#pipelines/video/config.ts';
import { ConfigError } from '#shared/errors.ts';
import { checkLicence, type LicenceRecord } from './licence.ts';

export const SOURCE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
const MAX_URI_CHARS = 1_024;

export interface AcceptedSource {
  readonly index: number;
  readonly id: string;
  readonly uri: string;
  readonly record: LicenceRecord;
  /** Known when the source is content-addressed already (the local generator's videos). */
  readonly sha256?: string;
}

export interface RefusedSource {
  readonly index: number;
  /** The entry's id, or `#<index>` when it has no usable one. */
  readonly id: string;
  readonly field: string;
  readonly reason: string;
}

export interface CheckedSources {
  readonly accepted: readonly AcceptedSource[];
  readonly refused: readonly RefusedSource[];
}

const SHA256 = /^[0-9a-f]{64}$/;

/** Checks a parsed source list (a JSON array). The list itself must be an array of at most MAX_SOURCES. */
export function checkSources(list: unknown, field = 'sources'): CheckedSources {
  if (!Array.isArray(list)) throw new ConfigError(field, typeof list, 'must be a JSON array of sources');
  if (list.length === 0) throw new ConfigError(field, 0, 'must list at least one source');
  if (list.length > MAX_SOURCES) throw new ConfigError(field, list.length, `lists more than the ${MAX_SOURCES} sources a run takes`);
  const accepted: AcceptedSource[] = [];
  const refused: RefusedSource[] = [];
  const ids = new Set<string>();
  for (const [index, entry] of (list as unknown[]).entries()) {
    const at = `${field}[${index}]`;
    const refuse = (id: string, where: string, reason: string) => {
      refused.push({ index, id, field: where, reason });
    };
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      refuse(`#${index}`, at, 'must be an object {id, uri, title, author, licence, deedUrl, sourceUrl}');
      continue;
    }
    const e = entry as Record<string, unknown>;
    if (typeof e.id !== 'string' || !SOURCE_ID.test(e.id)) {
      refuse(`#${index}`, `${at}.id`, `${JSON.stringify(e.id ?? null)} must be 1-63 lowercase letters, digits or "-"`);
      continue;
    }
    if (ids.has(e.id)) {
      refuse(e.id, `${at}.id`, `"${e.id}" appears twice: every source needs its own id`);
      continue;
    }
    ids.add(e.id);
    if (typeof e.uri !== 'string' || e.uri.length > MAX_URI_CHARS || !/^(s3:\/\/[^/\s]+\/\S+|https:\/\/\S+)$/.test(e.uri)) {
      refuse(e.id, `${at}.uri`, `${JSON.stringify(e.uri ?? null)} must be an s3:// or https:// URI of at most ${MAX_URI_CHARS} characters`);
      continue;
    }
    if (e.sha256 !== undefined && (typeof e.sha256 !== 'string' || !SHA256.test(e.sha256))) {
      refuse(e.id, `${at}.sha256`, `${JSON.stringify(e.sha256)} must be 64 lowercase hex digits`);
      continue;
    }
    const licence = checkLicence(e as Record<string, unknown>, at);
    if (!licence.ok) {
      refuse(e.id, licence.field, licence.reason);
      continue;
    }
    accepted.push({ index, id: e.id, uri: e.uri, record: licence.record, ...(typeof e.sha256 === 'string' ? { sha256: e.sha256 } : {}) });
  }
  return { accepted, refused };
}
