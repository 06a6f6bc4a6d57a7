/**
 * Curate a video dataset: scene cuts on the CPU queue, scoring and captions on the GPU queue, the
 * kept clips published with their attribution.
 *
 * 1. generate (Batch CPU, cached by the count, the seed and the code; sources.kind generated
 *    only): videos made with ffmpeg's test sources, cut at known frames, with clips made to be
 *    dropped, their licence records and the truth the benchmark measures against.
 * 2. sources (Lambda): the list checked entry by entry; the accepted ones become the Map's
 *    items, the refused ones are kept with their reasons. Published as the artifact
 *    `video-sources`, the dataset's lineage root.
 * 3. A Distributed Map, one child run per source (items and results in S3, never in the state):
 *    fetch (Batch CPU, cached by the URI and the limits; skipped for content-addressed sources),
 *    cut (Batch CPU, cached by the video's sha256 and the cut settings) and score (Batch GPU,
 *    cached by the clips' sha256 and the scorer). A bad video (not a video, no video stream,
 *    corrupt, too long) ends its child with the reason; a job that fails ends it failed. Either
 *    way the other sources go on.
 * 4. curate (Lambda, not cached: cheap, and the step a new threshold reruns): the rules of
 *    shared/video/curate.ts over every clip.
 * 5. Captions of the kept clips without one yet (per clip, by captioner and model): the VLM job
 *    (Batch GPU) or Claude over the contact sheet (Lambda); none without either.
 * 6. package (Lambda, cached): clips.jsonl and ATTRIBUTION.txt; publish `video-clips` (the kept
 *    clips, the manifest, the attribution) with lineage to `video-sources`.
 * 7. report (Lambda, after the copy, so its wall clock includes it), published as `video-report`
 *    with lineage to `video-clips`.
 *
 * The queues scale to zero: the CPU queue is Fargate, the GPU compute environment has no minimum
 * vCPUs (platform-stack.ts), so nothing bills between runs.
 */
import { Duration, Size } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { ENV } from '#shared/env.ts';
import {
  BatchJob,
  distributedFanOut,
  documentFunction,
  invoke,
  PipelineStack,
  type PipelineStackProps,
  publishArtifact,
  runJob,
  step,
} from '#pipelines/steps/index.ts';
import { VideoConfig } from './config.ts';

export const VIDEO_PIPELINE = 'video';
export const VIDEO_ARTIFACT = 'video-clips';
export const VIDEO_SOURCES_ARTIFACT = 'video-sources';
export const VIDEO_REPORT_ARTIFACT = 'video-report';

export type VideoStackProps = PipelineStackProps;

const SHA = 66;
const URI = 1200;

export class VideoStack extends PipelineStack {
  readonly jobs: Record<'generate' | 'fetch' | 'cut' | 'score' | 'caption', BatchJob>;

  constructor(scope: Construct, id: string, props: VideoStackProps) {
    super(scope, id, VIDEO_PIPELINE, props, VideoConfig);
    const { resources, steps, cache } = this;
    const { bucket, table } = resources;
    this.bounds
      .chars('$.steps.generate.sourcesUri', URI, "the generator's sources.json, a URI under runs/video/")
      .chars('$.steps.generate.sourcesSha256', SHA, "the sha256 of the generator's sources.json")
      .chars('$.prep.sourcesSha256', SHA, 'the sha256 of the checked source list')
      .chars('$.prep.captioner', 8, 'the resolved captioner: vlm, claude or none')
      .chars('$.steps.curate.curatedSha256', SHA, 'the sha256 of the curated document')
      .chars('$.steps.curate.curatedUri', URI, 'the curated document, a content-addressed URI under data/video/')
      .chars('$.steps.package.filesUri', URI, "the artifact's file list, a content-addressed URI under data/video/")
      .chars('$.steps.package.metrics', 300, "the package's figures: four counts")
      .chars('$.steps.publishSources', 400, 'the published source list: {name, version, uri, sha256}')
      .chars('$.steps.report.files', 600, 'two files under data/video/reports/: the report and its figures')
      .chars('$.steps.report.metrics', 2000, "the report's figures: a flat record of a few dozen numbers")
      .chars('$.steps.report.reportUri', URI, 'the report, a content-addressed URI under data/video/')
      .chars('$.prep.files', 300, 'one file: the checked source list, a content-addressed URI under data/video/')
      .chars('$.lineage.sources', 400, 'one published version: {name, version, uri, sha256}')
      .chars('$.lineage.clips', 400, 'one published version: {name, version, uri, sha256}')
      .chars('$.item', 1_700, 'one source: an index, an id of at most 63 characters, a URI of at most 1,024, a sha256 or null and an ETag or null')
      .chars('$.fetchLimits', 80, 'config.fetch: two numbers')
      .chars('$.cutSettings', 300, 'config.cut: six numbers')
      .chars('$.aesthetic', 10, 'config.score.aesthetic: quality or clip')
      .chars('$.fetched.result.sha256', SHA, "the fetched video's sha256")
      .chars('$.fetched.result.videoUri', URI, 'the fetched video, a content-addressed URI under runs/video/')
      .chars('$.cut.result.clipsSha256', SHA, "the sha256 of the video's clips document")
      .chars('$.cut.result.clipsUri', URI, "the video's clips document, a URI under runs/video/");

    const env = { ...this.functionEnv, [ENV.table]: table.tableName };
    const data = `data/${VIDEO_PIPELINE}/*`;
    const fn = (fnId: string, entry: string, description: string, memorySize: number, timeout: Duration) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: env,
        memorySize,
        timeout,
        logRetention: resources.logRetention,
        bucket,
        readsWhy: "Reads source lists, the jobs' clips and scores documents under runs/video/, and its own documents under data/video/.",
        writes: [
          { prefix: data, why: 'Writes content-addressed documents (named by the sha256 of their bytes) and per-clip captions under data/video/ only.' },
        ],
      });
    const sourcesFn = fn('Sources', 'sources', 'Checks the source list entry by entry and writes the Map items', 512, Duration.minutes(2));
    const curateFn = fn('Curate', 'curate', 'Reads every source outcome and keeps or drops each clip by the curation rules', 1024, Duration.minutes(5));
    const captionPlanFn = fn('CaptionPlan', 'caption-plan', 'Lists the kept clips without a caption by this captioner and model', 512, Duration.minutes(2));
    const captionClaudeFn = fn(
      'CaptionClaude',
      'caption-claude',
      "Captions clips with Claude's vision input over their contact sheets",
      1024,
      Duration.minutes(15),
    );
    const captionStoreFn = fn('CaptionStore', 'caption-store', "Stores the VLM job's captions per clip", 512, Duration.minutes(5));
    const packageFn = fn('Package', 'package', "Writes the dataset's manifest, attribution and file list", 1024, Duration.minutes(5));
    const reportFn = fn('Report', 'report', 'Writes the curation report (funnel, scores, contact sheets, timings with the copy)', 2048, Duration.minutes(10));
    for (const f of [sourcesFn, captionClaudeFn]) {
      resources.anthropicSecret.grantRead(f);
      f.addEnvironment(ENV.anthropicSecretArn, resources.anthropicSecret.secretArn);
    }

    // Cutting on the CPU queue (Fargate); scoring and captions on the GPU queue, its own pool.
    const cpu = (jobId: string, memory: number, hours: number) =>
      new BatchJob(this, jobId, { job: 'video-cut', vcpus: 2, memory: Size.gibibytes(memory), timeout: Duration.hours(hours), resources });
    const gpu = (jobId: string, hours: number) =>
      new BatchJob(this, jobId, {
        job: 'video-score',
        gpus: 1,
        instanceType: 'g6.xlarge',
        vcpus: 4,
        memory: Size.mebibytes(15_360),
        timeout: Duration.hours(hours),
        resources,
      });
    this.jobs = {
      generate: cpu('Generate', 4, 2),
      fetch: cpu('Fetch', 4, 2),
      cut: cpu('Cut', 8, 4),
      score: gpu('Score', 2),
      caption: gpu('Caption', 4),
    };

    const generate = step(this, 'generate', {
      run: runJob(this.jobs.generate, steps, { payload: { stage: 'generate', 'videos.$': '{inputs}.videos', 'seed.$': '{inputs}.seed' } }),
      inputs: { 'videos.$': '$.config.sources.videos', 'seed.$': '$.config.sources.seed' },
      resultPath: '$.steps.generate',
      cache,
    });
    const listed = new sfn.Pass(this, 'Listed sources', {
      result: sfn.Result.fromObject({ sourcesUri: null, truthUri: null, seconds: 0 }),
      resultPath: '$.steps.generate',
    });
    const sources = step(this, 'sources', {
      run: invoke(sourcesFn),
      inputs: { 'sources.$': '$.config.sources', 'generatedUri.$': '$.steps.generate.sourcesUri', 'captioner.$': '$.config.captions.captioner' },
      resultPath: '$.prep',
    });
    const publishSources = publishArtifact(this, 'publish-sources', {
      scope: steps,
      name: VIDEO_SOURCES_ARTIFACT,
      filesPath: '$.prep.files',
      resultPath: '$.steps.publishSources',
    });
    const sourcesLineage = new sfn.Pass(this, 'Sources lineage', {
      parameters: { 'sources.$': 'States.Array($.steps.publishSources)' },
      resultPath: '$.lineage',
    });
    const perSource = distributedFanOut(this, 'sources-map', {
      scope: steps,
      itemsKeyPath: '$.prep.itemsKey',
      itemSelector: {
        'item.$': '$$.Map.Item.Value',
        'fetchLimits.$': '$.config.fetch',
        'cutSettings.$': '$.config.cut',
        'aesthetic.$': '$.config.score.aesthetic',
      },
      iterator: (s) => this.perSource(s),
      resultPath: '$.steps.sources',
      maxConcurrency: 64,
      // A source that fails is named in the report; it never stops the others.
      tolerance: { maxFailurePercentage: 100 },
    });
    const noSources = new sfn.Pass(this, 'No accepted source', { result: sfn.Result.fromObject({ manifest: null }), resultPath: '$.steps.sources' });

    const curate = step(this, 'curate', {
      run: invoke(curateFn),
      inputs: { 'sourcesUri.$': '$.prep.sourcesUri', 'manifest.$': '$.steps.sources.manifest', 'thresholds.$': '$.config.curate' },
      resultPath: '$.steps.curate',
    });
    const captionModel = new sfn.Choice(this, 'Caption model?')
      .when(
        sfn.Condition.stringEquals('$.prep.captioner', 'vlm'),
        new sfn.Pass(this, 'VLM model', { parameters: { 'model.$': '$.config.captions.vlmModel' }, resultPath: '$.captionModel' }),
      )
      .otherwise(new sfn.Pass(this, 'Claude model', { parameters: { 'model.$': '$.config.captions.claudeModel' }, resultPath: '$.captionModel' }));
    const plan = step(this, 'caption-plan', {
      run: invoke(captionPlanFn),
      inputs: { 'curatedUri.$': '$.steps.curate.curatedUri', 'captioner.$': '$.prep.captioner', 'model.$': '$.captionModel.model' },
      resultPath: '$.steps.captionPlan',
    });
    const vlm = step(this, 'caption-vlm', {
      run: runJob(this.jobs.caption, steps, {
        payload: { stage: 'caption', 'requestUri.$': '$.steps.captionPlan.requestUri', 'model.$': '$.captionModel.model' },
      }),
      inputs: { 'requestUri.$': '$.steps.captionPlan.requestUri', 'model.$': '$.captionModel.model' },
      resultPath: '$.steps.captionVlm',
    });
    const store = step(this, 'caption-store', {
      run: invoke(captionStoreFn),
      inputs: { 'requestUri.$': '$.steps.captionPlan.requestUri', 'captionsUri.$': '$.steps.captionVlm.captionsUri' },
      resultPath: '$.steps.captions',
    });
    const claude = step(this, 'caption-claude', {
      run: invoke(captionClaudeFn),
      inputs: { 'requestUri.$': '$.steps.captionPlan.requestUri', 'concurrency.$': '$.config.captions.concurrency' },
      resultPath: '$.steps.captions',
    });
    const noCaptions = new sfn.Pass(this, 'Nothing to caption', {
      result: sfn.Result.fromObject({ captioned: 0, missing: 0, missingUri: null }),
      resultPath: '$.steps.captions',
    });
    const pack = step(this, 'package', {
      run: invoke(packageFn),
      inputs: {
        'curatedUri.$': '$.steps.curate.curatedUri',
        'captioner.$': '$.prep.captioner',
        'model.$': '$.captionModel.model',
        'height.$': '$.config.cut.height',
      },
      resultPath: '$.steps.package',
    });
    const publish = publishArtifact(this, 'publish', {
      scope: steps,
      name: VIDEO_ARTIFACT,
      filesUriPath: '$.steps.package.filesUri',
      metricsPath: '$.steps.package.metrics',
      lineagePath: '$.lineage.sources',
      resultPath: '$.steps.publish',
    });
    const report = step(this, 'report', {
      run: invoke(reportFn),
      inputs: {
        'curatedUri.$': '$.steps.curate.curatedUri',
        'captioner.$': '$.prep.captioner',
        'model.$': '$.captionModel.model',
        'captions.$': '$.steps.captions',
        'captioned.$': '$.steps.package.metrics.captioned',
        'truthUri.$': '$.steps.generate.truthUri',
        'artifact.$': '$.steps.publish',
        'runStartedAt.$': '$$.Execution.StartTime',
        // The package step's end is the copy's start; the report's own clock, its end.
        'copyStartedAt.$': '$.steps.package.finishedAt',
        'generateSeconds.$': '$.steps.generate.seconds',
      },
      resultPath: '$.steps.report',
    });
    const publishReport = publishArtifact(this, 'publish-report', {
      scope: steps,
      name: VIDEO_REPORT_ARTIFACT,
      filesPath: '$.steps.report.files',
      metricsPath: '$.steps.report.metrics',
      cardUriPath: '$.steps.report.reportUri',
      lineagePath: '$.lineage.clips',
      resultPath: '$.steps.publishReport',
    });
    const output = new sfn.Pass(this, 'Output', {
      parameters: {
        'metrics.$': '$.steps.report.metrics',
        'reportUri.$': '$.steps.report.reportUri',
        'artifact.$': '$.steps.publish',
        'report.$': '$.steps.publishReport',
      },
    });

    const clipsLineage = new sfn.Pass(this, 'Clips lineage', {
      parameters: { 'sources.$': '$.lineage.sources', 'clips.$': 'States.Array($.steps.publish)' },
      resultPath: '$.lineage',
    });
    const afterCaptions = pack.next(publish).next(report).next(clipsLineage).next(publishReport).next(output);
    const captions = new sfn.Choice(this, 'Captions to make?')
      .when(sfn.Condition.numberEquals('$.steps.captionPlan.missing', 0), noCaptions.next(afterCaptions))
      .when(sfn.Condition.stringEquals('$.prep.captioner', 'vlm'), vlm.next(store).next(afterCaptions))
      .otherwise(claude.next(afterCaptions));
    const tail = curate.next(captionModel);
    captionModel.afterwards().next(plan).next(captions);
    const mapOrSkip = new sfn.Choice(this, 'Any source accepted?')
      .when(sfn.Condition.numberEquals('$.prep.accepted', 0), noSources.next(tail))
      .otherwise(perSource.next(tail));
    const afterSources = sources.next(publishSources).next(sourcesLineage).next(mapOrSkip);
    const start = new sfn.Choice(this, 'Generated sources?')
      .when(sfn.Condition.stringEquals('$.config.sources.kind', 'generated'), generate.next(afterSources))
      .otherwise(listed.next(afterSources));
    this.finish(start, { timeout: Duration.hours(24) });
  }

  /** One source's child run: fetch (unless content-addressed), cut, score; its outcome at the end. */
  private perSource(scope: Construct): sfn.IChainable {
    const { steps, cache } = this;
    const fetch = step(scope, 'fetch', {
      run: runJob(this.jobs.fetch, steps, {
        payload: {
          stage: 'fetch',
          source: { 'id.$': '$.item.id', 'uri.$': '$.item.uri' },
          'maxBytes.$': '$.fetchLimits.maxBytes',
          'maxSeconds.$': '$.fetchLimits.maxSeconds',
        },
      }),
      // An S3 source's ETag is in the key: a new object at the same URI is fetched again.
      inputs: { 'uri.$': '$.item.uri', 'version.$': '$.item.version', 'limits.$': '$.fetchLimits' },
      resultPath: '$.fetched.result',
      cache,
    });
    const known = new sfn.Pass(scope, 'Content-addressed', {
      parameters: { ok: true, 'videoUri.$': '$.item.uri', 'sha256.$': '$.item.sha256' },
      resultPath: '$.fetched.result',
    });
    const cut = step(scope, 'cut', {
      run: runJob(this.jobs.cut, steps, {
        payload: {
          stage: 'cut',
          'videoUri.$': '$.fetched.result.videoUri',
          'sha256.$': '$.fetched.result.sha256',
          'sourceId.$': '$.item.id',
          'settings.$': '$.cutSettings',
        },
      }),
      inputs: { 'sha256.$': '$.fetched.result.sha256', 'settings.$': '$.cutSettings' },
      resultPath: '$.cut.result',
      cache,
    });
    const score = step(scope, 'score', {
      run: runJob(this.jobs.score, steps, { payload: { stage: 'score', 'clipsUri.$': '$.cut.result.clipsUri', 'scorer.$': '$.aesthetic' } }),
      inputs: { 'clipsSha256.$': '$.cut.result.clipsSha256', 'aesthetic.$': '$.aesthetic' },
      resultPath: '$.score.result',
      cache,
    });
    const scored = new sfn.Pass(scope, 'Scored', {
      parameters: {
        ok: true,
        'index.$': '$.item.index',
        'id.$': '$.item.id',
        'clipsUri.$': '$.cut.result.clipsUri',
        'scoresUri.$': '$.score.result.scoresUri',
      },
    });
    const badFetch = new sfn.Pass(scope, 'Not fetched', {
      parameters: { ok: false, 'index.$': '$.item.index', 'id.$': '$.item.id', 'field.$': '$.fetched.result.field', 'reason.$': '$.fetched.result.reason' },
    });
    const badCut = new sfn.Pass(scope, 'Not cut', {
      parameters: { ok: false, 'index.$': '$.item.index', 'id.$': '$.item.id', 'field.$': '$.cut.result.field', 'reason.$': '$.cut.result.reason' },
    });
    const afterFetch = new sfn.Choice(scope, 'Fetched?').when(sfn.Condition.booleanEquals('$.fetched.result.ok', false), badFetch).otherwise(cut);
    const afterCut = new sfn.Choice(scope, 'Cut?').when(sfn.Condition.booleanEquals('$.cut.result.ok', false), badCut).otherwise(score);
    cut.next(afterCut);
    score.next(scored);
    fetch.next(afterFetch);
    known.next(afterFetch);
    return new sfn.Choice(scope, 'Content-addressed?').when(sfn.Condition.isString('$.item.sha256'), known).otherwise(fetch);
  }
}
