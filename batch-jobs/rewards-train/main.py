"""rewards-train: trains a MountainCar PPO policy on a candidate reward function (a Batch CPU job,
run inside the reward search's sandbox).

1. Read the spec:
       {"reward_source": "<python source>"      one of the two: the candidate's text,
        "reward_path": "s3://... or a local file path",   or where to read it
        "seed": 0, "total_steps": 20000, "num_envs": 8, "evaluation_episodes": 100,
        "ppo": {...PPOConfig's fields...}}
   Every field but the reward is optional (TrainConfig's defaults); unknown fields are errors.
2. Load the candidate (reward_module: the interface it is written to), then train (trainer.train),
   printing a progress line per iteration.
3. Write policy.json (the data-only actor, policy.py's format; the only thing the grader reads),
   curves.json (one row per iteration) and return result.json's content: the training summary,
   a short curve, and the trainer's own greedy evaluation on its training seed. All of it is
   feedback about the candidate, never its score: the trusted grader (shared/rewards/mountaincar.ts)
   replays policy.json on fresh seeds.

Two ways to run it:
- under jobio's contract (JOB_SPEC_URI and OUTPUT_URI in S3): `python3 main.py`;
- on local files, with no network and no AWS SDK (the local sandbox):
  `python3 main.py --spec spec.json --output-dir DIR` writes the same files and result.json to
  DIR and exits as the contract does (0, or 1 with {"error": {type, message}} in result.json).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
from typing import Any, Callable

import torch

from policy import parse_policy
from reward_channel import RemoteReward
from reward_module import MAX_SOURCE_BYTES, RewardLoadError, load_reward_source
from trainer import TrainConfig, TrainConfigError, evaluate_policy, train

CURVE_POINTS_IN_RESULT = 20
LAST_EPISODES_IN_RESULT = 50


class SpecError(ValueError):
    """The spec's reward fields are missing, both given, or unreadable; names the field."""


def _read_reward(spec: dict[str, Any], client: Any) -> tuple[str, str]:
    """(source, filename for tracebacks) from reward_source or reward_path."""
    has_source, has_path = "reward_source" in spec, "reward_path" in spec
    if has_source == has_path:
        raise SpecError("reward_source / reward_path: give exactly one of them")
    if has_source:
        if not isinstance(spec["reward_source"], str):
            raise SpecError(f"reward_source: must be text (got {type(spec['reward_source']).__name__})")
        return spec["reward_source"], "reward.py"
    path = spec["reward_path"]
    if not isinstance(path, str) or not path:
        raise SpecError(f"reward_path: must be an s3:// URI or a file path (got {path!r})")
    if path.startswith("s3://"):
        if client is None:
            raise SpecError(f"reward_path: {path} is in S3, but this run has no S3 client (local mode)")
        from jobio import split_s3_uri  # the S3 path needs the contract's helpers; local mode does not
        bucket, key = split_s3_uri(path)
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read(MAX_SOURCE_BYTES + 1)
    else:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise RewardLoadError(f"reward_path: {path} is more than the limit of {MAX_SOURCE_BYTES} bytes")
    try:
        return data.decode("utf-8"), os.path.basename(path) or "reward.py"
    except UnicodeDecodeError as error:
        raise RewardLoadError(f"reward_path: {path} is not UTF-8 text") from error


def _short_curve(curves: dict[str, list], points: int) -> dict[str, list]:
    """At most `points` evenly spaced rows (the last always included) of the curve's main columns."""
    count = len(curves["iteration"])
    picks = sorted({round(i * (count - 1) / max(points - 1, 1)) for i in range(min(points, count))})
    keys = ("iteration", "env_steps", "env_return_mean", "success_rate", "candidate_return_mean",
            "candidate_reward_mean")
    return {key: [curves[key][i] for i in picks] for key in keys}


def main(spec: dict, ctx: Any, load_reward: Callable[[str, str], Any] = load_reward_source) -> dict:
    """`load_reward` loads the candidate: in this process (the default), or in its own process
    behind a socket (RemoteReward, the sandbox's way), where it cannot touch the trainer."""
    torch.set_num_threads(1)  # more threads collapse when anything else shares the CPU
    started = time.perf_counter()
    if not isinstance(spec, dict):
        raise SpecError(f"spec: expected an object (got {type(spec).__name__})")
    source, filename = _read_reward(spec, getattr(ctx, "client", None))
    config = TrainConfig.from_dict({k: v for k, v in spec.items() if k not in ("reward_source", "reward_path")})
    reward_fn = load_reward(source, filename)
    ctx.progress(stage="start", iterations=config.iterations, envSteps=config.iterations * config.batch_size,
                 vectorisedReward=reward_fn.vectorised)

    result = train(config, reward_fn, on_progress=lambda row: ctx.progress(stage="iteration", **row))
    policy = result.policy()
    parse_policy(policy)  # a diverged run (NaN weights) fails here, naming the weight, not in the grader
    evaluation = None
    if config.evaluation_episodes:
        evaluation = evaluate_policy(policy, [config.seed], config.evaluation_episodes)
        ctx.progress(stage="evaluated", successRate=evaluation["successRate"])

    # Compact: the 4,675 weights are most of the file (~50 KB; twice that indented).
    policy_bytes = json.dumps(policy, separators=(",", ":")).encode()
    written = [("policy.json", ctx.put_bytes("policy.json", policy_bytes, "application/json")),
               ("curves.json", ctx.put_json("curves.json", result.curves))]
    uris = dict(written)
    return {
        "policy": uris["policy.json"]["uri"],
        "curves": uris["curves.json"]["uri"],
        "rewardSha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "vectorisedReward": reward_fn.vectorised,
        "config": config.to_dict(),
        "iterations": config.iterations,
        "envSteps": result.env_steps,
        "episodes": result.episodes,
        "seconds": round(time.perf_counter() - started, 2),
        "trainSeconds": round(result.seconds, 2),
        "rewardSeconds": round(result.reward_seconds, 2),
        "lastEpisodes": result.last_episodes(LAST_EPISODES_IN_RESULT),
        "curve": _short_curve(result.curves, CURVE_POINTS_IN_RESULT),
        # What the trainer saw itself, greedy, on its own training seed's start states: feedback
        # for the proposer, never the candidate's score.
        "selfEvaluation": evaluation,
        "files": [{"uri": w["uri"], "name": name} for name, w in written],
        "s3Outputs": [{"Bucket": w["Bucket"], "Key": w["Key"]} for _, w in written if "Bucket" in w],
    }


class DirectoryContext:
    """jobio.JobContext's interface over a local directory: no S3, no network."""

    def __init__(self, output_dir: str):
        self.output_dir = os.path.abspath(output_dir)
        self.output_uri = self.output_dir + os.sep
        self.client = None
        os.makedirs(self.output_dir, exist_ok=True)

    def put_bytes(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        path = os.path.join(self.output_dir, name)
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
        return {"uri": path, "path": path}

    def put_json(self, name: str, value: Any) -> dict:
        return self.put_bytes(name, json.dumps(value, indent=2).encode(), "application/json")

    def progress(self, **fields: Any) -> None:
        print(json.dumps({"progress": fields, "time": time.time()}), flush=True)


def run_local(spec_path: str, output_dir: str, reward_socket: int | None = None) -> int:
    """jobio.run's contract on local files; returns the exit code. With `reward_socket` (an
    inherited socket to reward_channel.py's worker) the candidate runs in that process."""
    ctx = DirectoryContext(output_dir)
    try:
        with open(spec_path, encoding="utf-8") as handle:
            spec = json.load(handle)
        if reward_socket is None:
            result = main(spec, ctx)
        else:
            result = main(spec, ctx, lambda source, filename: RemoteReward.from_fd(reward_socket).load(source, filename))
    except Exception as error:  # noqa: BLE001 - the contract records any failure
        traceback.print_exc()
        ctx.put_json("result.json", {"error": {"type": type(error).__name__, "message": str(error)}})
        return 1
    ctx.put_json("result.json", result)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", help="a local spec file (local mode; with --output-dir)")
    parser.add_argument("--output-dir", help="where local mode writes its files and result.json")
    parser.add_argument("--reward-socket", type=int,
                        help="local mode: an inherited socket to the candidate's own process (reward_channel.py)")
    args = parser.parse_args()
    if args.spec or args.output_dir:
        if not (args.spec and args.output_dir):
            parser.error("--spec and --output-dir go together")
        sys.exit(run_local(args.spec, args.output_dir, args.reward_socket))
    if args.reward_socket is not None:
        parser.error("--reward-socket is a local-mode option (with --spec and --output-dir)")
    from jobio import run

    run(main)
