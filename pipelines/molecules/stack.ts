/**
 * Closed-loop molecular discovery: a surrogate picks molecules, a person approves each batch from
 * an emailed link, GFN2-xTB measures them on the CPU queue, and the loop refits and goes again;
 * a random baseline spends the same oracle budget in the same run.
 *
 * 1. prepare (Lambda): the pool (built in code, or a pool file in S3), its Morgan fingerprints,
 *    and the campaign document with round 0, a random sample, pending.
 * 2. Per round, a loop in the state machine:
 *    a. propose (Lambda): round 0 the sample; later rounds the Tanimoto GP fitted on everything
 *       measured picks the batch (exploit and explore arms) and the random baseline draws as many;
 *       predictions are recorded before measuring. Molecules measured by earlier runs with the
 *       same oracle come from the cache; the rest become oracle jobs and the approval email's items.
 *    b. approve: the email lists the batch (SMILES, predicted gap, arm, drawing) with a signed link.
 *       The execution waits for free (a Standard workflow holds no compute). Approve measures;
 *       Reject skips the batch and ends the loop; a timeout ends it too, keeping every result.
 *       Nothing to measure (all known): no email, straight to record.
 *    c. oracle (fan-out of Batch jobs, CPU queue): each job optimises its molecules with
 *       GFN2-xTB, one work dir and timeout per molecule; a molecule that fails is recorded with why.
 *    d. record (Lambda): results into the campaign and the oracle cache; round metrics.
 * 3. report (cached Lambda) and publish: the artifact `molecular-discovery` (report.html,
 *    measurements.csv, campaign.json).
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { ENV } from '#shared/env.ts';
import { APPROVAL_ITEMS_PREFIX } from '#shared/approval.ts';
import { approvalGate, BatchJob, documentFunction, fanOut, invoke, PipelineStack, type PipelineStackProps, runJob, step } from '#pipelines/steps/index.ts';
import { MoleculesConfig } from './config.ts';

export const MOLECULES_PIPELINE = 'molecules';
export const DISCOVERY_ARTIFACT = 'molecular-discovery';

export type MoleculesStackProps = PipelineStackProps;

export class MolecularDiscoveryStack extends PipelineStack {
  readonly oracleJob: BatchJob;

  constructor(scope: Construct, id: string, props: MoleculesStackProps) {
    super(scope, id, MOLECULES_PIPELINE, props, MoleculesConfig);
    const { resources, steps } = this;
    this.bounds.chars('$.campaign.campaignUri', 400, "the campaign document's content-addressed URI (data/molecules/campaign/<sha256>.json)");
    const { bucket, table } = resources;

    // The oracle: GFN2-xTB on the CPU queue (Node 22 and Debian's xtb in the image).
    const oracleJob = new BatchJob(this, 'Oracle', {
      job: 'molecules-oracle',
      entry: 'main.ts',
      vcpus: 2,
      timeout: Duration.hours(2),
      resources,
    });
    this.oracleJob = oracleJob;

    const env = {
      ...this.functionEnv,
      [ENV.table]: table.tableName,
      ORACLE_CODE_VERSION: oracleJob.codeVersion.hash,
    };
    const campaignFunction = (fnId: string, entry: string, description: string, memorySize: number, timeout: Duration, writes: string[]) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: env,
        memorySize,
        timeout,
        rdkit: true,
        logRetention: resources.logRetention,
        bucket,
        readsWhy:
          'Reads the pool file a run names (any key of the pipeline bucket, given at run time), pool and campaign documents (data/molecules/...), and oracle job results (runs/molecules/<execution>/...).',
        writes: writes.map((prefix) => ({
          prefix,
          why: `Writes content-addressed documents (named by the sha256 of their content or of what they were built from) under ${prefix.replace('/*', '/')} only.`,
        })),
      });
    const data = `data/${MOLECULES_PIPELINE}/*`;
    const prepareFn = campaignFunction(
      'Prepare',
      'prepare',
      'Builds or reads the molecule pool and its fingerprints; starts the campaign with a random sample',
      3008,
      Duration.minutes(10),
      [data],
    );
    const proposeFn = campaignFunction(
      'Propose',
      'propose',
      "Fits the surrogate, picks the next batch and the random baseline's, writes the approval items",
      3008,
      Duration.minutes(5),
      [data, `${APPROVAL_ITEMS_PREFIX}${MOLECULES_PIPELINE}/*`],
    );
    const recordFn = campaignFunction('Record', 'record', 'Records oracle results into the campaign and the oracle cache', 1024, Duration.minutes(2), [data]);
    const reportFn = campaignFunction('Report', 'report', 'Writes the discovery report and the measurements', 1024, Duration.minutes(2), [data]);
    table.grantReadData(proposeFn);
    table.grantWriteData(recordFn);

    const xtb = { 'timeoutSeconds.$': '$.config.oracle.timeoutSeconds', 'seed.$': '$.config.oracle.seed' };
    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: {
        'pool.$': '$.config.pool',
        settings: {
          'sampleSize.$': '$.config.sampleSize',
          'rounds.$': '$.config.rounds',
          'batchSize.$': '$.config.batchSize',
          'explorationFraction.$': '$.config.explorationFraction',
          'hitPercent.$': '$.config.hitPercent',
          'acquisition.$': '$.config.acquisition',
          'seed.$': '$.config.seed',
        },
      },
      resultPath: '$.campaign',
    });
    const propose = step(this, 'propose', {
      run: invoke(proposeFn),
      inputs: {
        'campaignUri.$': '$.campaign.campaignUri',
        options: { xtb, 'chunkSize.$': '$.config.oracle.chunkSize', 'parallel.$': '$.config.oracle.parallel' },
      },
      resultPath: '$.proposal',
    });
    const newRound = new sfn.Pass(this, 'New round', { result: sfn.Result.fromObject({ oracle: [] }), resultPath: '$.steps' });
    const approve = approvalGate(this, 'approve', {
      scope: steps,
      title: 'Measure a batch of molecules with GFN2-xTB',
      detailsPath: '$.proposal.details',
      itemsUriPath: '$.proposal.itemsUri',
      timeoutPath: '$.config.approvalTimeoutSeconds',
      onTimeout: 'continue',
      onReject: 'continue',
      resultPath: '$.approval',
      outcomes: {
        approve: 'Measures this batch with GFN2-xTB on the CPU queue; then the surrogate refits and proposes the next round.',
        reject: 'Skips this batch and ends the loop: nothing more is measured, and everything measured so far goes into the report.',
        timeout: 'Ends the loop as Reject does, keeping everything measured so far.',
      },
    });
    const oracle = fanOut(this, 'oracle', {
      scope: steps,
      itemsPath: '$.proposal.chunks',
      iterator: (s) =>
        step(s, 'measure', {
          // A chunk's spec and its result.json grow with the chunk (up to 500 molecules): both stay
          // in S3; propose staged the spec, content-addressed.
          run: runJob(oracleJob, steps, { specKeyPath: '$.item.specKey', result: 'uri' }),
          inputs: { 'spec.$': '$.item.specKey' },
          resultPath: '$.result',
        }),
      resultPath: '$.steps.oracle',
      maxConcurrency: 10,
      // Every failed job is recorded, and the record step fails the run naming the first one's
      // error after caching what the other jobs measured.
      tolerance: { maxFailuresPath: '$.proposal.toMeasure' },
    });
    const outcome = (name: string, value: string) => new sfn.Pass(this, name, { result: sfn.Result.fromObject({ value }), resultPath: '$.outcome' });
    const record = step(this, 'record', {
      run: invoke(recordFn),
      inputs: {
        'campaignUri.$': '$.proposal.campaignUri',
        'outcome.$': '$.outcome.value',
        'results.$': '$.steps.oracle',
        xtb,
        'executionId.$': '$$.Execution.Id',
      },
      resultPath: '$.campaign',
    });
    const finish = this.reportAndPublish({
      reportFn,
      inputs: { 'campaignUri.$': '$.campaign.campaignUri', 'config.$': '$.config' },
      artifact: DISCOVERY_ARTIFACT,
      output: { 'campaignUri.$': '$.campaign.campaignUri' },
    });
    const exhausted = new sfn.Pass(this, 'Pool exhausted', {
      parameters: { 'campaignUri.$': '$.proposal.campaignUri', done: true },
      resultPath: '$.campaign',
    }).next(finish);

    const decided = new sfn.Choice(this, 'Approved?')
      .when(
        sfn.Condition.and(sfn.Condition.isPresent('$.approval.timedOut'), sfn.Condition.booleanEquals('$.approval.timedOut', true)),
        outcome('Timed out: end the loop', 'timedOut').next(record),
      )
      .when(sfn.Condition.booleanEquals('$.approval.approved', true), oracle.next(outcome('Measured', 'approved')).next(record))
      .otherwise(outcome('Rejected: end the loop', 'rejected').next(record));
    const anything = new sfn.Choice(this, 'Anything to measure?')
      .when(sfn.Condition.booleanEquals('$.proposal.done', true), exhausted)
      .when(sfn.Condition.numberGreaterThan('$.proposal.toMeasure', 0), approve.next(decided))
      .otherwise(outcome('Nothing to measure', 'nothingToMeasure').next(record));
    const more = new sfn.Choice(this, 'More rounds?').when(sfn.Condition.booleanEquals('$.campaign.done', true), finish).otherwise(propose);

    prepare.next(propose).next(newRound).next(anything);
    record.next(more);

    this.finish(prepare, { timeout: Duration.days(30) });
  }
}
