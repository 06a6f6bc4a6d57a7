/**
 * Find features in a language model with sparse autoencoders: one cached harvest, a grid of TopK
 * SAEs in parallel, labels scored for detection.
 *
 * 1. prepare (Lambda, not cached: "latest" moves): the corpus artifact's version and manifest,
 *    the explainer (`auto` resolved by whether an Anthropic key is set) and the grid.
 * 2. lm (Batch, cached by the corpus's hash, the model settings and the seed): the local model
 *    trained on the corpus, published as the artifact `sae-lm` with lineage to the corpus.
 * 3. harvest (Batch, cached by the model's hash, the layer, the corpus's hash and the token
 *    count): the residual stream after the layer, stored once as shards; the held-out losses.
 * 4. saes (a Map of Batch jobs, each cached by the harvest's hash and its own width, k and
 *    training settings): one TopK SAE per grid point, with FVU, L0, dead latents and loss
 *    recovered. A new grid reruns only the new points; no harvest.
 * 5. select (Lambda): the SAE labelled, by the rule in the config.
 * 6. contexts (Batch, cached by the SAE's hash and the sampling settings): contexts of a
 *    sample of its features.
 * 7. label and 8. detect (Lambdas, cached by the contexts' hash, the explainer and the Claude
 *    model): a new Claude model reruns these two and the report only.
 * 9. report and publish: the artifact `sae` (every SAE's weights, the grid, labels, detection,
 *    the report) with lineage to `sae-lm` and the corpus.
 */
import { Duration, Size } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ENV } from '#shared/env.ts';
import { BatchJob, documentFunction, fanOut, invoke, PipelineStack, type PipelineStackProps, publishArtifact, runJob, step } from '#pipelines/steps/index.ts';
import { MAX_SAES, SaeConfig } from './config.ts';

export const SAE_PIPELINE = 'sae';
export const SAE_ARTIFACT = 'sae';
export const SAE_LM_ARTIFACT = 'sae-lm';

export type SaeStackProps = PipelineStackProps;

const SHA = 66;
const URI = 1200;

export class SaeStack extends PipelineStack {
  readonly jobs: Record<'lm' | 'harvest' | 'sae' | 'contexts', BatchJob>;

  constructor(scope: Construct, id: string, props: SaeStackProps) {
    super(scope, id, SAE_PIPELINE, props, SaeConfig);
    const { resources, steps, cache } = this;
    const { bucket, table } = resources;
    this.bounds
      .chars('$.prep.corpusSha256', SHA, "the sha256 of the corpus artifact's manifest")
      .chars('$.prep.explainer', 12, 'the resolved explainer: claude or top-tokens')
      .chars('$.prep.grid', MAX_SAES * 40, 'the grid: at most 18 {width, k} pairs of integers')
      .chars('$.prep.lineage', 200, 'one {name, version}: the corpus artifact')
      .chars('$.steps.lm.lmSha256', SHA, "the model's sha256: 64 hex digits")
      .chars('$.steps.lm.files', 1400, "the model's four files, each a short name and an s3:// URI under runs/sae/")
      .chars('$.steps.lm.metrics', 600, "the model's figures: a flat record of ten numbers")
      .chars('$.steps.harvest.harvestSha256', SHA, "the sha256 of the harvest's summary")
      .chars('$.steps.harvest.harvestUri', URI, "the harvest's summary, a URI under runs/sae/")
      .chars('$.steps.select.chosen.saeSha256', SHA, "the chosen SAE's sha256: 64 hex digits")
      .chars('$.steps.contexts.contextsSha256', SHA, "the sha256 of the chosen SAE's contexts")
      .chars('$.steps.label.labelsSha256', SHA, 'the sha256 of the labels document: 64 hex digits')
      .chars('$.steps.lm.metricsUri', URI, "the model's metrics, a URI under runs/sae/")
      .chars('$.prep.corpus', 120, "the corpus artifact's {name, version}: a name of at most 63 characters and an integer")
      .chars('$.steps.select.gridUri', URI, 'the grid document, a content-addressed URI under data/sae/')
      .chars('$.steps.contexts.contextsUri', URI, "the chosen SAE's contexts, a URI under runs/sae/")
      .chars('$.steps.label.labelsUri', URI, 'the labels document, a content-addressed URI under data/sae/')
      .chars('$.steps.detect.detectionUri', URI, 'the detection document, a content-addressed URI under data/sae/')
      .chars('$.steps.publishLm', 400, 'the published model: {name, version, uri, sha256}')
      .chars('$.steps.report.lineage', 300, 'two {name, version}: the model and the corpus')
      .chars('$.item', 60, 'one {width, k} pair of integers')
      .chars('$.harvestSha256', SHA, "the sha256 of the harvest's summary")
      .chars('$.seed', 12, 'config.seed, an integer from 0 to 2^30')
      .chars('$.sae', 400, "the config's sae settings: numbers and short enums, two arrays of at most 6 integers");

    const env = { ...this.functionEnv, [ENV.table]: table.tableName };
    const data = `data/${SAE_PIPELINE}/*`;
    const fn = (fnId: string, entry: string, description: string, memorySize: number, timeout: Duration) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: env,
        memorySize,
        timeout,
        logRetention: resources.logRetention,
        bucket,
        readsWhy: "Reads the corpus artifact's manifest, the jobs' results and files under runs/sae/, and its own documents under data/sae/.",
        writes: [{ prefix: data, why: 'Writes content-addressed documents (named by the sha256 of their bytes) under data/sae/ only.' }],
      });
    const prepareFn = fn('Prepare', 'prepare', 'Finds the corpus artifact, resolves the explainer and lists the SAE grid', 512, Duration.minutes(2));
    table.grantReadData(prepareFn);
    const selectFn = fn('Select', 'select', 'Reads every SAE result and chooses the one to label', 512, Duration.minutes(2));
    const labelFn = fn('Label', 'label', "Labels a sample of the chosen SAE's features (Claude or top tokens)", 1024, Duration.minutes(15));
    const detectFn = fn('Detect', 'detect', 'Scores each label for detection against a mismatched-label control', 1024, Duration.minutes(15));
    for (const f of [prepareFn, labelFn, detectFn]) {
      resources.anthropicSecret.grantRead(f);
      f.addEnvironment(ENV.anthropicSecretArn, resources.anthropicSecret.secretArn);
    }
    const reportFn = fn('Report', 'report', 'Writes the SAE report (Pareto front, dead latents, detection, top features)', 2048, Duration.minutes(10));

    // One image; GPU on AWS for the model's passes and the SAEs' training. 30 GiB: the SAE and
    // contexts stages hold the harvest's training activations (the full size's 4M tokens x 512
    // floats are 8 GiB) with the model beside them.
    const job = (jobId: string, memory: number, hours: number) =>
      new BatchJob(this, jobId, {
        job: 'sae',
        gpus: 1,
        instanceType: 'g6.2xlarge',
        vcpus: 8,
        memory: Size.gibibytes(memory),
        timeout: Duration.hours(hours),
        resources,
      });
    this.jobs = {
      lm: job('Model', 30, 8),
      harvest: job('Harvest', 30, 4),
      sae: job('Sae', 30, 4),
      contexts: job('Contexts', 30, 2),
    };

    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: {
        'corpus.$': '$.config.corpus',
        'explainer.$': '$.config.labels.explainer',
        'widths.$': '$.config.sae.widths',
        'ks.$': '$.config.sae.ks',
      },
      resultPath: '$.prep',
    });
    const lm = step(this, 'lm', {
      run: runJob(this.jobs.lm, steps, {
        payload: {
          stage: 'lm',
          'corpusUri.$': '$.prep.corpusUri',
          'lm.$': '{inputs}.lm',
          'seed.$': '{inputs}.seed',
          'harvestTokens.$': '$.config.harvest.tokens',
        },
      }),
      inputs: { 'corpusSha256.$': '$.prep.corpusSha256', 'lm.$': '$.config.lm', 'seed.$': '$.config.seed' },
      resultPath: '$.steps.lm',
      cache,
    });
    const publishLm = publishArtifact(this, 'publish-lm', {
      scope: steps,
      name: SAE_LM_ARTIFACT,
      filesPath: '$.steps.lm.files',
      metricsPath: '$.steps.lm.metrics',
      lineagePath: '$.prep.lineage',
      resultPath: '$.steps.publishLm',
    });
    const harvest = step(this, 'harvest', {
      run: runJob(this.jobs.harvest, steps, {
        payload: {
          stage: 'harvest',
          'corpusUri.$': '$.prep.corpusUri',
          'lmUri.$': '$.steps.lm.lmUri',
          'layer.$': '{inputs}.layer',
          'tokens.$': '{inputs}.tokens',
          'heldOutEvery.$': '{inputs}.heldOutEvery',
        },
      }),
      inputs: {
        'lmSha256.$': '$.steps.lm.lmSha256',
        'corpusSha256.$': '$.prep.corpusSha256',
        'layer.$': '$.config.layer',
        'tokens.$': '$.config.harvest.tokens',
        'heldOutEvery.$': '$.config.harvest.heldOutEvery',
      },
      resultPath: '$.steps.harvest',
      cache,
    });
    const saes = fanOut(this, 'saes', {
      scope: steps,
      itemsPath: '$.prep.grid',
      itemSelector: {
        'item.$': '$$.Map.Item.Value',
        'harvestUri.$': '$.steps.harvest.harvestUri',
        'harvestSha256.$': '$.steps.harvest.harvestSha256',
        'sae.$': '$.config.sae',
        'seed.$': '$.config.seed',
      },
      failureItem: { 'width.$': '$.item.width', 'k.$': '$.item.k' },
      iterator: (s) =>
        step(s, 'train-sae', {
          run: runJob(this.jobs.sae, steps, {
            payload: {
              stage: 'sae',
              'harvestUri.$': '$.harvestUri',
              'width.$': '{inputs}.width',
              'k.$': '{inputs}.k',
              'epochs.$': '{inputs}.epochs',
              'batchSize.$': '{inputs}.batchSize',
              'learningRate.$': '{inputs}.learningRate',
              'auxk.$': '{inputs}.auxk',
              'auxkCoef.$': '{inputs}.auxkCoef',
              'deadTokens.$': '{inputs}.deadTokens',
              'ablation.$': '{inputs}.ablation',
              'seed.$': '{inputs}.seed',
            },
          }),
          // Each field by itself, never the grid's arrays: another grid keeps every SAE it shares.
          inputs: {
            'harvestSha256.$': '$.harvestSha256',
            'width.$': '$.item.width',
            'k.$': '$.item.k',
            'epochs.$': '$.sae.epochs',
            'batchSize.$': '$.sae.batchSize',
            'learningRate.$': '$.sae.learningRate',
            'auxk.$': '$.sae.auxk',
            'auxkCoef.$': '$.sae.auxkCoef',
            'deadTokens.$': '$.sae.deadTokens',
            'ablation.$': '$.sae.ablation',
            'seed.$': '$.seed',
          },
          resultPath: '$.result',
          cache,
        }),
      resultPath: '$.steps.saes',
      maxConcurrency: MAX_SAES,
    });
    const select = step(this, 'select', {
      run: invoke(selectFn),
      inputs: { 'saes.$': '$.steps.saes', 'targetL0.$': '$.config.labels.targetL0' },
      resultPath: '$.steps.select',
    });
    const contexts = step(this, 'contexts', {
      run: runJob(this.jobs.contexts, steps, {
        payload: {
          stage: 'contexts',
          'harvestUri.$': '$.steps.harvest.harvestUri',
          'saeUri.$': '$.steps.select.chosen.saeUri',
          'labels.$': '{inputs}.labels',
          'seed.$': '{inputs}.seed',
        },
      }),
      inputs: {
        'saeSha256.$': '$.steps.select.chosen.saeSha256',
        'harvestSha256.$': '$.steps.harvest.harvestSha256',
        labels: {
          'features.$': '$.config.labels.features',
          'minActivating.$': '$.config.labels.minActivating',
          'explainExamples.$': '$.config.labels.explainExamples',
          'detectExamples.$': '$.config.labels.detectExamples',
          'windowTokens.$': '$.config.labels.windowTokens',
        },
        'seed.$': '$.config.seed',
      },
      resultPath: '$.steps.contexts',
      cache,
    });
    const label = step(this, 'label', {
      run: invoke(labelFn, {
        payload: {
          'contextsUri.$': '$.steps.contexts.contextsUri',
          'explainer.$': '{inputs}.explainer',
          'model.$': '{inputs}.model',
          'concurrency.$': '$.config.labels.concurrency',
        },
      }),
      inputs: { 'contextsSha256.$': '$.steps.contexts.contextsSha256', 'explainer.$': '$.prep.explainer', 'model.$': '$.config.labels.model' },
      resultPath: '$.steps.label',
      cache,
    });
    const detect = step(this, 'detect', {
      run: invoke(detectFn, {
        payload: {
          'contextsUri.$': '$.steps.contexts.contextsUri',
          'labelsUri.$': '$.steps.label.labelsUri',
          'explainer.$': '{inputs}.explainer',
          'model.$': '{inputs}.model',
          'concurrency.$': '$.config.labels.concurrency',
          'seed.$': '{inputs}.seed',
        },
      }),
      inputs: {
        'contextsSha256.$': '$.steps.contexts.contextsSha256',
        'labelsSha256.$': '$.steps.label.labelsSha256',
        'explainer.$': '$.prep.explainer',
        'model.$': '$.config.labels.model',
        'seed.$': '$.config.seed',
      },
      resultPath: '$.steps.detect',
      cache,
    });
    const tail = this.reportAndPublish({
      reportFn,
      inputs: {
        'lmMetricsUri.$': '$.steps.lm.metricsUri',
        'lm.$': '$.config.lm',
        'layer.$': '$.config.layer',
        'corpus.$': '$.prep.corpus',
        'harvestUri.$': '$.steps.harvest.harvestUri',
        'gridUri.$': '$.steps.select.gridUri',
        'contextsUri.$': '$.steps.contexts.contextsUri',
        'labelsUri.$': '$.steps.label.labelsUri',
        'detectionUri.$': '$.steps.detect.detectionUri',
        'targetL0.$': '$.config.labels.targetL0',
        'ablation.$': '$.config.sae.ablation',
        'lmArtifact.$': '$.steps.publishLm',
      },
      artifact: SAE_ARTIFACT,
      lineagePath: '$.steps.report.lineage',
      // Every SAE's weights (18 at most, content-addressed under data/sae/saes/: about 200
      // characters each), and five documents under data/sae/ (the grid, labels, detection, the
      // report and its figures).
      filesChars: MAX_SAES * 205 + 5 * 220,
      output: { 'chosen.$': '$.steps.select.chosen', 'explainer.$': '$.prep.explainer' },
    });

    const chain = prepare.next(lm).next(publishLm).next(harvest).next(saes).next(select).next(contexts).next(label).next(detect).next(tail);
    this.finish(chain, { timeout: Duration.hours(24) });
  }
}
