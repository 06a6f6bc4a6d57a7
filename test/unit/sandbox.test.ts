/**
 * The local sandbox for untrusted candidate code (bubblewrap). Each hostile program below is a
 * small Python script, as candidates are Python; each must be contained, reported with the
 * limit it hit, and leave the host unharmed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  readSandboxOutput,
  runPythonJobSandboxed,
  runSandboxed,
  sandboxAvailable,
  SandboxOutputError,
  SandboxSetupError,
  SandboxUnavailableError,
  type SandboxLimits,
  type SandboxResult,
} from '#infra/local/sandbox.ts';

const probe = await sandboxAvailable();
const skip = probe.available ? false : `no sandbox here: ${probe.reason}`;

// The hostile candidates. Each gets a JSON config as argv[1] where it needs host facts.
const SCRIPTS: Record<string, string> = {
  'benign.py': `
import json
squares = sum(i * i for i in range(1000))
with open("/job/out.json", "w") as f:
    json.dump({"sumOfSquares": squares}, f)
print("done")
`,
  'steal.py': `
import glob, json, os, socket, sys
cfg = json.loads(sys.argv[1])
attempts, loot = {}, []
def attempt(name, fn):
    try:
        loot.append(str(fn())[:20000])
        attempts[name] = "ok"
    except Exception as e:
        attempts[name] = type(e).__name__
attempt("environ", lambda: dict(os.environ))
for p in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    loot.append(open(p, "rb").read().decode(errors="replace"))
for p in cfg["files"] + [os.path.expanduser("~/.aws/credentials"), "/root/.aws/credentials"]:
    attempt("read " + p, lambda p=p: open(p).read())
for p in cfg["folders"]:
    attempt("list " + p, lambda p=p: os.listdir(p))
def fetch(host, port):
    s = socket.create_connection((host, port), timeout=2)
    s.sendall(b"GET /v2/credentials HTTP/1.0\\r\\n\\r\\n")
    return s.recv(1000)
attempt("credentials endpoint", lambda: fetch("169.254.170.2", 80))
attempt("instance metadata", lambda: fetch("169.254.169.254", 80))
with open("/job/loot.json", "w") as f:
    json.dump({"attempts": attempts, "loot": loot}, f)
`,
  'network.py': `
import json, socket, sys
cfg = json.loads(sys.argv[1])
attempts = {}
def attempt(name, fn):
    try:
        fn()
        attempts[name] = "ok"
    except Exception as e:
        attempts[name] = type(e).__name__
for host in cfg["hosts"]:
    attempt("tcp " + host, lambda host=host: socket.create_connection((host, cfg["port"]), timeout=2).sendall(b"hello"))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
attempt("tcp public", lambda: socket.create_connection(("1.1.1.1", 443), timeout=2))
print(json.dumps({"attempts": attempts, "interfaces": [n for _, n in socket.if_nameindex()]}))
`,
  'forkbomb.py': `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`,
  'hog.py': `
x = bytearray(8 * 1024 ** 3)
`,
  'hog_children.py': `
import os, time
for _ in range(4):
    if os.fork() == 0:
        chunk = bytearray(200 * 1024 ** 2)
        time.sleep(30)
        os._exit(0)
time.sleep(30)
`,
  'hog_memfd.py': `
import os, time
files = []
for i in range(4):
    fd = os.memfd_create(f"hog{i}")
    for _ in range(20):
        os.write(fd, b"x" * (10 * 1024 ** 2))
    files.append(fd)
time.sleep(30)
`,
  'hang.py': `
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
time.sleep(1000)
`,
  'spin.py': `
import signal, sys
if sys.argv[1:] == ["ignore-sigxcpu"]:
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while True:
    pass
`,
  'escape.py': `
import json, os, sys
cfg = json.loads(sys.argv[1])
attempts = {}
for p in cfg["writes"]:
    try:
        with open(p, "w") as f:
            f.write("escaped")
        attempts[p] = "ok"
    except Exception as e:
        attempts[p] = type(e).__name__
for p in cfg["lists"]:
    try:
        attempts["list " + p] = os.listdir(p)
    except Exception as e:
        attempts["list " + p] = type(e).__name__
print(json.dumps(attempts))
`,
  'trainer.py': `
REWARD_SCALE = 1.0
`,
  'patch.py': `
import json, os, time
attempts = {}
targets = {
    "/app/trainer.py": "REWARD_SCALE = 1000.0\\n",
    "/opt/common/jobio.py": "raise SystemExit('patched')\\n",
    "/usr/lib/python3/dist-packages/sitecustomize.py": "import builtins\\n",
    "/tmp/sitecustomize.py": "import builtins\\n",
    "/tmp/flag": "patched",
    "/dev/shm/flag": "patched",
    "/job/flag": "patched",
    "/flag": "patched",
}
for path, text in targets.items():
    try:
        with open(path, "w") as f:
            f.write(text)
        attempts[path] = "ok"
    except Exception as e:
        attempts[path] = type(e).__name__
print(json.dumps(attempts), flush=True)
time.sleep(1.5)
`,
  'check.py': `
import json, os
import trainer, jobio
print(json.dumps({
    "rewardScale": trainer.REWARD_SCALE,
    "jobioHasRun": hasattr(jobio, "run"),
    "seen": [p for p in ["/tmp/flag", "/dev/shm/flag", "/tmp/sitecustomize.py", "/flag", "/job/flag"] if os.path.exists(p)],
    "workDir": sorted(os.listdir("/job")),
}))
`,
  'plant.py': `
import os
os.symlink("/etc/passwd", "/job/policy.json")
os.mkfifo("/job/result.json")
print("planted")
`,
  'torch_job.py': `
import json, time
start = time.time()
import torch
imported = time.time() - start
model = torch.nn.Linear(2, 3)
loss = model(torch.randn(8, 2)).pow(2).mean()
loss.backward()
with open("/job/out.json", "w") as f:
    json.dump({"torch": torch.__version__, "importSeconds": imported, "loss": float(loss)}, f)
`,
  'fake_bwrap_error.py': `
import sys
print("bwrap: Creating new namespace failed: Operation not permitted", file=sys.stderr)
sys.exit(1)
`,
};

const scratch = mkdtempSync(join(tmpdir(), 'sandbox-test-'));
const jobDir = join(scratch, 'job');
let workDirCount = 0;

/** A fresh private work dir for one run. */
function newWorkDir(): string {
  const dir = join(scratch, `work-${workDirCount++}`);
  mkdirSync(dir);
  return dir;
}

function runJob(script: string, args: string[], limits: Partial<SandboxLimits>, workDir = newWorkDir()): Promise<SandboxResult> {
  return runPythonJobSandboxed({ jobDir, workDir, args: [script, ...args], limits: { wallSeconds: 20, ...limits } });
}

/** Processes still alive (not zombies) whose command line holds `marker`. */
function survivors(marker: string): number[] {
  const alive: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0];
      if (cmdline.includes(marker) && state !== 'Z') alive.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return alive;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function timeUnsandboxed(): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn('/usr/bin/python3', ['-c', 'pass'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve((performance.now() - start) / 1000) : reject(new Error(`exit ${code}`))));
  });
}

describe('local sandbox (bubblewrap)', () => {
  before(() => {
    mkdirSync(jobDir);
    for (const [name, source] of Object.entries(SCRIPTS)) writeFileSync(join(jobDir, name), source.trimStart());
    // The sandbox runs as an unprivileged host uid when the tests run as root: let it read the job.
    chmodSync(scratch, 0o755);
    chmodSync(jobDir, 0o755);
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it('is available here: bwrap installed and namespaces allowed', () => {
    assert.deepEqual(probe, { available: true });
  });

  it('runs a benign candidate, which writes its output to /job', { skip }, async () => {
    const workDir = newWorkDir();
    const result = await runJob('benign.py', [], {}, workDir);
    assert.equal(result.exitCode, 0, result.stderrTail);
    assert.equal(result.limit, null);
    assert.equal(result.stdoutTail, 'done\n');
    const out = JSON.parse((await readSandboxOutput(workDir, 'out.json', 1024)).toString('utf8')) as { sumOfSquares: number };
    assert.equal(out.sumOfSquares, 332_833_500);
  });

  describe('reads credentials', () => {
    const secret = `sandbox-secret-${randomUUID()}`;
    const saved = { ...process.env };
    const home = join(scratch, 'home');
    before(() => {
      mkdirSync(join(home, '.aws'), { recursive: true });
      writeFileSync(join(home, '.aws', 'credentials'), `[default]\naws_secret_access_key = ${secret}\n`);
      Object.assign(process.env, {
        HOME: home,
        AWS_ACCESS_KEY_ID: 'AKIASANDBOXTEST',
        AWS_SECRET_ACCESS_KEY: secret,
        AWS_SESSION_TOKEN: secret,
        AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: `/v2/credentials/${secret}`,
        ANTHROPIC_API_KEY: secret,
      });
    });
    after(() => {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
      Object.assign(process.env, saved);
    });

    it('finds no secret in its environment, /proc, the host HOME, the repository or the credentials endpoint', { skip }, async () => {
      const workDir = newWorkDir();
      const config = {
        files: [join(home, '.aws', 'credentials'), join(process.cwd(), 'package.json'), '/etc/shadow', '/etc/passwd'],
        folders: [home, process.cwd(), join(process.cwd(), '.local'), '/work', '/root', '/home', scratch],
      };
      const result = await runJob('steal.py', [JSON.stringify(config)], {}, workDir);
      assert.equal(result.exitCode, 0, result.stderrTail);
      const report = JSON.parse((await readSandboxOutput(workDir, 'loot.json', 10 * 1024 * 1024)).toString('utf8')) as {
        attempts: Record<string, string>;
        loot: string[];
      };
      assert.ok(!JSON.stringify(report).includes(secret), 'a secret reached the sandbox');
      assert.ok(!result.stdoutTail.includes(secret) && !result.stderrTail.includes(secret));
      assert.ok(!JSON.stringify(report.loot).includes('AKIASANDBOXTEST'));
      for (const [name, outcome] of Object.entries(report.attempts)) {
        if (name === 'environ') continue;
        assert.notEqual(outcome, 'ok', `${name} succeeded`);
      }
      // Its environment holds only what the job was given.
      const environ = report.loot[0]!;
      assert.match(environ, /JOB_WORK_DIR/);
      assert.doesNotMatch(environ, /AWS_|ANTHROPIC/);
    });
  });

  describe('opens a network connection', () => {
    let server: Server;
    let connections = 0;
    before(async () => {
      server = createServer((socket) => {
        connections++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('reaches nothing: not a loopback port the host opened, not the host by its address, not DNS', { skip }, async () => {
      const port = (server.address() as AddressInfo).port;
      const hostAddresses = Object.values(networkInterfaces())
        .flat()
        .filter((i) => i && i.family === 'IPv4' && !i.internal)
        .map((i) => i!.address);
      // The host side can connect: the server is really there.
      await new Promise<void>((resolve, reject) => {
        execFile('/usr/bin/python3', ['-c', `import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=2)`], (e) => (e ? reject(e) : resolve()));
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(connections, 1);

      const result = await runJob('network.py', [JSON.stringify({ hosts: ['127.0.0.1', 'localhost', ...hostAddresses], port })], {});
      assert.equal(result.exitCode, 0, result.stderrTail);
      const report = JSON.parse(result.stdoutTail) as { attempts: Record<string, string>; interfaces: string[] };
      for (const [name, outcome] of Object.entries(report.attempts)) assert.notEqual(outcome, 'ok', `${name} succeeded`);
      assert.deepEqual(report.interfaces, ['lo']);
      assert.equal(connections, 1, 'the sandbox reached the host server');
    });
  });

  it('contains a fork bomb at the process limit, quickly, and the host stays responsive', { skip }, async (t) => {
    const marker = `bomb-${randomUUID()}`;
    const bomb = runJob('forkbomb.py', [marker], { maxProcesses: 32, wallSeconds: 20 });
    // While it runs, the host still starts processes.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const hostStart = performance.now();
    await new Promise<void>((resolve, reject) => execFile('/usr/bin/true', (e) => (e ? reject(e) : resolve())));
    const hostSeconds = (performance.now() - hostStart) / 1000;
    const result = await bomb;
    t.diagnostic(`fork bomb ended after ${result.wallSeconds.toFixed(2)} s at ${result.peakTasks} tasks; host spawn during it ${hostSeconds.toFixed(3)} s`);
    assert.equal(result.limit, 'processes', JSON.stringify(result));
    assert.equal(result.limitEvidence, 'host');
    assert.equal(result.signal, 'SIGKILL');
    assert.ok(result.peakTasks >= 32 && result.peakTasks < 40, `peak ${result.peakTasks} tasks`);
    assert.deepEqual(survivors(marker), []);
  });

  describe('allocates far beyond the memory cap', () => {
    it('one huge allocation fails with MemoryError, reported as the memory limit', { skip }, async () => {
      const result = await runJob('hog.py', [], { memoryBytes: 512 * 1024 * 1024 });
      assert.equal(result.exitCode, 1);
      assert.equal(result.limit, 'memory');
      assert.equal(result.limitEvidence, 'stderr');
      assert.match(result.stderrTail, /MemoryError/);
    });

    it('processes that each stay under the cap but together pass it are killed by the host', { skip }, async () => {
      const marker = `hogs-${randomUUID()}`;
      const result = await runJob('hog_children.py', [marker], { memoryBytes: 512 * 1024 * 1024 });
      assert.equal(result.limit, 'memory', JSON.stringify(result));
      assert.equal(result.limitEvidence, 'host');
      assert.ok(result.peakResidentBytes > 512 * 1024 * 1024);
      assert.ok(result.wallSeconds < 20);
      assert.deepEqual(survivors(marker), []);
    });

    it("memory held in memfd files, outside any process's resident pages, is counted too", { skip }, async () => {
      const result = await runJob('hog_memfd.py', [], { memoryBytes: 512 * 1024 * 1024 });
      assert.equal(result.limit, 'memory', JSON.stringify(result));
      assert.equal(result.limitEvidence, 'host');
      assert.ok(result.wallSeconds < 20);
    });
  });

  it('never returns (ignores SIGTERM, leaves a daemon): killed at the wall limit, nothing left behind', { skip }, async () => {
    const marker = `hang-${randomUUID()}`;
    const result = await runJob('hang.py', [marker], { wallSeconds: 1.5 });
    assert.equal(result.limit, 'wall');
    assert.equal(result.signal, 'SIGKILL');
    assert.ok(result.wallSeconds >= 1.5 && result.wallSeconds < 5, `${result.wallSeconds} s`);
    assert.ok(result.peakTasks >= 3, 'the daemon ran');
    assert.deepEqual(survivors(marker), []);
  });

  describe('busy loop', () => {
    it('is ended by SIGXCPU at the CPU limit', { skip }, async () => {
      const result = await runJob('spin.py', [], { cpuSeconds: 1 });
      assert.equal(result.signal, 'SIGXCPU');
      assert.equal(result.limit, 'cpu');
      assert.equal(result.limitEvidence, 'host');
    });

    it('that ignores SIGXCPU is killed one CPU second later, still reported as the CPU limit', { skip }, async () => {
      const result = await runJob('spin.py', ['ignore-sigxcpu'], { cpuSeconds: 1 });
      assert.equal(result.signal, 'SIGKILL');
      assert.equal(result.limit, 'cpu');
      assert.ok(result.maxProcessCpuSeconds >= 1.5, `${result.maxProcessCpuSeconds} s of CPU seen`);
    });
  });

  it('writes outside its work dir: /usr, /job/.., the host temp dir, the job folder, a sibling run: all fail', { skip }, async () => {
    const sibling = newWorkDir();
    const siblingRun = await runJob('benign.py', [], {}, sibling);
    assert.equal(siblingRun.exitCode, 0);
    const hostTmp = mkdtempSync(join(tmpdir(), 'sandbox-host-tmp-'));
    const privateName = `sandbox-private-${randomUUID()}`;
    try {
      const config = {
        writes: [
          '/usr/escape',
          '/usr/lib/python3/dist-packages/sitecustomize.py',
          '/job/../escape',
          '/escape',
          '/dev/escape',
          '/etc/passwd',
          '/app/benign.py',
          join(hostTmp, 'escape'),
          join(sibling, 'out.json'),
          join(scratch, 'escape'),
          `/tmp/${privateName}`,
        ],
        lists: [sibling, '/job/..', hostTmp],
      };
      const result = await runJob('escape.py', [JSON.stringify(config)], {});
      assert.equal(result.exitCode, 0, result.stderrTail);
      const attempts = JSON.parse(result.stdoutTail) as Record<string, unknown>;
      for (const path of config.writes.slice(0, -1)) assert.notEqual(attempts[path], 'ok', `wrote ${path}`);
      assert.equal(attempts[join(hostTmp, 'escape')], 'FileNotFoundError');
      assert.equal(attempts[`list ${sibling}`], 'FileNotFoundError');
      assert.equal(attempts[`list ${hostTmp}`], 'FileNotFoundError');
      // Its /tmp is its own: the write worked there and never reached the host's.
      assert.equal(attempts[`/tmp/${privateName}`], 'ok');
      assert.equal(existsSync(join(tmpdir(), privateName)), false);
      assert.deepEqual(readdirSync(hostTmp), []);
      assert.equal(existsSync(join(scratch, 'escape')), false);
      assert.equal(readFileSync(join(sibling, 'out.json'), 'utf8'), '{"sumOfSquares": 332833500}');
      assert.equal(readFileSync(join(jobDir, 'benign.py'), 'utf8'), SCRIPTS['benign.py']!.trimStart());
    } finally {
      rmSync(hostTmp, { recursive: true, force: true });
    }
  });

  it('monkeypatches: a run cannot change the trainer, shared modules or anything another run sees', { skip }, async () => {
    const patching = runJob('patch.py', [], {});
    await new Promise((resolve) => setTimeout(resolve, 700));
    const during = await runJob('check.py', [], {});
    const patched = await patching;
    const afterwards = await runJob('check.py', [], {});

    const attempts = JSON.parse(patched.stdoutTail) as Record<string, string>;
    for (const path of ['/app/trainer.py', '/opt/common/jobio.py', '/usr/lib/python3/dist-packages/sitecustomize.py', '/flag']) {
      assert.notEqual(attempts[path], 'ok', `patched ${path}`);
    }
    // What it could write is private to it.
    for (const path of ['/tmp/flag', '/dev/shm/flag', '/job/flag', '/tmp/sitecustomize.py']) assert.equal(attempts[path], 'ok');
    for (const check of [during, afterwards]) {
      assert.equal(check.exitCode, 0, check.stderrTail);
      assert.deepEqual(JSON.parse(check.stdoutTail), { rewardScale: 1, jobioHasRun: true, seen: [], workDir: [] });
    }
    assert.equal(readFileSync(join(jobDir, 'trainer.py'), 'utf8'), SCRIPTS['trainer.py']!.trimStart());
  });

  describe('file size and work-dir disk', () => {
    it('a file past maxFileBytes fails to write', { skip }, async () => {
      const workDir = newWorkDir();
      const result = await runSandboxed({
        command: '/usr/bin/python3',
        args: ['-c', 'open("/job/big", "wb").write(b"x" * (4 * 1024 * 1024))'],
        workDir,
        limits: { maxFileBytes: 1024 * 1024, wallSeconds: 20 },
      });
      assert.equal(result.limit, 'fileSize');
      assert.match(result.stderrTail, /File too large/);
    });

    it('many files past workDirBytes: killed by the host', { skip }, async () => {
      const workDir = newWorkDir();
      const script = 'import time\nfor i in range(200):\n    open(f"/job/f{i}", "wb").write(b"x" * 1048576)\n    time.sleep(0.01)\ntime.sleep(20)';
      const result = await runSandboxed({
        command: '/usr/bin/python3',
        args: ['-c', script],
        workDir,
        limits: { workDirBytes: 16 * 1024 * 1024, wallSeconds: 20 },
      });
      assert.equal(result.limit, 'disk', JSON.stringify(result));
      assert.equal(result.limitEvidence, 'host');
      assert.ok(readdirSync(workDir).length < 60);
    });

    it('files deleted while held open still count against workDirBytes', { skip }, async () => {
      const workDir = newWorkDir();
      const script = [
        'import os, time',
        'held = []',
        'for i in range(200):',
        '    f = open(f"/job/t{i}", "wb"); f.write(b"x" * 1048576); f.flush(); os.unlink(f"/job/t{i}"); held.append(f)',
        '    time.sleep(0.01)',
        'time.sleep(20)',
      ].join('\n');
      const result = await runSandboxed({
        command: '/usr/bin/python3',
        args: ['-c', script],
        workDir,
        limits: { workDirBytes: 16 * 1024 * 1024, wallSeconds: 20 },
      });
      assert.equal(result.limit, 'disk', JSON.stringify(result));
      // At most the one file written when the kill came, before its unlink: 1 MiB, far under the
      // 16 MiB limit, so the limit was passed by the deleted files still held open.
      assert.ok(readdirSync(workDir).length <= 1, JSON.stringify(readdirSync(workDir)));
    });

    it('/tmp is capped in size', { skip }, async () => {
      const result = await runSandboxed({
        command: '/usr/bin/python3',
        args: ['-c', 'open("/tmp/big", "wb").write(b"x" * (8 * 1024 * 1024))'],
        workDir: newWorkDir(),
        limits: { tmpBytes: 4 * 1024 * 1024, wallSeconds: 20 },
      });
      assert.equal(result.exitCode, 1);
      assert.match(result.stderrTail, /No space left on device/);
    });
  });

  it('the host reads outputs without following links or blocking on FIFOs the candidate planted', { skip }, async () => {
    const workDir = newWorkDir();
    const result = await runJob('plant.py', [], {}, workDir);
    assert.equal(result.exitCode, 0, result.stderrTail);
    await assert.rejects(readSandboxOutput(workDir, 'policy.json', 1024), SandboxOutputError);
    await assert.rejects(readSandboxOutput(workDir, 'result.json', 1024), SandboxOutputError);
    await assert.rejects(readSandboxOutput(workDir, '../../etc/passwd', 1024), /relativePath/);
  });

  describe('failures of the sandbox itself', () => {
    it("a missing bwrap throws, naming Debian's bubblewrap package", async () => {
      await assert.rejects(
        runSandboxed({ command: '/usr/bin/true', workDir: newWorkDir(), bwrapPath: join(scratch, 'no-bwrap') }),
        (error: unknown) => error instanceof SandboxUnavailableError && /bubblewrap/.test(error.message),
      );
    });

    it('a bind bwrap cannot make throws SandboxSetupError before any code runs', { skip: skip || (process.getuid?.() !== 0 && 'needs root') }, async () => {
      const secretDir = join(scratch, 'root-only');
      // Inside a folder only root may enter: the sandbox's unprivileged host uid cannot reach it.
      mkdirSync(join(secretDir, 'inner'), { recursive: true, mode: 0o700 });
      chmodSync(secretDir, 0o700);
      await assert.rejects(
        runSandboxed({ command: '/usr/bin/true', workDir: newWorkDir(), readOnly: [{ source: join(secretDir, 'inner'), target: '/secret' }] }),
        (error: unknown) => error instanceof SandboxSetupError && /root-only/.test(error.message),
      );
    });

    it("a candidate that prints bwrap's own error messages is reported, not thrown", { skip }, async () => {
      const result = await runJob('fake_bwrap_error.py', [], {});
      assert.equal(result.exitCode, 1);
      assert.equal(result.limit, null);
    });

    it('rejects a shared work dir', async () => {
      await assert.rejects(runSandboxed({ command: '/usr/bin/true', workDir: tmpdir() }), /workDir: must be a private directory/);
    });
  });

  it("imports torch inside the sandbox (Debian's python3)", { skip }, async (t) => {
    const workDir = newWorkDir();
    const result = await runJob('torch_job.py', [], { memoryBytes: 2 * 1024 ** 3 }, workDir);
    assert.equal(result.exitCode, 0, result.stderrTail);
    const out = JSON.parse((await readSandboxOutput(workDir, 'out.json', 4096)).toString('utf8')) as { torch: string; importSeconds: number };
    t.diagnostic(`torch ${out.torch}: import ${out.importSeconds.toFixed(2)} s, whole run ${result.wallSeconds.toFixed(2)} s, peak ${result.peakTasks} tasks`);
    assert.match(out.torch, /^\d+\.\d+/);
  });

  it('measures the start-up overhead (median of 10 runs of python3 -c pass)', { skip }, async (t) => {
    const sandboxed: number[] = [];
    const plain: number[] = [];
    for (let i = 0; i < 10; i++) {
      plain.push(await timeUnsandboxed());
      const result = await runSandboxed({ command: '/usr/bin/python3', args: ['-c', 'pass'], workDir: newWorkDir() });
      assert.equal(result.exitCode, 0);
      sandboxed.push(result.wallSeconds);
    }
    const overhead = median(sandboxed) - median(plain);
    t.diagnostic(
      `python3 -c pass: sandboxed median ${(median(sandboxed) * 1000).toFixed(1)} ms, plain ${(median(plain) * 1000).toFixed(1)} ms, overhead ${(overhead * 1000).toFixed(1)} ms`,
    );
  });
});
