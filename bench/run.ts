/**
 * Benchmarks (npm run bench): prints the figures and writes them to bench/results.json.
 *
 * - Embedded runtime overhead per state transition, on a 200-state Pass chain.
 * - Fully cached rerun of the probe pipeline against its cold run (and what the rerun started).
 * - `cdk synth` of the whole app, offline, with bundling.
 * - The joint Elo fit over a full league: 22 players, 231 matches of 400 games.
 * - Self-play: NN-vs-NN match games per second (the match Lambda's code, one core), the trainer's
 *   environment steps per second and seconds per generation at each size, and the fully cached
 *   rerun of the smoke league against its cold run (about ten minutes; skip with --skip-league).
 * - The molecule pool: the default pool's size and build time (RDKit's WebAssembly build).
 * - The xTB oracle job's throughput against raw xtb on the same 50 pool molecules (goal >= 0.9).
 * - Reward search: the sandbox's start-up overhead, import torch inside it, and one candidate's
 *   training time sandboxed and plain.
 * - Molecular discovery at the local size, each batch approved from its email: surrogate hits
 *   against random hits on the same oracle budget (goal >= 3x); about ten minutes, skip with
 *   --skip-discovery.
 * - Evaluate every checkpoint, at the producer's test size: executions started against distinct
 *   checkpoints under repeated events, eval jobs of a one-benchmark backfill against the
 *   checkpoint count, eval throughput, and upload-to-execution latency.
 * - Refinery: documents/s and MB/s of each filter rule, the filter chain and MinHash signatures,
 *   one core (goal: filters and signatures together at 1,000 documents/s); then the pipeline at
 *   the smoke size, a cold run and a new threshold's rerun kept apart, the injected material's
 *   precision and recall, the classifier's agreement and the cost ratio (about ten minutes; skip
 *   with --skip-refinery-pipeline).
 * - Sparse autoencoders at the smoke size on the refinery's smoke output: the best SAE's loss
 *   recovered at L0 <= 64 (goal >= 90 %), detection of top-tokens labels against mismatched ones
 *   (goal: a gap of 0.15), a new k grid (no harvest job), Claude (the fake explainer) and a new
 *   Claude model (labels and detection only), SAE training tokens/s on one core (about fifteen
 *   minutes with its own refinery run; skip with --skip-sae-pipeline).
 * - Video curation at the smoke size (12 generated videos): cut precision and recall within 2
 *   frames, each drop rule's recall and the good clips dropped against the generator's truth,
 *   cutting and scoring speed per core, and a stricter threshold's rerun (about three minutes;
 *   skip with --skip-video-pipeline).
 * - The humanoid's CPU twin on one core: the G1's compile time, MuJoCo's physics steps per second
 *   (reference 10-12k) and the environment's control steps per second (ten seconds).
 * - The humanoid pipeline at the smoke size: the CPU trainer's environment steps per second on
 *   every core, its first evaluation against its last, the final policy's replays and a replay
 *   with its film in seconds (skip with --skip-humanoid-pipeline).
 */
import { spawnSync } from 'node:child_process';
import { cacheSaving, costOf, formatUsd, usageOfStats } from '#shared/cost/usage.ts';
import { parentExecutionArn } from '#infra/cli/inspect.ts';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRuntime } from '#infra/local/runtime.ts';
import { PIPELINES } from '#infra/registry.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { expectedScore, fitElo, fitEloPoint, type EloMatch } from '#shared/selfplay/elo.ts';
import { seededRandom } from '#shared/random.ts';
import { loadOnnxPolicy } from '#shared/selfplay/onnx.ts';
import { playMatch } from '#shared/selfplay/match.ts';
import { SELFPLAY_SIZES, SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { newLeague, trainingGroups } from '#shared/selfplay/league-doc.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { LM_SFT_SIZES, LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { backfill } from '#infra/cli/benchmarks.ts';
import type { ExecutionRecord } from '#infra/local/runtime.ts';
import { registerBenchmark, setGuardSettings } from '#shared/evals/benchmarks.ts';
import { CHAIN_LENGTH, CHAIN_PIPELINE } from './chain-stack.ts';
import { measurePool } from './molecules-pool.ts';
import { describeOracle, measureOracle } from './molecules-oracle.ts';
import { describeDiscovery, measureDiscovery } from './molecules-discovery.ts';
import { describeRewards, measureRewards } from './rewards.ts';
import { describeRefinery, measureRefinery } from './refinery.ts';
import { describeRefineryPipeline, measureRefineryPipeline } from './refinery-pipeline.ts';
import { describeSaePipeline, measureSaePipeline } from './sae-pipeline.ts';
import { describeVideoPipeline, measureVideoPipeline } from './video-pipeline.ts';
import { describeHumanoidPhysics, measureHumanoidPhysics } from './humanoid-physics.ts';
import { describeHumanoidPipeline, measureHumanoidPipeline } from './humanoid-pipeline.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const figures: Record<string, unknown> = {
  date: new Date().toISOString(),
  machine: { cores: availableParallelism(), cpu: cpus()[0]?.model, node: process.version },
};

/** A cold run and its fully cached rerun: both records, their seconds and the rerun's share of the cold time. */
async function coldAndRerun(runtime: LocalRuntime, pipeline: string, input: unknown) {
  const cold = await runtime.startExecution(pipeline, input).done;
  const warm = await runtime.startExecution(pipeline, input).done;
  if (cold.status !== 'SUCCEEDED' || warm.status !== 'SUCCEEDED') throw new Error(`${pipeline} runs: ${cold.status} ${cold.cause ?? ''}, ${warm.status}`);
  const seconds = (r: ExecutionRecord) => (Date.parse(r.stopDate!) - Date.parse(r.startDate)) / 1000;
  return { cold, warm, coldSeconds: seconds(cold), rerunSeconds: seconds(warm), ratio: seconds(warm) / seconds(cold) };
}

/**
 * The two runs priced at AWS's rates from their local counters (shared/cost): the cold run's low
 * end, the rerun's high end, the rerun's share (goal <= 0.05), and what its cache hits saved.
 */
function costFigures(cold: ExecutionRecord, warm: ExecutionRecord) {
  const coldCost = costOf(usageOfStats(cold.stats));
  const warmCost = costOf(usageOfStats(warm.stats));
  const steps = new Map([[cold.executionArn, cold.stats.steps]]);
  const saved = cacheSaving(warm.stats.cacheHits ?? [], (arn) => steps.get(parentExecutionArn(arn)));
  return {
    coldUsd: [coldCost.lowUsd, coldCost.highUsd],
    rerunUsd: [warmCost.lowUsd, warmCost.highUsd],
    costRatio: warmCost.highUsd / coldCost.lowUsd,
    savedUsd: [saved.lowUsd, saved.highUsd],
    text: `on AWS: cold ${formatUsd(coldCost.lowUsd, coldCost.highUsd)}, rerun ${formatUsd(warmCost.lowUsd, warmCost.highUsd)}, cost ratio ${(warmCost.highUsd / coldCost.lowUsd).toFixed(4)} (goal <= 0.05; the rerun's high end against the cold run's low end), the cache saved ${formatUsd(saved.lowUsd, saved.highUsd)}`,
  };
}

async function transitionOverhead(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-chain-'));
  const runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [CHAIN_PIPELINE] });
  try {
    const perTransition: number[] = [];
    for (let i = 0; i < 12; i++) {
      const t0 = performance.now();
      const record = await runtime.startExecution('bench-chain', { config: {} }).done;
      const ms = performance.now() - t0;
      if (record.status !== 'SUCCEEDED' || record.stats.statesEntered !== CHAIN_LENGTH) throw new Error(`chain run ${record.status}`);
      if (i >= 2) perTransition.push(ms / CHAIN_LENGTH); // the first runs warm up the JIT
    }
    figures.transitionOverheadMs = {
      median: median(perTransition),
      min: Math.min(...perTransition),
      goal: 5,
      states: CHAIN_LENGTH,
      runs: perTransition.length,
    };
    console.log(
      `runtime overhead per state transition: ${median(perTransition).toFixed(3)} ms (median of ${perTransition.length} runs of ${CHAIN_LENGTH} states; goal <= 5 ms)`,
    );
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function cachedRerun(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-probe-'));
  const runtime = await LocalRuntime.start({ dataDir: dir });
  const probe = PIPELINES.find((p) => p.name === 'probe')!;
  const input = { config: probe.config.parse(probe.smoke) };
  try {
    const { cold, warm, coldSeconds, rerunSeconds, ratio } = await coldAndRerun(runtime, 'probe', input);
    const cost = costFigures(cold, warm);
    figures.cachedRerun = {
      cost: { coldUsd: cost.coldUsd, rerunUsd: cost.rerunUsd, ratio: cost.costRatio, savedUsd: cost.savedUsd },
      coldSeconds,
      rerunSeconds,
      ratio,
      goal: 0.05,
      rerunLambdaInvocations: warm.stats.lambdaInvocations,
      rerunBatchJobs: warm.stats.batchJobs,
      coldLambdaInvocations: cold.stats.lambdaInvocations,
      coldBatchJobs: cold.stats.batchJobs,
    };
    console.log(
      `probe: cold ${coldSeconds.toFixed(3)} s, fully cached rerun ${rerunSeconds.toFixed(3)} s, ratio ${ratio.toFixed(4)} (goal <= 0.05); ` +
        `rerun started ${warm.stats.lambdaInvocations} Lambda invocations and ${warm.stats.batchJobs} Batch jobs`,
    );
    console.log(`probe ${cost.text}`);
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function cdkSynth(): void {
  const out = mkdtempSync(join(tmpdir(), 'fp-bench-synth-'));
  const times: number[] = [];
  for (let i = 0; i < 2; i++) {
    const t0 = performance.now();
    const result = spawnSync('npx', ['cdk', 'synth', '--quiet', '--output', out], {
      cwd: REPO_ROOT,
      env: { ...process.env, CDK_DISABLE_CLI_TELEMETRY: 'true' },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`cdk synth failed: ${result.stderr}`);
    times.push((performance.now() - t0) / 1000);
  }
  rmSync(out, { recursive: true, force: true });
  figures.cdkSynthSeconds = { runs: times, median: median(times) };
  console.log(`cdk synth (whole app, bundling, cdk-nag): ${times.map((t) => t.toFixed(1)).join(' s, ')} s`);
}

function eloFit(): void {
  // A league of 22 players with spread-out true ratings, every pair playing 400 games.
  const random = seededRandom(7);
  const players = Array.from({ length: 22 }, (_, i) => (i === 0 ? 'random' : `p${i}`));
  const truth = players.map((_, i) => i * 40);
  const matches: EloMatch[] = [];
  for (let a = 0; a < players.length; a++) {
    for (let b = a + 1; b < players.length; b++) {
      const p = expectedScore(truth[a]!, truth[b]!);
      let winsA = 0;
      for (let g = 0; g < 400; g++) if (random() < p) winsA++;
      matches.push({ a: players[a]!, b: players[b]!, winsA, winsB: 400 - winsA, draws: 0 });
    }
  }
  const input = { players, matches, anchor: 'random' };
  fitEloPoint(input); // warm-up: the first call compiles
  const point: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    fitEloPoint(input);
    point.push(performance.now() - t0);
  }
  const t0 = performance.now();
  fitElo(input, { bootstrapSamples: 200 });
  const withBootstrap = performance.now() - t0;
  figures.eloFit = { matches: matches.length, players: players.length, pointFitMs: median(point), goalMs: 50, withBootstrap200Ms: withBootstrap };
  console.log(
    `Elo fit, 22 players / ${matches.length} matches: ${median(point).toFixed(2)} ms (goal <= 50 ms); with 200 bootstrap resamples ${withBootstrap.toFixed(0)} ms`,
  );
}

const python = '/usr/bin/python3';

async function matchSpeed(policyDir: string): Promise<void> {
  // The real architecture (126-256-256-7, untrained weights), as the match Lambda loads it.
  const a = await loadOnnxPolicy(join(policyDir, 'policy-1.onnx'), { name: 'a' });
  const b = await loadOnnxPolicy(join(policyDir, 'policy-2.onnx'), { name: 'b' });
  const rows: Record<string, { gamesPerSecond: number; seconds400: number; pliesPerGame: number }> = {};
  for (const mode of ['sample', 'greedy'] as const) {
    await playMatch({ a, b, games: 400, seed: 0, mode }); // warm-up
    const times: number[] = [];
    let plies = 0;
    for (let i = 1; i <= 7; i++) {
      const t0 = performance.now();
      plies += (await playMatch({ a, b, games: 400, seed: i, mode })).plies;
      times.push((performance.now() - t0) / 1000);
    }
    rows[mode] = { gamesPerSecond: 400 / median(times), seconds400: median(times), pliesPerGame: plies / (7 * 400) };
    console.log(
      `match, NN vs NN (126-256-256-7, untrained), ${mode}: ${(400 / median(times)).toFixed(0)} games/s, 400 games in ${median(times).toFixed(3)} s, ` +
        `${(plies / (7 * 400)).toFixed(1)} plies/game (goal >= 1,000 games/s)`,
    );
  }
  figures.matchGamesPerSecond = { ...rows, goal: 1000 };
}

function trainerSpeed(policyDir: string): void {
  const rows: Record<string, unknown> = {};
  for (const size of ['smoke', 'full'] as const) {
    const config = SelfPlayConfig.parse(SELFPLAY_SIZES[size]);
    const iterations = 3;
    const fields = { games_per_iteration: config.gamesPerIteration, iterations, ppo: config.ppo, opponent_groups: trainingGroups(newLeague().opponents) };
    const run = spawnSync(python, [join(REPO_ROOT, 'bench', 'selfplay_bench.py'), policyDir, JSON.stringify(fields)], {
      encoding: 'utf8',
      env: { ...process.env, OMP_NUM_THREADS: '1', PYTHONDONTWRITEBYTECODE: '1' },
    });
    if (run.status !== 0) throw new Error(`selfplay_bench.py failed: ${run.stderr}`);
    const row = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { envStepsPerSecond: number; secondsPerIteration: number };
    rows[size] = { ...row, iterationsPerGeneration: config.iterations, secondsPerGeneration: row.secondsPerIteration * config.iterations };
    console.log(
      `trainer (CPU, one thread), ${size}: ${config.gamesPerIteration} games/iteration, ${row.envStepsPerSecond.toFixed(0)} env steps/s in rollouts, ` +
        `${row.secondsPerIteration.toFixed(2)} s/iteration, ${(row.secondsPerIteration * config.iterations).toFixed(0)} s per generation of ${config.iterations} iterations`,
    );
  }
  figures.trainer = rows;
}

async function leagueRerun(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-league-'));
  const entry = PIPELINES.find((p) => p.name === SELFPLAY_PIPELINE)!;
  const runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [entry] });
  const input = { config: SelfPlayConfig.parse(SELFPLAY_SIZES.smoke) };
  try {
    const { cold, warm, coldSeconds, rerunSeconds, ratio } = await coldAndRerun(runtime, SELFPLAY_PIPELINE, input);
    const metrics = (cold.output as { metrics: Record<string, number | string> }).metrics;
    const cost = costFigures(cold, warm);
    figures.smokeLeague = {
      cost: { coldUsd: cost.coldUsd, rerunUsd: cost.rerunUsd, ratio: cost.costRatio, savedUsd: cost.savedUsd },
      coldSeconds,
      rerunSeconds,
      ratio,
      goal: 0.05,
      rerunBatchJobs: warm.stats.batchJobs,
      rerunLambdaInvocations: warm.stats.lambdaInvocations,
      metrics,
    };
    console.log(
      `smoke league: cold ${coldSeconds.toFixed(0)} s, fully cached rerun ${rerunSeconds.toFixed(2)} s, ratio ${ratio.toFixed(4)} (goal <= 0.05); ` +
        `rerun started ${warm.stats.batchJobs} Batch jobs and ${warm.stats.lambdaInvocations} Lambda invocations (the config check, which found the run cache's entry)`,
    );
    console.log(`smoke league ${cost.text}`);
    console.log(
      `smoke champion ${metrics.champion}: greedy vs tactical ${metrics.greedyVsTactical} (first ${metrics.greedyVsTacticalFirst}, second ${metrics.greedyVsTacticalSecond}), ` +
        `vs random ${metrics.greedyVsRandom}; Elo ${metrics.championElo} vs tactical ${metrics.tacticalElo}`,
    );
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function evaluations(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-evals-'));
  const data = join(dir, 'benchmarks');
  const made = spawnSync(python, [join(REPO_ROOT, 'batch-jobs/evals-lm/make_benchmarks.py'), data, '--rows', '300'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`make_benchmarks.py failed: ${made.stderr}`);
  const runtime = await LocalRuntime.start({ dataDir: join(dir, 'data'), pipelines: [pipelineNamed(EVALS_PIPELINE), pipelineNamed(LM_SFT_PIPELINE)] });
  const where = { table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! };
  try {
    for (const [name, scorer] of [
      ['arithmetic', 'exact-number'],
      ['reversal', 'exact-string'],
    ] as const) {
      await registerBenchmark(where, { name, scorer, sampleSize: 100, data: readFileSync(join(data, `${name}.jsonl`), 'utf8') });
    }
    await setGuardSettings(where, { target: 'arithmetic', guard: 'reversal', marginPoints: 2 });
    // Upload-to-execution latency: from the manifest's PUT (the objectCreated event) to the run's start.
    const uploaded = new Map<string, number>();
    const announced = new Map<string, Record<string, unknown>>();
    const latencies: number[] = [];
    const evalRecords: ExecutionRecord[] = [];
    runtime.on('objectCreated', (e: { detail: { object: { key: string } } }) => {
      uploaded.set(e.detail.object.key, performance.now());
      announced.set(e.detail.object.key, e);
    });
    runtime.on('stateEntered', ({ state, executionArn }: { state: string; executionArn: string }) => {
      if (state !== 'Started by upload?') return;
      const record = runtime.executionRecord(executionArn);
      const key = (record?.input as { trigger?: { key: string } } | undefined)?.trigger?.key;
      if (key && uploaded.has(key)) latencies.push(performance.now() - uploaded.get(key)!);
    });
    runtime.on('executionDone', (r: ExecutionRecord) => {
      if (r.pipeline === EVALS_PIPELINE) evalRecords.push(r);
    });
    const config = LmSftConfig.parse(LM_SFT_SIZES.test);
    const producer = await runtime.startExecution(LM_SFT_PIPELINE, { config }).done;
    await runtime.idle();
    if (producer.status !== 'SUCCEEDED') throw new Error(`producer ${producer.status}: ${producer.cause}`);
    const checkpoints = (producer.output as { train: { checkpoints: unknown[] } }).train.checkpoints.length;
    // Every manifest's event delivered three more times: no new execution.
    const manifests = [...uploaded.keys()].filter((k) => k.startsWith('checkpoints/') && k.endsWith('/manifest.json'));
    const before = evalRecords.length;
    for (const key of manifests) {
      for (let i = 0; i < 3; i++) await runtime.deliverEvent(announced.get(key)!);
    }
    await runtime.idle();
    const afterRepeats = evalRecords.length;
    const jobsBefore = runtime.counters().batchJobs;
    await registerBenchmark(where, {
      name: 'arithmetic-small',
      scorer: 'exact-number',
      sampleSize: 50,
      data: readFileSync(join(data, 'arithmetic.jsonl'), 'utf8'),
    });
    const summary = await backfill(config.run, undefined, { target: 'local' }, { out: () => {}, err: (l) => console.error(l) }, runtime);
    // Samples per second of the eval job's generation and scoring (one thread, CPU), per benchmark.
    const rates = new Map<string, number[]>();
    for (const r of evalRecords.slice(0, before)) {
      for (const item of (r.output as { results: { ok: boolean; value?: { benchmark: string; samplesPerSecond: number } }[] }).results) {
        if (item.ok && item.value) rates.set(item.value.benchmark, [...(rates.get(item.value.benchmark) ?? []), item.value.samplesPerSecond]);
      }
    }
    const samplesPerSecond = Object.fromEntries([...rates].map(([b, xs]) => [b, median(xs)]));
    figures.evaluations = {
      checkpoints,
      evalExecutions: before,
      executionsAfterRepeatedEvents: afterRepeats,
      repeatedDeliveries: manifests.length * 3,
      backfillEvalJobs: runtime.counters().batchJobs - jobsBefore,
      backfill: summary,
      uploadToExecutionMs: { median: median(latencies), max: Math.max(...latencies), runs: latencies.length },
      evalSamplesPerSecond: samplesPerSecond,
    };
    console.log(
      `evaluations: ${checkpoints} checkpoints uploaded -> ${before} executions; after ${manifests.length * 3} repeated deliveries: ${afterRepeats}; ` +
        `backfill of one new benchmark: ${runtime.counters().batchJobs - jobsBefore} eval jobs for ${summary.checkpoints} checkpoints; upload-to-execution ${median(latencies).toFixed(0)} ms median`,
    );
    console.log(
      `eval throughput (median samples/s, one thread): ${Object.entries(samplesPerSecond)
        .map(([b, x]) => `${b} ${x.toFixed(0)}`)
        .join(', ')}`,
    );
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const policyDir = mkdtempSync(join(tmpdir(), 'fp-bench-policies-'));
trainerSpeed(policyDir);
await matchSpeed(policyDir);
rmSync(policyDir, { recursive: true, force: true });
eloFit();
const pool = await measurePool();
figures.moleculePool = pool;
console.log(
  `molecule pool (RDKit WebAssembly, one core): ${pool.molecules} molecules from ${pool.candidates} candidates in ${pool.seconds.toFixed(1)} s; skipped ${JSON.stringify(pool.skipped)}`,
);
const humanoid = await measureHumanoidPhysics();
figures.humanoidPhysics = humanoid;
console.log(describeHumanoidPhysics(humanoid));
const oracle = await measureOracle();
figures.oracle = oracle;
console.log(describeOracle(oracle));
const refinery = await measureRefinery();
figures.refinery = refinery;
console.log(describeRefinery(refinery));
const rewards = await measureRewards();
figures.rewards = rewards;
console.log(describeRewards(rewards));
await transitionOverhead();
await cachedRerun();
await evaluations();
cdkSynth();
if (!process.argv.includes('--skip-refinery-pipeline')) {
  const pipeline = await measureRefineryPipeline('smoke');
  figures.refineryPipeline = { ...pipeline, cold: undefined, rerun: undefined, coldFigures: pipeline.cold, rerunKept: pipeline.rerun.accounting.kept };
  console.log(describeRefineryPipeline(pipeline));
}
if (!process.argv.includes('--skip-sae-pipeline')) {
  const sae = await measureSaePipeline('smoke', 'smoke');
  figures.saePipeline = sae;
  console.log(describeSaePipeline(sae));
}
if (!process.argv.includes('--skip-video-pipeline')) {
  const video = await measureVideoPipeline('smoke');
  figures.videoPipeline = video;
  console.log(describeVideoPipeline(video));
}
if (!process.argv.includes('--skip-humanoid-pipeline')) {
  const humanoidPipeline = await measureHumanoidPipeline('smoke');
  figures.humanoidPipeline = humanoidPipeline;
  console.log(describeHumanoidPipeline(humanoidPipeline));
}
if (!process.argv.includes('--skip-league')) await leagueRerun();
if (!process.argv.includes('--skip-discovery')) {
  const discovery = await measureDiscovery('local');
  figures.discovery = discovery;
  console.log(describeDiscovery(discovery));
}
writeFileSync(join(REPO_ROOT, 'bench', 'results.json'), `${JSON.stringify(figures, null, 2)}\n`);
console.log('wrote bench/results.json');
