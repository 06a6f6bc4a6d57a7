"""The sandboxed job's stager against a loopback HTTP server standing in for presigned S3 URLs."""
from __future__ import annotations

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


class Store(BaseHTTPRequestHandler):
    objects: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802
        body = self.objects.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def do_PUT(self):  # noqa: N802
        self.objects[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
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
        self.saved = dict(os.environ)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved)

    def job(self, body: str) -> list[str]:
        path = os.path.join(self.dir, "job.py")
        with open(path, "w") as handle:
            handle.write(textwrap.dedent(body))
        return [sys.executable, path]

    def urls(self, run: str, names: list[str]) -> None:
        Store.objects[f"/{run}/spec.json"] = json.dumps({"n": 21}).encode()
        os.environ["JOB_SPEC_URL"] = f"{self.base}/{run}/spec.json"
        os.environ["JOB_OUTPUT_URLS"] = json.dumps({name: f"{self.base}/{run}/out/{name}" for name in names})

    def test_stages_the_spec_in_and_only_declared_regular_outputs_out(self):
        self.urls("ok", ["result.json", "policy.json", "curves.json"])
        command = self.job("""
            import argparse, json, os
            p = argparse.ArgumentParser(); p.add_argument('--spec'); p.add_argument('--output-dir'); a = p.parse_args()
            spec = json.load(open(a.spec))
            assert 'JOB_OUTPUT_URLS' not in os.environ and 'JOB_SPEC_URL' not in os.environ
            json.dump({'doubled': spec['n'] * 2}, open(os.path.join(a.output_dir, 'result.json'), 'w'))
            open(os.path.join(a.output_dir, 'policy.json'), 'w').write('{}')
            os.symlink('/etc/passwd', os.path.join(a.output_dir, 'curves.json'))
            open(os.path.join(a.output_dir, 'undeclared.txt'), 'w').write('x')
        """)
        self.assertEqual(sandbox_entry.main(command), 0)
        self.assertEqual(json.loads(Store.objects["/ok/out/result.json"]), {"doubled": 42})
        self.assertEqual(Store.objects["/ok/out/policy.json"], b"{}")
        self.assertNotIn("/ok/out/curves.json", Store.objects)  # a link is not an output
        self.assertFalse(any("undeclared" in key for key in Store.objects))

    def test_a_failed_job_without_result_gets_one_and_its_status(self):
        self.urls("bad", ["result.json"])
        self.assertEqual(sandbox_entry.main(self.job("import sys; sys.exit(3)")), 3)
        self.assertEqual(json.loads(Store.objects["/bad/out/result.json"])["error"]["type"], "JobFailed")

    def test_refuses_to_start_without_presigned_urls(self):
        os.environ.pop("JOB_SPEC_URL", None)
        self.assertEqual(sandbox_entry.main(["true"]), 2)


if __name__ == "__main__":
    unittest.main()
