"""The sandboxed job's stager against a loopback HTTP server standing in for presigned S3 URLs: one
URL in the environment (JOB_STAGING_URL), of a staging document holding the spec's and the outputs'."""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import textwrap
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(__file__))
import sandbox_entry  # noqa: E402

# As root (as in the image), the job and the worker run as two other users, as the image's job
# and reward users; otherwise both run as this user.
AS_ROOT = os.geteuid() == 0
USERS = sandbox_entry.Users(job=65534, worker=65533) if AS_ROOT else None


class Store(BaseHTTPRequestHandler):
    objects: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802
        body = self.objects.get(self.path.split("?")[0])  # the key, without the signature's query
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def do_PUT(self):  # noqa: N802
        self.objects[self.path.split("?")[0]] = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):  # quiet
        pass


class SandboxEntryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.base = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()

    def setUp(self):
        Store.objects.clear()
        self.dir = tempfile.mkdtemp()
        os.chmod(self.dir, 0o755)  # the job's and the worker's users read their scripts here
        self.saved = dict(os.environ)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved)

    def job(self, body: str, name: str = "job.py") -> list[str]:
        path = os.path.join(self.dir, name)
        with open(path, "w") as handle:
            handle.write(textwrap.dedent(body))
        os.chmod(path, 0o644)
        return [sys.executable, path]

    def urls(self, run: str, names: list[str]) -> None:
        """The spec, the staging document next to it (as the presign step writes them), and its URL."""
        Store.objects[f"/{run}/spec.json"] = json.dumps({"n": 21}).encode()
        Store.objects[f"/{run}/staging.json"] = json.dumps({
            "specUrl": f"{self.base}/{run}/spec.json",
            "outputUrls": {name: f"{self.base}/{run}/out/{name}" for name in names},
        }).encode()
        os.environ["JOB_STAGING_URL"] = f"{self.base}/{run}/staging.json"

    def test_stages_the_spec_in_and_only_declared_regular_outputs_out(self):
        self.urls("ok", ["result.json", "policy.json", "curves.json"])
        command = self.job("""
            import argparse, json, os
            p = argparse.ArgumentParser(); p.add_argument('--spec'); p.add_argument('--output-dir'); a = p.parse_args()
            spec = json.load(open(a.spec))
            assert 'JOB_STAGING_URL' not in os.environ
            json.dump({'doubled': spec['n'] * 2}, open(os.path.join(a.output_dir, 'result.json'), 'w'))
            open(os.path.join(a.output_dir, 'policy.json'), 'w').write('{}')
            os.symlink('/etc/passwd', os.path.join(a.output_dir, 'curves.json'))
            open(os.path.join(a.output_dir, 'undeclared.txt'), 'w').write('x')
        """)
        self.assertEqual(sandbox_entry.main(command, USERS), 0)
        self.assertEqual(json.loads(Store.objects["/ok/out/result.json"]), {"doubled": 42})
        self.assertEqual(Store.objects["/ok/out/policy.json"], b"{}")
        self.assertNotIn("/ok/out/curves.json", Store.objects)  # a link is not an output
        self.assertFalse(any("undeclared" in key for key in Store.objects))

    def test_a_failed_job_without_result_gets_one_and_its_status(self):
        self.urls("bad", ["result.json"])
        self.assertEqual(sandbox_entry.main(self.job("import sys; sys.exit(3)"), USERS), 3)
        self.assertEqual(json.loads(Store.objects["/bad/out/result.json"])["error"]["type"], "JobFailed")

    def test_runs_the_worker_apart_from_the_job_joined_by_one_socket(self):
        self.urls("pair", ["result.json", "policy.json"])
        # The worker (a candidate's side) reports what it could reach, then answers the job.
        worker = self.job("""
            import argparse, glob, json, os, socket
            p = argparse.ArgumentParser(); p.add_argument('--socket', type=int); a = p.parse_args()
            sock = socket.socket(fileno=a.socket)
            found = {'uid': os.getuid(), 'env': sorted(os.environ), 'writes': {}, 'reads': {}}
            for path in glob.glob('/tmp/job-*/out/policy.json') + [os.path.join(d, 'out', 'policy.json') for d in glob.glob('/tmp/job-*')]:
                try:
                    open(path, 'w').write('forged')
                    found['writes'][path] = 'written'
                except OSError as error:
                    found['writes'][path] = type(error).__name__
            for path in ['/proc/%d/environ' % os.getppid()]:
                try:
                    found['reads'][path] = 'JOB_STAGING_URL' in open(path, 'rb').read().decode(errors='replace')
                except OSError as error:
                    found['reads'][path] = type(error).__name__
            sock.recv(4)
            sock.sendall(json.dumps(found).encode())
            sock.close()
        """, "worker.py")
        job = self.job("""
            import argparse, json, os, socket
            p = argparse.ArgumentParser(); p.add_argument('--spec'); p.add_argument('--output-dir'); p.add_argument('--reward-socket', type=int)
            a = p.parse_args()
            sock = socket.socket(fileno=a.reward_socket)
            sock.sendall(b'ping')
            answer = b''
            while chunk := sock.recv(65536):
                answer += chunk
            open(os.path.join(a.output_dir, 'policy.json'), 'w').write('{"trained": true}')
            json.dump({'worker': json.loads(answer), 'uid': os.getuid()}, open(os.path.join(a.output_dir, 'result.json'), 'w'))
        """)
        self.assertEqual(sandbox_entry.main(["--worker", worker[1], "--", *job], USERS), 0)
        result = json.loads(Store.objects["/pair/out/result.json"])
        found = result["worker"]
        self.assertEqual(Store.objects["/pair/out/policy.json"], b'{"trained": true}')
        self.assertNotIn("JOB_STAGING_URL", found["env"])
        if AS_ROOT:
            self.assertEqual((result["uid"], found["uid"]), (USERS.job, USERS.worker))
            self.assertTrue(found["writes"], "the worker looked for the job's directory")
            self.assertNotIn("written", found["writes"].values())
            self.assertEqual(set(found["reads"].values()), {"PermissionError"})

    def test_refuses_a_malformed_worker_option(self):
        self.assertEqual(sandbox_entry.main(["--worker", "w.py", "python3", "main.py"], USERS), 2)

    def test_refuses_to_start_without_presigned_urls(self):
        os.environ.pop("JOB_STAGING_URL", None)
        self.assertEqual(sandbox_entry.main(["true"], USERS), 2)

    def test_refuses_a_staging_document_it_cannot_use_naming_the_fault_never_the_url(self):
        ran = os.path.join(self.dir, "ran")
        command = self.job(f"open({ran!r}, 'w').write('ran')")
        cases = {
            "missing": (None, "HTTP 404"),
            "not-json": (b"<Error/>", "not JSON"),
            "no-result": ({"specUrl": f"{self.base}/x/spec.json", "outputUrls": {"policy.json": f"{self.base}/x/p"}}, "result.json"),
            "no-spec": ({"outputUrls": {"result.json": f"{self.base}/x/r"}}, "specUrl"),
            "bad-name": ({"specUrl": f"{self.base}/x/spec.json", "outputUrls": {"result.json": f"{self.base}/x/r", "../x": f"{self.base}/x/e"}}, "'../x'"),
        }
        for run, (document, message) in cases.items():
            with self.subTest(run):
                if document is not None:
                    Store.objects[f"/{run}/staging.json"] = document if isinstance(document, bytes) else json.dumps(document).encode()
                os.environ["JOB_STAGING_URL"] = f"{self.base}/{run}/staging.json?X-Amz-Security-Token=secret-token"
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr):
                    self.assertEqual(sandbox_entry.main(command, USERS), 2)
                self.assertIn(message, stderr.getvalue())
                self.assertNotIn("secret-token", stderr.getvalue())
                self.assertFalse(os.path.exists(ran), "the job never ran")


if __name__ == "__main__":
    unittest.main()
