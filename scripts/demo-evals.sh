#!/usr/bin/env bash
# The evaluate-every-checkpoint demo on the embedded runtime: register the two benchmarks and the
# guard, then run the checkpoint producer; each checkpoint it uploads starts an evaluation.
# Options (e.g. --data-dir DIR) are passed to every command.
set -euo pipefail
cd "$(dirname "$0")/.."
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
python3 batch-jobs/evals-lm/make_benchmarks.py "$data" --rows 500
npx frontier benchmarks add arithmetic --data "$data/arithmetic.jsonl" --scorer exact-number --sample-size 200 \
  --description "GSM8K-style one-operation word problems, held out" "$@"
npx frontier benchmarks add reversal --data "$data/reversal.jsonl" --scorer exact-string --sample-size 200 \
  --description "String reversal, the general skill of the base model" "$@"
npx frontier benchmarks guard arithmetic reversal --margin 2 "$@"
npx frontier run lm-sft "$@"
npx frontier artifacts show leaderboard-sft-demo "$@"
