"""lm-eval: one checkpoint on one benchmark (a Batch job; one per (checkpoint, benchmark)).

1. Read the spec (EvalSpec below). The checkpoint is either a TinyLM checkpoint directory in
   S3 with its manifest (the producer's manifest.json; read from the directory when the spec
   does not carry it) or, for the real-model path, a Hugging Face model id (hf_models.py).
2. Download every file the manifest lists and check its size and sha256 (MissingCheckpointFile,
   ChecksumMismatch, each naming the file), then load it safely (tinylm.load_model: no pickle
   beyond tensors is ever executed).
3. Read the benchmark's JSONL rows {id, prompt, answer} and take a seeded sample of
   sample_size rows (all rows when there are fewer). The sample depends only on the benchmark's
   name, version and seed, so every checkpoint is scored on the same rows.
4. Generate greedily in batches, score with the named scorer (scorers.py) and return a small
   result.json (under 20 KiB): accuracy, its binomial standard error, the commonest-answer
   baseline on the same sample, and a few example generations.

Started by the evaluate-every-checkpoint state machine through jobio's contract.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

import specs
from jobio import JobContext, run, split_s3_uri
from scorers import SCORERS, UnknownScorerError, score
from tinylm import load_model

FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
WEIGHT_FILES = ("model.safetensors", "model.pt")
EXAMPLE_TEXT_CHARS = 300
DEFAULT_MAX_NEW_TOKENS = 16
DEFAULT_EXAMPLES = 5
MAX_EXAMPLES = 10
RESULT_LIMIT_BYTES = 20 * 1024
DEFAULT_BATCH_SIZE = 64


class MissingInputError(FileNotFoundError):
    """An object the spec points at (manifest, benchmark data) is not in S3."""


class MissingCheckpointFile(FileNotFoundError):
    """A file the manifest lists is not in the checkpoint directory."""


class ChecksumMismatch(ValueError):
    """A checkpoint file's size or sha256 differs from the manifest's."""


class ManifestError(ValueError):
    """The manifest is malformed: no file list, an unsafe file name, no weights or config."""


class BenchmarkDataError(ValueError):
    """The benchmark data is not JSONL rows of {id, prompt, answer} strings, or is empty."""


@dataclass(frozen=True)
class EvalSpec:
    checkpoint_uri: str | None
    manifest: dict | None
    hf_model_id: str | None
    hf_revision: str | None
    name: str
    version: str
    sample_size: int
    scorer: str
    data_uri: str
    seed: int
    max_new_tokens: int
    examples: int
    batch_size: int
    device: str

    @staticmethod
    def from_dict(spec: Any) -> "EvalSpec":
        if not isinstance(spec, dict):
            raise specs.SpecError(f"spec: must be an object (got {type(spec).__name__})")
        checkpoint = specs.obj(spec, "checkpoint", "")
        kind = checkpoint.get("kind", "tinylm")
        if kind not in ("tinylm", "hf"):
            raise specs.SpecError(f"checkpoint.kind: must be tinylm or hf (got {kind!r})")
        uri = manifest = model_id = revision = None
        if kind == "tinylm":
            uri = specs.string(checkpoint, "uri", "checkpoint.", prefix="s3://")
            split_s3_uri(uri)
            uri = uri if uri.endswith("/") else uri + "/"
            manifest = checkpoint.get("manifest")
            if manifest is not None and not isinstance(manifest, dict):
                raise specs.SpecError(f"checkpoint.manifest: must be an object (got {manifest!r:.80})")
        else:
            model_id = specs.string(checkpoint, "model_id", "checkpoint.")
            revision = checkpoint.get("revision")
        benchmark = specs.obj(spec, "benchmark", "")
        scorer = specs.string(benchmark, "scorer", "benchmark.")
        if scorer not in SCORERS:
            raise UnknownScorerError(f"benchmark.scorer: must be one of {', '.join(SCORERS)} (got {scorer!r})")
        version = benchmark.get("version")
        if isinstance(version, bool) or not isinstance(version, (str, int)) or version == "":
            raise specs.SpecError(f"benchmark.version: must be a string or an integer (got {version!r})")
        data_uri = specs.string(benchmark, "data_uri", "benchmark.")
        if not (data_uri.startswith("s3://") or data_uri.startswith("hf://")):
            raise specs.SpecError(f"benchmark.data_uri: must start with s3:// or hf:// (got {data_uri!r})")
        device = spec.get("device", "auto")
        if device not in ("auto", "cpu", "cuda"):
            raise specs.SpecError(f"device: must be auto, cpu or cuda (got {device!r})")
        return EvalSpec(
            checkpoint_uri=uri, manifest=manifest, hf_model_id=model_id, hf_revision=revision,
            name=specs.string(benchmark, "name", "benchmark."), version=str(version),
            sample_size=specs.integer(benchmark, "sample_size", "benchmark.", 1, 100_000),
            scorer=scorer, data_uri=data_uri, seed=specs.integer(benchmark, "seed", "benchmark.", 0, default=0),
            max_new_tokens=specs.integer(spec, "max_new_tokens", "", 1, 1024, default=DEFAULT_MAX_NEW_TOKENS),
            examples=specs.integer(spec, "examples", "", 0, MAX_EXAMPLES, default=DEFAULT_EXAMPLES),
            batch_size=specs.integer(spec, "batch_size", "", 1, 4096, default=DEFAULT_BATCH_SIZE),
            device=device)


def _missing_key(error: Exception) -> bool:
    code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
    return code in ("NoSuchKey", "404", "NotFound")


def _get(client: Any, uri: str) -> bytes:
    bucket, key = split_s3_uri(uri)
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def _get_input(client: Any, uri: str) -> bytes:
    try:
        return _get(client, uri)
    except Exception as error:  # noqa: BLE001 - a missing key gets a clear name; others re-raise
        if _missing_key(error):
            raise MissingInputError(f"{uri}: no such object") from error
        raise


def check_manifest(manifest: Any) -> list[dict]:
    """-> the manifest's file entries, each {name, sha256, size}; raises ManifestError."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not files:
        raise ManifestError("manifest.files: must be a non-empty list")
    for i, entry in enumerate(files):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not FILE_NAME.match(name):
            raise ManifestError(f"manifest.files[{i}].name: must be a plain file name (got {name!r})")
        if not isinstance(entry.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise ManifestError(f"manifest.files[{i}].sha256: must be 64 lowercase hex digits (got {entry.get('sha256')!r})")
        size = entry.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ManifestError(f"manifest.files[{i}].size: must be an integer >= 0 (got {size!r})")
    names = [f["name"] for f in files]
    if "config.json" not in names or not any(w in names for w in WEIGHT_FILES):
        raise ManifestError(f"manifest.files: must list config.json and one of {', '.join(WEIGHT_FILES)} (got {names})")
    return files


def download_checkpoint(client: Any, checkpoint_uri: str, files: list[dict], directory: str) -> dict[str, str]:
    """Downloads and verifies each listed file -> {name: local path}."""
    paths = {}
    for entry in files:
        name, uri = entry["name"], checkpoint_uri + entry["name"]
        try:
            data = _get(client, uri)
        except Exception as error:  # noqa: BLE001
            if _missing_key(error):
                raise MissingCheckpointFile(f"checkpoint file {name}: {uri}: no such object") from error
            raise
        if len(data) != entry["size"]:
            raise ChecksumMismatch(f"checkpoint file {name}: size {len(data)} bytes does not match the "
                                   f"manifest's {entry['size']}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise ChecksumMismatch(f"checkpoint file {name}: sha256 {digest} does not match the "
                                   f"manifest's {entry['sha256']}")
        paths[name] = os.path.join(directory, name)
        with open(paths[name], "wb") as out:
            out.write(data)
    return paths


def parse_rows(data: bytes, uri: str) -> list[dict[str, str]]:
    rows = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise BenchmarkDataError(f"benchmark data {uri}: line {number}: not JSON ({err})") from err
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("id", "prompt", "answer")):
            raise BenchmarkDataError(f"benchmark data {uri}: line {number}: must be an object with string "
                                     f"id, prompt and answer")
        rows.append({"id": row["id"], "prompt": row["prompt"], "answer": row["answer"]})
    if not rows:
        raise BenchmarkDataError(f"benchmark data {uri}: no rows")
    return rows


def sample_rows(rows: list[dict], name: str, version: str, seed: int, size: int) -> list[dict]:
    """A seeded sample in file order; the same for every checkpoint of every run."""
    if len(rows) <= size:
        return list(rows)
    rng = random.Random(f"{name}|{version}|{seed}")
    return [rows[i] for i in sorted(rng.sample(range(len(rows)), size))]


def _clip(text: str) -> str:
    return text if len(text) <= EXAMPLE_TEXT_CHARS else text[:EXAMPLE_TEXT_CHARS - 3] + "..."


def summarize(spec: EvalSpec, sample: list[dict], generations: list[str], correct: list[bool]) -> dict:
    n, hits = len(sample), sum(correct)
    accuracy = hits / n
    answers = [r["answer"].strip() for r in sample]
    return {
        "benchmark": spec.name,
        "version": spec.version,
        "scorer": spec.scorer,
        "n": n,
        "correct": hits,
        "accuracy": round(accuracy, 6),
        "stderr": round(math.sqrt(accuracy * (1 - accuracy) / n), 6),
        "baseline": round(Counter(answers).most_common(1)[0][1] / n, 6),
        "examples": [{"id": _clip(r["id"]), "prompt": _clip(r["prompt"]), "answer": _clip(r["answer"]),
                      "generation": _clip(g), "correct": c}
                     for r, g, c in list(zip(sample, generations, correct))[:spec.examples]],
    }


def main(spec_fields: dict, ctx: JobContext) -> dict:
    torch.set_num_threads(1)  # more threads collapse when anything else shares the CPU
    started = time.perf_counter()
    spec = EvalSpec.from_dict(spec_fields)
    device = spec.device if spec.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if spec.data_uri.startswith("hf://"):
        from hf_models import load_hf_benchmark  # transformers/datasets only on this path
        rows = load_hf_benchmark(spec.data_uri)
    else:
        rows = parse_rows(_get_input(ctx.client, spec.data_uri), spec.data_uri)
    sample = sample_rows(rows, spec.name, spec.version, spec.seed, spec.sample_size)
    ctx.progress(stage="data", rows=len(rows), sample=len(sample))

    if spec.hf_model_id is not None:
        from hf_models import HFGenerator
        generator = HFGenerator(spec.hf_model_id, spec.hf_revision, device)
        checkpoint = {"model_id": spec.hf_model_id, "revision": spec.hf_revision, "run": None, "step": None}
    else:
        manifest = spec.manifest
        if manifest is None:
            manifest = json.loads(_get_input(ctx.client, spec.checkpoint_uri + "manifest.json"))
        files = check_manifest(manifest)
        with tempfile.TemporaryDirectory(prefix="lm-eval-") as workdir:
            paths = download_checkpoint(ctx.client, spec.checkpoint_uri, files, workdir)
            weights = next(paths[w] for w in WEIGHT_FILES if w in paths)
            generator = load_model(paths["config.json"], weights).to(device)
        checkpoint = {"run": manifest.get("run"), "step": manifest.get("step")}
    ctx.progress(stage="loaded", checkpoint=checkpoint)

    generating = time.perf_counter()
    prompts = [r["prompt"] for r in sample]
    generations: list[str] = []
    for start in range(0, len(prompts), spec.batch_size):
        generations += generator.generate(prompts[start:start + spec.batch_size], spec.max_new_tokens,
                                          batch_size=spec.batch_size)
        ctx.progress(stage="generate", done=len(generations), total=len(prompts))
    correct = score(spec.scorer, generations, [r["answer"] for r in sample])
    generate_seconds = time.perf_counter() - generating
    result = summarize(spec, sample, generations, correct)
    result.update({
        "seconds": round(time.perf_counter() - started, 3),
        "samples_per_second": round(len(sample) / generate_seconds, 2),
        "checkpoint": checkpoint,
        "device": device,
    })
    # Every scored row goes to eval.json (the file the artifact index keeps); result.json stays small.
    rows = [{"id": r["id"], "answer": r["answer"], "generation": g, "correct": c}
            for r, g, c in zip(sample, generations, correct)]
    written = ctx.put_json("eval.json", {**{k: v for k, v in result.items() if k != "examples"}, "rows": rows})
    result["files"] = [{"name": "eval.json", "uri": written["uri"]}]
    result["s3Outputs"] = [{"Bucket": written["Bucket"], "Key": written["Key"]}]
    # 10 examples of 4 clipped texts fit; escaped control characters could still swell them.
    while result["examples"] and len(json.dumps(result, indent=2)) >= RESULT_LIMIT_BYTES:
        result["examples"].pop()
    return result


if __name__ == "__main__":
    run(main)
