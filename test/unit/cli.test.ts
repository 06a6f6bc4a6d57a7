/**
 * The command line: errors that name what was wrong, `--target aws` against a mocked AWS
 * (CloudFormation and Step Functions at the SDK edge), and the local commands end to end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mockClient } from 'aws-sdk-client-mock';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { main } from '#infra/cli.ts';
import { serveLocal } from '#infra/cli/serve.ts';
import { waitFor } from '../support/runtime.ts';
import { runAws, runCostWhere } from '#infra/cli/run-aws.ts';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { diffJson } from '#infra/cli/cache-explain.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err, text: () => [...out, ...err].join('\n') };
}

describe('cli: errors', () => {
  it('an unknown pipeline names it and lists the known ones', async () => {
    const c = capture();
    assert.equal(await main(['run', 'nope'], c.io), 1);
    assert.match(c.text(), /unknown pipeline "nope"; known pipelines: selfplay, evals, lm-sft, molecules, rewards, refinery, sae, video, humanoid, probe/);
  });

  it('--checkpoint is for the humanoid, must name a checkpoint.json, and PPO is refused locally, before anything runs', async () => {
    const wrongPipeline = capture();
    assert.equal(await main(['run', 'probe', '--checkpoint', 's3://b/runs/x/checkpoint.json'], wrongPipeline.io), 1);
    assert.match(wrongPipeline.text(), /--checkpoint: is for the humanoid pipeline/);
    const notACheckpoint = capture();
    assert.equal(await main(['run', 'humanoid', '--checkpoint', 's3://b/runs/x/params.json'], notACheckpoint.io), 1);
    assert.match(notACheckpoint.text(), /config\.checkpoint: must be the s3:\/\/ URI of a checkpoint's checkpoint\.json/);
    const ppo = capture();
    assert.equal(await main(['run', 'humanoid', '--full'], ppo.io), 1);
    assert.match(ppo.text(), /trainer: Brax PPO over MuJoCo MJX runs on the GPU queue on AWS only \(--target aws\)/);
  });

  it("--plan prints a cold run's counts and cost without running it, a range where data decides", async () => {
    const plan = capture();
    assert.equal(await main(['run', 'probe', '--plan', '--config', '{"items":[2,3]}'], plan.io), 0, plan.text());
    assert.match(plan.text(), /state transitions: 78\nhistory events: \d+ of 25,000/);
    assert.match(plan.text(), /Lambda invocations: 5\nBatch jobs: 1/);
    assert.match(plan.text(), /cost on AWS: \$[0-9.]+-\$[0-9.]+ \(low: .* us-east-1 prices of \d{4}-\d{2}-\d{2}\)/);
    const league = capture();
    assert.equal(await main(['run', 'selfplay', '--size', 'test', '--plan'], league.io), 0, league.text());
    assert.match(league.text(), /Map widths: matches: Items \d+/);
    // The league caches whole runs: a rerun ends in its config check. The probe does not.
    assert.match(
      league.text(),
      /a rerun of this config after a run of it succeeded ends from the run cache: 5 state transitions, 1 Lambda invocation, 0 Batch jobs, \$/,
    );
    assert.doesNotMatch(plan.text(), /run cache/);
    // Step by step: the training step's 3 jobs (one a generation), the config check's one invocation.
    assert.match(league.text(), /^ {2}step +transitions +history events +Lambda +jobs +cost$/m);
    assert.match(league.text(), /^ {2}train +\d+ +\d+ +0 +3 +\$[0-9.]+-\$[0-9.]+$/m);
    assert.match(league.text(), /^ {2}config +3 +9 +1 +0 +\$/m);
    assert.match(plan.text(), /largest state: [\d,]+ bytes at most, of 262,144 \(the execution input/);
    // A config past a limit is refused before anything starts: no runtime, no run.
    const over = capture();
    assert.equal(await main(['run', 'probe', '--config', '{"items":[2,3],"padKiB":300}'], over.io), 1);
    assert.match(
      over.text(),
      /config\.padKiB: is refused before the run starts: its plan reaches [\d,]+ bytes of state, over the 262,144 allowed .*the largest that fits is padKiB \d+ \(got 300\)/,
    );
    assert.doesNotMatch(over.text(), /local runtime ready/);
    // --plan of the same config says so, after the plan.
    const overPlan = capture();
    assert.equal(await main(['run', 'probe', '--plan', '--config', '{"items":[2,3],"padKiB":300}'], overPlan.io), 0);
    assert.match(overPlan.text(), /a run of this config is refused before it starts: config\.padKiB: its plan reaches/);
    // Where data decides part of the run, the plan gives both ends of the range.
    const refinery = capture();
    assert.equal(await main(['run', 'refinery', '--size', 'test', '--plan'], refinery.io), 0, refinery.text());
    assert.match(
      refinery.text(),
      /data decides part of it \(the corpus decides the shards: 1 to 5\): below is the high end; the low end has\n {2}\d+ state transitions/,
    );
    assert.match(refinery.text(), /Map widths: filter: Items 5, score: Items 5/);
    assert.match(
      refinery.text(),
      /Claude, label: 0-120 calls to \S+ \(one per sampled document that survives\), in each of up to 4 requests \(retries\) at most 1,024 output tokens and 9,824 input tokens \(5,468 of them the cached instructions/,
    );
    const rewards = capture();
    assert.equal(await main(['run', 'rewards', '--size', 'test', '--plan'], rewards.io), 0, rewards.text());
    assert.match(
      rewards.text(),
      /Claude, propose: 2 calls to \S+ \(one per generation\), in each of up to 3 requests \(retries\) at most 8,000 output tokens and [\d,]+ input tokens/,
    );
  });

  it('reward search without an Anthropic key says so and offers reward files; reward files are checked', async () => {
    const key = process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
    try {
      const c = capture();
      assert.equal(await main(['run', 'rewards', '--size', 'test'], c.io), 1);
      assert.match(c.text(), /no Anthropic API key: set ANTHROPIC_API_KEY .*or evaluate your own with --reward-file FILE\.py/);
      const missing = capture();
      assert.equal(await main(['run', 'rewards', '--reward-file', '/nonexistent/r.py'], missing.io), 1);
      assert.match(missing.text(), /--reward-file: does not exist \(got "\/nonexistent\/r\.py"\)/);
      const dir = mkdtempSync(join(tmpdir(), 'fp-reward-file-'));
      writeFileSync(join(dir, 'bad.py'), '');
      const empty = capture();
      assert.equal(await main(['run', 'rewards', '--reward-file', join(dir, 'bad.py')], empty.io), 1);
      assert.match(empty.text(), /--reward-file: is empty/);
      writeFileSync(join(dir, 'long.py'), `def reward(obs, action, next_obs, done, info):\n    return 0.0\n${'#'.repeat(6000)}\n`);
      const long = capture();
      assert.equal(await main(['run', 'rewards', '--reward-file', join(dir, 'long.py')], long.io), 1);
      assert.match(long.text(), /--reward-file: has 6063 characters, over 6000/);
      const wrong = capture();
      assert.equal(await main(['run', 'probe', '--reward-file', join(dir, 'bad.py')], wrong.io), 1);
      assert.match(wrong.text(), /--reward-file: is for the rewards pipeline/);
      rmSync(dir, { recursive: true, force: true });
    } finally {
      if (key !== undefined) process.env.ANTHROPIC_API_KEY = key;
    }
  });

  it('the refinery without an Anthropic key says so and offers a labels file; labels files are checked', async () => {
    const key = process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
    const dir = mkdtempSync(join(tmpdir(), 'fp-labels-file-'));
    try {
      const c = capture();
      assert.equal(await main(['run', 'refinery', '--size', 'test'], c.io), 1);
      assert.match(c.text(), /no Anthropic API key: set ANTHROPIC_API_KEY .*or give labels with --labels-file FILE\.jsonl/);
      const missing = capture();
      assert.equal(await main(['run', 'refinery', '--labels-file', '/nonexistent/labels.jsonl'], missing.io), 1);
      assert.match(missing.text(), /--labels-file: does not exist \(got "\/nonexistent\/labels\.jsonl"\)/);
      writeFileSync(join(dir, 'bad.jsonl'), '{"id":"a","score":3}\n{"id":"b","score":9}\n');
      const bad = capture();
      assert.equal(await main(['run', 'refinery', '--labels-file', join(dir, 'bad.jsonl')], bad.io), 1);
      assert.match(bad.text(), /--labels-file line 2\.score: .*\(got 9\)/);
      const wrong = capture();
      assert.equal(await main(['run', 'probe', '--labels-file', join(dir, 'bad.jsonl')], wrong.io), 1);
      assert.match(wrong.text(), /--labels-file: is for the refinery pipeline/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      if (key !== undefined) process.env.ANTHROPIC_API_KEY = key;
    }
  });

  it('a config that fails its schema names the field and the value', async () => {
    const c = capture();
    assert.equal(await main(['run', 'probe', '--config', '{"items":"x"}'], c.io), 1);
    assert.match(c.text(), /config\.items: .*expected array.*\(got "x"\)/);
    assert.throws(() => resolveConfig(pipelineNamed('probe'), { config: '{"items":[1],"maxFailures":-1}' }), /config\.maxFailures.*\(got -1\)/);
    assert.throws(() => resolveConfig(pipelineNamed('probe'), { config: '{"items":[1],"extra":1}' }), /config: .*extra/);
  });

  it('a named size is the base config; an unknown size lists the known ones', async () => {
    const selfplay = pipelineNamed('selfplay');
    assert.equal(pipelineNamed(undefined), selfplay);
    assert.equal(resolveConfig(selfplay, { size: 'test' }).generations, 3);
    assert.equal(resolveConfig(selfplay, { size: 'local', config: '{"generations":3}' }).generations, 3);
    assert.throws(() => resolveConfig(selfplay, { size: 'huge' }), /--size: is not a size of selfplay \(sizes: smoke, full, test, local\) \(got "huge"\)/);
    const c = capture();
    assert.equal(await main(['run', '--size', 'test', '--full'], c.io), 1);
    assert.match(c.text(), /--size: cannot be combined with --full or --smoke/);
  });

  it('malformed config JSON is named as such', async () => {
    const c = capture();
    assert.equal(await main(['run', '--config', '{items:'], c.io), 1);
    assert.match(c.text(), /--config: is neither a JSON file nor JSON text/);
  });

  it('an unknown option or command gets the usage', async () => {
    const c = capture();
    assert.equal(await main(['run', '--bogus'], c.io), 2);
    assert.match(c.text(), /usage:/);
    const d = capture();
    assert.equal(await main(['frobnicate'], d.io), 2);
    assert.match(d.text(), /unknown command "frobnicate"/);
  });

  it('commands that read only local data refuse --target aws rather than show local data', async () => {
    for (const args of [
      ['artifacts', 'list'],
      ['approvals', 'list'],
      ['cache', 'explain'],
    ]) {
      const c = capture();
      assert.equal(await main([...args, '--target', 'aws'], c.io), 1);
      assert.match(c.text(), /--target: .*(local index|local cache)/);
    }
  });

  it('reset refuses without --yes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fp-cli-reset-'));
    const c = capture();
    assert.equal(await main(['reset', '--data-dir', dir], c.io), 1);
    assert.match(c.text(), /pass --yes/);
    assert.ok(existsSync(dir));
    assert.equal(await main(['reset', '--yes', '--data-dir', dir], capture().io), 0);
    assert.ok(!existsSync(dir));
  });

  it('config keys are sorted so equal configs give equal cache keys', () => {
    const a = resolveConfig(pipelineNamed('probe'), { config: '{"label":"a","items":[1]}' });
    const b = resolveConfig(pipelineNamed('probe'), { config: '{"items":[1],"label":"a"}' });
    assert.equal(JSON.stringify(a), JSON.stringify(b));
    assert.deepEqual(Object.keys(a), [...Object.keys(a)].sort());
  });
});

describe('cli: as a person runs it (npx, from a shell)', () => {
  // A shell's PATH, without the node_modules/.bin that npm test puts first: there the system Node
  // runs npm (20 on these machines), and npm warned EBADENGINE (ten lines) on every npx while the
  // project's engines said >=22. The project's own code runs on the node@22 package either way.
  const shellPath = (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => !dir.includes('node_modules'))
    .join(':');

  it('the engines field admits the system Node, in package.json and in the lockfile alike', () => {
    const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8'));
    assert.deepEqual(lock.packages[''].engines, manifest.engines, "npm warns from the lockfile's copy");
    const range = /^>=(\d+)$/.exec(manifest.engines.node);
    assert.ok(range, `engines.node: expected ">=N" (got ${manifest.engines.node})`);
    const system = spawnSync('node', ['--version'], { env: { ...process.env, PATH: shellPath }, encoding: 'utf8' });
    const major = Number(/^v(\d+)/.exec(system.stdout)?.[1]);
    assert.ok(major >= Number(range[1]), `the system Node ${system.stdout.trim()} is outside engines ${manifest.engines.node}`);
    assert.ok(Number(range[1]) <= 20, 'the README promises any system Node that runs npm (20 and later)');
  });

  it("`npx frontier pipelines` starts with the command's own output, whatever the system Node is", () => {
    const result = spawnSync('npx', ['--no-install', 'frontier', 'pipelines'], {
      cwd: REPO_ROOT,
      env: { ...process.env, PATH: shellPath, NODE_OPTIONS: '' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stderr, '');
    assert.match(result.stdout, /^selfplay +stack SelfPlayLeague/);
  });
});

describe('cli: --target aws', () => {
  const cfn = mockClient(CloudFormationClient);
  const sfn = mockClient(SFNClient);
  // The region comes from the environment or ~/.aws/config; each test sets the one it needs.
  const saved = {
    AWS_REGION: process.env.AWS_REGION,
    AWS_DEFAULT_REGION: process.env.AWS_DEFAULT_REGION,
    AWS_PROFILE: process.env.AWS_PROFILE,
    AWS_CONFIG_FILE: process.env.AWS_CONFIG_FILE,
  };
  before(() => {
    delete process.env.AWS_DEFAULT_REGION;
    delete process.env.AWS_PROFILE;
    process.env.AWS_CONFIG_FILE = join(tmpdir(), 'fp-no-aws-config');
    process.env.AWS_REGION = 'eu-west-1';
  });
  after(() => {
    cfn.restore();
    sfn.restore();
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });

  it('no region says what is missing and what to do, without "Error: Error:"', async () => {
    cfn.reset();
    delete process.env.AWS_REGION;
    try {
      const c = capture();
      assert.equal(await main(['run', 'selfplay', '--target', 'aws'], c.io), 1);
      assert.match(
        c.text(),
        /^error: --target aws: no AWS region is set; configure a region and credentials \(aws configure, or AWS_PROFILE \/ AWS_REGION\), and deploy the stack first: npm run deploy -- FrontierPlatform SelfPlayLeague$/,
      );
      assert.doesNotMatch(c.text(), /Error: Error/);
      assert.equal(cfn.calls().length, 0, 'nothing is asked of AWS without a region');
    } finally {
      process.env.AWS_REGION = 'eu-west-1';
    }
  });

  it('no credentials names the region and says what to do', async () => {
    cfn.reset();
    cfn.on(DescribeStacksCommand).rejects(Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' }));
    const c = capture();
    assert.equal(await main(['run', 'selfplay', '--target', 'aws'], c.io), 1);
    assert.match(
      c.text(),
      /^error: --target aws: no AWS credentials were found for eu-west-1; configure .* npm run deploy -- FrontierPlatform SelfPlayLeague$/,
    );
  });

  it('an unexpected plain Error is printed once, a named one with its name', async () => {
    cfn.reset();
    cfn
      .on(DescribeStacksCommand)
      .rejectsOnce(new Error('socket hang up'))
      .rejectsOnce(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const plain = capture();
    assert.equal(await main(['run', 'probe', '--target', 'aws'], plain.io), 1);
    assert.equal(plain.text(), 'error: socket hang up');
    const named = capture();
    assert.equal(await main(['run', 'probe', '--target', 'aws'], named.io), 1);
    assert.equal(named.text(), 'error: ThrottlingException: Rate exceeded');
  });

  it('a missing deployment says which stack to deploy', async () => {
    cfn.reset();
    cfn.on(DescribeStacksCommand).rejects(Object.assign(new Error('Stack with id FrontierProbe does not exist'), { name: 'ValidationError' }));
    const c = capture();
    assert.equal(await main(['run', 'probe', '--target', 'aws'], c.io), 1);
    assert.match(c.text(), /pipeline probe is not deployed in .* \(no stack FrontierProbe\); deploy it with: npx cdk deploy FrontierProbe/);
  });

  it('starts the deployed state machine and follows it to the end', async () => {
    cfn.reset();
    sfn.reset();
    const arn = 'arn:aws:states:eu-west-1:123456789012:stateMachine:probe';
    cfn.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'FrontierProbe',
          CreationTime: new Date(),
          StackStatus: 'CREATE_COMPLETE',
          Outputs: [{ OutputKey: 'StateMachineArn', OutputValue: arn }],
        },
      ],
    });
    sfn.on(StartExecutionCommand).resolves({ executionArn: `${arn}:exec`, startDate: new Date() });
    sfn
      .on(GetExecutionHistoryCommand)
      .resolvesOnce({ events: [{ id: 1, timestamp: new Date(), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'prepare: Invoke' } }] })
      // The next poll returns the whole history again: only the new event is shown.
      .resolves({
        events: [
          { id: 1, timestamp: new Date(), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'prepare: Invoke' } },
          { id: 2, timestamp: new Date(), type: 'MapIterationSucceeded' },
        ],
      });
    sfn
      .on(DescribeExecutionCommand)
      .resolvesOnce({ status: 'RUNNING', executionArn: `${arn}:exec`, stateMachineArn: arn, startDate: new Date() })
      .resolves({
        status: 'SUCCEEDED',
        executionArn: `${arn}:exec`,
        stateMachineArn: arn,
        startDate: new Date(),
        output: '{"total":14}',
      });
    const c = capture();
    const result = await runAws(pipelineNamed('probe'), { items: [1] }, { pollMs: 1 }, c.io, {
      cfn: new CloudFormationClient({ region: 'eu-west-1' }),
      sfn: new SFNClient({ region: 'eu-west-1' }),
    });
    assert.equal(result.status, 'SUCCEEDED');
    assert.deepEqual(result.output, { total: 14 });
    const start = sfn.commandCalls(StartExecutionCommand)[0]!.args[0].input;
    assert.equal(start.stateMachineArn, arn);
    assert.deepEqual(JSON.parse(start.input!), { config: { items: [1] } });
    assert.equal(c.text().match(/> prepare: Invoke/g)?.length, 1, 'each event shown once');
    assert.equal(c.text().match(/map items: 1 done/g)?.length, 1);
    // The probe has no report: its line is in the run-cost function's log, and runs show prints it.
    assert.match(c.text(), new RegExp(`writes them in its log \\(this pipeline's runs have no report\\).*runs show ${arn}:exec --target aws`));
    assert.equal(
      runCostWhere('sae', `${arn}:run-7`, { reportUri: 's3://platform-bucket/data/sae/reports/ab/report.html' }).split(': ')[1]!.split(' within')[0],
      'the run-cost function writes them with the report at s3://platform-bucket/runs/sae/run-7/report.html',
    );
    assert.doesNotMatch(c.text(), /map items: 2 done/);
  });
});

describe('cli: local commands end to end', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'fp-cli-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('serve keeps the arena and approval links up until told to stop', async () => {
    const c = capture();
    let stop!: () => void;
    const until = new Promise<void>((resolve) => (stop = resolve));
    const serving = serveLocal({ dataDir: dir }, until, c.io);
    const url = await waitFor('the serve line', () => /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(c.text())?.[1], 60_000);
    const page = await fetch(`${url}/arena`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
    assert.match(c.text(), /arena: http:\/\/127\.0\.0\.1:\d+\/arena/);
    stop();
    assert.deepEqual(await serving, { url });
    await assert.rejects(fetch(`${url}/arena`), 'stopped');
  });

  it('run, runs, artifacts, approvals and cache explain', async () => {
    const run = capture();
    assert.equal(await main(['run', 'probe', '--data-dir', dir, '--config', '{"items":[2,3]}'], run.io), 0, run.text());
    assert.match(run.text(), /> prepare/);
    assert.match(run.text(), /square: Items: 2 done/);
    assert.match(run.text(), /SUCCEEDED in .* 1 Batch jobs/);

    const runs = capture();
    assert.equal(await main(['runs', '--data-dir', dir], runs.io), 0);
    assert.match(runs.text(), /probe\s+SUCCEEDED/);

    // runs show: the run's counters and their cost at the dated AWS prices.
    const name = /^(\S+)\s+probe\s+SUCCEEDED/m.exec(runs.text())?.[1];
    assert.ok(name, runs.text());
    const shown = capture();
    assert.equal(await main(['runs', 'show', name, '--data-dir', dir], shown.io), 0, shown.text());
    assert.match(shown.text(), /state transitions: \d+/);
    assert.match(shown.text(), /Lambda: 5 invocations, \d+ ms billed/);
    assert.match(shown.text(), /Batch: 1 jobs/);
    assert.match(shown.text(), /Batch on Fargate/);
    // Step by step beside the plan: the cold run made every planned state, invocation and job.
    assert.match(shown.text(), /^by step \(actual \/ planned for a cold run\):$/m);
    assert.match(shown.text(), /^ {2}config +3 \/ 3 +1 \/ 1 +0 \/ 0 +0\.0 +0 +\$/m);
    assert.match(shown.text(), /^ {2}sum +(\d+) \/ \1 +0 \/ 0 +1 \/ 1 +\d+\.\d +1 +\$/m);
    assert.match(shown.text(), /cost on AWS at these figures: \$[0-9.]+ \(us-east-1 prices of \d{4}-\d{2}-\d{2}/);
    const unknown = capture();
    assert.equal(await main(['runs', 'show', 'no-such-run', '--data-dir', dir], unknown.io), 1);
    assert.match(unknown.text(), /RUN: .*no-such-run/);

    const list = capture();
    assert.equal(await main(['artifacts', 'list', '--data-dir', dir], list.io), 0);
    assert.match(list.text(), /probe-summary\s+1/);

    const show = capture();
    assert.equal(await main(['artifacts', 'show', 'probe-summary@1', '--data-dir', dir], show.io), 0, show.text());
    assert.match(show.text(), /probe-summary@1 {2}s3:\/\//);
    assert.match(show.text(), /lineage\n {4}probe-summary@1 {2}\(made by arn:aws:states:/);
    assert.match(show.text(), /metrics {4}\{"total":13,"count":2\}/);

    const missing = capture();
    assert.equal(await main(['artifacts', 'show', 'probe-summary@9', '--data-dir', dir], missing.io), 1);
    assert.match(missing.text(), /artifact "probe-summary" has no version 9/);

    const approvals = capture();
    assert.equal(await main(['approvals', 'list', '--data-dir', dir], approvals.io), 0);
    assert.match(approvals.text(), /no approvals yet/);

    const explain = capture();
    assert.equal(await main(['cache', 'explain', 'probe', '--data-dir', dir], explain.io), 0, explain.text());
    assert.match(explain.text(), /prepare\n {2}1 entry; latest from .*\n {2}code version: unchanged/);

    // A second run with other items: explain names the input field that differs.
    assert.equal(await main(['run', 'probe', '--data-dir', dir, '--config', '{"items":[2,4]}'], capture().io), 0);
    const explain2 = capture();
    assert.equal(await main(['cache', 'explain', 'probe', 'prepare', '--data-dir', dir], explain2.io), 0);
    assert.match(explain2.text(), /inputs: the latest two entries differ at \$\.items\[1\]/);
  });

  it('cache explain names the files that changed since the latest entry', async () => {
    // Record an entry made with an older code version of prepare: its manifest differs in one file.
    const versions = join(dir, 'code-versions');
    const current = readdirSync(versions)
      .map((f) => ({ f, c: JSON.parse(readFileSync(join(versions, f), 'utf8')) as Record<string, string> }))
      .find(({ c }) => 'functions/probe/prepare/handler.ts' in c)!;
    const older = { ...current.c, 'functions/probe/prepare/handler.ts': '0'.repeat(64) };
    const olderHash = 'f'.repeat(64);
    writeFileSync(join(versions, `${olderHash}.json`), JSON.stringify(older));
    const { LocalRuntime } = await import('#infra/local/runtime.ts');
    const { PutCommand } = await import('@aws-sdk/lib-dynamodb');
    const { dynamoClient } = await import('#shared/clients/aws.ts');
    const runtime = await LocalRuntime.start({ dataDir: dir });
    try {
      await dynamoClient().send(
        new PutCommand({
          TableName: runtime.resources.tables[0]!,
          Item: { pk: 'CACHE#probe#prepare', sk: 'older', codeVersion: olderHash, inputs: '{}', createdAt: '2999-01-01T00:00:00.000Z', executionId: 'x' },
        }),
      );
    } finally {
      await runtime.stop();
    }
    const explain = capture();
    assert.equal(await main(['cache', 'explain', 'probe', 'prepare', '--data-dir', dir], explain.io), 0);
    assert.match(explain.text(), /code version: CHANGED ffffffffffff -> [0-9a-f]{12}/);
    assert.match(explain.text(), /changed: functions\/probe\/prepare\/handler\.ts/);
  });

  it('diffJson names nested paths', () => {
    assert.deepEqual(diffJson({ a: 1, b: [1, 2] }, { a: 1, b: [1, 3], c: 0 }), ['$.b[1]', '$.c']);
    assert.deepEqual(diffJson({ a: 1 }, { a: 1 }), []);
  });
});
