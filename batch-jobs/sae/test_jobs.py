"""The job's four stages end to end on a small corpus, over an in-memory S3.

The corpus is Debian's licence texts (/usr/share/common-licenses: real prose nobody here wrote,
on every Debian system), a few hundred kilobytes split into paragraphs.
"""
from __future__ import annotations

import json
import os
import sys
import unittest

import torch
from harvest import HarvestError
from jobio import JobContext
from memory_s3 import MemoryS3
from main import SpecError, main

LICENCES = "/usr/share/common-licenses"


def licence_paragraphs() -> list[str]:
    paragraphs: list[str] = []
    for name in sorted(os.listdir(LICENCES)):
        path = os.path.join(LICENCES, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as source:
                paragraphs.extend(p.strip() for p in source.read().split("\n\n") if len(p.strip()) > 40)
    return paragraphs


def quietly(fn, *args):
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            return fn(*args)
        finally:
            sys.stdout = stdout


LM = {"kind": "local", "layers": 2, "width": 32, "heads": 2, "context": 32, "vocab": 512, "steps": 150,
      "batchSize": 16, "learningRate": 3e-3}


class StagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        torch.set_num_threads(1)
        cls.s3 = MemoryS3()
        rows = "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(licence_paragraphs()))
        cls.s3.put_object("lab", "corpus/shard-0.jsonl", rows.encode())
        manifest = {"shards": [{"uri": "s3://lab/corpus/shard-0.jsonl"}]}
        cls.s3.put_object("lab", "corpus/manifest.json", json.dumps(manifest).encode())
        cls.lm = cls.run_stage("lm", {"stage": "lm", "corpusUri": "s3://lab/corpus/manifest.json", "lm": LM, "seed": 0,
                                      "harvestTokens": 16_384})
        cls.harvest = cls.run_stage("harvest", {"stage": "harvest", "corpusUri": "s3://lab/corpus/manifest.json",
                                                "lmUri": cls.lm["lmUri"], "layer": 1, "tokens": 16_384, "heldOutEvery": 8})

    @classmethod
    def run_stage(cls, name: str, spec: dict) -> dict:
        ctx = JobContext(output_uri=f"s3://lab/runs/{name}/", client=cls.s3)
        return quietly(main, spec, ctx)

    def sae(self, width: int, k: int) -> dict:
        return self.run_stage(f"sae-{width}-{k}", {
            "stage": "sae", "harvestUri": self.harvest["harvestUri"], "width": width, "k": k, "epochs": 8,
            "batchSize": 512, "learningRate": None, "auxk": None, "auxkCoef": 1 / 32, "deadTokens": 4_000,
            "ablation": "zero", "seed": 0})

    def test_lm_and_harvest(self) -> None:
        self.assertGreater(self.lm["corpusTokens"], 16_384)
        self.assertLess(self.lm["heldOutLoss"], 6.0)
        self.assertEqual(self.harvest["trainTokens"] + self.harvest["heldOutTokens"], 16_384)
        self.assertLess(self.harvest["ceClean"] + 0.5, self.harvest["ceZeroAblated"])

    def test_sae_grid_and_contexts(self) -> None:
        small, large = self.sae(128, 4), self.sae(128, 16)
        for result in (small, large):
            self.assertLessEqual(result["l0"], result["k"] + 1e-9)
            self.assertGreater(result["tokensPerSecond"], 0)
        # More latents per token reconstruct better and recover more of the loss.
        self.assertLess(large["fvu"], small["fvu"])
        self.assertGreater(large["lossRecovered"], 0.5)
        contexts = self.run_stage("contexts", {
            "stage": "contexts", "harvestUri": self.harvest["harvestUri"], "saeUri": large["saeUri"], "seed": 0,
            "labels": {"features": 6, "minActivating": 4, "explainExamples": 8, "detectExamples": 8, "windowTokens": 12}})
        bucket, key = contexts["contextsUri"][len("s3://"):].split("/", 1)
        document = json.loads(self.s3.objects[(bucket, key)])
        self.assertEqual(document["format"], "sae-contexts-v1")
        self.assertEqual(len(document["features"]), 6)
        for feature in document["features"]:
            self.assertEqual(len(feature["detect"]), 8)
            self.assertEqual(sum(w["active"] for w in feature["detect"]), 4)
            for window in feature["detect"]:
                self.assertEqual(window["active"], any(a > 0 for a in window["activations"]))
                self.assertLessEqual(len(window["tokens"]), 12)
            sources = [w["source"] for w in feature["explain"]]
            self.assertEqual(sources.count("inactive"), 2)
            self.assertTrue(all(any(a > 0 for a in w["activations"]) for w in feature["explain"] if w["source"] != "inactive"))

    def test_bad_specs(self) -> None:
        with self.assertRaisesRegex(SpecError, r"stage: must be one of"):
            self.run_stage("bad", {"stage": "train"})
        with self.assertRaisesRegex(HarvestError, r"harvest.tokens: 100000000 tokens asked for, but the corpus has \d+"):
            self.run_stage("short", {"stage": "lm", "corpusUri": "s3://lab/corpus/manifest.json", "lm": LM, "seed": 0,
                                     "harvestTokens": 100_000_000})
        with self.assertRaisesRegex(SpecError, r"corpusUri: s3://lab/missing.json: no such object"):
            self.run_stage("missing", {"stage": "lm", "corpusUri": "s3://lab/missing.json", "lm": LM, "seed": 0,
                                       "harvestTokens": 1})


class HugeWordTest(unittest.TestCase):
    """A word piece has no length bound, but the contexts' schema caps a token's text at 200
    characters (shared/sae/explain.ts MAX_TOKEN_CHARS): a 5,000-letter word, frequent enough to be
    a piece of its own, is cut to 200 characters in every window shown."""

    def test_a_huge_piece_is_cut_to_the_schema_bound(self) -> None:
        torch.set_num_threads(1)
        huge = " " + "q" * 5_000
        s3 = MemoryS3()
        texts = []
        for paragraph in licence_paragraphs()[:150]:
            words = paragraph.split(" ")
            texts.append(" ".join(w + huge if i % 6 == 5 else w for i, w in enumerate(words)))
        s3.put_object("lab", "corpus/shard-0.jsonl", "".join(json.dumps({"text": t}) + "\n" for t in texts).encode())
        s3.put_object("lab", "corpus/manifest.json", json.dumps({"shards": [{"uri": "s3://lab/corpus/shard-0.jsonl"}]}).encode())

        def run(name: str, spec: dict) -> dict:
            return quietly(main, spec, JobContext(output_uri=f"s3://lab/runs/{name}/", client=s3))

        lm = run("lm", {"stage": "lm", "corpusUri": "s3://lab/corpus/manifest.json", "lm": {**LM, "steps": 20}, "seed": 0,
                        "harvestTokens": 4_096})
        tokenizer = json.loads(s3.objects[("lab", "runs/lm/tokenizer.json")])
        self.assertIn(huge, tokenizer["pieces"])
        harvest = run("harvest", {"stage": "harvest", "corpusUri": "s3://lab/corpus/manifest.json", "lmUri": lm["lmUri"],
                                  "layer": 1, "tokens": 4_096, "heldOutEvery": 4})
        sae = run("sae", {"stage": "sae", "harvestUri": harvest["harvestUri"], "width": 64, "k": 4, "epochs": 1,
                          "batchSize": 256, "learningRate": None, "auxk": None, "auxkCoef": 1 / 32, "deadTokens": 1_000,
                          "ablation": "zero", "seed": 0})
        contexts = run("contexts", {"stage": "contexts", "harvestUri": harvest["harvestUri"], "saeUri": sae["saeUri"], "seed": 0,
                                    "labels": {"features": 4, "minActivating": 2, "explainExamples": 6, "detectExamples": 4,
                                               "windowTokens": 12}})
        bucket, key = contexts["contextsUri"][len("s3://"):].split("/", 1)
        document = json.loads(s3.objects[(bucket, key)])
        tokens = [t for f in document["features"] for w in f["explain"] + f["detect"] for t in w["tokens"]]
        self.assertGreater(len(tokens), 0)
        self.assertLessEqual(max(len(t) for t in tokens), 200)
        self.assertIn(huge[:200], tokens)


if __name__ == "__main__":
    unittest.main()
