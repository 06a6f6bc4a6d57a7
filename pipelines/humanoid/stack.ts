/**
 * Teach a humanoid to run: the Unitree G1 on MuJoCo Playground's joystick task (as changed here:
 * shared/humanoid/task.ts), trained by ARS over the CPU twin on the CPU queue, or by Brax PPO over
 * MuJoCo MJX on the GPU queue; every checkpoint replayed and filmed on CPU as it lands.
 *
 * A training run (from the CLI):
 * 1. prepare (Lambda): the checkpoint it continues from checked (format, policy shape, trainer),
 *    and the run's replay settings written beside its checkpoints.
 * 2. train (Batch, cached by the trainer's settings, the seed and what it continues from): ARS on
 *    the CPU queue or PPO on the GPU queue, a checkpoint every so often to
 *    runs/humanoid/checkpoints/<run>/<step>/, each one's upload firing the replays below while
 *    training goes on. A reclaimed instance's rerun continues from the newest of them.
 * 3. replays (a fan-out of CPU Batch jobs, each cached by the checkpoint's hash and its command):
 *    the final policy at each replay speed, measured and filmed.
 * 4. report (Lambda), then, unless the run continued a checkpoint (which never publishes): the
 *    artifact `g1-checkpoints` (the run's checkpoints) and `g1-run-policy` (ONNX, the raw
 *    parameters, the task spec, metrics, films, the report) with lineage to it.
 *
 * A checkpoint's upload (checkpoint.json, written last): checkpoint (Lambda: read and checked,
 * the run's replay settings), the same replays, and live (Lambda: the run's live report at
 * data/humanoid/live/<run>/report.html, rewritten from every checkpoint replayed so far).
 */
import { Duration, Size } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { CHECKPOINT_PATTERN, CHECKPOINTS_PREFIX } from '#shared/humanoid/checkpoint.ts';
import { MAX_CHECKPOINTS } from '#shared/humanoid/checkpoint.ts';
import {
  BatchJob,
  documentFunction,
  fanOut,
  invoke,
  PipelineStack,
  type PipelineStackProps,
  publishArtifact,
  runJob,
  S3Trigger,
  step,
} from '#pipelines/steps/index.ts';
import { HumanoidConfig, MAX_REPLAY_COMMANDS } from './config.ts';

export const HUMANOID_PIPELINE = 'humanoid';
export const POLICY_ARTIFACT = 'g1-run-policy';
export const CHECKPOINTS_ARTIFACT = 'g1-checkpoints';

export type HumanoidStackProps = PipelineStackProps;

const SHA = 66;
const URI = 1200;

export class HumanoidStack extends PipelineStack {
  readonly jobs: Record<'train' | 'replay' | 'gpu', BatchJob>;

  constructor(scope: Construct, id: string, props: HumanoidStackProps) {
    super(scope, id, HUMANOID_PIPELINE, props, HumanoidConfig);
    const { resources, steps, cache } = this;
    const { bucket } = resources;
    this.bounds
      .chars('$.prep.resumeSha256', SHA, "the continued checkpoint's sha256, or 'none'")
      .chars('$.steps.train.checkpointSha256', SHA, "the final checkpoint.json's sha256: 64 hex digits")
      .chars('$.checkpoint.sha256', SHA, "the uploaded checkpoint.json's sha256: 64 hex digits")
      .chars('$.sha256', SHA, "a checkpoint.json's sha256: 64 hex digits")
      .chars('$.item', 24, 'one forward speed, a number from 0 to 2.5')
      .chars('$.replaySteps', 24, 'config.replay.steps, an integer')
      .chars('$.prep.trainCommand', 120, 'null, or a command of three numbers: {forward, lateral, yaw}')
      .chars('$.filmEvery', 24, 'config.replay.filmEvery, an integer')
      .chars('$.steps.train.checkpoints', MAX_CHECKPOINTS * (URI + 4), `the run's checkpoints: at most ${MAX_CHECKPOINTS} URIs under runs/humanoid/`)
      .chars('$.steps.report.checkpointFilesUri', URI, "the list of the run's checkpoint files, a content-addressed URI under data/humanoid/")
      .chars('$.steps.report.checkpointMetrics', 300, 'the run name (at most 80 characters) and two integers')
      .chars(
        '$.steps.report.files',
        5000,
        "at most 16 files (the checkpoint's few, task, replays, report and a film per replay speed, at most 6), each a short name and a URI of at most 250 characters: a 63-character bucket and a key under runs/humanoid/ or data/humanoid/ naming a run (80) and a hash or an id",
      )
      .chars('$.steps.report.metrics', 4000, "the report's figures: a flat record of at most 25 numbers and short names")
      .chars('$.steps.report.reportUri', 600, 'an s3:// URI of the report, a content-addressed key under data/humanoid/')
      .chars('$.lineage', 200, 'one {name, version}: the g1-checkpoints version');

    const data = `data/${HUMANOID_PIPELINE}/*`;
    const fn = (fnId: string, entry: string, description: string, memorySize: number, timeout: Duration, writes: { prefix: string; why: string }[]) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: this.functionEnv,
        memorySize,
        timeout,
        onnxRuntime: true,
        logRetention: resources.logRetention,
        bucket,
        readsWhy:
          "Reads checkpoints (runs/humanoid/checkpoints/...), replay results and films under runs/humanoid/, and the pipeline's own documents under data/humanoid/.",
        writes,
      });
    const dataWrites = { prefix: data, why: 'Writes documents and reports under data/humanoid/ only (content-addressed, or the live report of a run).' };
    const prepareFn = fn(
      'Prepare',
      'prepare',
      'Checks the checkpoint a run continues from; writes the run settings beside its checkpoints',
      1024,
      Duration.minutes(2),
      [{ prefix: `${CHECKPOINTS_PREFIX}*`, why: "Writes each run's run.json (its replay settings) beside that run's checkpoints only." }],
    );
    const checkpointFn = fn('Checkpoint', 'checkpoint', 'Reads and checks an uploaded checkpoint and its run settings', 1024, Duration.minutes(2), []);
    const liveFn = fn('Live', 'live', "Records a checkpoint's replays and rewrites the run's live report", 1024, Duration.minutes(5), [dataWrites]);
    const reportFn = fn('Report', 'report', "Writes the run's report and lists the published files", 1024, Duration.minutes(5), [dataWrites]);

    // The CPU job (train and replay stages, one image: Node 22 with ffmpeg); the GPU job (Python,
    // JAX, MuJoCo MJX and Brax: batch-jobs/humanoid-gpu, unverified without a GPU).
    const cpuJob = { job: 'humanoid-cpu', entry: 'main.ts', nativePackages: ['onnxruntime-node'], resources };
    this.jobs = {
      train: new BatchJob(this, 'TrainCpu', { ...cpuJob, vcpus: 16, memory: Size.gibibytes(16), timeout: Duration.hours(12) }),
      replay: new BatchJob(this, 'Replay', { ...cpuJob, vcpus: 1, memory: Size.gibibytes(2), timeout: Duration.minutes(30) }),
      gpu: new BatchJob(this, 'TrainGpu', {
        job: 'humanoid-gpu',
        command: ['python3', 'train.py'],
        gpus: 1,
        // The platform's GPU environment launches g6 and g5: an L4 (24 GB) holds 8,192 MJX G1s.
        // The reference's L40S (g6e) is not among them.
        instanceType: 'g6.2xlarge',
        vcpus: 8,
        timeout: Duration.hours(6),
        resources,
      }),
    };

    const replays = (
      stepId: string,
      replayId: string,
      itemsPath: string,
      sha256Path: string,
      uriPath: string,
      stepsPath: string,
      filmEveryPath: string,
      resultPath: string,
    ) =>
      fanOut(this, stepId, {
        scope: steps,
        itemsPath,
        itemSelector: {
          'item.$': '$$.Map.Item.Value',
          'sha256.$': sha256Path,
          'uri.$': uriPath,
          'replaySteps.$': stepsPath,
          'filmEvery.$': filmEveryPath,
        },
        failureItem: { 'forward.$': '$.item' },
        iterator: (s) =>
          step(s, replayId, {
            // Where the checkpoint lives reaches the job, not the key: the key has its hash.
            run: runJob(this.jobs.replay, steps, {
              payload: {
                stage: 'replay',
                'checkpoint.$': '$.uri',
                command: { 'forward.$': '{inputs}.forward', lateral: 0, yaw: 0 },
                'steps.$': '{inputs}.steps',
                'filmEvery.$': '{inputs}.filmEvery',
              },
            }),
            inputs: { 'checkpoint.$': '$.sha256', 'forward.$': '$.item', 'steps.$': '$.replaySteps', 'filmEvery.$': '$.filmEvery' },
            resultPath: '$.result',
            cache,
          }),
        resultPath,
        maxConcurrency: MAX_REPLAY_COMMANDS,
        tolerance: { maxFailures: MAX_REPLAY_COMMANDS },
      });

    // ---- a training run ----
    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: {
        'run.$': '$$.Execution.Name',
        'trainer.$': '$.config.trainer',
        'checkpoint.$': '$.config.checkpoint',
        'replay.$': '$.config.replay',
        'trainForward.$': '$.config.env.forward',
      },
      resultPath: '$.prep',
    });
    const trainArs = step(this, 'train', {
      run: runJob(this.jobs.train, steps, {
        payload: {
          stage: 'train',
          trainer: 'ars',
          'run.$': '$.prep.run',
          'seed.$': '{inputs}.seed',
          'resume.$': '$.prep.resumeUri',
          'workers.$': '$.config.ars.workers',
          ars: {
            'iterations.$': '{inputs}.ars.iterations',
            'start.$': '{inputs}.ars.start',
            'objective.$': '{inputs}.ars.objective',
            'directions.$': '{inputs}.ars.directions',
            'topDirections.$': '{inputs}.ars.topDirections',
            'stepSize.$': '{inputs}.ars.stepSize',
            'noise.$': '{inputs}.ars.noise',
            'rolloutSteps.$': '{inputs}.ars.rolloutSteps',
            'evaluations.$': '{inputs}.ars.evaluations',
            'checkpointEvery.$': '{inputs}.ars.checkpointEvery',
            'normaliserIterations.$': '{inputs}.ars.normaliserIterations',
          },
          'env.$': '{inputs}.env',
        },
      }),
      // The settings that change the policy; not where checkpoints go, the workers or the vCPUs.
      inputs: {
        trainer: 'ars',
        'seed.$': '$.config.seed',
        'resume.$': '$.prep.resumeSha256',
        ars: {
          'iterations.$': '$.config.ars.iterations',
          'start.$': '$.config.ars.start',
          'objective.$': '$.config.ars.objective',
          'directions.$': '$.config.ars.directions',
          'topDirections.$': '$.config.ars.topDirections',
          'stepSize.$': '$.config.ars.stepSize',
          'noise.$': '$.config.ars.noise',
          'rolloutSteps.$': '$.config.ars.rolloutSteps',
          'evaluations.$': '$.config.ars.evaluations',
          'checkpointEvery.$': '$.config.ars.checkpointEvery',
          'normaliserIterations.$': '$.config.ars.normaliserIterations',
        },
        env: {
          'noiseLevel.$': '$.config.env.noiseLevel',
          'pushes.$': '$.config.env.pushes',
          'randomReset.$': '$.config.env.randomReset',
          'survivalBonus.$': '$.config.env.survivalBonus',
          'command.$': '$.prep.trainCommand',
        },
      },
      resultPath: '$.steps.train',
      cache,
    });
    const trainPpo = step(this, 'train-gpu', {
      run: runJob(this.jobs.gpu, steps, {
        payload: {
          trainer: 'ppo',
          'run.$': '$.prep.run',
          'seed.$': '{inputs}.seed',
          'resume.$': '$.prep.resumeUri',
          'checkpointPrefix.$': '$.prep.checkpointPrefix',
          'task.$': '$.prep.task',
          'ppo.$': '{inputs}.ppo',
        },
      }),
      inputs: { trainer: 'ppo', 'seed.$': '$.config.seed', 'resume.$': '$.prep.resumeSha256', 'ppo.$': '$.config.ppo' },
      resultPath: '$.steps.train',
      cache,
    });
    const finalReplays = replays(
      'replays',
      'replay',
      '$.config.replay.forward',
      '$.steps.train.checkpointSha256',
      '$.steps.train.checkpoint',
      '$.config.replay.steps',
      '$.config.replay.filmEvery',
      '$.steps.replays',
    );
    const report = step(this, 'report', {
      run: invoke(reportFn),
      inputs: {
        'run.$': '$.prep.run',
        'trainer.$': '$.config.trainer',
        train: {
          'checkpoint.$': '$.steps.train.checkpoint',
          'checkpoints.$': '$.steps.train.checkpoints',
          'startedFrom.$': '$.steps.train.startedFrom',
          'stepsPerSecond.$': '$.steps.train.stepsPerSecond',
        },
        'replays.$': '$.steps.replays',
        // Both trainers' settings: the report shows the ones of the trainer that ran, and for ARS
        // the start its checkpoint records (a continued run keeps its checkpoint's).
        settings: {
          'trainer.$': '$.config.trainer',
          'seed.$': '$.config.seed',
          ars: {
            'iterations.$': '$.config.ars.iterations',
            'start.$': '$.config.ars.start',
            'objective.$': '$.config.ars.objective',
            'directions.$': '$.config.ars.directions',
            'stepSize.$': '$.config.ars.stepSize',
            'noise.$': '$.config.ars.noise',
            'rolloutSteps.$': '$.config.ars.rolloutSteps',
          },
          env: {
            'survivalBonus.$': '$.config.env.survivalBonus',
            'noiseLevel.$': '$.config.env.noiseLevel',
            'pushes.$': '$.config.env.pushes',
            'randomReset.$': '$.config.env.randomReset',
          },
          'ppo.$': '$.config.ppo',
        },
      },
      resultPath: '$.steps.report',
    });
    const publishCheckpoints = publishArtifact(this, 'publish-checkpoints', {
      scope: steps,
      name: CHECKPOINTS_ARTIFACT,
      filesUriPath: '$.steps.report.checkpointFilesUri',
      metricsPath: '$.steps.report.checkpointMetrics',
      resultPath: '$.steps.publishCheckpoints',
    });
    const lineage = new sfn.Pass(this, 'Policy lineage', {
      parameters: { 'lineage.$': 'States.Array($.steps.publishCheckpoints)' },
      resultPath: '$.lineage',
    });
    const publishPolicy = publishArtifact(this, 'publish', {
      scope: steps,
      name: POLICY_ARTIFACT,
      filesPath: '$.steps.report.files',
      metricsPath: '$.steps.report.metrics',
      cardUriPath: '$.steps.report.reportUri',
      lineagePath: '$.lineage.lineage',
      resultPath: '$.steps.publish',
    });
    const output = (name: string, published: boolean) =>
      new sfn.Pass(this, name, {
        parameters: {
          'run.$': '$.prep.run',
          'checkpoint.$': '$.steps.train.checkpoint',
          'train.$': '$.steps.train',
          'replays.$': '$.steps.replays',
          'metrics.$': '$.steps.report.metrics',
          'reportUri.$': '$.steps.report.reportUri',
          published,
          ...(published ? { 'artifact.$': '$.steps.publish' } : {}),
        },
      });
    const publishOrNot = new sfn.Choice(this, 'Continued a checkpoint?')
      .when(sfn.Condition.booleanEquals('$.prep.published', false), output('Output (not published)', false))
      .otherwise(publishCheckpoints.next(lineage).next(publishPolicy).next(output('Output', true)));
    const afterTrain = finalReplays.next(report).next(publishOrNot);
    const train = new sfn.Choice(this, 'Trainer?')
      .when(sfn.Condition.stringEquals('$.config.trainer', 'ppo'), trainPpo.next(afterTrain))
      .otherwise(trainArs.next(afterTrain));
    const training = this.configCheck().next(prepare).next(train);

    // ---- a checkpoint's upload ----
    const checkpoint = step(this, 'checkpoint', {
      run: invoke(checkpointFn),
      inputs: { 'trigger.$': '$.trigger' },
      resultPath: '$.checkpoint',
    });
    const liveReplays = replays(
      'live-replays',
      'live-replay',
      '$.checkpoint.forward',
      '$.checkpoint.sha256',
      '$.checkpoint.uri',
      '$.checkpoint.steps',
      '$.checkpoint.filmEvery',
      '$.replays',
    );
    const live = step(this, 'live', {
      run: invoke(liveFn),
      inputs: { 'run.$': '$.checkpoint.run', 'step.$': '$.checkpoint.step', 'checkpoint.$': '$.checkpoint.uri', 'replays.$': '$.replays' },
      resultPath: '$.live',
    });
    const liveOutput = new sfn.Pass(this, 'Live output', {
      parameters: { 'run.$': '$.checkpoint.run', 'step.$': '$.checkpoint.step', 'reportUri.$': '$.live.reportUri' },
    });
    const upload = checkpoint.next(liveReplays).next(live).next(liveOutput);

    const start = new sfn.Choice(this, 'Started by upload?').when(sfn.Condition.isPresent('$.trigger'), upload).otherwise(training);
    this.finish(start, { timeout: Duration.days(2) });
    new S3Trigger(this, 'Trigger', { scope: steps, keyPattern: CHECKPOINT_PATTERN, stateMachine: this.stateMachine });
  }
}
