"""selfplay-train: one generation of the Connect Four league's self-play PPO (a Batch GPU job).

1. Read the spec (TrainConfig's fields, with S3 URIs where the trainer takes local files, plus
   evaluation_games) and download the previous snapshot and the snapshot opponents.
2. If OUTPUT_URI already holds checkpoint.pt, resume from it: a Batch retry attempt reruns the
   same job with the same OUTPUT_URI, so a reclaimed spot instance loses at most
   checkpoint_every iterations.
3. Train (trainer.train), uploading checkpoint.pt as it goes and printing a progress line per
   iteration.
4. Evaluate greedily against the tactical and random bots, split by seat.
5. Upload snapshot.onnx (the logits head, for the match and arena Lambdas), snapshot.pt (the
   weights, architecture and Adam state, for the next generation's trainer) and curves.json;
   return the small result the state machine reads (result.json: URIs and summary figures, its
   size independent of the iterations; the curves stay in curves.json).

Started by the SelfPlayLeague state machine's train step through jobio's contract.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import torch

from jobio import JobContext, run, split_s3_uri
from policy import export_onnx, save_checkpoint
from trainer import TrainConfig, TrainConfigError, evaluate, train

CHECKPOINT_NAME = "checkpoint.pt"
DEFAULT_EVALUATION_GAMES = 400


def _missing_key(error: Exception) -> bool:
    """True for S3's "no such key" (botocore's ClientError carries the code in .response)."""
    code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
    return code in ("NoSuchKey", "404", "NotFound")


class MissingInputError(FileNotFoundError):
    """An input the spec names (a snapshot, an opponent) is not in S3."""


def _download(client: Any, uri: str, path: str) -> str:
    bucket, key = split_s3_uri(uri)
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as error:  # noqa: BLE001 - a missing key gets a clear name; others re-raise
        if _missing_key(error):
            raise MissingInputError(f"{uri}: no such object") from error
        raise
    with open(path, "wb") as out:
        out.write(body)
    return path


def _download_optional(client: Any, uri: str, path: str) -> str | None:
    try:
        return _download(client, uri, path)
    except MissingInputError:
        return None


def localize_spec(spec: dict[str, Any], client: Any, workdir: str) -> tuple[TrainConfig, int]:
    """The spec with its S3 inputs downloaded -> (TrainConfig on local paths, evaluation games)."""
    if not isinstance(spec, dict):
        raise TrainConfigError(f"spec: expected an object (got {type(spec).__name__})")
    fields = dict(spec)
    evaluation_games = fields.pop("evaluation_games", DEFAULT_EVALUATION_GAMES)
    if isinstance(evaluation_games, bool) or not isinstance(evaluation_games, int) \
            or evaluation_games < 2 or evaluation_games % 2:
        raise TrainConfigError(f"evaluation_games: must be an even integer >= 2 (got {evaluation_games!r})")
    if fields.get("initial_state_dict"):
        fields["initial_state_dict"] = _download(client, fields["initial_state_dict"],
                                                 os.path.join(workdir, "initial.pt"))
    groups = fields.get("opponent_groups")
    if isinstance(groups, list):
        localized = []
        for i, group in enumerate(groups):
            if not isinstance(group, list):
                localized.append(group)  # TrainConfig names the error
                continue
            members = []
            for j, member in enumerate(group):
                if isinstance(member, dict) and isinstance(member.get("state_dict"), str) \
                        and member["state_dict"].startswith("s3://"):
                    member = {**member, "state_dict": _download(
                        client, member["state_dict"], os.path.join(workdir, f"opponent-{i}-{j}.pt"))}
                members.append(member)
            localized.append(members)
        fields["opponent_groups"] = localized
    return TrainConfig.from_dict(fields), evaluation_games


def main(spec: dict, ctx: JobContext) -> dict:
    torch.set_num_threads(1)  # more threads collapse when anything else shares the CPU
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="selfplay-train-") as workdir:
        config, evaluation_games = localize_spec(spec, ctx.client, workdir)
        bucket, prefix = split_s3_uri(ctx.output_uri)
        resume = _download_optional(ctx.client, f"s3://{bucket}/{prefix}{CHECKPOINT_NAME}",
                                    os.path.join(workdir, "resume.pt"))
        ctx.progress(stage="start", iterations=config.iterations, games=config.games_per_iteration,
                     groups=config.group_names(), resuming=resume is not None)

        def on_checkpoint(checkpoint) -> None:
            path = os.path.join(workdir, CHECKPOINT_NAME)
            checkpoint.save(path)
            with open(path, "rb") as data:
                ctx.put_bytes(CHECKPOINT_NAME, data.read())
            ctx.progress(stage="checkpoint", iteration=checkpoint.iteration)

        result = train(config, on_progress=lambda row: ctx.progress(stage="iteration", **row),
                       on_checkpoint=on_checkpoint, resume_from=resume, identity=spec)
        evaluation = {
            "vsTactical": evaluate(result.net, "tactical", evaluation_games, config.seed + 1),
            "vsRandom": evaluate(result.net, "random", evaluation_games, config.seed + 2),
        }
        ctx.progress(stage="evaluated", **{k: v["overall"] for k, v in evaluation.items()})

        onnx_path = os.path.join(workdir, "snapshot.onnx")
        export_onnx(result.net, onnx_path)
        pt_path = os.path.join(workdir, "snapshot.pt")
        # With the optimizer state: the next generation's job continues it (continue_optimizer).
        save_checkpoint(pt_path, result.net.cpu(), result.optimizer)
        uploads = []
        for name, path, content_type in (("snapshot.onnx", onnx_path, "application/octet-stream"),
                                         ("snapshot.pt", pt_path, "application/octet-stream")):
            with open(path, "rb") as data:
                uploads.append((name, ctx.put_bytes(name, data.read(), content_type)))
        curves = {"groups": result.group_names, **result.curves}
        uploads.append(("curves.json", ctx.put_json("curves.json", curves)))

    written = dict(uploads)
    return {
        "snapshotOnnx": written["snapshot.onnx"]["uri"],
        "stateDict": written["snapshot.pt"]["uri"],
        # The per-iteration curves grow with the iterations (up to 10,000): they stay in S3, and
        # the league's plan step reads them from curves.json.
        "curvesUri": written["curves.json"]["uri"],
        "groups": result.group_names,
        "iterations": len(result.curves["iteration"]),
        "evaluation": evaluation,
        "envStepsPerSecond": round(result.env_steps_per_second, 1),
        "seconds": round(time.perf_counter() - started, 2),
        "resumedFromIteration": result.resumed_from,
        "files": [{"uri": w["uri"], "name": name} for name, w in uploads],
        "s3Outputs": [{"Bucket": w["Bucket"], "Key": w["Key"]} for _, w in uploads],
    }


if __name__ == "__main__":
    run(main)
