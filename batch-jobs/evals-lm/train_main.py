"""lm-train: the checkpoint producer. Trains a base TinyLM, then fine-tunes it on arithmetic,
uploading a checkpoint as it goes; each upload starts the evaluate-every-checkpoint pipeline.

1. Read the spec (TrainSpec below) and seed everything.
2. Train the base model on the base mix (English text and string reversal by default).
3. Upload it as step 0: s3://<checkpoints_uri>/0/{model.safetensors, config.json,
   trainer_state.json} and then manifest.json, LAST: the manifest's arrival is the event that
   starts evaluation, so every file it lists is already in place and its sha256 and size let
   the eval job detect a torn or replaced file.
4. Fine-tune on arithmetic (with replay_fraction of each batch drawn from the base mix),
   uploading the same files under <step>/ every checkpoint_every steps and at the last step.
5. Return result.json: the checkpoint URIs and the loss curves.

Started as `python3 train_main.py` (the image's default command is the eval job) through
jobio's contract.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import torch

import specs
from jobio import JobContext, run, split_s3_uri
from tasks import ArithmeticOptions, TaskError
from tinylm import ModelConfig, ModelConfigError, TinyLM, save_model
from trainer import MixedSampler, train_phase

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CHECKPOINT_FILES = ("model.safetensors", "config.json", "trainer_state.json")


@dataclass(frozen=True)
class PhaseSpec:
    steps: int
    batch_size: int
    lr: float


@dataclass(frozen=True)
class TrainSpec:
    run: str
    """The run name; also the last part of checkpoints_uri by convention (not enforced)."""
    checkpoints_uri: str
    """s3://bucket/checkpoints/<run>/ ; checkpoint <step> goes under <checkpoints_uri><step>/."""
    seed: int
    model: ModelConfig
    arithmetic: ArithmeticOptions
    base: PhaseSpec
    base_mix: dict[str, float]
    finetune: PhaseSpec
    checkpoint_every: int
    replay_fraction: float
    """Share of each fine-tune batch drawn from the base mix (0 = arithmetic only)."""
    device: str

    @staticmethod
    def from_dict(spec: Any) -> "TrainSpec":
        if not isinstance(spec, dict):
            raise specs.SpecError(f"spec: must be an object (got {type(spec).__name__})")
        run_name = specs.string(spec, "run", "")
        if not RUN_NAME.match(run_name):
            raise specs.SpecError(f"run: must match {RUN_NAME.pattern} (got {run_name!r})")
        uri = specs.string(spec, "checkpoints_uri", "", prefix="s3://")
        split_s3_uri(uri)
        uri = uri if uri.endswith("/") else uri + "/"
        model_fields = specs.obj(spec, "model", "", default={})
        try:
            model = ModelConfig(**{k: model_fields[k] for k in ("n_layer", "n_embd", "n_head", "block_size")
                                   if k in model_fields})
        except ModelConfigError as err:
            raise specs.SpecError(f"model.{err}") from err
        unknown = set(model_fields) - {"n_layer", "n_embd", "n_head", "block_size"}
        if unknown:
            raise specs.SpecError(f"model: unknown fields {sorted(unknown)}")
        arith = specs.obj(spec, "arithmetic", "", default={})
        try:
            arithmetic = ArithmeticOptions(max_operand=arith.get("max_operand", 9),
                                           operations=tuple(arith.get("operations", ["add"])))
        except (TaskError, TypeError) as err:
            raise specs.SpecError(f"arithmetic.{err}") from err
        base = specs.obj(spec, "base", "")
        mix = specs.obj(base, "mix", "base.", default={"text": 0.5, "reversal": 0.5})
        for task, weight in mix.items():
            if task not in ("text", "reversal", "arithmetic") or isinstance(weight, bool) \
                    or not isinstance(weight, (int, float)) or weight < 0:
                raise specs.SpecError(f"base.mix.{task}: must be a task (text, reversal, arithmetic) "
                                      f"with a weight >= 0 (got {weight!r})")
        if sum(mix.values()) <= 0:
            raise specs.SpecError(f"base.mix: weights must sum to more than 0 (got {mix!r})")
        finetune = specs.obj(spec, "finetune", "")
        device = spec.get("device", "auto")
        if device not in ("auto", "cpu", "cuda"):
            raise specs.SpecError(f"device: must be auto, cpu or cuda (got {device!r})")
        return TrainSpec(
            run=run_name, checkpoints_uri=uri, seed=specs.integer(spec, "seed", "", 0, default=0),
            model=model, arithmetic=arithmetic, base=_phase(base, "base."), base_mix=dict(mix),
            finetune=_phase(finetune, "finetune."),
            checkpoint_every=specs.integer(finetune, "checkpoint_every", "finetune.", 1),
            replay_fraction=specs.number(finetune, "replay_fraction", "finetune.", 0.0, 0.9, default=0.0),
            device=device)


def _phase(fields: dict, path: str) -> PhaseSpec:
    return PhaseSpec(steps=specs.integer(fields, "steps", path, 1),
                     batch_size=specs.integer(fields, "batch_size", path, 1, 4096),
                     lr=specs.number(fields, "lr", path, 0.0, 1.0, low_open=True))


def upload_checkpoint(client: Any, spec: TrainSpec, step: int, model: TinyLM, state: dict, workdir: str) -> dict:
    """Writes the checkpoint files under <checkpoints_uri><step>/, then manifest.json last."""
    directory = os.path.join(workdir, f"step-{step}")
    save_model(directory, model)
    with open(os.path.join(directory, "trainer_state.json"), "w") as out:
        json.dump(state, out, indent=2)
    bucket, prefix = split_s3_uri(spec.checkpoints_uri)
    prefix = f"{prefix}{step}/"
    files = []
    for name in CHECKPOINT_FILES:
        with open(os.path.join(directory, name), "rb") as source:
            data = source.read()
        client.put_object(Bucket=bucket, Key=prefix + name, Body=data,
                          ContentType="application/json" if name.endswith(".json") else "application/octet-stream")
        files.append({"name": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    manifest = {"run": spec.run, "step": step, "files": files, "base_step": 0,
                "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    client.put_object(Bucket=bucket, Key=prefix + "manifest.json", Body=json.dumps(manifest, indent=2).encode(),
                      ContentType="application/json")
    return {"step": step, "uri": f"s3://{bucket}/{prefix}", "manifest_uri": f"s3://{bucket}/{prefix}manifest.json",
            "model_bytes": files[0]["size"]}


def train_checkpoints(spec: TrainSpec, on_checkpoint: Callable[[int, TinyLM, dict], dict],
                      on_progress: Callable[..., None]) -> dict:
    """The two phases; on_checkpoint(step, model, trainer_state) uploads and returns its record."""
    torch.manual_seed(spec.seed)
    rng = random.Random(spec.seed)
    device = spec.device if spec.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyLM(spec.model).to(device)
    spec_hash = hashlib.sha256(json.dumps(
        {"seed": spec.seed, "model": spec.model.to_json(), "base": spec.base.__dict__, "mix": spec.base_mix,
         "finetune": spec.finetune.__dict__, "replay": spec.replay_fraction}, sort_keys=True).encode()).hexdigest()
    checkpoints: list[dict] = []

    def state(phase: str, step: int, loss: float, phase_spec: PhaseSpec, seconds: float) -> dict:
        return {"run": spec.run, "phase": phase, "step": step, "loss": loss, "seed": spec.seed,
                "lr": phase_spec.lr, "batch_size": phase_spec.batch_size, "phase_seconds": round(seconds, 3),
                "replay_fraction": spec.replay_fraction if phase == "finetune" else 0.0,
                "spec_sha256": spec_hash}

    base_mix = MixedSampler(spec.base_mix, rng, spec.arithmetic)
    on_progress(stage="base", steps=spec.base.steps, parameters=model.num_parameters(), device=device)
    base = train_phase(model, lambda: base_mix.batch(spec.base.batch_size), spec.base.steps, spec.base.lr,
                       on_progress=lambda row: on_progress(stage="base-step", **row), device=device)
    checkpoints.append(on_checkpoint(0, model, state("base", 0, base.curve[-1]["loss"], spec.base, base.seconds)))

    arithmetic = MixedSampler({"arithmetic": 1.0}, rng, spec.arithmetic)
    replay_count = round(spec.finetune.batch_size * spec.replay_fraction)

    def finetune_batch():
        batch = arithmetic.batch(spec.finetune.batch_size - replay_count)
        if replay_count:
            batch += base_mix.batch(replay_count)
        return batch

    started = time.perf_counter()
    finetune = train_phase(
        model, finetune_batch, spec.finetune.steps, spec.finetune.lr, checkpoint_every=spec.checkpoint_every,
        on_checkpoint=lambda step, loss: checkpoints.append(on_checkpoint(
            step, model, state("finetune", step, loss, spec.finetune, time.perf_counter() - started))),
        on_progress=lambda row: on_progress(stage="finetune-step", **row), device=device)
    return {
        "checkpoints": checkpoints,
        "curve": {"base": base.curve, "finetune": finetune.curve},
        "train_seconds": {"base": round(base.seconds, 2), "finetune": round(finetune.seconds, 2)},
        "steps_per_second": {"base": round(spec.base.steps / base.seconds, 2),
                             "finetune": round(spec.finetune.steps / finetune.seconds, 2)},
        "parameters": model.num_parameters(),
        "device": device,
    }


def main(spec_fields: dict, ctx: JobContext) -> dict:
    torch.set_num_threads(1)  # more threads collapse when anything else shares the CPU
    started = time.perf_counter()
    spec = TrainSpec.from_dict(spec_fields)
    with tempfile.TemporaryDirectory(prefix="lm-train-") as workdir:
        def on_checkpoint(step: int, model: TinyLM, trainer_state: dict) -> dict:
            # save_model copies the weights to the CPU itself; the model stays where it trains.
            record = upload_checkpoint(ctx.client, spec, step, model, trainer_state, workdir)
            ctx.progress(stage="checkpoint", step=step, uri=record["uri"])
            return record

        out = train_checkpoints(spec, on_checkpoint, ctx.progress)
    model_bytes = out["checkpoints"][0]["model_bytes"]
    return {
        "run": spec.run,
        "checkpoints": [{k: c[k] for k in ("step", "uri", "manifest_uri")} for c in out["checkpoints"]],
        "curve": out["curve"],
        "train_seconds": out["train_seconds"],
        "steps_per_second": out["steps_per_second"],
        "seconds": round(time.perf_counter() - started, 2),
        "parameters": out["parameters"],
        "model_bytes": model_bytes,
        "device": out["device"],
    }


if __name__ == "__main__":
    run(main)
