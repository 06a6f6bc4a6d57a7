/**
 * Licence records and the attribution a published clip needs.
 *
 * Every source carries a record: title, author, licence (an SPDX id), the licence deed's URL and
 * the source's URL. A source whose record is missing a field, or whose licence does not allow
 * adaptations (cutting a film into clips is one), is refused before anything is fetched: no
 * attribution, no publication. The others proceed.
 *
 * ATTRIBUTION.txt follows CC BY 4.0 section 3(a)(1) and the TASL practice (title, author,
 * source, licence) for each source that has a kept clip: the creator credit, a link to the
 * material, the licence's name and deed link, the disclaimer notice, and what was changed.
 */
export const LICENCE_FIELDS = ['title', 'author', 'licence', 'deedUrl', 'sourceUrl'] as const;
export type LicenceField = (typeof LICENCE_FIELDS)[number];

export interface LicenceRecord {
  readonly title: string;
  readonly author: string;
  /** An SPDX id, e.g. CC-BY-4.0. */
  readonly licence: string;
  readonly deedUrl: string;
  readonly sourceUrl: string;
}

/** Licences that allow adaptations and redistribution, by SPDX id, with their names. */
export const ALLOWED_LICENCES: Readonly<Record<string, { name: string; shareAlike: boolean; attribution: boolean }>> = {
  'CC0-1.0': { name: 'CC0 1.0 Universal', shareAlike: false, attribution: false },
  'CC-BY-2.0': { name: 'Creative Commons Attribution 2.0 Generic', shareAlike: false, attribution: true },
  'CC-BY-2.5': { name: 'Creative Commons Attribution 2.5 Generic', shareAlike: false, attribution: true },
  'CC-BY-3.0': { name: 'Creative Commons Attribution 3.0 Unported', shareAlike: false, attribution: true },
  'CC-BY-4.0': { name: 'Creative Commons Attribution 4.0 International', shareAlike: false, attribution: true },
  'CC-BY-SA-3.0': { name: 'Creative Commons Attribution-ShareAlike 3.0 Unported', shareAlike: true, attribution: true },
  'CC-BY-SA-4.0': { name: 'Creative Commons Attribution-ShareAlike 4.0 International', shareAlike: true, attribution: true },
};

export type LicenceCheck = { readonly ok: true; readonly record: LicenceRecord } | { readonly ok: false; readonly field: string; readonly reason: string };

const URL_FIELDS: readonly LicenceField[] = ['deedUrl', 'sourceUrl'];

/**
 * Whether a source's licence record is complete and its licence allows publishing clips.
 * `prefix` names the source in the field (e.g. `sources[3]`).
 */
export function checkLicence(record: Partial<Record<LicenceField, unknown>> | null | undefined, prefix: string): LicenceCheck {
  if (!record || typeof record !== 'object') {
    return { ok: false, field: `${prefix}.licence`, reason: 'no licence record: a clip cannot be attributed, so none is published' };
  }
  const missing = LICENCE_FIELDS.filter((f) => typeof record[f] !== 'string' || !(record[f] as string).trim());
  if (missing.length) {
    return {
      ok: false,
      field: `${prefix}.${missing[0]}`,
      reason: `the licence record lacks ${missing.join(', ')}: a clip cannot be attributed, so none is published`,
    };
  }
  for (const field of URL_FIELDS) {
    const value = record[field] as string;
    if (!/^(https?|s3):\/\/\S+$/.test(value)) return { ok: false, field: `${prefix}.${field}`, reason: `${JSON.stringify(value)} is not a link` };
  }
  const licence = (record.licence as string).trim();
  if (!ALLOWED_LICENCES[licence]) {
    const why = /-ND\b|-ND-/.test(licence)
      ? 'forbids adaptations, and cutting a video into clips is one'
      : `is not one the pipeline publishes (${Object.keys(ALLOWED_LICENCES).join(', ')})`;
    return { ok: false, field: `${prefix}.licence`, reason: `${JSON.stringify(licence)} ${why}` };
  }
  return {
    ok: true,
    record: {
      title: (record.title as string).trim(),
      author: (record.author as string).trim(),
      licence,
      deedUrl: (record.deedUrl as string).trim(),
      sourceUrl: (record.sourceUrl as string).trim(),
    },
  };
}

export interface AttributedSource {
  readonly id: string;
  readonly record: LicenceRecord;
  /** Kept clips of this source, with their spans in the source (seconds). */
  readonly clips: readonly { readonly id: string; readonly start: number; readonly end: number }[];
}

const span = (s: number) => {
  const m = Math.floor(s / 60);
  return `${m}:${(s - m * 60).toFixed(2).padStart(5, '0')}`;
};

/** What was done to every source's material, as the attribution states it. */
export function changesMade(height: number): string {
  return (
    `cut into clips at detected scene changes (the spans below), re-encoded to H.264 at ${height} pixels high ` +
    'without audio, and frames of each clip resized into key-frame images and a contact sheet (a grid of frames)'
  );
}

/** ATTRIBUTION.txt for the published clips: one block per source with a kept clip. */
export function attributionText(sources: readonly AttributedSource[], height: number): string {
  const lines = [
    'Attribution for the clips in this dataset',
    '',
    'Each clip is an adaptation of the work named in its block. The clips of a work are offered',
    "under that work's licence. The licensors do not endorse this dataset or its use.",
    '',
  ];
  for (const source of sources.filter((s) => s.clips.length > 0)) {
    const licence = ALLOWED_LICENCES[source.record.licence];
    if (!licence) throw new Error(`sources.${source.id}.licence: ${source.record.licence} was not checked before attribution`);
    lines.push(
      `== ${source.record.title} ==`,
      `Title: ${source.record.title}`,
      `Author: ${source.record.author}`,
      `Source: ${source.record.sourceUrl}`,
      `Licence: ${licence.name} (${source.record.licence}), ${source.record.deedUrl}`,
      `Changes: ${changesMade(height)}.`,
      'Disclaimer: the work is provided as-is; see the licence for the disclaimer of warranties and limitation of liability.',
      `Clips (${source.clips.length}):`,
      ...source.clips.map((c) => `  ${c.id}.mp4: ${span(c.start)}-${span(c.end)}`),
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}
