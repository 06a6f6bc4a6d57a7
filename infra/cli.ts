#!/usr/bin/env -S node --import tsx
/**
 * frontier: one command line for both targets.
 *
 *   frontier run [pipeline] [--smoke|--full|--size NAME] [--config FILE|JSON] [--name NAME] [--target local|aws] [--verbose]
 *   frontier run [pipeline] ... --plan   (the run's plan and cost from its config; nothing runs)
 *   frontier runs [pipeline] [--target local|aws]
 *   frontier runs show RUN [--target local|aws]
 *   frontier artifacts list [NAME] | artifacts show NAME[@VERSION]
 *   frontier approvals list
 *   frontier cache explain [pipeline] [STEP]
 *   frontier benchmarks add NAME --data FILE --scorer SCORER --sample-size N [--description TEXT] [--bump]
 *   frontier benchmarks list | benchmarks guard TARGET GUARD [--margin POINTS]
 *   frontier backfill RUN [--benchmarks a,b]
 *   frontier triggers replay PIPELINE [--dry-run]   (uploads whose run could not start, from the trigger's dead-letter queue)
 *   frontier pipelines
 *   frontier serve                  (the arena and approval links on loopback, until Ctrl-C)
 *   frontier reset [--yes]
 *
 * Local (the embedded runtime, data under .local/) is the default target.
 */
import { existsSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { ConfigError, EmulatorStartError, PipelineError } from '#shared/errors.ts';
import { lockDataDir } from './local/emulators.ts';
import { openLocalData } from './local/data.ts';
import { LocalRuntime } from './local/runtime.ts';
import { PIPELINES, type PipelineEntry } from './registry.ts';
import { REWARDS_PIPELINE } from '../pipelines/rewards/stack.ts';
import { REFINERY_PIPELINE } from '../pipelines/refinery/stack.ts';
import { HUMANOID_PIPELINE } from '../pipelines/humanoid/stack.ts';
import { writeFile } from '#shared/documents.ts';
import { labelFileKey } from '#shared/refinery/label-step.ts';
import { parseLabelsFile } from '#shared/refinery/labels.ts';
import { MissingApiKeyError } from '#shared/rewards/errors.ts';
import { MAX_SOURCE_CHARS } from '#shared/rewards/propose.ts';
import { writeRewardSource } from '#shared/rewards/steps.ts';
import { sha256Hex } from '#shared/json.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { explainCache } from './cli/cache-explain.ts';
import { pipelineNamed, resolveConfig } from './cli/config.ts';
import { cachesRuns, limitBreaches, planOptionsOf, planRun, planWithRange, printPlan, refuseOverLimits, worstCase } from './cli/plan.ts';
import { measuredFigures } from './cli/plan-measured.ts';
import { listExecutionRecords } from './local/execution-records.ts';
import { listApprovals, listArtifacts, listAwsRuns, listLocalRuns, showArtifact, showAwsRun, showLocalRun } from './cli/inspect.ts';
import { processIo, type Io } from './cli/output.ts';
import { runAws } from './cli/run-aws.ts';
import { runLocal } from './cli/run-local.ts';
import { interrupted, serveLocal } from './cli/serve.ts';
import { backfill, benchmarksCommand } from './cli/benchmarks.ts';
import { triggersCommand } from './cli/triggers.ts';

const USAGE = `usage:
  frontier run [pipeline] [--smoke|--full|--size NAME] [--config FILE|JSON] [--name NAME] [--target local|aws] [--verbose]
  frontier run [pipeline] ... --plan    (a cold run's transitions, history events, invocations, jobs and cost; nothing runs)
  frontier run rewards --reward-file FILE.py [--reward-file ...]   (evaluate reward functions without Claude)
  frontier run refinery --labels-file FILE.jsonl   (quality labels {id, score, reason?} instead of Claude's)
  frontier run humanoid --checkpoint s3://.../checkpoint.json   (continue a run's training; publishes nothing)
  frontier runs [pipeline] [--target local|aws]
  frontier runs show RUN [--target aws] (a run's counters, its plan and their cost on AWS; on AWS, RUN is the execution ARN)
  frontier artifacts list [NAME]
  frontier artifacts show NAME[@VERSION]
  frontier approvals list
  frontier cache explain [pipeline] [STEP]
  frontier benchmarks add NAME --data FILE --scorer SCORER --sample-size N [--description TEXT] [--bump]
  frontier benchmarks list
  frontier benchmarks guard TARGET GUARD [--margin POINTS]
  frontier backfill RUN [--benchmarks a,b] [--target local|aws]
  frontier triggers replay PIPELINE [--dry-run] [--target local|aws]
  frontier pipelines
  frontier serve
  frontier reset [--yes]
options: --data-dir DIR (default .local), --port-base N (fixed loopback ports N..N+3)`;

/**
 * Reward files on the command line: each named by its file name and by the sha256 of its source,
 * checked by the pipeline's schema; the sources go to the platform bucket before the run starts
 * (`upload`), so that no source travels in the execution's input.
 */
function withRewardFiles(
  config: Record<string, unknown>,
  entry: PipelineEntry,
  files: string[] | undefined,
): { config: Record<string, unknown>; upload?: (bucket: string) => Promise<void> } {
  if (!files?.length) return { config };
  const sources = files.map((file) => {
    if (!existsSync(file)) throw new ConfigError('--reward-file', file, 'does not exist');
    const source = readFileSync(file, 'utf8');
    if (!source.trim()) throw new ConfigError('--reward-file', file, 'is empty');
    if (source.length > MAX_SOURCE_CHARS) throw new ConfigError('--reward-file', file, `has ${source.length} characters, over ${MAX_SOURCE_CHARS}`);
    const name =
      basename(file)
        .replace(/\.py$/, '')
        .toLowerCase()
        .replace(/[^a-z0-9_-]+/g, '-')
        .replace(/^[^a-z]+/, '')
        .slice(0, 40) || 'reward';
    return { name, source };
  });
  const rewardFiles = sources.map(({ name, source }) => ({ name, sha256: sha256Hex(source) }));
  return {
    config: parseOrThrow(entry.config, { ...config, rewardFiles }, 'config') as Record<string, unknown>,
    upload: async (bucket) => {
      for (const { source } of sources) await writeRewardSource({ bucket, pipeline: entry.name }, source);
    },
  };
}

/**
 * A labels file for the refinery: checked here (a bad line is named before anything runs), named
 * in the config by its sha256 and uploaded to data/refinery/label-files/<sha256>.jsonl before the
 * run starts.
 */
function withLabelsFile(
  config: Record<string, unknown>,
  entry: PipelineEntry,
  file: string | undefined,
): { config: Record<string, unknown>; upload?: (bucket: string) => Promise<void> } {
  if (file === undefined) return { config };
  if (!existsSync(file)) throw new ConfigError('--labels-file', file, 'does not exist');
  const text = readFileSync(file, 'utf8');
  parseLabelsFile(text, '--labels-file');
  const sha256 = sha256Hex(text);
  const labels = { ...((config.labels as Record<string, unknown> | undefined) ?? {}), fileSha256: sha256 };
  return {
    config: parseOrThrow(entry.config, { ...config, labels }, 'config') as Record<string, unknown>,
    upload: async (bucket) => {
      await writeFile(bucket, labelFileKey(entry.name, sha256), text, 'application/x-ndjson');
    },
  };
}

/** `--checkpoint URI` for the humanoid: the run continues that checkpoint's training and publishes nothing. */
function withCheckpoint(config: Record<string, unknown>, entry: PipelineEntry, checkpoint: string | undefined): Record<string, unknown> {
  if (checkpoint === undefined) return config;
  if (entry.name !== HUMANOID_PIPELINE) throw new ConfigError('--checkpoint', checkpoint, `is for the ${HUMANOID_PIPELINE} pipeline`);
  return parseOrThrow(entry.config, { ...config, checkpoint }, 'config') as Record<string, unknown>;
}

/** Locally, the refinery asks Claude for labels only with a key; without one it says what to do instead. */
function requireClaudeOrLabels(config: Record<string, unknown>, env: NodeJS.ProcessEnv): void {
  const labels = (config.labels ?? {}) as { fileSha256?: unknown };
  if (labels.fileSha256 || env.ANTHROPIC_API_KEY) return;
  throw new MissingApiKeyError(
    'no Anthropic API key: set ANTHROPIC_API_KEY to let Claude label the sample, or give labels with --labels-file FILE.jsonl (one {"id", "score": 0-5, "reason"} per line)',
  );
}

/** Locally, reward search asks Claude only with a key; without one it says what to do instead. */
function requireClaudeOrFiles(config: Record<string, unknown>, env: NodeJS.ProcessEnv): void {
  if (config.rewardFiles || env.ANTHROPIC_API_KEY) return;
  throw new MissingApiKeyError(
    'no Anthropic API key: set ANTHROPIC_API_KEY to let Claude write reward functions, or evaluate your own with --reward-file FILE.py (def reward(obs, action, next_obs, done, info) -> float)',
  );
}

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        full: { type: 'boolean', default: false },
        smoke: { type: 'boolean', default: false },
        size: { type: 'string' },
        config: { type: 'string' },
        name: { type: 'string' },
        target: { type: 'string', default: 'local' },
        verbose: { type: 'boolean', default: false },
        'data-dir': { type: 'string' },
        'port-base': { type: 'string' },
        yes: { type: 'boolean', default: false },
        data: { type: 'string' },
        scorer: { type: 'string' },
        'sample-size': { type: 'string' },
        description: { type: 'string' },
        bump: { type: 'boolean', default: false },
        margin: { type: 'string' },
        benchmarks: { type: 'string' },
        'reward-file': { type: 'string', multiple: true },
        'labels-file': { type: 'string' },
        checkpoint: { type: 'string' },
        'dry-run': { type: 'boolean', default: false },
        plan: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    io.err(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    io.out(USAGE);
    return command || values.help ? 0 : 2;
  }
  const dataDir = values['data-dir'] ?? join(REPO_ROOT, '.local');
  try {
    if (values.target !== 'local' && values.target !== 'aws') throw new ConfigError('--target', values.target, 'must be local or aws');
    if (values.full && values.smoke) throw new ConfigError('--full', true, 'cannot be combined with --smoke');
    if (values.size !== undefined && (values.full || values.smoke)) throw new ConfigError('--size', values.size, 'cannot be combined with --full or --smoke');
    const portBase = values['port-base'] === undefined ? undefined : Number(values['port-base']);
    if (portBase !== undefined && (!Number.isInteger(portBase) || portBase < 1024 || portBase > 65532)) {
      throw new ConfigError('--port-base', values['port-base'], 'must be an integer from 1024 to 65532');
    }
    switch (command) {
      case 'run': {
        const entry = pipelineNamed(rest[0]);
        const rewardFiles = values['reward-file'];
        if (rewardFiles?.length && entry.name !== REWARDS_PIPELINE)
          throw new ConfigError('--reward-file', rewardFiles[0], `is for the ${REWARDS_PIPELINE} pipeline`);
        const labelsFile = values['labels-file'];
        if (labelsFile !== undefined && entry.name !== REFINERY_PIPELINE)
          throw new ConfigError('--labels-file', labelsFile, `is for the ${REFINERY_PIPELINE} pipeline`);
        const withRewards = withRewardFiles(resolveConfig(entry, { full: values.full, size: values.size, config: values.config }), entry, rewardFiles);
        const withLabels = withLabelsFile(withRewards.config, entry, labelsFile);
        const config = withCheckpoint(withLabels.config, entry, values.checkpoint);
        if (values.plan) {
          const options = planOptionsOf(entry, config);
          const { plan, low } = planWithRange(entry, config, options);
          const failing = planRun(entry, config, { ...worstCase(entry, config, options), everyItemFails: true });
          const rerun = cachesRuns(entry) ? planRun(entry, config, { ...options, runCacheHit: true }) : undefined;
          printPlan(plan, io, low, measuredFigures(entry, config, listExecutionRecords(dataDir)), failing, rerun);
          for (const breach of limitBreaches(entry, config, worstCase(entry, config, options), plan))
            io.out(`a run of this config is refused before it starts: ${breach.driver ? `config.${breach.driver.field}: ` : ''}${breach.message}`);
          return 0;
        }
        // A run whose plan breaks a hard limit of Step Functions is refused here, before it starts.
        refuseOverLimits(entry, config, planOptionsOf(entry, config));
        if (entry.name === HUMANOID_PIPELINE && values.target !== 'aws' && config.trainer === 'ppo') {
          throw new ConfigError('trainer', 'ppo', 'Brax PPO over MuJoCo MJX runs on the GPU queue on AWS only (--target aws); locally the trainer is ars');
        }
        const upload = withRewards.upload ?? withLabels.upload;
        if (entry.name === REWARDS_PIPELINE && values.target !== 'aws') requireClaudeOrFiles(config, process.env);
        if (entry.name === REFINERY_PIPELINE && values.target !== 'aws') requireClaudeOrLabels(config, process.env);
        if (values.target === 'aws') {
          const result = await runAws(entry, config, { name: values.name, beforeStart: upload, verbose: values.verbose }, io);
          return result.status === 'SUCCEEDED' ? 0 : 1;
        }
        const record = await runLocal(entry, config, { dataDir, portBase, name: values.name, verbose: values.verbose, beforeStart: upload }, io);
        return record.status === 'SUCCEEDED' ? 0 : 1;
      }
      case 'runs':
        if (rest[0] === 'show') {
          if (!rest[1]) throw new ConfigError('runs show', undefined, 'needs the RUN to show (its name, as `frontier runs` lists it)');
          if (values.target === 'aws') await showAwsRun(rest[1], io);
          else showLocalRun(dataDir, rest[1], io);
          return 0;
        }
        if (values.target === 'aws') await listAwsRuns(pipelineNamed(rest[0]), io);
        else listLocalRuns(dataDir, rest[0] === undefined ? undefined : pipelineNamed(rest[0]).name, io);
        return 0;
      case 'benchmarks': {
        const [sub, ...args] = rest;
        await benchmarksCommand(
          sub,
          args,
          {
            data: values.data,
            scorer: values.scorer,
            sampleSize: values['sample-size'],
            description: values.description,
            bump: values.bump,
            margin: values.margin,
          },
          { target: values.target, dataDir, portBase },
          io,
        );
        return 0;
      }
      case 'backfill': {
        const [run] = rest;
        if (!run) throw new ConfigError('backfill', undefined, 'needs the RUN whose checkpoints to evaluate (checkpoints/<run>/<step>/)');
        const summary = await backfill(
          run,
          values.benchmarks
            ?.split(',')
            .map((b) => b.trim())
            .filter(Boolean),
          { target: values.target, dataDir, portBase },
          io,
        );
        return summary.failed ? 1 : 0;
      }
      case 'triggers': {
        const [sub, ...args] = rest;
        const summary = await triggersCommand(sub, args, { target: values.target, dataDir, portBase, dryRun: values['dry-run'] }, io);
        return summary.failed ? 1 : 0;
      }
      case 'serve':
        if (values.target === 'aws')
          throw new ConfigError('--target', 'aws', '"serve" serves the local runtime; a deployed arena is at the SelfPlayLeague stack output ArenaUrl');
        await serveLocal({ dataDir, portBase }, interrupted(), io);
        return 0;
      case 'pipelines':
        for (const p of PIPELINES) io.out(`${p.name.padEnd(16)} stack ${p.stackId.padEnd(20)} ${p.description}`);
        return 0;
      case 'artifacts':
      case 'approvals': {
        if (values.target === 'aws') {
          throw new ConfigError(
            '--target',
            'aws',
            `"${command}" reads the local index; against AWS, query the platform table (FrontierPlatform output TableName) with the AWS CLI`,
          );
        }
        const data = await openLocalData(dataDir);
        try {
          const [sub, arg] = rest;
          if (command === 'approvals') {
            if (sub !== undefined && sub !== 'list') throw new ConfigError('approvals', sub, 'the only subcommand is list');
            await listApprovals(data, io);
          } else if (sub === undefined || sub === 'list') {
            await listArtifacts(data, arg, io);
          } else if (sub === 'show' && arg) {
            await showArtifact(data, arg, io);
          } else {
            throw new ConfigError('artifacts', sub, 'use "artifacts list [NAME]" or "artifacts show NAME[@VERSION]"');
          }
        } finally {
          await data.close();
        }
        return 0;
      }
      case 'cache': {
        const [sub, pipelineName, step] = rest;
        if (sub !== 'explain') throw new ConfigError('cache', sub, 'the only subcommand is explain');
        if (values.target === 'aws') throw new ConfigError('--target', 'aws', '"cache explain" compares against the local cache only');
        const entry = pipelineNamed(pipelineName);
        const runtime = await LocalRuntime.start({ dataDir, portBase });
        try {
          await explainCache(runtime, entry.name, step, io);
        } finally {
          await runtime.stop();
        }
        return 0;
      }
      case 'reset': {
        if (!existsSync(dataDir)) {
          io.out(`${dataDir} does not exist; nothing to reset`);
          return 0;
        }
        if (!values.yes) throw new ConfigError('--yes', false, `reset deletes ${dataDir} (cache, artifacts, runs); pass --yes to confirm`);
        // Refuses while a live runtime holds the directory.
        const unlock = lockDataDir(dataDir);
        unlock();
        rmSync(dataDir, { recursive: true, force: true });
        io.out(`deleted ${dataDir}`);
        return 0;
      }
      default:
        io.err(`unknown command "${command}"\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    const e = error as Error;
    if (e instanceof PipelineError || e instanceof EmulatorStartError) {
      io.err(`error: ${e.message}`);
      return 1;
    }
    // A plain Error's name adds nothing ("Error: Error: ..."); a named one says what kind it is.
    io.err(e.name && e.name !== 'Error' ? `error: ${e.name}: ${e.message}` : `error: ${e.message}`);
    return 1;
  }
}

// Run when executed (directly, through npm's bin link, or by tsx), not when imported.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
