"""Writes a test fixture for the TypeScript side: `python3 make_fixture.py OUT_DIR`.

OUT_DIR/policy.onnx is `checkpoints.policy_onnx` of seeded random weights at the real sizes
(103 -> 512 -> 256 -> 128 -> 58, swish) and a random normaliser; OUT_DIR/expected.json holds five
observations and the actions `checkpoints.policy_forward` gives them, so a test with
onnxruntime-node can check that it reads this job's export as this job means it. The observations
are float32 values written exactly, so both sides feed the model the same input; compare the
actions with a tolerance (1e-5), never bit for bit.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

import checkpoints

SEED = 20260806
HIDDEN = (512, 256, 128)
ROWS = 5


def fixture_policy(seed: int = SEED):
    """(mean, std, layers): lecun-uniform weights as Brax initialises them, a plausible normaliser."""
    rng = np.random.default_rng(seed)
    widths = (checkpoints.OBSERVATION_SIZE, *HIDDEN, checkpoints.POLICY_OUTPUT_SIZE)
    layers = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        limit = np.sqrt(3.0 / fan_in)
        layers.append((rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                       rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)))
    mean = rng.normal(0.0, 0.5, checkpoints.OBSERVATION_SIZE).astype(np.float32)
    std = rng.uniform(0.2, 2.0, checkpoints.OBSERVATION_SIZE).astype(np.float32)
    observations = rng.normal(0.0, 1.0, (ROWS, checkpoints.OBSERVATION_SIZE)).astype(np.float32)
    return mean, std, layers, observations


def make_fixture(out_dir: str, seed: int = SEED) -> dict:
    mean, std, layers, observations = fixture_policy(seed)
    actions = checkpoints.policy_forward(mean, std, layers, observations)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "policy.onnx"), "wb") as out:
        out.write(checkpoints.policy_onnx(mean, std, layers))
    expected = {
        "observations": [[float(v) for v in row] for row in observations],
        "actions": [[float(v) for v in row] for row in actions],
    }
    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as out:
        json.dump(expected, out, indent=1)
        out.write("\n")
    return expected


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 make_fixture.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    make_fixture(sys.argv[1])
    print(f"wrote {os.path.join(sys.argv[1], 'policy.onnx')} and expected.json")
