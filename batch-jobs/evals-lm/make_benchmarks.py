"""Writes the held-out benchmark files the registry points at: OUT_DIR/arithmetic.jsonl and
OUT_DIR/reversal.jsonl, one JSON row {id, prompt, answer} a line, seeded (same bytes every run).

    python3 make_benchmarks.py OUT_DIR [--rows 500] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import os

from tasks import commonest_answer_accuracy, heldout_rows


def write_benchmarks(out_dir: str, rows: int = 500, seed: int = 0) -> dict[str, dict]:
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for task in ("arithmetic", "reversal"):
        data = heldout_rows(task, rows, seed)
        path = os.path.join(out_dir, f"{task}.jsonl")
        with open(path, "w") as out:
            for row in data:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
        written[task] = {"path": path, "rows": len(data),
                         "baseline": round(commonest_answer_accuracy([r["answer"] for r in data]), 4)}
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(write_benchmarks(args.out_dir, args.rows, args.seed)))
