/**
 * Refine a pretraining corpus: filters, dedup and decontamination on a fan-out; LLM labels
 * distilled into a cheap classifier.
 *
 * 1. prepare (Lambda): the corpus exists (an s3:// corpus's ETag keys the cache); the benchmarks
 *    of the evals registry (and the config's extra sets) in one content-addressed file.
 * 2. ingest (Batch CPU job, cached by the corpus and its settings): the corpus read (`debian:`,
 *    JSONL or Parquet in S3, hf:// on AWS), sampled, mixed with labelled test material, split into
 *    content-addressed JSONL shards; the shard list goes to S3, only its key and counts to the state.
 * 3. filter (Distributed Map over the shard list; per shard a cached Lambda keyed by the shard's
 *    hash, the filter settings, the benchmarks and the code): the filters, decontamination and
 *    the survivors' MinHash signatures.
 * 4. dedup (cached Lambda): every shard's band keys, and the full signatures of candidates only;
 *    never text.
 * 5. label (cached Lambda): a stratified sample of the survivors labelled 0-5 by Claude (or a
 *    labels file), concurrently, with retries.
 * 6. train (Batch CPU job, cached by the labels): a hashed n-gram classifier exported as ONNX.
 * 7. score (Distributed Map; per shard a cached Lambda with onnxruntime-node keyed by the shard
 *    and the model): every filtered document scored.
 * 8. curate (cached Lambda keyed by the dedup result, the model and the threshold): the documents
 *    at or above the threshold, in content-addressed shards with a manifest.
 * 9. report and publish: the artifact `refined-corpus` (manifest, report) with lineage.
 * A new threshold reruns steps 8 and 9 only: every other step is a cache hit.
 */
import { Duration, Size } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ENV } from '#shared/env.ts';
import { BatchJob, distributedFanOut, documentFunction, invoke, PipelineStack, type PipelineStackProps, runJob, step } from '#pipelines/steps/index.ts';
import { RefineryConfig } from './config.ts';

export const REFINERY_PIPELINE = 'refinery';
export const REFINED_CORPUS_ARTIFACT = 'refined-corpus';

export type RefineryStackProps = PipelineStackProps;

const SHA = 66;
const URI = 1200;

export class RefineryStack extends PipelineStack {
  readonly ingestJob: BatchJob;
  readonly classifierJob: BatchJob;

  constructor(scope: Construct, id: string, props: RefineryStackProps) {
    super(scope, id, REFINERY_PIPELINE, props, RefineryConfig);
    const { resources, steps, cache } = this;
    const { bucket, table } = resources;
    this.bounds
      .chars('$.prep.corpusIdentity', URI, "the corpus's identity: its URI (at most 1,100 characters), or an s3 ETag and size")
      .chars('$.prep.benchmarksSha256', SHA, "the sha256 of the benchmarks file, or 'none'")
      .chars('$.prep.filtersSha256', SHA, 'the sha256 of the parsed filter settings')
      .chars('$.prep.benchmarkCount', 24, 'how many benchmarks (and extra sets) prepare found, an integer')
      .chars('$.item', URI + 200, 'a shard item the ingest job or dedup wrote: its content-addressed URI under data/refinery/, its sha256 and two counts')
      .chars('$.filtersSha256', SHA, 'the sha256 of the parsed filter settings')
      .chars('$.benchmarksSha256', SHA, "the sha256 of the benchmarks file, or 'none'")
      .chars('$.ngram', 24, 'config.decontamination.ngram, an integer from 1 to 50')
      .chars('$.maxChars', 24, 'config.labels.maxChars, an integer from 100 to 20,000')
      .chars('$.indexPrompt', 8, 'config.decontamination.indexPrompt, true or false')
      .chars('$.modelSha256', SHA, "the classifier's sha256, 64 hex digits")
      .chars('$.settings', 100, "the classifier's feature settings from the train job: {buckets, maxTokens}, two integers")
      .chars('$.steps.ingest.itemsSha256', SHA, "the sha256 of the ingest job's shard list")
      .chars('$.steps.dedup.dedupUri', URI, "the dedup document's content-addressed URI under data/refinery/dedup/")
      .chars('$.steps.label.labelsSha256', SHA, 'the sha256 of the labels file')
      .chars('$.steps.train.modelSha256', SHA, "the classifier's sha256, 64 hex digits")
      .chars('$.steps.curate.manifestUri', URI, "the refined corpus manifest's content-addressed URI under data/refinery/")
      .chars('$.steps.label.summaryUri', URI, "the label step's summary, a content-addressed URI under data/refinery/")
      .chars('$.steps.train.metricsUri', URI, "the classifier's metrics, a URI under runs/refinery/")
      .chars('$.steps.ingest.reportUri', URI, "the ingest report's URI under runs/refinery/")
      .chars('$.steps.ingest.truthUri', URI, "the injected material's truth file, a URI under runs/refinery/");

    const env = { ...this.functionEnv, [ENV.table]: table.tableName };
    const data = `data/${REFINERY_PIPELINE}/*`;
    const fn = (
      fnId: string,
      entry: string,
      description: string,
      memorySize: number,
      timeout: Duration,
      extra: { onnxRuntime?: boolean; languageModel?: boolean } = {},
    ) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: env,
        memorySize,
        timeout,
        ...extra,
        logRetention: resources.logRetention,
        bucket,
        readsWhy:
          'Reads the corpus a run names (any key of the pipeline bucket, given at run time), shards and documents under data/refinery/, and job and map-run results under runs/refinery/.',
        writes: [
          { prefix: data, why: 'Writes content-addressed shards, signatures and documents (named by the sha256 of their bytes) under data/refinery/ only.' },
        ],
      });
    const prepareFn = fn('Prepare', 'prepare', 'Checks the corpus exists and gathers the benchmarks to decontaminate against', 512, Duration.minutes(2));
    table.grantReadData(prepareFn);
    // The language rule reads fastText's lid.176 model from beside the bundle.
    const filterFn = fn('Filter', 'filter', "One shard's filters, decontamination and MinHash signatures", 2048, Duration.minutes(10), {
      languageModel: true,
    });
    const dedupFn = fn('Dedup', 'dedup', 'Global dedup over every shard’s signatures (no text read)', 3008, Duration.minutes(15));
    const labelFn = fn('Label', 'label', 'Labels a stratified sample of the survivors with Claude, or reads a labels file', 1024, Duration.minutes(15));
    resources.anthropicSecret.grantRead(labelFn);
    labelFn.addEnvironment(ENV.anthropicSecretArn, resources.anthropicSecret.secretArn);
    const scoreFn = fn('Score', 'score', "Scores one shard's documents with the classifier (onnxruntime-node)", 1024, Duration.minutes(10), {
      onnxRuntime: true,
    });
    const curateFn = fn(
      'Curate',
      'curate',
      'Keeps the documents at or above the threshold; writes the refined shards and manifest',
      2048,
      Duration.minutes(15),
    );
    const reportFn = fn('Report', 'report', 'Writes the refinery report (funnel, rules, dedup, labels, classifier, cost, timings)', 2048, Duration.minutes(10));

    // 16 GiB: the full size samples 300,000 rows of a FineWeb file held in memory (about a
    // million rows of ~3 KB, twice that as JavaScript strings); Fargate's largest for 2 vCPUs.
    this.ingestJob = new BatchJob(this, 'Ingest', {
      job: 'refinery-ingest',
      entry: 'main.ts',
      vcpus: 2,
      memory: Size.gibibytes(16),
      timeout: Duration.hours(4),
      resources,
    });
    this.classifierJob = new BatchJob(this, 'Classifier', { job: 'refinery-classifier', vcpus: 2, timeout: Duration.hours(2), resources });

    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: {
        'corpus.$': '$.config.corpus',
        'benchmarks.$': '$.config.decontamination.benchmarks',
        'extra.$': '$.config.decontamination.extra',
        'filters.$': '$.config.filters',
      },
      resultPath: '$.prep',
    });
    const ingest = step(this, 'ingest', {
      run: runJob(this.ingestJob, steps, {
        payload: {
          'corpus.$': '{inputs}.corpus',
          'sample.$': '{inputs}.sample',
          'seed.$': '{inputs}.seed',
          'inject.$': '{inputs}.inject',
          'shardDocuments.$': '{inputs}.shardDocuments',
          'maxDocumentBytes.$': '{inputs}.maxDocumentBytes',
          'benchmarksUri.$': '$.prep.benchmarksUri',
          shardPrefix: `s3://${bucket.bucketName}/data/${REFINERY_PIPELINE}/shards/`,
        },
      }),
      inputs: {
        'corpus.$': '$.config.corpus',
        'corpusIdentity.$': '$.prep.corpusIdentity',
        'sample.$': '$.config.sample',
        'seed.$': '$.config.seed',
        'inject.$': '$.config.inject',
        'shardDocuments.$': '$.config.shardDocuments',
        'maxDocumentBytes.$': '$.config.maxDocumentBytes',
        'benchmarksSha256.$': '$.prep.benchmarksSha256',
      },
      resultPath: '$.steps.ingest',
      cache,
    });
    const filter = distributedFanOut(this, 'filter', {
      scope: steps,
      itemsKeyPath: '$.steps.ingest.itemsKey',
      itemSelector: {
        'item.$': '$$.Map.Item.Value',
        'filters.$': '$.config.filters',
        'filtersSha256.$': '$.prep.filtersSha256',
        'ngram.$': '$.config.decontamination.ngram',
        'indexPrompt.$': '$.config.decontamination.indexPrompt',
        'benchmarksUri.$': '$.prep.benchmarksUri',
        'benchmarksSha256.$': '$.prep.benchmarksSha256',
      },
      iterator: (s) =>
        step(s, 'filter-shard', {
          // The settings themselves travel beside the key, which holds their hashes.
          run: invoke(filterFn, {
            payload: {
              'shard.$': '{inputs}.shard',
              'filters.$': '$.filters',
              'ngram.$': '$.ngram',
              'indexPrompt.$': '$.indexPrompt',
              'benchmarksUri.$': '$.benchmarksUri',
            },
          }),
          inputs: {
            shard: { 'uri.$': '$.item.uri', 'sha256.$': '$.item.sha256', 'documents.$': '$.item.documents', 'bytes.$': '$.item.bytes' },
            'filtersSha256.$': '$.filtersSha256',
            decontamination: { 'ngram.$': '$.ngram', 'indexPrompt.$': '$.indexPrompt', 'benchmarksSha256.$': '$.benchmarksSha256' },
          },
          resultPath: '$.result',
          cache,
        }),
      resultPath: '$.steps.filter',
      maxConcurrency: 40,
    });
    const dedup = step(this, 'dedup', {
      run: invoke(dedupFn, { payload: { 'manifest.$': '$.steps.filter.manifest' } }),
      inputs: {
        'itemsSha256.$': '$.steps.ingest.itemsSha256',
        'filtersSha256.$': '$.prep.filtersSha256',
        'ngram.$': '$.config.decontamination.ngram',
        'indexPrompt.$': '$.config.decontamination.indexPrompt',
        'benchmarksSha256.$': '$.prep.benchmarksSha256',
      },
      resultPath: '$.steps.dedup',
      cache,
    });
    const label = step(this, 'label', {
      run: invoke(labelFn, { payload: { 'dedupUri.$': '{inputs}.dedupUri', 'labels.$': '{inputs}.labels', 'seed.$': '{inputs}.seed' } }),
      inputs: { 'dedupUri.$': '$.steps.dedup.dedupUri', 'labels.$': '$.config.labels', 'seed.$': '$.config.seed' },
      resultPath: '$.steps.label',
      cache,
    });
    const train = step(this, 'train', {
      run: runJob(this.classifierJob, steps, {
        payload: {
          'labelsUri.$': '$.steps.label.labelsUri',
          'threshold.$': '$.config.threshold',
          'heldOutFraction.$': '{inputs}.classifier.heldOutFraction',
          'seed.$': '{inputs}.seed',
          'model.$': '{inputs}.classifier.model',
          'buckets.$': '{inputs}.classifier.buckets',
          'dim.$': '{inputs}.classifier.dim',
          'epochs.$': '{inputs}.classifier.epochs',
        },
      }),
      // The threshold is not in the key: it changes only the job's keep/drop figures, which the
      // report recomputes, so a new threshold keeps the trained model.
      inputs: { 'labelsSha256.$': '$.steps.label.labelsSha256', 'classifier.$': '$.config.classifier', 'seed.$': '$.config.seed' },
      resultPath: '$.steps.train',
      cache,
    });
    const score = distributedFanOut(this, 'score', {
      scope: steps,
      itemsKeyPath: '$.steps.dedup.scoreItemsKey',
      itemSelector: {
        'item.$': '$$.Map.Item.Value',
        'modelUri.$': '$.steps.train.modelUri',
        'modelSha256.$': '$.steps.train.modelSha256',
        'settings.$': '$.steps.train.features',
        'maxChars.$': '$.config.labels.maxChars',
      },
      iterator: (s) =>
        step(s, 'score-shard', {
          run: invoke(scoreFn, {
            payload: {
              'shard.$': '{inputs}.shard',
              'modelUri.$': '$.modelUri',
              'modelSha256.$': '$.modelSha256',
              'settings.$': '$.settings',
              'maxChars.$': '$.maxChars',
            },
          }),
          inputs: {
            shard: { 'uri.$': '$.item.uri', 'sha256.$': '$.item.sha256' },
            'modelSha256.$': '$.modelSha256',
            'settings.$': '$.settings',
            'maxChars.$': '$.maxChars',
          },
          resultPath: '$.result',
          cache,
        }),
      resultPath: '$.steps.score',
      maxConcurrency: 40,
    });
    const curate = step(this, 'curate', {
      run: invoke(curateFn, {
        payload: {
          'dedupUri.$': '{inputs}.dedupUri',
          'threshold.$': '{inputs}.threshold',
          'modelSha256.$': '{inputs}.modelSha256',
          'scores.$': '$.steps.score.manifest',
          // Provenance for the manifest: it follows from the key's inputs (the dedup document's
          // hash covers the corpus, the filters and the benchmarks).
          'source.$': '$.config.corpus',
          'sourceIdentity.$': '$.prep.corpusIdentity',
          'benchmarks.$': '$.prep.benchmarks',
          'filters.$': '$.config.filters',
        },
      }),
      inputs: { 'dedupUri.$': '$.steps.dedup.dedupUri', 'modelSha256.$': '$.steps.train.modelSha256', 'threshold.$': '$.config.threshold' },
      resultPath: '$.steps.curate',
      cache,
    });
    const tail = this.reportAndPublish({
      reportFn,
      inputs: {
        'threshold.$': '$.config.threshold',
        'ingestReportUri.$': '$.steps.ingest.reportUri',
        'truthUri.$': '$.steps.ingest.truthUri',
        'benchmarkCount.$': '$.prep.benchmarkCount',
        'dedupUri.$': '$.steps.dedup.dedupUri',
        'labelSummaryUri.$': '$.steps.label.summaryUri',
        'metricsUri.$': '$.steps.train.metricsUri',
        'manifestUri.$': '$.steps.curate.manifestUri',
      },
      artifact: REFINED_CORPUS_ARTIFACT,
      output: { 'manifestUri.$': '$.steps.curate.manifestUri' },
    });

    const chain = prepare.next(ingest).next(filter).next(dedup).next(label).next(train).next(score).next(curate).next(tail);
    this.finish(chain, { timeout: Duration.hours(12) });
  }
}
