/**
 * `frontier cache explain`: why a cached step will miss. For each cached step of the pipeline:
 * does today's code version match the latest entry's (and if not, which files changed), and which
 * input fields differ between the latest two entries. Entries are read from the pipeline's own
 * partition of the step (`CACHE#<pipeline>#<step>`, as the state machine writes them), so another
 * pipeline's step of the same name is never compared.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { diffCodeVersions } from '#pipelines/steps/code-version.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { ConfigError } from '#shared/errors.ts';
import { cachePartition } from '#shared/table.ts';
import type { LocalRuntime } from '../local/runtime.ts';
import type { Io } from './output.ts';

interface CacheEntry {
  codeVersion: string;
  inputs: string;
  createdAt: string;
  executionId: string;
}

export async function explainCache(runtime: LocalRuntime, pipeline: string, onlyStep: string | undefined, io: Io): Promise<void> {
  const steps = runtime.cachedSteps(pipeline);
  const chosen = onlyStep ? steps.filter((s) => s.step === onlyStep) : steps;
  if (onlyStep && !chosen.length) {
    throw new ConfigError('step', onlyStep, `is not a cached step of ${pipeline}; cached steps: ${steps.map((s) => s.step).join(', ')}`);
  }
  for (const { step, codeVersion } of chosen) {
    const entries = await cacheEntries(runtime.resources.tables[0]!, cachePartition(pipeline, step));
    io.out(`${step}`);
    if (!entries.length) {
      io.out('  no cache entries: the next run computes it');
      continue;
    }
    const [latest, previous] = entries as [CacheEntry, CacheEntry | undefined];
    io.out(`  ${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}; latest from ${latest.createdAt}`);
    if (latest.codeVersion === codeVersion) {
      io.out(`  code version: unchanged (${short(codeVersion)})`);
    } else {
      io.out(`  code version: CHANGED ${short(latest.codeVersion)} -> ${short(codeVersion)}: every entry of this step misses`);
      for (const line of describeCodeChange(runtime.dataDir, latest.codeVersion, codeVersion)) io.out(`    ${line}`);
    }
    if (previous) {
      const changed = diffJson(JSON.parse(previous.inputs), JSON.parse(latest.inputs));
      io.out(changed.length ? `  inputs: the latest two entries differ at ${changed.join(', ')}` : '  inputs: the latest two entries have equal inputs');
    }
  }
}

async function cacheEntries(table: string, partition: string): Promise<CacheEntry[]> {
  const items: CacheEntry[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await dynamoClient().send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': partition },
        ProjectionExpression: 'codeVersion, inputs, createdAt, executionId',
        ExclusiveStartKey: start,
      }),
    );
    items.push(...((page.Items ?? []) as CacheEntry[]));
    start = page.LastEvaluatedKey;
  } while (start);
  return items.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
}

function short(version: string): string {
  const [hash, salt] = version.split('+');
  return `${hash!.slice(0, 12)}${salt ? `+${salt}` : ''}`;
}

function describeCodeChange(dataDir: string, before: string, after: string): string[] {
  const [beforeHash, beforeSalt] = before.split('+');
  const [afterHash, afterSalt] = after.split('+');
  const lines: string[] = [];
  if (beforeSalt !== afterSalt) lines.push(`salt: ${beforeSalt ?? '(none)'} -> ${afterSalt ?? '(none)'}`);
  const load = (hash: string) => {
    const file = join(dataDir, 'code-versions', `${hash}.json`);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>) : undefined;
  };
  const a = load(beforeHash!);
  const b = load(afterHash!);
  if (beforeHash === afterHash) return lines;
  if (!a || !b) return [...lines, 'the files of the older version are not recorded here (it was synthesized elsewhere)'];
  const diff = diffCodeVersions(a, b);
  for (const f of diff.changed) lines.push(`changed: ${f}`);
  for (const f of diff.added) lines.push(`added:   ${f}`);
  for (const f of diff.removed) lines.push(`removed: ${f}`);
  return lines;
}

/** JSONPath-like locations where two values differ. */
export function diffJson(a: unknown, b: unknown, path = '$'): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    const out: string[] = [];
    for (const k of keys) {
      const sub = Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`;
      out.push(...diffJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], sub));
    }
    return out;
  }
  return [path];
}
