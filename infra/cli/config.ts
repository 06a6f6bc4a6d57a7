/** Which pipeline a command means, and the config it runs with, checked against its schema. */
import { existsSync, readFileSync } from 'node:fs';
import { ConfigError, UnknownPipelineError } from '#shared/errors.ts';
import { sortKeys } from '#shared/json.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { PIPELINES, type PipelineEntry } from '../registry.ts';

export function pipelineNamed(name: string | undefined): PipelineEntry {
  const entry = name === undefined ? PIPELINES[0] : PIPELINES.find((p) => p.name === name);
  if (!entry)
    throw new UnknownPipelineError(
      String(name),
      PIPELINES.map((p) => p.name),
    );
  return entry;
}

export interface ConfigChoice {
  /** Full-size config rather than smoke. */
  readonly full?: boolean;
  /** A named size of the pipeline (`sizes`), e.g. test, smoke, local, full. */
  readonly size?: string;
  /** A JSON file, or inline JSON, merged over the chosen size. */
  readonly config?: string;
}

/**
 * The execution input's config: the chosen size, overlaid with the user's JSON, parsed by the
 * pipeline's schema (defaults filled in), keys sorted so equal configs give equal cache keys.
 */
export function resolveConfig(entry: PipelineEntry, choice: ConfigChoice): Record<string, unknown> {
  let base = choice.full ? (entry.full ?? entry.smoke) : entry.smoke;
  if (choice.size !== undefined) {
    const sizes: Record<string, Record<string, unknown>> = { smoke: entry.smoke, ...(entry.full ? { full: entry.full } : {}), ...entry.sizes };
    const named = sizes[choice.size];
    if (!named) throw new ConfigError('--size', choice.size, `is not a size of ${entry.name} (sizes: ${Object.keys(sizes).join(', ')})`);
    base = named;
  }
  let overlay: unknown = {};
  if (choice.config !== undefined) {
    const text = existsSync(choice.config) ? readFileSync(choice.config, 'utf8') : choice.config;
    try {
      overlay = JSON.parse(text);
    } catch (error) {
      throw new ConfigError('--config', choice.config, `is neither a JSON file nor JSON text (${(error as Error).message})`);
    }
    if (!overlay || typeof overlay !== 'object' || Array.isArray(overlay)) {
      throw new ConfigError('--config', overlay, 'must be a JSON object');
    }
  }
  const parsed = parseOrThrow(entry.config, { ...base, ...(overlay as object) }, 'config');
  return sortKeys(parsed) as Record<string, unknown>;
}
