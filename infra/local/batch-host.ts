/**
 * Runs Batch jobs locally: the job folder's command as a child process with the spec and
 * environment the job gets on AWS, at most one job per core at once (the local compute
 * environment), its output in a log file, its JSON progress lines passed on. A Node job's
 * command (`node --import tsx main.ts`) runs on this process's own Node, which is 22 even where
 * the system's `node` is older.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, createWriteStream, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { STAGING_URL_VARIABLE, StagingDocument } from '#shared/presign.ts';
import { LOCAL_MAX_TIMEOUT_SECONDS } from './asl-prepass.ts';
import { TaskError } from './lambda-host.ts';
import {
  newSandboxWorkDir,
  readSandboxOutput,
  runPythonJobSandboxed,
  SandboxSetupError,
  type PythonJobOptions,
  type SandboxLimits,
  type SandboxResult,
} from './sandbox.ts';

export interface LocalJobDefinition {
  readonly arn: string;
  readonly name: string;
  /** Repo-relative job folder. */
  readonly jobDir: string;
  readonly command: string[];
  readonly environment: Record<string, string>;
  readonly timeoutSeconds: number;
  /** Batch's attempts (RetryStrategy.Attempts): each may run to the timeout. Default 1. */
  readonly attempts?: number;
  /** Runs untrusted code: in the local sandbox, with its spec staged in and its outputs copied out. */
  readonly sandbox?: LocalSandbox;
  /** What the job asks for on AWS (its resource requirements), for the cost model. */
  readonly resources?: {
    readonly platform: 'FARGATE' | 'EC2';
    readonly vcpus: number;
    readonly memoryMiB: number;
    readonly gpus: number;
    readonly instanceType?: string;
  };
}

/**
 * A sandboxed job locally. The sandbox has no network, so the host (trusted) stages the job as
 * the image's stager does on AWS: it reads the staging document at JOB_STAGING_URL, fetches the
 * spec by its presigned GET into the job's private work dir, runs `<command> --spec
 * /job/spec.json --output-dir /job/out`, and uploads only the declared outputs (regular files,
 * size-capped) by their presigned PUTs. A limit the run hit (wall, CPU, memory, processes, files)
 * becomes the job's error, written as its result.json in place of anything the job wrote there.
 */
export interface LocalSandbox {
  /** File names the job may hand back from /job/out, besides result.json. */
  readonly outputs: readonly string[];
  /** The wall limit is not here: it is the job's timeout (the definition's, or the submit's). */
  readonly limits?: Partial<Omit<SandboxLimits, 'wallSeconds'>>;
  /** Largest output file copied back. Default: 8 MiB. */
  readonly maxOutputBytes?: number;
  /**
   * The untrusted half's script in the job folder (reward_channel.py): it runs in a second
   * sandbox, with its own empty work dir, joined to the job by one socket (the job's
   * `--reward-socket 4`, the worker's `--socket 4`); the job's outputs are out of its reach.
   */
  readonly worker?: string;
}

export interface JobRun {
  readonly jobId: string;
  readonly jobName: string;
  readonly exitCode: number;
  readonly logFile: string;
}

/** A counting semaphore: the local compute environment's capacity. */
class Slots {
  private waiting: (() => void)[] = [];
  private used = 0;
  constructor(private readonly size: number) {}
  async take(): Promise<() => void> {
    if (this.used >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.used++;
    return () => {
      this.used--;
      this.waiting.shift()?.();
    };
  }
}

/** Debian's python3 carries python3-torch and python3-boto3; prefer it to whatever is first on PATH. */
function pythonBinary(): string {
  return process.env.FRONTIER_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

export class BatchHost {
  private readonly slots: Slots;
  jobsRun = 0;
  private stopped = false;
  private readonly children = new Set<ReturnType<typeof spawn>>();

  constructor(
    private readonly logDir: string,
    private readonly baseEnv: Record<string, string>,
    concurrency = availableParallelism(),
    private readonly onProgress?: (jobName: string, progress: unknown) => void,
  ) {
    this.slots = new Slots(Math.max(1, concurrency));
    mkdirSync(logDir, { recursive: true });
  }

  /**
   * Runs one job to completion; throws States.TaskFailed (as `submitJob.sync` does) when it fails.
   * `timeoutSeconds` is the submit's attempt timeout, which replaces the definition's.
   */
  async run(
    def: LocalJobDefinition,
    jobName: string,
    overrides: Record<string, string>,
    timeoutSeconds?: number,
    onSeconds?: (seconds: number) => void,
  ): Promise<JobRun> {
    const wallSeconds = Math.min(timeoutSeconds ?? def.timeoutSeconds, LOCAL_MAX_TIMEOUT_SECONDS);
    if (this.stopped) throw new TaskError('Batch.ServerException', `${jobName}: the local runtime is stopping`);
    const taken = await this.slots.take();
    if (this.stopped) {
      taken();
      throw new TaskError('Batch.ServerException', `${jobName}: the local runtime is stopping`);
    }
    // The job's seconds from its slot to its end, failed or not (what an instance would bill;
    // the wait for a slot is the queue's, which AWS does not bill).
    const started = performance.now();
    const release = () => {
      taken();
      onSeconds?.((performance.now() - started) / 1000);
    };
    const jobId = randomUUID();
    const logFile = join(this.logDir, `${jobName}-${jobId}.log`);
    if (def.sandbox) {
      try {
        this.jobsRun++;
        return await this.runSandboxed(def, def.sandbox, jobName, jobId, logFile, overrides, wallSeconds);
      } finally {
        release();
      }
    }
    try {
      this.jobsRun++;
      const [cmd, ...args] = def.command;
      const binary = cmd === 'python3' || cmd === 'python' ? pythonBinary() : cmd === 'node' ? process.execPath : cmd!;
      const cwd = join(REPO_ROOT, def.jobDir);
      const env = {
        ...this.baseEnv,
        ...def.environment,
        ...overrides,
        AWS_BATCH_JOB_ID: jobId,
        AWS_BATCH_JOB_ATTEMPT: '1',
        PYTHONPATH: join(REPO_ROOT, 'batch-jobs', 'common'),
        // Two cores are shared by every local job and the runtime: one thread per job.
        OMP_NUM_THREADS: '1',
        OPENBLAS_NUM_THREADS: '1',
      };
      const log = createWriteStream(logFile);
      const child = spawn(binary, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      this.children.add(child);
      let tail = '';
      let partial = '';
      child.stdout.on('data', (chunk: Buffer) => {
        log.write(chunk);
        partial += chunk.toString('utf8');
        const lines = partial.split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          if (line.startsWith('{"progress"')) {
            try {
              this.onProgress?.(jobName, (JSON.parse(line) as { progress: unknown }).progress);
            } catch {
              /* not a progress line after all */
            }
          }
        }
      });
      child.stderr.on('data', (chunk: Buffer) => {
        log.write(chunk);
        tail = (tail + chunk.toString('utf8')).slice(-2000);
      });
      const exitCode = await new Promise<number>((resolve) => {
        // Clamped: setTimeout fires at once for delays past 2^31 ms (about 24.8 days).
        const timer = setTimeout(() => child.kill('SIGKILL'), wallSeconds * 1000);
        child.on('error', (error) => {
          tail += `\n${error.message}`;
          clearTimeout(timer);
          resolve(127);
        });
        child.on('close', (code, signal) => {
          clearTimeout(timer);
          resolve(code ?? (signal ? 137 : 1));
        });
      });
      this.children.delete(child);
      await new Promise((resolve) => log.end(resolve));
      if (exitCode !== 0) throw containerExited(jobId, jobName, exitCode, logFile, tail);
      return { jobId, jobName, exitCode, logFile };
    } finally {
      release();
    }
  }

  private async runSandboxed(
    def: LocalJobDefinition,
    sandbox: LocalSandbox,
    jobName: string,
    jobId: string,
    logFile: string,
    overrides: Record<string, string>,
    wallSeconds: number,
  ): Promise<JobRun> {
    const [cmd, ...args] = def.command;
    if (cmd !== 'python3' || !args[0])
      throw new TaskError('Batch.ClientException', `${jobName}: a sandboxed job runs "python3 <script>", not ${JSON.stringify(def.command)}`);
    // As the image's stager (sandbox_entry.py): everything the job reads or writes goes through
    // the presigned URLs of its staging document, checked and expired by the S3 emulator as S3 does.
    let staging: StagingDocument;
    try {
      staging = await readStagingDocument(overrides[STAGING_URL_VARIABLE]);
    } catch (error) {
      if (!(error instanceof StagingError)) throw error;
      writeFileSync(logFile, `${error.message}\n`);
      throw containerExited(jobId, jobName, 2, logFile, error.message);
    }
    const work = newSandboxWorkDir(jobName);
    const put = (name: string, body: Buffer | string) => {
      const url = staging.outputUrls[name];
      if (!url) throw new StagingError(`the staging document (${STAGING_URL_VARIABLE}) has no URL for the declared output ${name}`);
      return presignedRequest(url, `the output ${name}`, { method: 'PUT', body });
    };
    try {
      writeFileSync(join(work, 'spec.json'), await presignedRequest(staging.specUrl, 'the spec'));
      const job = {
        jobDir: def.jobDir,
        workDir: work,
        args: [args[0], ...args.slice(1), '--spec', '/job/spec.json', '--output-dir', '/job/out'],
        env: { AWS_BATCH_JOB_ID: jobId, AWS_BATCH_JOB_ATTEMPT: '1' },
        limits: { ...sandbox.limits, wallSeconds },
      };
      const runs: { job: SandboxResult; worker?: SandboxResult } = sandbox.worker
        ? await runSandboxedWithWorker(job, sandbox.worker, jobName)
        : { job: await runPythonJobSandboxed(job) };
      // The limit either sandbox hit is the job's verdict; the candidate's own process first.
      const result: SandboxResult = runs.worker?.limit
        ? { ...runs.job, limit: runs.worker.limit, limitDetail: runs.worker.limitDetail, limitEvidence: runs.worker.limitEvidence }
        : runs.job;
      writeFileSync(
        logFile,
        `${runs.job.stdoutTail}\n--- stderr ---\n${runs.job.stderrTail}\n` +
          (runs.worker ? `--- reward process: stdout ---\n${runs.worker.stdoutTail}\n--- reward process: stderr ---\n${runs.worker.stderrTail}\n` : ''),
      );
      const maxBytes = sandbox.maxOutputBytes ?? 8 * 1024 * 1024;
      for (const name of [...sandbox.outputs, 'result.json']) {
        if (result.limit && name === 'result.json') continue;
        let bytes: Buffer;
        try {
          bytes = await readSandboxOutput(work, `out/${name}`, maxBytes);
        } catch {
          continue; // missing, not a regular file, or too big: not handed back
        }
        await put(name, bytes);
      }
      if (result.limit) {
        const message = `the sandbox stopped the job: ${result.limit} limit (${result.limitDetail ?? 'no detail'})`;
        await put('result.json', JSON.stringify({ error: { type: 'SandboxLimit', limit: result.limit, evidence: result.limitEvidence, message } }, null, 2));
        throw new TaskError(
          'States.TaskFailed',
          JSON.stringify({ JobId: jobId, JobName: jobName, Status: 'FAILED', StatusReason: message, SandboxLimit: result.limit }),
        );
      }
      if (result.exitCode !== 0) throw containerExited(jobId, jobName, result.exitCode, logFile, result.stderrTail);
      return { jobId, jobName, exitCode: 0, logFile };
    } catch (error) {
      // A refused or failed transfer fails the job, as the stager's would on AWS.
      if (!(error instanceof StagingError)) throw error;
      appendFileSync(logFile, `${error.message}\n`);
      throw containerExited(jobId, jobName, 1, logFile, error.message);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  stop(): void {
    this.stopped = true;
    for (const child of this.children) child.kill('SIGKILL');
  }
}

/** A sandboxed job's staging failed: no document, a bad one, or a transfer S3 refused. */
class StagingError extends Error {
  override name = 'StagingError';
}

/**
 * A presigned GET or PUT as the stager makes it; a refusal names what was moved and S3's error
 * code, never the URL (it is a credential until it expires).
 */
async function presignedRequest(url: string, what: string, init: { method?: string; body?: Buffer | string } = {}): Promise<Buffer> {
  let response: Response;
  try {
    const body = typeof init.body === 'string' || init.body === undefined ? init.body : new Uint8Array(init.body);
    response = await fetch(url, { ...init, body, signal: AbortSignal.timeout(60_000) });
  } catch (error) {
    throw new StagingError(`${what}: the request failed (${(error as Error).message})`);
  }
  const body = Buffer.from(await response.arrayBuffer());
  if (!response.ok) {
    const code = /<Code>([^<]+)<\/Code>/.exec(body.toString('utf8'))?.[1] ?? 'no error code';
    throw new StagingError(`${what}: HTTP ${response.status} (${code})`);
  }
  return body;
}

/** The document at the job's JOB_STAGING_URL: its spec's presigned GET and its outputs' PUTs. */
async function readStagingDocument(url: string | undefined): Promise<StagingDocument> {
  if (!url) {
    throw new StagingError(`${STAGING_URL_VARIABLE} must be set: a sandboxed job is started with the presigned URL of its staging document`);
  }
  const what = `the staging document (${STAGING_URL_VARIABLE})`;
  const text = (await presignedRequest(url, what)).toString('utf8');
  let parsed: ReturnType<typeof StagingDocument.safeParse>;
  try {
    parsed = StagingDocument.safeParse(JSON.parse(text));
  } catch {
    throw new StagingError(`${what} is not JSON`);
  }
  if (parsed.success) return parsed.data;
  // The field and the rule, not the value: a value there may be a presigned URL.
  const issue = parsed.error.issues[0]!;
  throw new StagingError(`${what}: ${['staging', ...issue.path.map(String)].join('.')}: ${issue.message}`);
}

/** The job's failure as `submitJob.sync` reports it: its description, with the last lines of its stderr. */
function containerExited(jobId: string, jobName: string, exitCode: number | null, logFile: string, stderr: string): TaskError {
  return new TaskError(
    'States.TaskFailed',
    JSON.stringify({
      JobId: jobId,
      JobName: jobName,
      Status: 'FAILED',
      StatusReason: 'Essential container in task exited',
      Container: { ExitCode: exitCode, LogStreamName: logFile },
      StderrTail: stderr.trim().split('\n').slice(-15).join('\n'),
    }),
  );
}

/**
 * A job and its untrusted worker in two sandboxes joined by one socket: the worker starts first
 * with a socket to this process at its fd 4; that socket is handed to the job's sandbox as its
 * fd 4 and closed here at once (before either side can send), so the two talk directly and
 * nothing else holds an end. When the job ends, the worker is stopped.
 */
export async function runSandboxedWithWorker(job: PythonJobOptions, worker: string, jobName: string): Promise<{ job: SandboxResult; worker: SandboxResult }> {
  const workerDir = newSandboxWorkDir(`${jobName}-worker`);
  const stop = new AbortController();
  let handOver!: (socket: Socket) => void;
  const spawned = new Promise<Socket>((resolve) => (handOver = resolve));
  const workerRun = runPythonJobSandboxed({
    jobDir: job.jobDir,
    workDir: workerDir,
    args: [worker, '--socket', '4'],
    ...(job.limits ? { limits: job.limits } : {}),
    extraFds: ['pipe'],
    onSpawn: (child) => handOver(child.stdio[4] as Socket),
    abort: stop.signal,
  });
  try {
    const socket = await Promise.race([
      spawned,
      workerRun.then(() => {
        throw new SandboxSetupError(`${jobName}: the worker ended before the job started`);
      }),
    ]);
    const jobRun = await runPythonJobSandboxed({
      ...job,
      args: [...job.args, '--reward-socket', '4'],
      extraFds: [socket],
      onSpawn: () => socket.destroy(),
    }).finally(() => stop.abort());
    return { job: jobRun, worker: await workerRun };
  } finally {
    stop.abort();
    await workerRun.catch(() => undefined);
    rmSync(workerDir, { recursive: true, force: true });
  }
}
