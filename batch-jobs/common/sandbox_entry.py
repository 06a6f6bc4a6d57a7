"""The stager of a sandboxed job's container (AWS): the job holds no credentials, so this stages
its spec in and its declared outputs out through presigned URLs for exactly its own keys.

    python3 sandbox_entry.py [--worker SCRIPT --] <job command...>

JOB_STAGING_URL is a presigned GET of the job's staging document (JSON, written next to its spec
by the presign step): `specUrl`, a presigned GET of the spec, and `outputUrls`, output file name
-> presigned PUT (result.json among them). One URL, because each carries the signer's session
token and Batch refuses container overrides over 8,192 characters. The job runs as `<job
command> --spec FILE --output-dir DIR` in a fresh directory, without that variable; afterwards
each declared output the job left as a regular file under the size cap is uploaded to its URL.
A URL is never printed: it is a credential until it expires. When the job wrote no result.json
and failed, the stager writes one with the exit status. It exits with the job's status.

The container starts as root so that nothing it runs is: the job runs as the image's `job` user
in a directory only that user can enter, and with --worker, SCRIPT (the untrusted half: a
candidate's code) runs as the `reward` user in a directory of its own, joined to the job by one
socket (`SCRIPT --socket FD` beside `<job command> ... --reward-socket FD`). The worker can reach
neither the job's files nor its memory, nor this process's environment (which holds the URLs).
Run as another user than root (tests), both run as that user.

Locally the embedded runtime does the same staging around bubblewrap (infra/local/batch-host.ts),
with the worker in a second sandbox.
"""
from __future__ import annotations

import json
import os
import pwd
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from typing import NamedTuple

MAX_OUTPUT_BYTES = 8 * 1024 * 1024
STAGING_VARIABLES = ("JOB_STAGING_URL",)
OUTPUT_NAME = re.compile(r"[\w.-]{1,100}")


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a presigned https URL
        return response.read()


def read_staging(url: str) -> tuple[str, dict[str, str]]:
    """The spec's URL and the outputs' URLs from the staging document; ValueError says what is wrong."""
    try:
        document = json.loads(fetch(url))
    except urllib.error.HTTPError as error:
        raise ValueError(f"the staging document (JOB_STAGING_URL) could not be read: HTTP {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        raise ValueError(f"the staging document (JOB_STAGING_URL) could not be read: {type(error).__name__}") from None
    except ValueError:
        raise ValueError("the staging document (JOB_STAGING_URL) is not JSON") from None
    spec_url = document.get("specUrl") if isinstance(document, dict) else None
    outputs = document.get("outputUrls") if isinstance(document, dict) else None
    if not isinstance(spec_url, str) or not spec_url:
        raise ValueError("the staging document's specUrl must be a URL")
    if not isinstance(outputs, dict) or "result.json" not in outputs:
        raise ValueError("the staging document's outputUrls must map output names to URLs, result.json among them")
    for name, output_url in outputs.items():
        if not OUTPUT_NAME.fullmatch(name) or name.startswith(".") or not isinstance(output_url, str) or not output_url:
            raise ValueError(f"the staging document's outputUrls must map plain file names to URLs (got the name {name!r})")
    return spec_url, outputs


def upload(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="PUT")
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        response.read()


def read_output(directory: str, name: str) -> bytes | None:
    """The output's bytes when it is a regular file (not a link, a FIFO or a directory) under the cap."""
    path = os.path.join(directory, name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OUTPUT_BYTES:
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_OUTPUT_BYTES + 1)[:MAX_OUTPUT_BYTES]


class Users(NamedTuple):
    """Who runs the job and who runs the worker (uids; their groups are the same numbers)."""
    job: int
    worker: int


def image_users() -> Users | None:
    """The image's `job` and `reward` users when this runs as root; None otherwise (no switching)."""
    if os.geteuid() != 0:
        return None
    try:
        return Users(pwd.getpwnam("job").pw_uid, pwd.getpwnam("reward").pw_uid)
    except KeyError as error:
        raise SystemExit(f"sandbox_entry: the image must have the users job and reward ({error})") from None


def _as(uid: int | None) -> dict:
    """Popen arguments that run a child as `uid` (and its group, no supplementary groups)."""
    return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}


def _private_dir(prefix: str, uid: int | None) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    if uid is not None:
        os.chown(path, uid, uid)
    os.chmod(path, 0o700)
    return path


def _parse(argv: list[str]) -> tuple[str | None, list[str]]:
    if argv[:1] == ["--worker"]:
        if len(argv) < 4 or argv[2] != "--":
            raise ValueError("usage: sandbox_entry.py --worker SCRIPT -- <job command...>")
        return os.path.abspath(argv[1]), argv[3:]
    return None, argv


def main(argv: list[str], users: Users | None | str = "image") -> int:
    try:
        worker_script, argv = _parse(argv)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if not argv:
        print("usage: sandbox_entry.py [--worker SCRIPT --] <job command...>", file=sys.stderr)
        return 2
    if users == "image":
        users = image_users()
    staging_url = os.environ.get("JOB_STAGING_URL")
    if not staging_url:
        print("JOB_STAGING_URL must be set: a sandboxed job is started with the presigned URL of its staging document", file=sys.stderr)
        return 2
    try:
        spec_url, outputs = read_staging(staging_url)
    except ValueError as error:
        print(f"sandbox_entry: {error}", file=sys.stderr)
        return 2
    job_uid = users.job if isinstance(users, Users) else None
    work = _private_dir("job-", job_uid)
    spec_path = os.path.join(work, "spec.json")
    out_dir = os.path.join(work, "out")
    with open(spec_path, "wb") as handle:
        handle.write(fetch(spec_url))
    os.makedirs(out_dir)
    if job_uid is not None:
        for path in (spec_path, out_dir):
            os.chown(path, job_uid, job_uid)
    env = {k: v for k, v in os.environ.items() if k not in STAGING_VARIABLES}
    command = [*argv, "--spec", spec_path, "--output-dir", out_dir]
    if worker_script is None:
        status = subprocess.run(command, env=env, cwd=work, check=False, **_as(job_uid)).returncode
    else:
        status = run_with_worker(command, worker_script, env, work, users if isinstance(users, Users) else None)
    for name, url in outputs.items():
        body = read_output(out_dir, name)
        if body is None and name == "result.json" and status != 0:
            body = json.dumps({"error": {"type": "JobFailed", "message": f"the job exited with status {status} and wrote no result.json"}}).encode()
        if body is not None:
            upload(url, body)
    return status


def run_with_worker(command: list[str], script: str, env: dict[str, str], work: str, users: Users | None) -> int:
    """The job and its worker, joined by a socketpair; the worker is stopped when the job ends."""
    worker_uid = users.worker if users else None
    home = _private_dir("worker-", worker_uid)
    job_end, worker_end = socket.socketpair()
    # The worker's environment: nothing of the container's but what Python needs.
    worker_env = {"PATH": env.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
                  "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
                  "OPENBLAS_NUM_THREADS": "1"}
    worker = subprocess.Popen([sys.executable, script, "--socket", str(worker_end.fileno())], pass_fds=[worker_end.fileno()],
                              env=worker_env, cwd=home, start_new_session=True, **_as(worker_uid))
    worker_end.close()
    try:
        job = subprocess.Popen([*command, "--reward-socket", str(job_end.fileno())], pass_fds=[job_end.fileno()],
                               env=env, cwd=work, **_as(users.job if users else None))
        job_end.close()
        return job.wait()
    finally:
        job_end.close()
        try:
            os.killpg(worker.pid, signal.SIGKILL)  # its whole session: anything it left running
        except ProcessLookupError:
            pass
        worker.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
