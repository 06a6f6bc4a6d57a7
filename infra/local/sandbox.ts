/**
 * Runs untrusted code (a candidate reward function and the training job around it) on this
 * machine inside a bubblewrap sandbox: the local stand-in for the Fargate job with no role and
 * no network that runs it on AWS.
 *
 * What the sandboxed code gets:
 * 1. New user, pid, network, IPC, UTS and cgroup namespaces (`--unshare-all`): no network at all,
 *    not even the host's loopback, where the local emulators and the credentials live; it sees
 *    only its own processes; it may not create further user namespaces.
 * 2. A root file system of read-only binds: /usr, /etc/alternatives and /etc/ld.so.cache (so
 *    shared libraries such as BLAS resolve), and what the caller binds read-only (the job
 *    folder). The host's HOME, /work, the repository, credentials files and `.local/` are not
 *    mounted at all. The caller's private work dir is the only writable host path, at /job;
 *    /tmp and /dev/shm are private tmpfs mounts with a size cap; everything else is read-only.
 * 3. An empty environment plus what the caller passes (`--clearenv`); bwrap itself is started
 *    with an empty environment too, because the sandbox's pid 1 is a fork of bwrap and its
 *    /proc/1/environ would otherwise show the host's variables.
 * 4. Resource limits set by prlimit inside the sandbox: CPU seconds, address space, tasks
 *    (fork bombs), file size, no core dumps. RLIMIT_NPROC is ignored for real root, so when
 *    this process is root, bwrap runs as an unprivileged host uid (65534 by default); the
 *    limit is then counted per sandbox (per user namespace), so concurrent runs do not share it.
 * 5. Host-side watchdogs, sampled from /proc every 200 ms, which the sandboxed code cannot
 *    tamper with: the wall clock, the number of tasks, the memory of all its processes together
 *    (RLIMIT_AS is per process; memfd files count too) and the disk used by the work dir
 *    (files deleted but held open count too). Any of them SIGKILLs bwrap, and with it
 *    (`--die-with-parent`) the sandbox's pid 1 and its whole pid namespace.
 *
 * Nothing the sandboxed code does makes `runSandboxed` throw: its exit, its signal and the
 * limit it hit come back in the result. It throws SandboxUnavailableError when bwrap is not
 * installed and SandboxSetupError when bwrap cannot build the sandbox (namespaces refused, a
 * bind source missing); both happen before any sandboxed code runs.
 *
 * Not contained here: the kernel itself (no seccomp filter; an exploitable kernel bug is an
 * escape, which on AWS the Fargate micro-VM boundary covers); CPU time summed over processes
 * (RLIMIT_CPU is per process; the wall clock bounds the total); System V shared memory that
 * is filled and then detached, which no process's figures show and which only a memory cgroup
 * would bound (the segments go when the sandbox's IPC namespace does, at the end of the run).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { chmodSync, constants, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { chmod, lchown, lstat, mkdtemp, open, readdir, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { delimiter, isAbsolute, join, normalize, resolve, sep } from 'node:path';
import { ConfigError, PipelineError } from '#shared/errors.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

/** bwrap is not installed (Debian's package is `bubblewrap`). */
export class SandboxUnavailableError extends PipelineError {}

/** bwrap ran but could not build the sandbox; no sandboxed code ran. */
export class SandboxSetupError extends PipelineError {}

/** A file the sandboxed code left in its work dir is not a plain, small, regular file. */
export class SandboxOutputError extends PipelineError {}

export interface SandboxLimits {
  /** Wall-clock seconds from start; then the host kills the whole sandbox. */
  readonly wallSeconds: number;
  /** CPU seconds per process (RLIMIT_CPU): SIGXCPU at this, SIGKILL one second later. */
  readonly cpuSeconds: number;
  /**
   * Address space per process (RLIMIT_AS), so an allocation past it fails (MemoryError), and
   * the host's cap on the memory of all the sandbox's processes together (anonymous and
   * shared-memory pages in RAM, plus memfd files).
   */
  readonly memoryBytes: number;
  /**
   * Tasks (processes and threads) in the sandbox (RLIMIT_NPROC, counted per sandbox); when
   * the host sees the sandbox at this count it ends the run as a fork bomb.
   */
  readonly maxProcesses: number;
  /** Largest file any process may write (RLIMIT_FSIZE): past it, writes fail with EFBIG. */
  readonly maxFileBytes: number;
  /** Disk the work dir may use (allocated blocks of everything in it), checked by the host. */
  readonly workDirBytes: number;
  /** Files and directories the work dir may hold, checked by the host. */
  readonly workDirEntries: number;
  /** Size of each private tmpfs (/tmp and /dev/shm); they live in the host's memory. */
  readonly tmpBytes: number;
  /** Open files per process (RLIMIT_NOFILE), which also bounds the host's per-sample fd scan. */
  readonly maxOpenFiles: number;
}

const MiB = 1024 * 1024;

/** Sized for one PPO training run of a small policy on CPU (torch needs about 0.8 GB of address space). */
export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  wallSeconds: 600,
  cpuSeconds: 600,
  memoryBytes: 2048 * MiB,
  maxProcesses: 64,
  maxFileBytes: 256 * MiB,
  workDirBytes: 1024 * MiB,
  workDirEntries: 10_000,
  tmpBytes: 64 * MiB,
  maxOpenFiles: 256,
};

export interface ReadOnlyBind {
  /** Absolute host path. */
  readonly source: string;
  /** Absolute path inside the sandbox (not /, /job, /tmp, /proc, /dev or /usr). */
  readonly target: string;
}

export interface SandboxOptions {
  /** Absolute path of the program inside the sandbox (for example /usr/bin/python3). */
  readonly command: string;
  readonly args?: readonly string[];
  /**
   * Host directory bound writable at /job: private to this run and created by the caller.
   * When this process is root it is handed to `hostUid` (chown, mode 0700) before the run.
   */
  readonly workDir: string;
  /** Further read-only binds (the job folder, shared modules). */
  readonly readOnly?: readonly ReadOnlyBind[];
  /** The whole environment of the sandboxed program, over PATH, HOME=/tmp, TMPDIR=/tmp and LANG. */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory inside the sandbox; /job by default. */
  readonly cwd?: string;
  /** Any subset; the rest come from DEFAULT_SANDBOX_LIMITS. */
  readonly limits?: Partial<SandboxLimits>;
  /** uid (and gid) inside the sandbox; 1000 by default, the `job` user of the job images. */
  readonly uid?: number;
  /** Unprivileged host uid (and gid) bwrap runs as when this process is root; 65534 by default. */
  readonly hostUid?: number;
  /** Bytes of stdout and of stderr kept in the result; 16 KiB each by default. */
  readonly tailBytes?: number;
  /** Every chunk of output as it arrives (progress lines), besides the bounded tails. */
  readonly onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /** The bwrap binary; found on PATH by default. */
  readonly bwrapPath?: string;
  /**
   * Further descriptors the sandboxed program inherits, as fds 4, 5...: 'pipe' (a socket to
   * this process, reachable from `onSpawn`'s child) or a socket of another run's, which joins the
   * two sandboxes directly (nothing else reaches either end).
   */
  readonly extraFds?: readonly ('pipe' | Socket)[];
  /** Called once bwrap is spawned, before any sandboxed code runs. */
  readonly onSpawn?: (child: ChildProcess) => void;
  /** Ends the run early (SIGKILL to the whole sandbox); that is no limit, so `limit` stays null. */
  readonly abort?: AbortSignal;
}

export type SandboxLimitName = 'wall' | 'cpu' | 'memory' | 'processes' | 'fileSize' | 'disk';

export interface SandboxResult {
  /** The program's exit status; null when a signal ended it. */
  readonly exitCode: number | null;
  /** The signal that ended the program (SIGKILL when the host ended the sandbox). */
  readonly signal: NodeJS.Signals | null;
  /** The limit the run hit, or null. */
  readonly limit: SandboxLimitName | null;
  /**
   * How the limit was recognised. `host`: a host watchdog ended the run, or the program died
   * of the kernel's limit signal (SIGXCPU, SIGXFSZ). `stderr`: inferred from the program's own
   * error output (MemoryError, EAGAIN from fork), which hostile code could fake about itself.
   */
  readonly limitEvidence: 'host' | 'stderr' | null;
  /** One sentence on the limit hit, for a verdict. */
  readonly limitDetail: string | null;
  readonly stdoutTail: string;
  readonly stderrTail: string;
  readonly wallSeconds: number;
  /** Largest number of tasks (processes plus threads) the host saw in the sandbox at once. */
  readonly peakTasks: number;
  /** Largest memory of all the sandbox's processes together that the host saw (as memoryBytes counts it). */
  readonly peakResidentBytes: number;
  /** Largest CPU time of a single process that the host saw. */
  readonly maxProcessCpuSeconds: number;
}

const JOB_DIR = '/job';
const DEFAULT_UID = 1000;
const NOBODY = 65534;
// Host-side checks run this often; a fork bomb or a memory hog is ended within about this long.
const WATCH_INTERVAL_MS = 200;
// Linux reports process CPU time in clock ticks of 1/100 s on every architecture this runs on.
const CLOCK_TICKS_PER_SECOND = 100;
const RESERVED_TARGETS = ['/', JOB_DIR, '/tmp', '/proc', '/dev', '/usr'];

/** Where bwrap is, or a SandboxUnavailableError that says how to install it. */
export function findBwrap(explicit?: string): string {
  if (explicit !== undefined) {
    if (!existsSync(explicit)) throw unavailable(`bwrap not found at ${explicit}`);
    return explicit;
  }
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/bin', '/usr/local/bin'];
  for (const dir of dirs) {
    const candidate = join(dir, 'bwrap');
    if (existsSync(candidate)) return candidate;
  }
  throw unavailable('bwrap not found on PATH');
}

function unavailable(what: string): SandboxUnavailableError {
  return new SandboxUnavailableError(
    `${what}: the local sandbox for untrusted code needs bubblewrap; install Debian's bubblewrap package (apt-get install bubblewrap)`,
  );
}

export interface SandboxProbe {
  readonly available: boolean;
  /** Why not, when not available. */
  readonly reason?: string;
}

const probes = new Map<string, Promise<SandboxProbe>>();

/** Whether a sandbox can be built here (bwrap installed, namespaces allowed); cached per process. */
export function sandboxAvailable(options: { bwrapPath?: string; hostUid?: number } = {}): Promise<SandboxProbe> {
  const key = `${options.bwrapPath ?? ''}:${options.hostUid ?? ''}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = probeSandbox(options);
    probes.set(key, probe);
  }
  return probe;
}

async function probeSandbox(options: { bwrapPath?: string; hostUid?: number }): Promise<SandboxProbe> {
  const workDir = await mkdtemp(join(tmpdir(), 'sandbox-probe-'));
  try {
    const result = await runSandboxed({
      command: '/usr/bin/true',
      workDir,
      limits: { wallSeconds: 30 },
      ...(options.bwrapPath !== undefined ? { bwrapPath: options.bwrapPath } : {}),
      ...(options.hostUid !== undefined ? { hostUid: options.hostUid } : {}),
    });
    if (result.exitCode !== 0)
      return { available: false, reason: `/usr/bin/true exited ${result.exitCode ?? result.signal} in the sandbox: ${result.stderrTail}` };
    return { available: true };
  } catch (error) {
    return { available: false, reason: error instanceof Error ? error.message : String(error) };
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

/** Runs one command in a fresh sandbox and reports how it ended. */
export async function runSandboxed(options: SandboxOptions): Promise<SandboxResult> {
  const limits = resolveLimits(options.limits);
  const workDir = checkWorkDir(options.workDir);
  const readOnly = (options.readOnly ?? []).map(checkBind);
  const uid = checkId('uid', options.uid ?? DEFAULT_UID);
  const bwrap = findBwrap(options.bwrapPath);
  const tailBytes = options.tailBytes ?? 16 * 1024;
  if (!isAbsolute(options.command)) throw new ConfigError('command', options.command, 'must be an absolute path inside the sandbox');

  // Real root is exempt from RLIMIT_NPROC (and should not own the sandbox anyway): run bwrap
  // as an unprivileged host uid that owns the work dir.
  const asRoot = process.getuid?.() === 0;
  const hostUid = asRoot ? checkId('hostUid', options.hostUid ?? NOBODY) : undefined;
  if (hostUid !== undefined) await handOver(workDir, hostUid);

  const args = bwrapArgs({ ...options, workDir, readOnly, uid, limits });
  const started = performance.now();
  const child = spawn(bwrap, args, {
    env: {},
    stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...(options.extraFds ?? [])],
    detached: true,
    ...(hostUid !== undefined ? { uid: hostUid, gid: hostUid } : {}),
  });
  options.onSpawn?.(child);

  const stdout = new Tail(tailBytes);
  const stderr = new Tail(tailBytes);
  let ready = false;
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout.push(chunk);
    options.onOutput?.('stdout', chunk);
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr.push(chunk);
    options.onOutput?.('stderr', chunk);
  });
  // The wrapper shell writes one byte here just before it execs the command, so a failure
  // before that byte is bwrap's, whatever the command would later print.
  (child.stdio[3] as NodeJS.ReadableStream).on('data', () => {
    ready = true;
  });
  (child.stdio[3] as NodeJS.ReadableStream).on('error', () => {});

  const watch = new Watch(limits, workDir);
  let killed: { limit: SandboxLimitName; detail: string } | undefined;
  const killAll = (limit: SandboxLimitName, detail: string): void => {
    if (killed) return;
    killed = { limit, detail };
    // bwrap's process group, only while bwrap is unreaped (so its pid cannot have been reused).
    // Its pid-1 child dies with it (--die-with-parent) and takes the pid namespace along: every
    // sandboxed process, daemons included, whatever signals they ignore.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  };
  let aborted = false;
  const abort = (): void => {
    if (killed || aborted) return;
    aborted = true;
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  };
  if (options.abort?.aborted) abort();
  else options.abort?.addEventListener('abort', abort, { once: true });
  const wallTimer = setTimeout(
    () => killAll('wall', `killed by the host after the wall-clock limit of ${limits.wallSeconds} s`),
    // Clamped: setTimeout fires at once for delays past 2^31 ms (about 24.8 days).
    Math.min(limits.wallSeconds * 1000, 2 ** 31 - 1),
  );
  const watchTimer = setInterval(() => {
    if (child.pid === undefined || killed || aborted) return;
    const verdict = watch.sample(child.pid);
    if (verdict) killAll(verdict.limit, verdict.detail);
  }, WATCH_INTERVAL_MS);

  const ended = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((done) => {
    child.on('error', (error) => done({ code: null, signal: null, error }));
    child.on('close', (code, sig) => done({ code, signal: sig }));
  });
  clearTimeout(wallTimer);
  clearInterval(watchTimer);
  options.abort?.removeEventListener('abort', abort);
  const wallSeconds = (performance.now() - started) / 1000;

  if (ended.error) {
    const code = (ended.error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw unavailable(`bwrap not found at ${bwrap}`);
    throw new SandboxSetupError(`could not start ${bwrap}: ${ended.error.message}`, { cause: ended.error });
  }
  if (!ready && !killed && !aborted) throw setupError(stderr.text(), hostUid);

  // Written faster than the watch samples: still over the limit, though it ended by itself.
  const diskAfter = killed || aborted ? undefined : watch.overDisk();
  const exit = decodeExit(ended.code, ended.signal);
  const verdict = killed
    ? { ...killed, evidence: 'host' as const }
    : aborted
      ? undefined
      : diskAfter
        ? { limit: 'disk' as const, detail: `left ${diskAfter}`, evidence: 'host' as const }
        : classify(exit, limits, watch, stderr.text());
  return {
    exitCode: exit.exitCode,
    signal: exit.signal,
    limit: verdict?.limit ?? null,
    limitEvidence: verdict?.evidence ?? null,
    limitDetail: verdict?.detail ?? null,
    stdoutTail: stdout.text(),
    stderrTail: stderr.text(),
    wallSeconds,
    peakTasks: watch.peakTasks,
    peakResidentBytes: watch.peakResidentBytes,
    maxProcessCpuSeconds: watch.maxCpuSeconds,
  };
}

/** The bwrap command line for one run (exported so reports can show it). */
export function bwrapArgs(o: {
  command: string;
  args?: readonly string[];
  workDir: string;
  readOnly?: readonly ReadOnlyBind[];
  env?: Readonly<Record<string, string>>;
  cwd?: string;
  uid: number;
  limits: SandboxLimits;
}): string[] {
  const { limits } = o;
  const args = [
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--uid',
    String(o.uid),
    '--gid',
    String(o.uid),
    '--hostname',
    'sandbox',
    '--ro-bind',
    '/usr',
    '/usr',
  ];
  // Merged-/usr Debian has /bin, /lib... as links into /usr; elsewhere they are real folders.
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const host = `/${name}`;
    let stat;
    try {
      stat = lstatSync(host);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', readlinkSync(host), host);
    else if (stat.isDirectory()) args.push('--ro-bind', host, host);
  }
  args.push(
    // Debian resolves libblas/liblapack through /etc/alternatives (torch needs them).
    '--ro-bind-try',
    '/etc/alternatives',
    '/etc/alternatives',
    '--ro-bind-try',
    '/etc/ld.so.cache',
    '/etc/ld.so.cache',
    '--dev',
    '/dev',
    '--size',
    String(limits.tmpBytes),
    '--tmpfs',
    '/dev/shm',
    '--proc',
    '/proc',
    '--size',
    String(limits.tmpBytes),
    '--tmpfs',
    '/tmp',
  );
  for (const bind of o.readOnly ?? []) args.push('--ro-bind', bind.source, bind.target);
  args.push(
    '--bind',
    o.workDir,
    JOB_DIR,
    // bwrap's root and /dev are tmpfs mounts without a size cap: make them read-only last
    // (not recursive, so /job, /tmp and /dev/shm stay writable).
    '--remount-ro',
    '/dev',
    '--remount-ro',
    '/',
    '--chdir',
    o.cwd ?? JOB_DIR,
    '--clearenv',
  );
  const env: Record<string, string> = {
    PATH: '/usr/bin:/bin',
    HOME: '/tmp',
    TMPDIR: '/tmp',
    LANG: 'C.UTF-8',
    ...o.env,
  };
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push(
    '--',
    '/bin/sh',
    '-c',
    'printf R >&3; exec "$@" 3>&-',
    'sandbox',
    '/usr/bin/prlimit',
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    `--as=${limits.memoryBytes}`,
    `--nproc=${limits.maxProcesses}`,
    `--fsize=${limits.maxFileBytes}`,
    `--nofile=${limits.maxOpenFiles}`,
    '--core=0',
    '--',
    o.command,
    ...(o.args ?? []),
  );
  return args;
}

// --- The Python job helper -------------------------------------------------------------------

/**
 * A new private work dir for one sandboxed run. bwrap runs as an unprivileged uid that must reach
 * it: the dirs live under a traverse-only (0711) root in the temp dir, not under a caller's
 * private data dir; each run's own dir is private (0700, handed to that uid at the run).
 */
export function newSandboxWorkDir(prefix: string): string {
  const root = join(tmpdir(), 'frontier-sandboxes');
  mkdirSync(root, { recursive: true, mode: 0o711 });
  chmodSync(root, 0o711);
  return mkdtempSync(join(root, `${prefix}-`));
}

/** Where runPythonJobSandboxed binds things inside the sandbox. */
export const SANDBOX_PATHS = {
  /** The job folder, read-only (the image's WORKDIR is /app too). */
  app: '/app',
  /** batch-jobs/common, read-only, on PYTHONPATH. */
  common: '/opt/common',
  /** The caller's private work dir, writable. */
  work: JOB_DIR,
  /** Debian's interpreter, which carries python3-torch. */
  python: '/usr/bin/python3',
} as const;

export interface PythonJobOptions {
  /** The job folder: absolute, or relative to the repository (batch-jobs/rewards-train). */
  readonly jobDir: string;
  /** The run's private work dir (see SandboxOptions.workDir). */
  readonly workDir: string;
  /** The entry script relative to the job folder (main.py), then its arguments. */
  readonly args: readonly string[];
  /** Added to the job environment below (and may override it). */
  readonly env?: Readonly<Record<string, string>>;
  readonly limits?: Partial<SandboxLimits>;
  readonly onOutput?: SandboxOptions['onOutput'];
  readonly hostUid?: number;
  readonly extraFds?: SandboxOptions['extraFds'];
  readonly onSpawn?: SandboxOptions['onSpawn'];
  readonly abort?: SandboxOptions['abort'];
}

/**
 * Runs a Python job folder in the sandbox the way its image runs it: Debian's python3 with
 * torch, the job folder at /app and batch-jobs/common on PYTHONPATH (both read-only), one
 * BLAS thread, unbuffered output, no bytecode writes. The working directory is /job, the only
 * writable place that outlives the run; JOB_WORK_DIR names it.
 */
export function runPythonJobSandboxed(options: PythonJobOptions): Promise<SandboxResult> {
  const [script, ...rest] = options.args;
  if (script === undefined || isAbsolute(script) || normalize(script).startsWith('..')) {
    throw new ConfigError('args[0]', script, 'must be the entry script, relative to the job folder');
  }
  const jobDir = isAbsolute(options.jobDir) ? options.jobDir : resolve(REPO_ROOT, options.jobDir);
  return runSandboxed({
    command: SANDBOX_PATHS.python,
    args: ['-B', `${SANDBOX_PATHS.app}/${normalize(script)}`, ...rest],
    workDir: options.workDir,
    readOnly: [
      { source: jobDir, target: SANDBOX_PATHS.app },
      { source: join(REPO_ROOT, 'batch-jobs', 'common'), target: SANDBOX_PATHS.common },
    ],
    env: {
      PYTHONPATH: `${SANDBOX_PATHS.app}:${SANDBOX_PATHS.common}`,
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONUNBUFFERED: '1',
      PYTHONNOUSERSITE: '1',
      // Two cores are shared by every local job: one BLAS/OpenMP thread each (threads also
      // count against maxProcesses).
      OMP_NUM_THREADS: '1',
      OPENBLAS_NUM_THREADS: '1',
      MKL_NUM_THREADS: '1',
      JOB_WORK_DIR: SANDBOX_PATHS.work,
      ...options.env,
    },
    ...(options.limits !== undefined ? { limits: options.limits } : {}),
    ...(options.onOutput !== undefined ? { onOutput: options.onOutput } : {}),
    ...(options.hostUid !== undefined ? { hostUid: options.hostUid } : {}),
    ...(options.extraFds !== undefined ? { extraFds: options.extraFds } : {}),
    ...(options.onSpawn !== undefined ? { onSpawn: options.onSpawn } : {}),
    ...(options.abort !== undefined ? { abort: options.abort } : {}),
  });
}

/**
 * Reads a file the sandboxed code left in its work dir without trusting it: no symbolic link
 * anywhere on the path (a link to /etc/shadow would be read by the host), a regular file (a
 * FIFO would block the host), at most maxBytes.
 */
export async function readSandboxOutput(workDir: string, relativePath: string, maxBytes: number): Promise<Buffer> {
  const parts = normalize(relativePath).split(sep);
  if (isAbsolute(relativePath) || parts.some((p) => p === '..' || p === '')) {
    throw new ConfigError('relativePath', relativePath, 'must be a path inside the work dir');
  }
  let path = workDir;
  for (const part of parts) {
    path = join(path, part);
    const stat = await lstat(path).catch(() => undefined);
    if (!stat) throw new SandboxOutputError(`${relativePath}: not found in the work dir`);
    if (stat.isSymbolicLink()) throw new SandboxOutputError(`${relativePath}: ${part} is a symbolic link`);
  }
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new SandboxOutputError(`${relativePath}: not a regular file`);
    if (stat.size > maxBytes) throw new SandboxOutputError(`${relativePath}: ${stat.size} bytes, more than the ${maxBytes} allowed`);
    const buffer = Buffer.alloc(stat.size);
    const { bytesRead } = await handle.read(buffer, 0, stat.size, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

// --- Checks on the options -------------------------------------------------------------------

function resolveLimits(partial: Partial<SandboxLimits> | undefined): SandboxLimits {
  const limits = { ...DEFAULT_SANDBOX_LIMITS, ...partial };
  for (const [field, value] of Object.entries(limits)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new ConfigError(`limits.${field}`, value, 'must be a positive number');
    }
  }
  for (const field of ['cpuSeconds', 'memoryBytes', 'maxProcesses', 'maxFileBytes', 'tmpBytes', 'maxOpenFiles', 'workDirEntries'] as const) {
    if (!Number.isInteger(limits[field])) throw new ConfigError(`limits.${field}`, limits[field], 'must be a whole number');
  }
  return limits;
}

function checkId(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 2 ** 32 - 2) {
    throw new ConfigError(field, value, 'must be a non-root uid (1 to 4294967294)');
  }
  return value;
}

function checkWorkDir(workDir: string): string {
  if (!isAbsolute(workDir)) throw new ConfigError('workDir', workDir, 'must be an absolute path');
  let stat;
  try {
    stat = lstatSync(workDir);
  } catch {
    throw new ConfigError('workDir', workDir, 'does not exist; the caller creates a private directory per run');
  }
  if (!stat.isDirectory()) throw new ConfigError('workDir', workDir, 'must be a directory (not a link or a file)');
  const real = realpathSync(workDir);
  // Shared places would let runs (or the host) see each other's files.
  const shared = new Set(['/', '/tmp', '/var/tmp', '/dev/shm', realpathSync(tmpdir()), homedir(), REPO_ROOT].map((p) => resolve(p)));
  if (shared.has(real)) throw new ConfigError('workDir', workDir, 'must be a private directory for this run, not a shared one');
  if (REPO_ROOT.startsWith(`${real}${sep}`)) throw new ConfigError('workDir', workDir, 'must not contain the repository');
  return real;
}

function checkBind(bind: ReadOnlyBind): ReadOnlyBind {
  if (!isAbsolute(bind.source) || !existsSync(bind.source)) {
    throw new ConfigError('readOnly.source', bind.source, 'must be an existing absolute host path');
  }
  const target = normalize(bind.target).replace(/(.)\/$/, '$1');
  const reserved = (r: string): boolean => target === r || (r !== '/' && target.startsWith(`${r}/`));
  if (!isAbsolute(target) || RESERVED_TARGETS.some(reserved)) {
    throw new ConfigError('readOnly.target', bind.target, `must be an absolute path, not / and not under ${RESERVED_TARGETS.slice(1).join(', ')}`);
  }
  return { source: realpathSync(bind.source), target };
}

/** Gives the work dir (and whatever the caller staged in it) to the sandbox's host uid, private to it. */
async function handOver(workDir: string, hostUid: number): Promise<void> {
  const walk = async (path: string): Promise<void> => {
    await lchown(path, hostUid, hostUid);
    const stat = await lstat(path);
    if (!stat.isDirectory()) return;
    for (const entry of await readdir(path)) await walk(join(path, entry));
  };
  await walk(workDir);
  await chmod(workDir, 0o700);
}

function setupError(stderr: string, hostUid: number | undefined): SandboxSetupError {
  const message = stderr.trim() || '(bwrap printed nothing)';
  let hint = '';
  if (/namespace|uid map|setting up uid|No permissions to creat/i.test(message)) {
    hint =
      " User namespaces may be disabled here: check sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone and AppArmor's kernel.apparmor_restrict_unprivileged_userns.";
  } else if (hostUid !== undefined && /Permission denied/.test(message)) {
    hint = ` bwrap runs as host uid ${hostUid}, which must be able to reach every bound folder.`;
  }
  return new SandboxSetupError(`bubblewrap could not set up the sandbox: ${message}.${hint}`);
}

// --- How the run ended -----------------------------------------------------------------------

const SIGNAL_NAMES: Record<number, NodeJS.Signals> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  3: 'SIGQUIT',
  4: 'SIGILL',
  5: 'SIGTRAP',
  6: 'SIGABRT',
  7: 'SIGBUS',
  8: 'SIGFPE',
  9: 'SIGKILL',
  10: 'SIGUSR1',
  11: 'SIGSEGV',
  12: 'SIGUSR2',
  13: 'SIGPIPE',
  14: 'SIGALRM',
  15: 'SIGTERM',
  24: 'SIGXCPU',
  25: 'SIGXFSZ',
  31: 'SIGSYS',
};

/** bwrap exits 128+N when its command died of signal N (as shells report it). */
function decodeExit(code: number | null, sig: NodeJS.Signals | null): { exitCode: number | null; signal: NodeJS.Signals | null } {
  if (sig) return { exitCode: null, signal: sig };
  if (code !== null && code > 128 && SIGNAL_NAMES[code - 128]) return { exitCode: null, signal: SIGNAL_NAMES[code - 128]! };
  return { exitCode: code, signal: null };
}

function classify(
  exit: { exitCode: number | null; signal: NodeJS.Signals | null },
  limits: SandboxLimits,
  watch: Watch,
  stderr: string,
): { limit: SandboxLimitName; detail: string; evidence: 'host' | 'stderr' } | undefined {
  if (exit.signal === 'SIGXCPU' || (exit.signal === 'SIGKILL' && watch.maxCpuSeconds >= limits.cpuSeconds - 0.5)) {
    return { limit: 'cpu', evidence: 'host', detail: `killed by the kernel at the CPU limit of ${limits.cpuSeconds} s per process` };
  }
  if (exit.signal === 'SIGXFSZ') {
    return { limit: 'fileSize', evidence: 'host', detail: `killed by the kernel writing past the file-size limit of ${limits.maxFileBytes} bytes` };
  }
  if (exit.exitCode === 0) return undefined;
  if (/BlockingIOError|Resource temporarily unavailable|can't start new thread|fork: retry/i.test(stderr)) {
    return { limit: 'processes', evidence: 'stderr', detail: `could not create a process or thread past the limit of ${limits.maxProcesses} tasks` };
  }
  if (/MemoryError|Cannot allocate memory|can't allocate memory|std::bad_alloc|out of memory/i.test(stderr)) {
    return { limit: 'memory', evidence: 'stderr', detail: `an allocation failed at the address-space limit of ${limits.memoryBytes} bytes` };
  }
  if (/File too large|EFBIG/.test(stderr)) {
    return { limit: 'fileSize', evidence: 'stderr', detail: `a write failed at the file-size limit of ${limits.maxFileBytes} bytes` };
  }
  return undefined;
}

/** The last `size` bytes of a stream. */
class Tail {
  private chunks: Buffer[] = [];
  private length = 0;
  constructor(private readonly size: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    while (this.length - this.chunks[0]!.length >= this.size) this.length -= this.chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.size)).toString('utf8');
  }
}

// --- Host-side watchdogs ---------------------------------------------------------------------

interface ProcStat {
  readonly ppid: number;
  readonly cpuSeconds: number;
  readonly threads: number;
}

function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return {
    ppid: Number(fields[1]),
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND,
    threads: Number(fields[17]),
  };
}

/** Private and shared-memory pages in RAM (file-backed pages such as libraries are not counted). */
function residentBytes(pid: number): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return 0;
  }
  let bytes = 0;
  for (const field of ['RssAnon', 'RssShmem']) {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (match) bytes += Number(match[1]) * 1024;
  }
  return bytes;
}

/**
 * Files a process holds open after deleting them, which no folder walk sees: memfd files
 * (RAM, counted as memory) and unlinked files (counted as disk). Each file once, by inode.
 */
function heldDeletedFiles(pid: number, seen: Set<string>): { memory: number; disk: number } {
  const held = { memory: 0, disk: 0 };
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return held;
  }
  for (const fd of fds) {
    const path = `/proc/${pid}/fd/${fd}`;
    try {
      const target = readlinkSync(path);
      if (!target.endsWith(' (deleted)')) continue;
      const stat = statSync(path);
      const key = `${stat.dev}:${stat.ino}`;
      if (!stat.isFile() || seen.has(key)) continue;
      seen.add(key);
      if (target.startsWith('/memfd:')) held.memory += stat.blocks * 512;
      else held.disk += stat.blocks * 512;
    } catch {
      /* closed meanwhile */
    }
  }
  return held;
}

/** Samples the sandbox's process tree and work dir; says which host-enforced limit is crossed. */
class Watch {
  peakTasks = 0;
  peakResidentBytes = 0;
  maxCpuSeconds = 0;

  constructor(
    private readonly limits: SandboxLimits,
    private readonly workDir: string,
  ) {}

  sample(bwrapPid: number): { limit: SandboxLimitName; detail: string } | undefined {
    const children = new Map<number, number[]>();
    const stats = new Map<number, ProcStat>();
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid)) continue;
      const stat = readStat(pid);
      if (!stat) continue;
      stats.set(pid, stat);
      const siblings = children.get(stat.ppid);
      if (siblings) siblings.push(pid);
      else children.set(stat.ppid, [pid]);
    }
    // Everything below bwrap: its pid-1 child, the command and whatever that started (orphans
    // are re-parented to the pid-1 child, so nothing escapes the count).
    const pids: number[] = [];
    const queue = [...(children.get(bwrapPid) ?? [])];
    while (queue.length > 0) {
      const pid = queue.shift()!;
      pids.push(pid);
      queue.push(...(children.get(pid) ?? []));
    }
    let tasks = 0;
    let resident = 0;
    let deletedOnDisk = 0;
    const seen = new Set<string>();
    for (const pid of pids) {
      const stat = stats.get(pid)!;
      tasks += stat.threads;
      this.maxCpuSeconds = Math.max(this.maxCpuSeconds, stat.cpuSeconds);
      const held = heldDeletedFiles(pid, seen);
      resident += residentBytes(pid) + held.memory;
      deletedOnDisk += held.disk;
    }
    this.peakTasks = Math.max(this.peakTasks, tasks);
    this.peakResidentBytes = Math.max(this.peakResidentBytes, resident);
    if (tasks >= this.limits.maxProcesses) {
      return { limit: 'processes', detail: `killed by the host at ${tasks} tasks, the limit of ${this.limits.maxProcesses} processes and threads` };
    }
    if (resident > this.limits.memoryBytes) {
      return {
        limit: 'memory',
        detail: `killed by the host with ${resident} bytes in memory in all its processes, over the limit of ${this.limits.memoryBytes}`,
      };
    }
    const disk = this.overDisk(deletedOnDisk);
    return disk ? { limit: 'disk', detail: `killed by the host with ${disk}` } : undefined;
  }

  /**
   * Which work-dir limit is passed, if any: its allocated bytes (plus `heldBytes` of deleted
   * files still held open) and its entries, counted until a limit is passed.
   */
  overDisk(heldBytes = 0): string | undefined {
    const over = `more than ${this.limits.workDirBytes} bytes in its work dir`;
    let bytes = heldBytes;
    if (bytes > this.limits.workDirBytes) return over;
    let entries = 0;
    const stack = [this.workDir];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue;
      }
      for (const name of names) {
        entries++;
        if (entries > this.limits.workDirEntries) {
          return `more than ${this.limits.workDirEntries} files and folders in its work dir`;
        }
        try {
          const stat = lstatSync(join(dir, name));
          bytes += stat.blocks * 512;
          if (stat.isDirectory()) stack.push(join(dir, name));
        } catch {
          /* removed meanwhile */
        }
        if (bytes > this.limits.workDirBytes) return over;
      }
    }
    return undefined;
  }
}
