/**
 * The single DynamoDB table: partition key `pk`, sort key `sk`, TTL attribute `expiresAt`
 * (epoch seconds). Keys are prefixed by kind so one table holds every kind of item.
 *
 *   CACHE#<pipeline>#<step>   / <cache key>          a cached step's output (each pipeline's steps apart)
 *   CACHE#<pipeline>#run      / <run key>            a run's output, for a rerun of its config (run-cache.ts)
 *   ARTIFACT#<name>           / V#<000000000001>     an artifact version (immutable)
 *   ARTIFACT#<name>           / COUNTER              the version counter
 *   ARTIFACTS                 / <name>               the artifact-name directory
 *   APPROVAL#<id>             / APPROVAL             an approval request
 *   EVENT#<bucket>#<key>#<u>  / EVENT                the trigger ledger: one item per upload (its version id,
 *                                                    else its event's sequencer), for exactly-once starts
 *   BENCHMARKS                / <name>               a benchmark's current entry (the registry)
 *   BENCHMARK#<name>          / V#<000001>           every version a benchmark had
 *   EVAL#<run>                / <step>#<benchmark>   a checkpoint's latest result on a benchmark
 *   ORACLE#<version>          / <canonical SMILES>   a molecule's oracle result (xTB settings + code)
 */
export const TABLE_KEYS = { partitionKey: 'pk', sortKey: 'sk', ttlAttribute: 'expiresAt' } as const;

/** An item's attributes without its table keys. */
export function withoutKeys(item: Record<string, unknown>): Record<string, unknown> {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return rest;
}

/**
 * The partition of one pipeline's cached step: two pipelines may each have a step of the same name
 * (selfplay's and lm-sft's `train`), whose entries, code versions and `cache explain` stay apart.
 */
/** The run cache's step id (shared/run-cache.ts): its states are `run: <state>`, its entries `CACHE#<pipeline>#run`. No step may take it. */
export const RUN_STEP = 'run';
/** The config check's step id: the first step of every run, made again by a run cache hit. */
export const CONFIG_STEP = 'config';

export const cachePartition = (pipeline: string, step: string) => `CACHE#${pipeline}#${step}`;
export const cacheKeyOf = (pipeline: string, step: string, key: string) => ({ pk: cachePartition(pipeline, step), sk: key });
export const artifactVersionKey = (name: string, version: number) => ({
  pk: `ARTIFACT#${name}`,
  sk: `V#${String(version).padStart(12, '0')}`,
});
export const artifactCounterKey = (name: string) => ({ pk: `ARTIFACT#${name}`, sk: 'COUNTER' });
export const artifactDirectoryKey = (name: string) => ({ pk: 'ARTIFACTS', sk: name });
export const approvalKey = (id: string) => ({ pk: `APPROVAL#${id}`, sk: 'APPROVAL' });
export const benchmarkKey = (name: string) => ({ pk: 'BENCHMARKS', sk: name });
export const benchmarkVersionKey = (name: string, version: number) => ({ pk: `BENCHMARK#${name}`, sk: `V#${String(version).padStart(6, '0')}` });
export const evalResultKey = (run: string, step: number, benchmark: string) => ({
  pk: `EVAL#${run}`,
  sk: `${String(step).padStart(12, '0')}#${benchmark}`,
});
export const oracleKey = (version: string, smiles: string) => ({ pk: `ORACLE#${version}`, sk: smiles });
export const eventKey = (bucket: string, key: string, upload: string) => ({
  pk: `EVENT#${bucket}#${key}#${upload}`,
  sk: 'EVENT',
});
