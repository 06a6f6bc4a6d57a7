import copy
import io
import json
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

from jobio import JobContext  # noqa: E402
from memory_s3 import MemoryS3  # noqa: E402
from scorers import UnknownScorerError  # noqa: E402
from specs import SpecError  # noqa: E402
from tasks import heldout_rows  # noqa: E402
from tinylm import CheckpointRefused, UnknownCharacterError  # noqa: E402
import eval_main  # noqa: E402
import train_main  # noqa: E402

torch.set_num_threads(1)

TINY_TRAIN = {
    "run": "smoke", "checkpoints_uri": "s3://lab/checkpoints/smoke/", "seed": 3,
    "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 96},
    "base": {"steps": 4, "batch_size": 4, "lr": 0.003, "mix": {"text": 1, "reversal": 1}},
    "finetune": {"steps": 6, "batch_size": 4, "lr": 0.003, "checkpoint_every": 3, "replay_fraction": 0.25},
}


def quietly(fn, *args):
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            return fn(*args)
        finally:
            sys.stdout = stdout


class JobsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s3 = MemoryS3()
        cls.train = quietly(train_main.main, copy.deepcopy(TINY_TRAIN), JobContext("s3://lab/jobs/train/", cls.s3))
        for task in ("arithmetic", "reversal"):
            body = "\n".join(json.dumps(r) for r in heldout_rows(task, 30)).encode()
            cls.s3.put_object("lab", f"benchmarks/{task}/v1.jsonl", body)

    def manifest(self, step):
        return json.loads(self.s3.objects[("lab", f"checkpoints/smoke/{step}/manifest.json")])

    def eval_spec(self, step=6, **benchmark):
        return {"checkpoint": {"uri": f"s3://lab/checkpoints/smoke/{step}/", "manifest": self.manifest(step)},
                "benchmark": {"name": "arithmetic", "version": "1", "sample_size": 20, "scorer": "exact-number",
                              "data_uri": "s3://lab/benchmarks/arithmetic/v1.jsonl", **benchmark},
                "max_new_tokens": 4, "examples": 3}

    def evaluate(self, spec):
        return quietly(eval_main.main, spec, JobContext("s3://lab/jobs/eval/", self.s3))

    def test_the_producer_uploads_base_and_finetune_checkpoints_manifest_last(self):
        self.assertEqual([c["step"] for c in self.train["checkpoints"]], [0, 3, 6])
        self.assertEqual(self.train["checkpoints"][1], {
            "step": 3, "uri": "s3://lab/checkpoints/smoke/3/",
            "manifest_uri": "s3://lab/checkpoints/smoke/3/manifest.json"})
        for step in (0, 3, 6):
            keys = [k for k in self.s3.order if k.startswith(f"checkpoints/smoke/{step}/")]
            self.assertEqual(keys[-1], f"checkpoints/smoke/{step}/manifest.json")
            manifest = self.manifest(step)
            self.assertEqual((manifest["run"], manifest["step"], manifest["base_step"]), ("smoke", step, 0))
            self.assertEqual([f["name"] for f in manifest["files"]],
                             ["model.safetensors", "config.json", "trainer_state.json"])
            self.assertRegex(manifest["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")
        state = json.loads(self.s3.objects[("lab", "checkpoints/smoke/3/trainer_state.json")])
        self.assertEqual((state["phase"], state["step"], state["replay_fraction"]), ("finetune", 3, 0.25))
        self.assertEqual([p["step"] for p in self.train["curve"]["finetune"]], [1, 2, 3, 4, 5, 6])
        self.assertLess(len(json.dumps(self.train)), 32 * 1024)

    def test_eval_scores_a_checkpoint_with_a_small_result(self):
        result = self.evaluate(self.eval_spec())
        self.assertEqual(result["checkpoint"], {"run": "smoke", "step": 6})
        self.assertEqual((result["benchmark"], result["version"], result["n"]), ("arithmetic", "1", 20))
        self.assertEqual(result["correct"], sum(e["correct"] for e in result["examples"]) if result["n"] == 3
                         else result["correct"])
        # accuracy and stderr are written rounded to 6 decimals (and stderr through math.sqrt,
        # here ** 0.5): places 6 and 5 absorb that rounding (<= 5e-7), nothing more.
        self.assertAlmostEqual(result["accuracy"], result["correct"] / 20, places=6)
        p = result["accuracy"]
        self.assertAlmostEqual(result["stderr"], (p * (1 - p) / 20) ** 0.5, places=5)
        self.assertGreater(result["baseline"], 0)
        self.assertEqual(len(result["examples"]), 3)
        self.assertEqual(set(result["examples"][0]), {"id", "prompt", "answer", "generation", "correct"})
        self.assertGreater(result["samples_per_second"], 0)
        self.assertLess(len(json.dumps(result)), 20 * 1024)
        # Every scored row is kept in eval.json, the file the artifact index points at.
        self.assertEqual(result["files"], [{"name": "eval.json", "uri": "s3://lab/jobs/eval/eval.json"}])
        self.assertEqual(result["s3Outputs"], [{"Bucket": "lab", "Key": "jobs/eval/eval.json"}])
        detail = json.loads(self.s3.objects[("lab", "jobs/eval/eval.json")])
        self.assertEqual(len(detail["rows"]), 20)
        self.assertEqual(sum(r["correct"] for r in detail["rows"]), result["correct"])

    def test_the_sample_is_seeded_and_all_rows_when_fewer(self):
        first = self.evaluate(self.eval_spec() | {"examples": 10})
        again = self.evaluate(self.eval_spec(step=3) | {"examples": 10})
        self.assertEqual([e["id"] for e in first["examples"]], [e["id"] for e in again["examples"]])
        self.assertEqual(self.evaluate(self.eval_spec(sample_size=1000))["n"], 30)
        other = self.evaluate(self.eval_spec(seed=9) | {"examples": 10})
        self.assertNotEqual([e["id"] for e in first["examples"]], [e["id"] for e in other["examples"]])

    def test_the_manifest_is_read_from_s3_when_the_spec_has_none(self):
        spec = self.eval_spec(name="reversal", scorer="exact-string", data_uri="s3://lab/benchmarks/reversal/v1.jsonl")
        del spec["checkpoint"]["manifest"]
        self.assertEqual(self.evaluate(spec)["checkpoint"], {"run": "smoke", "step": 6})

    def test_the_result_stays_under_20_kib_with_long_texts(self):
        rows = [{"id": f"long-{i}" + "x" * 500, "prompt": "\u0001" * 40 + "y" * 500, "answer": "z" * 900}
                for i in range(12)]
        self.s3.put_object("lab", "benchmarks/long.jsonl", "\n".join(json.dumps(r) for r in rows).encode())
        spec = self.eval_spec(data_uri="s3://lab/benchmarks/long.jsonl", scorer="exact-string")
        spec["examples"] = 10
        spec["checkpoint"]["manifest"] = self.manifest(6)
        with self.assertRaisesRegex(UnknownCharacterError, "is not in the vocabulary"):
            self.evaluate(spec)
        rows = [{**r, "prompt": "y" * 40} for r in rows]
        self.s3.put_object("lab", "benchmarks/long.jsonl", "\n".join(json.dumps(r) for r in rows).encode())
        result = self.evaluate(spec)
        self.assertEqual(len(result["examples"]), 10)
        self.assertLessEqual(len(result["examples"][0]["answer"]), 300)
        self.assertLess(len(json.dumps(result, indent=2)), 20 * 1024)

    def test_a_changed_file_is_named(self):
        spec = self.eval_spec()
        spec["checkpoint"]["manifest"]["files"][1]["sha256"] = "0" * 64
        with self.assertRaisesRegex(eval_main.ChecksumMismatch, "checkpoint file config.json: sha256 [0-9a-f]{64} "
                                                                "does not match the manifest's 0{64}"):
            self.evaluate(spec)
        spec = self.eval_spec()
        spec["checkpoint"]["manifest"]["files"][0]["size"] += 1
        with self.assertRaisesRegex(eval_main.ChecksumMismatch, "checkpoint file model.safetensors: size \\d+ bytes"):
            self.evaluate(spec)

    def test_a_missing_file_is_named(self):
        spec = self.eval_spec()
        spec["checkpoint"]["manifest"]["files"].append({"name": "tokenizer.json", "sha256": "a" * 64, "size": 1})
        with self.assertRaisesRegex(eval_main.MissingCheckpointFile, "checkpoint file tokenizer.json: "
                                    "s3://lab/checkpoints/smoke/6/tokenizer.json: no such object"):
            self.evaluate(spec)

    def test_an_unsafe_file_name_is_refused(self):
        spec = self.eval_spec()
        spec["checkpoint"]["manifest"]["files"][0]["name"] = "../6/model.safetensors"
        with self.assertRaisesRegex(eval_main.ManifestError, "manifest.files\\[0\\].name: must be a plain file name"):
            self.evaluate(spec)

    def test_a_pickle_checkpoint_that_runs_code_is_refused(self):
        import hashlib
        marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pwned_marker__")

        class Payload:
            def __reduce__(self):
                return (exec, (f"open({marker!r}, 'w')",))

        buffer = io.BytesIO()
        torch.save({"wte.weight": torch.zeros(1), "x": Payload()}, buffer)
        self.s3.put_object("lab", "checkpoints/evil/1/model.pt", buffer.getvalue())
        config = self.s3.objects[("lab", "checkpoints/smoke/6/config.json")]
        self.s3.put_object("lab", "checkpoints/evil/1/config.json", config)
        files = [{"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                 for n, d in (("config.json", config), ("model.pt", buffer.getvalue()))]
        spec = self.eval_spec()
        spec["checkpoint"] = {"uri": "s3://lab/checkpoints/evil/1/", "manifest": {"run": "evil", "step": 1, "files": files}}
        with self.assertRaisesRegex(CheckpointRefused, "model.pt: refused"):
            self.evaluate(spec)
        self.assertFalse(os.path.exists(marker))

    def test_spec_errors_are_named(self):
        with self.assertRaisesRegex(UnknownScorerError, "got 'bleu'"):
            self.evaluate(self.eval_spec(scorer="bleu"))
        with self.assertRaisesRegex(SpecError, "benchmark.sample_size: must be an integer in 1..100000 .got 0"):
            self.evaluate(self.eval_spec(sample_size=0))
        with self.assertRaisesRegex(eval_main.MissingInputError, "s3://lab/benchmarks/nope.jsonl: no such object"):
            self.evaluate(self.eval_spec(data_uri="s3://lab/benchmarks/nope.jsonl"))
        bad = copy.deepcopy(TINY_TRAIN)
        bad["finetune"]["replay_fraction"] = 1.5
        with self.assertRaisesRegex(SpecError, "finetune.replay_fraction: must be a number in \\[0.0, 0.9\\] .got 1.5"):
            train_main.TrainSpec.from_dict(bad)
        bad = copy.deepcopy(TINY_TRAIN)
        del bad["finetune"]["checkpoint_every"]
        with self.assertRaisesRegex(SpecError, "finetune.checkpoint_every: must be an integer >= 1 .got nothing"):
            train_main.TrainSpec.from_dict(bad)
        with self.assertRaisesRegex(SpecError, "model.n_embd: must be a multiple of n_head"):
            train_main.TrainSpec.from_dict(TINY_TRAIN | {"model": {"n_embd": 30, "n_head": 4}})


if __name__ == "__main__":
    unittest.main()
