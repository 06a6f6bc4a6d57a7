"""The stager of a sandboxed job's container (AWS): the job holds no credentials, so this stages
its spec in and its declared outputs out through presigned URLs for exactly its own keys.

    python3 sandbox_entry.py <job command...>

JOB_SPEC_URL is a presigned GET of the spec; JOB_OUTPUT_URLS is a JSON object of output file name
-> presigned PUT (result.json among them). The job runs as `<job command> --spec FILE --output-dir
DIR` in a fresh directory, without those variables; afterwards each declared output the job left
as a regular file under the size cap is uploaded to its URL. When the job wrote no result.json
and failed, the stager writes one with the exit status. It exits with the job's status.

Locally the embedded runtime does the same staging around bubblewrap (infra/local/batch-host.ts).
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import urllib.request

MAX_OUTPUT_BYTES = 8 * 1024 * 1024
STAGING_VARIABLES = ("JOB_SPEC_URL", "JOB_OUTPUT_URLS")


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a presigned https URL
        return response.read()


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


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: sandbox_entry.py <job command...>", file=sys.stderr)
        return 2
    spec_url = os.environ.get("JOB_SPEC_URL")
    try:
        outputs = json.loads(os.environ.get("JOB_OUTPUT_URLS", ""))
    except json.JSONDecodeError:
        outputs = None
    if not spec_url or not isinstance(outputs, dict) or "result.json" not in outputs:
        print("JOB_SPEC_URL and JOB_OUTPUT_URLS (with result.json) must be set: a sandboxed job is started with presigned URLs", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="job-")
    spec_path = os.path.join(work, "spec.json")
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    with open(spec_path, "wb") as handle:
        handle.write(fetch(spec_url))
    env = {k: v for k, v in os.environ.items() if k not in STAGING_VARIABLES}
    status = subprocess.run([*argv, "--spec", spec_path, "--output-dir", out_dir], env=env, check=False).returncode
    for name, url in outputs.items():
        body = read_output(out_dir, name)
        if body is None and name == "result.json" and status != 0:
            body = json.dumps({"error": {"type": "JobFailed", "message": f"the job exited with status {status} and wrote no result.json"}}).encode()
        if body is not None:
            upload(url, body)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
