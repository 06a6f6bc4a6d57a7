"""Self-play trainer figures for npm run bench: environment steps per second and seconds per
iteration at a size's games per iteration, one torch thread, CPU; and two exported ONNX policies
(the real 126-256-256 network) for the match benchmark.

Usage: python3 selfplay_bench.py OUT_DIR TRAIN_CONFIG_JSON
(TrainConfig's fields: the league's first-generation groups and a size's games, iterations, ppo.)
Prints one JSON line.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "batch-jobs", "selfplay-train"), os.path.join(HERE, "..", "batch-jobs", "common")]

import torch  # noqa: E402

torch.set_num_threads(1)

from policy import PolicyConfig, PolicyNet, export_onnx  # noqa: E402
from trainer import TrainConfig, train  # noqa: E402


def main() -> None:
    out_dir, fields = sys.argv[1], json.loads(sys.argv[2])
    for seed in (1, 2):
        torch.manual_seed(seed)
        export_onnx(PolicyNet(PolicyConfig()), os.path.join(out_dir, f"policy-{seed}.onnx"))
    config = TrainConfig.from_dict({**fields, "seed": 0, "checkpoint_every": 10_000})
    games, iterations = config.games_per_iteration, config.iterations
    started = time.perf_counter()
    result = train(config)
    seconds = time.perf_counter() - started
    print(json.dumps({
        "gamesPerIteration": games,
        "iterations": iterations,
        "envSteps": result.env_steps,
        "envStepsPerSecond": round(result.env_steps_per_second, 1),
        "rolloutSeconds": round(result.rollout_seconds, 2),
        "secondsPerIteration": round(seconds / iterations, 3),
    }))


if __name__ == "__main__":
    main()
