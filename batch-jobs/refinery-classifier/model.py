"""The refinery's cheap quality classifier: hashed word features -> a 0-5 educational-value score.
Training, held-out evaluation and ONNX export.

The default model (model "lasso"): a relaxed lasso. The score is b + the sum of w[bucket] over the
buckets a document's words fall in (presence features, features.py): a linear model with one
weight per bucket, fitted by minimising (1/2n)||Xw + b - y||^2 + lambda ||w||_1 (X the n x buckets
0/1 presence matrix, y the labels, b unpenalised) with FISTA, then refitting least squares on the
buckets the lasso kept and blending w = gamma w_lasso + (1 - gamma) w_refit (Meinshausen 2007,
"relaxed lasso"). lambda and gamma are chosen from l1Grid x relaxGrid by cvFolds-fold
cross-validation on the training labels only (fit_lasso). Why:
- The labels are driven by a limited set of words (subject terms, "for example", "chapter"
  against "price", "login", "cart"); an L1 prior says exactly that, sets every other weight to
  zero, and keeps the rest of the vocabulary, whose co-occurrence with the marking words is
  chance at a few hundred labels, from soaking up weight (what the SGD-trained bag and a ridge
  regression do).
- The lasso's penalty also shrinks the weights it keeps towards zero, which pulls scores towards
  the mean and so across the threshold; the refit on the kept words removes that bias, and the
  cross-validated gamma decides how much of it to remove.
- It is exported as the embedding bag below with dim 1 and a linear head (weight 1, bias b):
  the same ONNX graph, inputs and output, so the scorer does not change; the file is a
  [buckets, 1] table (1 MB at 2^18 buckets against 16 MB).
- The MLP stays available (model "mlp") for labels whose signal is diffuse: many weak words and
  interactions, where a sparse linear model underfits.
Measured: see "Measured" below.

The MLP option (model "mlp", fastText-style). Each document is its (bucket, weight) pairs from
features.py. The model looks up a `dim`-wide row per bucket in one table (buckets x dim), sums the
rows weighted by the pair weights (weight 1 per distinct word: a sum over the words present, see
features.py), and a head maps that `dim`-vector to one number: one hidden ReLU layer of `hidden`
units (0 for a linear head). Why this shape:
- Cost. Scoring is a gather of a few thousand rows and a 16-wide sum per document: thousands of
  documents per second on one Lambda core, which is what applying it to every surviving document
  of a crawl needs. Training 5,000 labels takes seconds on one CPU.
- Hashing needs no vocabulary to ship or keep in step between Python and TypeScript; the two
  implementations of features.py's definition are all that must agree.
- The table is a learned low-rank linear model over n-grams (what fastText shows is strong for
  topic- and register-like labels, and educational value is mostly that); the hidden layer lets
  the score saturate and combine signals ("a lesson" and "for sale" together) at no real cost.

The target: regression on the integer 0-5 label with a squared loss, as FineWeb-Edu's classifier
does (a one-output regression head, outputs clipped to the scale). A regression keeps the order
of the scale (predicting 4 for a 5 is a smaller error than predicting 0) and gives one continuous
score that any threshold can be applied to without retraining. The exported score is clipped to
[0, 5]. A document is kept when score >= threshold; FineWeb-Edu's "rounded score >= 3" is the
same as threshold 2.5 on this continuous score.

No probability is produced, so the calibration figures are a reliability table of the score
itself: per rounded predicted score, the mean prediction next to the mean label, and their
count-weighted mean absolute gap (the score-scale analogue of an expected calibration error).

MLP training is seeded and deterministic on one machine: the table is updated with sparse gradients
by plain SGD (a step touches only the rows its batch uses, so a 2^18-row table costs no more than
a small one; why not Adam is in fit), the head with Adam. The table starts near zero (+-1e-3), so
a word the labels never moved adds almost nothing to a sum of a few hundred rows. By default all
`epochs` run and the last weights are kept; early stopping on a development split carved from the
training labels by a hash of the id (never the held-out labels, which are only scored once at the
end) is available with devFraction > 0.

Measured (the smoke run's 741 real labels, first 1,000 characters of each document; held-out 136
by the id hash, heldOutFraction 0.2; agreement = keep/drop agreement at the threshold; mean over
seeds 0-4, seed 0 in brackets; CPU, about a second of training either way):
  v1 features (uni+bigrams, frequency weights), +-1/dim start, 10 % dev split, patience 3:
      agreement at 2 / 3 / 4 = 0.82 / 0.72 (0.76) / 0.93, F1 at 3 0.41 (0.55), MAE 0.48 (0.44)
  v2 features (unigram presence), +-1e-3 start, no early stopping, 40 epochs (the defaults):
      agreement at 2 / 3 / 4 = 0.83 / 0.81 (0.82) / 0.93, F1 at 3 0.66 (0.68), MAE 0.30 (0.29)
Steps between: presence weights alone with bigrams 0.75 at 3; unigram presence with early
stopping on the 60-label dev split 0.77 (it stops on noise; without it 0.80); a linear head
(hidden 0) 0.81 at 3 with MAE 0.33, within noise of the MLP; the mean of five seeds' scores 0.81.
For reference, a closed-form ridge regression on exact (unhashed) unigram presence reaches 0.82
at 3: a dense linear bag of words spreads weight over words that co-occur with the marking ones.
136 held-out labels put about +-0.035 of sampling noise on each figure.
  The relaxed lasso (the default since; same features, defaults l1Grid 0.0005-0.008, relaxGrid
  0 / 0.5 / 1, 5 folds, MSE criterion), on the fixed split above: agreement at 2 / 3 / 4 =
      0.81 / 0.85 / 0.96, F1 at 3 0.75, MAE 0.27, calibration gap 0.11; chosen lambda 0.002,
      gamma 1, 217 non-zero weights; about 10 s of training on one CPU.
  Mean (std) over 10 random 148-label held-out splits of the same 741 labels (numpy seed 0):
      agreement at 2 / 3 / 4 = 0.847 (0.038) / 0.852 (0.023) / 0.940 (0.020), MAE 0.248
      (0.017); the choice was lambda 0.002 in 9 splits (gamma 1 in 8), 0.004 in one; the MLP
      on the same kind of splits: about 0.816 at 3.
  With the isotonic map (calibration "isotonic", the default; isotonic_knots) on the same 10
      splits: agreement at 2 / 3 / 4 = 0.904 / 0.917 (0.030) / 0.946; on the fixed split 0.882 /
      0.904 / 0.956; 23-33 knots; about 11 s a fit on one CPU. The linear score's cut at 3 sat
      in the wrong place because the labels saturate (2 to 3 takes more evidence than 0 to 1).
  Choosing by cross-validated keep/drop agreement at 3 instead of MSE: 0.856 / 0.855 (0.024) /
      0.949, MAE 0.252, within noise of the MSE criterion; the MSE is kept because it makes
      the model independent of the threshold (see fit_lasso).
  On a synthetic 5,000-label set (250-300 words a document, 30,000-word vocabulary, 40 marking
  words, labels from their count plus noise): 3,963 training labels in 85 s on one CPU (lambda
  0.008, gamma 0: 40 non-zero weights, the 40 marking words). The cost is the non-zeros of X
  times the FISTA steps, over 5 folds x 5 lambdas and a refit each (on the smoke labels a fit
  converges in 200-800 steps, well under lassoIterations).

ONNX: inputs `indices` int64 [batch, L] and `weights` float32 [batch, L] (pad with index 0 and
weight 0), output `score` float32 [batch]; batch and L dynamic; opset 13. The bag is a Gather and
a weighted ReduceSum, which every runtime has (nn.EmbeddingBag's export is avoided).

CLI (used by the cross-language test, and to train locally from a JSONL file):
    python3 model.py fit --labels LABELS.jsonl --out DIR [--config JSON] [--score TEXTS.json]
writes DIR/model.onnx, DIR/metrics.json and, with --score (a JSON list of strings),
DIR/predictions.json: torch's scores for those texts.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from features import (DEFAULT_BUCKETS, DEFAULT_MAX_TOKENS, FeatureSettings, document_features,
                      pad_batch)

ONNX_OPSET = 13
ONNX_INPUT_NAMES = ("indices", "weights")
ONNX_OUTPUT_NAME = "score"
MIN_SCORE = 0
MAX_SCORE = 5
MIN_LABELS = 20
TABLE_INIT = 1e-3
"""The table starts uniform in +-TABLE_INIT (see build_model)."""
MAX_TABLE_FLOATS = 1 << 26
"""buckets x dim at most 2^26 float32 (256 MiB): the model must load in a Lambda."""


class LabelError(ValueError):
    """The labels cannot train a classifier: malformed rows, too few, or a single class."""


@dataclass(frozen=True)
class Label:
    id: str
    text: str
    score: int


def _int_in(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name}: must be an integer from {low} to {high} (got {value!r})")
    return int(value)


def _number_in(name: str, value: Any, low: float, high: float, low_open: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) \
        and (low < value if low_open else low <= value) and value <= high
    if not ok:
        bound = "(" if low_open else "["
        raise ValueError(f"{name}: must be a number in {bound}{low}, {high}] (got {value!r})")
    return float(value)


def _grid(name: str, value: Any, low: float, high: float, low_open: bool = False) -> tuple[float, ...]:
    """A non-empty list of at most MAX_GRID numbers, each in the range, as a tuple of floats."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not 1 <= len(value) <= MAX_GRID:
        raise ValueError(f"{name}: must be a list of 1 to {MAX_GRID} numbers (got {value!r})")
    return tuple(_number_in(f"{name}[{i}]", v, low, high, low_open) for i, v in enumerate(value))


@dataclass(frozen=True)
class TrainConfig:
    """How to split, train and judge. Field names here are snake_case; the job spec and the CLI
    take the camelCase names given in FIELD_NAMES (the TypeScript side's zod schema)."""

    threshold: float = 3.0
    """Keep a document when its score >= threshold; the binary metrics use it. In (0, 5]."""
    held_out_fraction: float = 0.2
    """Share of labels held out (by a hash of the id) and scored once, after training. (0, 0.9]."""
    seed: int = 0
    """Seeds the initial weights and the batch order."""
    buckets: int = DEFAULT_BUCKETS
    """Hash buckets = rows of the embedding table (features.py)."""
    dim: int = 16
    """Width of each embedding row."""
    hidden: int = 32
    """Units of the head's hidden ReLU layer; 0 for a linear head."""
    epochs: int = 40
    """Passes over the training labels (fewer only when early stopping is on, devFraction > 0)."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Tokens read from the start of each document (features.py)."""
    batch_size: int = 32
    learning_rate: float = 0.01
    """Adam's learning rate for the head."""
    table_learning_rate: float = 1.0
    """Plain SGD's learning rate for the table, divided by the mean number of distinct buckets
    of a training document, so that one step moves a document's sum about as far whatever the
    documents' length (see fit)."""
    patience: int = 3
    """Epochs without a better development loss before training stops."""
    dev_fraction: float = 0.0
    """Share of the training labels (by a second hash of the id) held back for early stopping;
    0 (the default), or fewer than MIN_DEV of them, trains on all and keeps the last weights.
    Off by default: with a few hundred labels the split is too small to judge epochs by (it
    stopped training early on noise and cost 0.03 of agreement on the smoke labels)."""
    model: str = "lasso"
    """"lasso" (the default): a relaxed lasso, a sparse linear model over the same features,
    fitted by FISTA with (lambda, gamma) chosen by cross-validation (fit_lasso);
    "mlp": the embedding bag with a hidden layer trained by SGD (fit), which uses dim, hidden,
    epochs, batchSize, learningRate, tableLearningRate, patience and devFraction. The lasso
    ignores those; the MLP ignores the lasso's fields below."""
    l1_grid: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.004, 0.008)
    """The lasso's L1 penalties (lambda) to choose from, on the objective
    (1/2n)||Xw + b - y||^2 + lambda ||w||_1 with X the 0/1 presence matrix."""
    relax_grid: tuple[float, ...] = (0.0, 0.5, 1.0)
    """The relaxed lasso's blends (gamma) to choose from: w = gamma w_lasso + (1 - gamma) w_refit,
    w_refit least squares on the lasso's support; 1 is the plain lasso."""
    cv_folds: int = 5
    """Cross-validation folds over the training labels (by a hash of the id) for the choice."""
    lasso_iterations: int = 2000
    """The most FISTA steps of each fit (it stops earlier once no weight moves by 1e-6)."""
    calibration: str = "isotonic"
    """The lasso's output map: "isotonic" (the default) maps its linear score onto the 0-5 scale
    by an isotonic regression fitted to the out-of-fold scores of the cross-validation (see
    isotonic_knots); "none" keeps the linear score."""

    def __post_init__(self) -> None:
        _number_in("threshold", self.threshold, MIN_SCORE, MAX_SCORE, low_open=True)
        _number_in("heldOutFraction", self.held_out_fraction, 0.0, 0.9, low_open=True)
        _int_in("seed", self.seed, 0, 2**63 - 1)
        FeatureSettings(self.buckets, self.max_tokens)  # checks buckets and maxTokens
        _int_in("dim", self.dim, 1, 256)
        if self.buckets * self.dim > MAX_TABLE_FLOATS:
            raise ValueError(f"buckets x dim: must be at most {MAX_TABLE_FLOATS} (got {self.buckets} x {self.dim}"
                             f" = {self.buckets * self.dim})")
        _int_in("hidden", self.hidden, 0, 4096)
        _int_in("epochs", self.epochs, 1, 1000)
        _int_in("batchSize", self.batch_size, 1, 4096)
        _number_in("learningRate", self.learning_rate, 0.0, 1.0, low_open=True)
        _number_in("tableLearningRate", self.table_learning_rate, 0.0, 100.0, low_open=True)
        _int_in("patience", self.patience, 1, 1000)
        _number_in("devFraction", self.dev_fraction, 0.0, 0.5)
        if self.model not in MODELS:
            raise ValueError(f"model: must be one of {list(MODELS)} (got {self.model!r})")
        object.__setattr__(self, "l1_grid", _grid("l1Grid", self.l1_grid, 0.0, 100.0, low_open=True))
        object.__setattr__(self, "relax_grid", _grid("relaxGrid", self.relax_grid, 0.0, 1.0))
        _int_in("cvFolds", self.cv_folds, 2, 20)
        _int_in("lassoIterations", self.lasso_iterations, 1, 100_000)
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration: must be one of {list(CALIBRATIONS)} (got {self.calibration!r})")

    @property
    def features(self) -> FeatureSettings:
        return FeatureSettings(self.buckets, self.max_tokens)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TrainConfig":
        """From camelCase keys; an unknown key is an error naming it."""
        if not isinstance(data, dict):
            raise ValueError(f"config: expected an object (got {type(data).__name__})")
        unknown = sorted(set(data) - set(FIELD_NAMES))
        if unknown:
            raise ValueError(f"config: unknown field(s) {unknown}; known: {sorted(FIELD_NAMES)}")
        return cls(**{FIELD_NAMES[key]: value for key, value in data.items()})

    def to_json(self) -> dict[str, Any]:
        snake_to_camel = {v: k for k, v in FIELD_NAMES.items()}
        out = {snake_to_camel[f.name]: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {key: list(value) if isinstance(value, tuple) else value for key, value in out.items()}


FIELD_NAMES = {
    "threshold": "threshold", "heldOutFraction": "held_out_fraction", "seed": "seed",
    "buckets": "buckets", "dim": "dim", "hidden": "hidden", "epochs": "epochs",
    "maxTokens": "max_tokens", "batchSize": "batch_size", "learningRate": "learning_rate",
    "tableLearningRate": "table_learning_rate",
    "patience": "patience", "devFraction": "dev_fraction",
    "model": "model", "l1Grid": "l1_grid", "relaxGrid": "relax_grid", "cvFolds": "cv_folds",
    "lassoIterations": "lasso_iterations", "calibration": "calibration",
}
MODELS = ("lasso", "mlp")
CALIBRATIONS = ("isotonic", "none")
MAX_GRID = 50
MIN_DEV = 10


# ------------------------------------------------------------------------------------------------
# Labels and splits.

def parse_labels(jsonl: bytes | str, source: str = "labels") -> list[Label]:
    """JSONL rows {id, text, score} -> Labels. Blank lines are skipped; a bad row, a score that
    is not an integer 0-5, or a repeated id raises LabelError naming the line and the field."""
    text = jsonl.decode("utf-8") if isinstance(jsonl, bytes) else jsonl
    labels: list[Label] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise LabelError(f"{where}: not JSON ({error.msg})") from error
        if not isinstance(row, dict):
            raise LabelError(f"{where}: expected an object {{id, text, score}} (got {type(row).__name__})")
        ident, body, score = row.get("id"), row.get("text"), row.get("score")
        if not isinstance(ident, str) or not ident:
            raise LabelError(f"{where}: id must be a non-empty string (got {ident!r})")
        if not isinstance(body, str):
            raise LabelError(f"{where}: text must be a string (got {type(body).__name__})")
        if isinstance(score, bool) or not isinstance(score, int) or not MIN_SCORE <= score <= MAX_SCORE:
            raise LabelError(f"{where}: score must be an integer from {MIN_SCORE} to {MAX_SCORE} (got {score!r})")
        if ident in seen:
            raise LabelError(f"{where}: id {ident!r} already appears on line {seen[ident]}")
        seen[ident] = number
        labels.append(Label(ident, body, score))
    return labels


def check_trainable(labels: list[Label], threshold: float, source: str = "labels") -> None:
    """Raises LabelError when the labels cannot train or judge a classifier: fewer than
    MIN_LABELS, one score only, or all on one side of the threshold."""
    if len(labels) < MIN_LABELS:
        raise LabelError(f"{source}: {len(labels)} labels; at least {MIN_LABELS} are needed")
    counts = score_counts([label.score for label in labels])
    if sum(1 for c in counts.values() if c) < 2:
        raise LabelError(f"{source}: every label has the same score ({labels[0].score}); "
                         f"a classifier needs at least two (score counts {counts})")
    kept = sum(1 for label in labels if label.score >= threshold)
    if kept in (0, len(labels)):
        side = "at or above" if kept else "below"
        raise LabelError(f"{source}: every label is {side} threshold {threshold}; keep and drop both need "
                         f"examples (score counts {counts})")


def score_counts(scores: list[int]) -> dict[str, int]:
    return {str(s): sum(1 for x in scores if x == s) for s in range(MIN_SCORE, MAX_SCORE + 1)}


def hash_fraction(ident: str, salt: str) -> float:
    """A uniform number in [0, 1) fixed by the id: the first 8 bytes of SHA-256(salt + id)."""
    digest = hashlib.sha256(f"{salt}{ident}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_labels(labels: list[Label], fraction: float, salt: str) -> tuple[list[Label], list[Label]]:
    """(kept, split off): a label goes to the split-off part when hash_fraction(id) < fraction.
    The same ids always split the same way, whatever their order or the other labels."""
    kept, off = [], []
    for label in labels:
        (off if hash_fraction(label.id, salt) < fraction else kept).append(label)
    return kept, off


HELD_OUT_SALT = "held-out:"
DEV_SALT = "dev:"


# ------------------------------------------------------------------------------------------------
# The model.

class ScoreModel(nn.Module):
    """(indices [B, L] int64, weights [B, L] float32) -> score [B] in [0, 5]."""

    def __init__(self, buckets: int, dim: int, hidden: int):
        super().__init__()
        self.buckets, self.dim, self.hidden = buckets, dim, hidden
        # sparse=True: backward gives a sparse gradient over the rows a batch used.
        self.table = nn.Embedding(buckets, dim, sparse=True)
        if hidden:
            self.head = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        else:
            self.head = nn.Sequential(nn.Linear(dim, 1))

    def bag(self, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The weighted sum of the rows: [B, dim]. Padding (weight 0) adds exactly 0."""
        return (self.table(indices) * weights.unsqueeze(-1)).sum(dim=1)

    def raw(self, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The unclipped score [B], what the loss sees (clipping would stop its gradient)."""
        return self.head(self.bag(indices, weights)).squeeze(-1)

    def forward(self, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.raw(indices, weights).clamp(float(MIN_SCORE), float(MAX_SCORE))


def build_model(config: TrainConfig, mean_score: float) -> ScoreModel:
    """A fresh model, seeded by config.seed. The table starts uniform in +-TABLE_INIT: a
    document's features sum a few hundred rows, so fastText's +-1/dim start (made for a mean)
    would give every document a random offset of about 0.6 per component that the labels then
    have to undo (measured: MAE 0.43 against 0.30). The output bias starts at the mean training
    score, so epoch one learns differences from the mean instead of the mean itself."""
    torch.manual_seed(config.seed)
    model = ScoreModel(config.buckets, config.dim, config.hidden)
    with torch.no_grad():
        model.table.weight.uniform_(-TABLE_INIT, TABLE_INIT)
        model.head[-1].bias.fill_(mean_score)
    return model


Features = list[tuple[np.ndarray, np.ndarray]]


def featurize(texts: list[str], settings: FeatureSettings) -> Features:
    return [document_features(text, settings) for text in texts]


def predict(model: ScoreModel, features: Features, batch_size: int = 256) -> np.ndarray:
    """Clipped scores (float32) for documents' features, in order."""
    model.eval()
    out = np.zeros(len(features), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            indices, weights = pad_batch(features[start: start + batch_size])
            out[start: start + len(indices)] = model(torch.from_numpy(indices), torch.from_numpy(weights)).numpy()
    return out


def _mse(model: ScoreModel, features: Features, scores: np.ndarray) -> float:
    predicted = predict(model, features)
    return float(np.mean((predicted.astype(np.float64) - scores) ** 2))


@dataclass
class FitResult:
    model: ScoreModel
    epochs_run: int
    best_epoch: int
    history: list[dict[str, float]]
    """Per epoch: the training loss and, with a development split, its MSE."""
    n_train: int
    n_dev: int


def fit(train: list[Label], config: TrainConfig,
        on_epoch: Callable[[dict[str, float]], None] | None = None) -> FitResult:
    """Trains on `train` (a development split for early stopping is carved from it)."""
    fit_labels, dev_labels = split_labels(train, config.dev_fraction, DEV_SALT)
    if len(dev_labels) < MIN_DEV or not fit_labels:
        fit_labels, dev_labels = list(train), []
    settings = config.features
    fit_features = featurize([label.text for label in fit_labels], settings)
    fit_scores = np.array([label.score for label in fit_labels], dtype=np.float32)
    dev_features = featurize([label.text for label in dev_labels], settings)
    dev_scores = np.array([label.score for label in dev_labels], dtype=np.float64)

    model = build_model(config, float(fit_scores.mean()))
    # The table: plain SGD on sparse gradients. Every present word has weight 1, so one step
    # moves each of a document's n rows by the bag's gradient times the rate, and its sum by n
    # times that: dividing the rate by the mean n keeps the step on the sum the same whatever
    # the documents' length (a linear model's SGD is stable below 2 / ||x||^2, here 2 / n).
    # A row used by many documents gets their summed gradient, so frequent words move most.
    # Not Adam: Adam normalises each row's step, so a word seen once moves as far as one seen in
    # every document, and the model memorises documents by their rare words (measured with
    # SparseAdam on the smoke labels: agreement at 3 0.74 against 0.80 with SGD).
    mean_words = float(np.mean([max(len(w), 1) for _, w in fit_features]))
    table_optimizer = torch.optim.SGD(list(model.table.parameters()), lr=config.table_learning_rate / mean_words)
    head_optimizer = torch.optim.Adam(model.head.parameters(), lr=config.learning_rate)
    order_rng = np.random.default_rng(config.seed)

    history: list[dict[str, float]] = []
    best_state, best_loss, best_epoch, stale = None, math.inf, 0, 0
    epoch = 0
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = order_rng.permutation(len(fit_features))
        total, seen = 0.0, 0
        for start in range(0, len(order), config.batch_size):
            rows = order[start: start + config.batch_size]
            indices, weights = pad_batch([fit_features[i] for i in rows])
            target = torch.from_numpy(fit_scores[rows])
            loss = F.mse_loss(model.raw(torch.from_numpy(indices), torch.from_numpy(weights)), target)
            table_optimizer.zero_grad()
            head_optimizer.zero_grad()
            loss.backward()
            table_optimizer.step()
            head_optimizer.step()
            total += float(loss) * len(rows)
            seen += len(rows)
        record = {"epoch": epoch, "trainLoss": total / max(seen, 1)}
        if dev_labels:
            record["devMse"] = _mse(model, dev_features, dev_scores)
        history.append(record)
        if on_epoch:
            on_epoch(record)
        if dev_labels:
            if record["devMse"] < best_loss - 1e-6:
                best_loss, best_epoch, stale = record["devMse"], epoch, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
                if stale >= config.patience:
                    break
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        best_epoch = epoch
    model.eval()
    return FitResult(model, epoch, best_epoch, history, len(fit_labels), len(dev_labels))


# ------------------------------------------------------------------------------------------------
# The relaxed lasso (the default model).

class _Design:
    """The 0/1 presence matrix of some documents over a compressed column space, centred
    implicitly: Xc = X - 1 mu^T with mu the column means, without ever forming Xc (it would be
    dense). Centring removes the unpenalised bias from the iteration: for any w the best bias is
    mean(y) - mu.w, so the solver works on centred y and recovers b at the end; it also lowers the
    step-size constant L (the mean direction, X's largest, is gone), so FISTA converges faster.

    Stored as the (row, column) pairs of the non-zero entries, int64 each, and products are
    np.bincount sums, which add in a fixed order on one thread: the same inputs give
    bit-identical results (torch's CSR products need MKL on CPU, and its COO products were
    several times slower). Memory is 16 bytes per non-zero plus a float64 per pair during a
    product: the features themselves are no smaller. At the configuration's worst realistic
    case, 20,000 labels of a 2,000-token extract (at most about 1,000 distinct words each), that
    is 2e7 non-zeros, about 0.5 GB per matrix with its temporaries (cross-validation holds two
    at a time, a fold's and the previous one's, while it builds the next); a dense matrix over
    the used columns would be 20,000 x up to 2^18 float32, 21 GB, so it is not used."""

    def __init__(self, docs: list[np.ndarray], n_cols: int):
        self.n, self.m = len(docs), n_cols
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        self.rows = np.repeat(np.arange(self.n, dtype=np.int64), lengths)
        self.cols = np.concatenate(docs).astype(np.int64) if self.n and lengths.sum() else np.zeros(0, np.int64)
        self.mu = np.bincount(self.cols, minlength=self.m).astype(np.float64) / max(self.n, 1)

    def mv(self, w: np.ndarray) -> np.ndarray:
        """Xc w, [n]."""
        return np.bincount(self.rows, weights=w[self.cols], minlength=self.n) - float(self.mu @ w)

    def rmv(self, r: np.ndarray) -> np.ndarray:
        """Xc^T r, [m]."""
        return np.bincount(self.cols, weights=r[self.rows], minlength=self.m) - self.mu * float(r.sum())

    def lipschitz(self, mask: np.ndarray | None = None, iterations: int = 100) -> float:
        """The largest eigenvalue of Xc_S^T Xc_S / n (S the columns where `mask`, all by default),
        by power iteration from a fixed start vector; raised by 5 % and a small floor, since
        power iteration approaches it from below and a step over 1/L can diverge."""
        v = np.ones(self.m) if mask is None else mask.astype(np.float64)
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            return 1.0
        v /= norm
        estimate = 0.0
        for _ in range(iterations):
            u = self.rmv(self.mv(v)) / self.n
            if mask is not None:
                u *= mask
            estimate = float(np.linalg.norm(u))
            if estimate == 0.0:
                return 1.0
            v = u / estimate
        return 1.05 * estimate + 1e-9


def _fista(design: _Design, yc: np.ndarray, lam: float, iterations: int, w0: np.ndarray | None = None,
           mask: np.ndarray | None = None, lipschitz: float | None = None, tol: float = 1e-6) -> tuple[np.ndarray, int]:
    """Minimises (1/2n)||Xc w - yc||^2 + lam ||w||_1 over w (zero outside `mask` when given) by
    FISTA (Beck & Teboulle 2009) with O'Donoghue & Candes's gradient restart, from w0 (or zero),
    stopping after `iterations` steps or once no weight moves by more than `tol` in a step (1e-6
    on the 0-5 score scale moves no prediction visibly). Returns (w, steps taken)."""
    L = lipschitz if lipschitz is not None else design.lipschitz(mask)
    n = design.n
    w = np.zeros(design.m) if w0 is None else w0.copy()
    z, t = w.copy(), 1.0
    step = 0
    for step in range(1, iterations + 1):
        grad = design.rmv(design.mv(z) - yc) / n
        w_new = z - grad / L
        if lam > 0:
            w_new = np.sign(w_new) * np.maximum(np.abs(w_new) - lam / L, 0.0)
        if mask is not None:
            w_new *= mask
        delta = w_new - w
        if float(np.max(np.abs(delta), initial=0.0)) <= tol:
            w = w_new
            break
        if float((z - w_new) @ delta) > 0:  # the momentum points uphill: restart it
            t = 1.0
        t_new = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
        z = w_new + ((t - 1.0) / t_new) * delta
        w, t = w_new, t_new
    return w, step


def _relaxed_path(design: _Design, y: np.ndarray, lambdas: list[float], gammas: list[float],
                  iterations: int, refit_last_only: bool = False) -> list[tuple[float, float, np.ndarray, float, int]]:
    """The relaxed lasso (Meinshausen 2007) at every (lambda, gamma): fit the lasso along
    `lambdas` from the largest down, each warm-started from the previous, then refit least
    squares on each lasso's support S (from zero, so a rank-deficient S gets the smallest-norm
    fit) and blend w = gamma w_lasso + (1 - gamma) w_refit. Returns (lambda, gamma, w, bias,
    non-zeros) in path order; with refit_last_only, only for the last (smallest) lambda."""
    mean_y = float(y.mean())
    yc = y - mean_y
    L = design.lipschitz()
    out = []
    w_lasso = None
    ordered = sorted(set(lambdas), reverse=True)
    for lam in ordered:
        w_lasso, _ = _fista(design, yc, lam, iterations, w0=w_lasso, lipschitz=L)
        if refit_last_only and lam != ordered[-1]:
            continue
        support = w_lasso != 0
        w_refit = None
        if any(g < 1 for g in gammas) and support.any():
            mask = support.astype(np.float64)
            w_refit, _ = _fista(design, yc, 0.0, iterations, mask=mask, lipschitz=design.lipschitz(mask))
        for gamma in sorted(set(gammas)):
            w = w_lasso if w_refit is None or gamma >= 1 else gamma * w_lasso + (1 - gamma) * w_refit
            out.append((lam, gamma, w, mean_y - float(design.mu @ w), int(np.count_nonzero(w))))
    return out


CV_SALT = "cv-fold:"


def _compress(features: Features) -> tuple[np.ndarray, list[np.ndarray]]:
    """(the buckets used by `features` in ascending order, each document's buckets as positions
    in that list)."""
    used = np.unique(np.concatenate([ix for ix, _ in features] + [np.zeros(0, np.int64)]).astype(np.int64))
    return used, [np.searchsorted(used, ix.astype(np.int64)) for ix, _ in features]


@dataclass
class LassoFit:
    model: ScoreModel
    l1: float
    relax: float
    non_zero: int
    cross_validation: list[dict[str, float]]
    """Per grid point: lambda, gamma, the pooled out-of-fold MSE of clipped predictions (the
    criterion) and keep/drop agreement at the threshold (reported only)."""
    n_train: int
    knots: tuple[np.ndarray, np.ndarray] | None = None
    """The isotonic map's knots (linear scores, calibrated scores), or None without calibration."""


def fit_lasso(train: list[Label], config: TrainConfig,
              on_step: Callable[[dict[str, float]], None] | None = None) -> LassoFit:
    """Chooses (lambda, gamma) from config.l1_grid x config.relax_grid by K-fold cross-validation
    over `train` (fold = a hash of the id, so deterministic), refits on all of `train` with the
    chosen pair, and returns it as a ScoreModel with dim 1 and a linear head (weight 1, bias b).

    The criterion is the out-of-fold mean squared error of the clipped scores, not keep/drop
    agreement at the threshold: the model is then independent of the threshold (the pipeline
    caches a trained model across thresholds, and the report applies other thresholds to it),
    and on the smoke labels the two criteria chose models of the same held-out agreement within
    noise (0.852 against 0.855 at threshold 3, mean of 10 splits; the module comment has the
    figures)."""
    features = featurize([label.text for label in train], config.features)
    y = np.array([label.score for label in train], dtype=np.float64)
    used, docs = _compress(features)
    folds = np.array([int(hash_fraction(label.id, CV_SALT) * config.cv_folds) for label in train])
    grid_keys = [(lam, g) for lam in sorted(set(config.l1_grid), reverse=True) for g in sorted(set(config.relax_grid))]
    sq_error = {key: 0.0 for key in grid_keys}
    agree = {key: 0 for key in grid_keys}
    out_of_fold = {key: np.full(len(train), np.nan) for key in grid_keys}
    counted = 0
    for fold in range(config.cv_folds):
        inside = np.flatnonzero(folds != fold)
        outside = np.flatnonzero(folds == fold)
        if len(outside) == 0 or len(inside) < 2:
            continue
        design = _Design([docs[i] for i in inside], len(used))
        held = _Design([docs[i] for i in outside], len(used))
        for lam, gamma, w, b, _ in _relaxed_path(design, y[inside], config.l1_grid, config.relax_grid,
                                                  config.lasso_iterations):
            raw = np.bincount(held.rows, weights=w[held.cols], minlength=held.n) + b
            out_of_fold[(lam, gamma)][outside] = raw
            p = np.clip(raw, MIN_SCORE, MAX_SCORE)
            sq_error[(lam, gamma)] += float(np.sum((p - y[outside]) ** 2))
            agree[(lam, gamma)] += int(np.sum((p >= config.threshold) == (y[outside] >= config.threshold)))
        counted += len(outside)
        if on_step:
            on_step({"fold": fold, "folds": config.cv_folds})
    table = [{"lambda": lam, "gamma": g, "cvMse": sq_error[(lam, g)] / max(counted, 1),
              "cvAgreement": agree[(lam, g)] / max(counted, 1)} for lam, g in grid_keys]
    # Ties go to the first in grid order: the larger lambda, then the smaller gamma.
    best = min(table, key=lambda row: row["cvMse"]) if counted else table[0]
    design = _Design(docs, len(used))
    path = _relaxed_path(design, y, [lam for lam in config.l1_grid if lam >= best["lambda"]], [best["gamma"]],
                         config.lasso_iterations, refit_last_only=True)
    _, _, w, b, non_zero = path[-1]
    knots = None
    if config.calibration == "isotonic" and counted:
        scored = out_of_fold[(best["lambda"], best["gamma"])]
        seen = ~np.isnan(scored)
        knots = isotonic_knots(scored[seen], y[seen])
    table_weights = np.zeros((config.buckets, 1), dtype=np.float32)
    table_weights[used, 0] = w
    model = linear_score_model(table_weights, b, knots)
    return LassoFit(model, best["lambda"], best["gamma"], non_zero, table, len(train), knots)


CALIBRATION_MIN_GAP = 0.01
"""Knots of the isotonic map closer than this on the linear score are merged: the map is then
at most (5 / 0.01)-steep, so its float32 ONNX form stays within about 1e-4 of the exact map."""


def isotonic_knots(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The isotonic regression of `labels` on `scores` (pool adjacent violators, Barlow et al.
    1972; ties in scores kept in their given order, so the result is deterministic) as knots of a
    piecewise-linear map: each pooled block's mean score and mean label, blocks closer than
    CALIBRATION_MIN_GAP merged (weighted), the map flat beyond the first and last knot.

    Why: the lasso is linear in the words present, the labels are not (on the 0-5 scale, going
    from 2 to 3 may take more evidence than from 0 to 1, and 5 saturates), so a linear score
    sits above the labels at one end and below at the other, and a threshold on it cuts in the
    wrong place. The isotonic map keeps the score's order (the lasso decides which document is
    better) and puts it back on the labels' scale, where the threshold means what it says. It is
    fitted on the cross-validation's out-of-fold scores, never on scores of documents a model
    was trained on (those are too good), and never on the held-out labels."""
    order = np.argsort(scores, kind="stable")
    xs, ys = scores[order].astype(np.float64), labels[order].astype(np.float64)
    # Blocks as [sum of labels, count, sum of scores]; a block whose mean label falls below the
    # previous one's is pooled with it until the means rise.
    blocks: list[list[float]] = []
    for x, label in zip(xs, ys):
        blocks.append([label, 1.0, x])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total, count, x_total = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
            blocks[-1][2] += x_total
    merged: list[list[float]] = []
    for block in blocks:
        if merged and block[2] / block[1] - merged[-1][2] / merged[-1][1] < CALIBRATION_MIN_GAP:
            for k in range(3):
                merged[-1][k] += block[k]
        else:
            merged.append(list(block))
    knot_x = np.array([b[2] / b[1] for b in merged])
    knot_y = np.clip(np.array([b[0] / b[1] for b in merged]), MIN_SCORE, MAX_SCORE)
    return knot_x, knot_y


def linear_score_model(table_weights: np.ndarray, bias: float,
                       knots: tuple[np.ndarray, np.ndarray] | None) -> ScoreModel:
    """A linear score (the sum of the present words' weights plus `bias`) as a ScoreModel of
    dim 1, so that it exports as the same ONNX graph as the MLP. Without knots the head is
    linear (weight 1). With knots (x_k, y_k) the head is the piecewise-linear map through them,
    written with one hidden ReLU layer as y_0 + sum_k (y_k+1 - y_k) * ramp_k(s), where
    ramp_k(s) = relu(t) - relu(t - 1) with t = (s - x_k) / (x_k+1 - x_k) rises from 0 to 1
    between the two knots: every term is bounded by its step, so float32 adds no cancellation."""
    buckets = table_weights.shape[0]
    ramps = 0 if knots is None else len(knots[0]) - 1
    model = ScoreModel(buckets, 1, 2 * ramps)
    with torch.no_grad():
        model.table.weight.copy_(torch.from_numpy(table_weights.astype(np.float32)))
        if knots is None:
            model.head[0].weight.fill_(1.0)
            model.head[0].bias.fill_(bias)
        elif ramps == 0:
            # One knot: a constant map.
            model.head[0].weight.zero_()
            model.head[0].bias.fill_(float(knots[1][0]))
        else:
            x, y = knots
            width = np.diff(x)
            slope = 1.0 / width
            up = model.head[0]
            # Unit 2k: t_k = (s - x_k) / width_k with s = table sum + bias; unit 2k+1: t_k - 1.
            up.weight.copy_(torch.from_numpy(np.repeat(slope, 2).reshape(-1, 1).astype(np.float32)))
            offsets = np.empty(2 * ramps)
            offsets[0::2] = (bias - x[:-1]) * slope
            offsets[1::2] = offsets[0::2] - 1.0
            up.bias.copy_(torch.from_numpy(offsets.astype(np.float32)))
            down = model.head[2]
            steps = np.empty(2 * ramps)
            steps[0::2] = np.diff(y)
            steps[1::2] = -np.diff(y)
            down.weight.copy_(torch.from_numpy(steps.reshape(1, -1).astype(np.float32)))
            down.bias.fill_(float(y[0]))
    model.eval()
    return model


# ------------------------------------------------------------------------------------------------
# Evaluation.

def _round_score(predicted: np.ndarray) -> np.ndarray:
    """Nearest integer score, halves up (2.5 -> 3), within 0-5."""
    return np.clip(np.floor(predicted.astype(np.float64) + 0.5), MIN_SCORE, MAX_SCORE).astype(np.int64)


def evaluate(predicted: np.ndarray, labels: np.ndarray, threshold: float,
             baseline_score: float | None = None) -> dict[str, Any]:
    """Held-out figures for scores `predicted` against integer `labels`.

    - accuracy: the rounded score equals the label; mae, rmse on the continuous score.
    - binary (keep = score >= threshold on both sides): accuracy ("agreement"), precision,
      recall, f1 (0 when undefined), the confusion counts, and the kept shares.
    - calibration: per rounded predicted score, count, mean predicted, mean label; and their
      count-weighted mean absolute gap.
    - scoreConfusion[label][rounded prediction].
    - baselineMae: the MAE of always predicting `baseline_score` (the training mean), when given.
    """
    p = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n = len(y)
    if n == 0:
        raise ValueError("evaluate: no labels to evaluate")
    rounded = _round_score(p)
    keep_pred, keep_true = p >= threshold, y >= threshold
    tp = int(np.sum(keep_pred & keep_true))
    fp = int(np.sum(keep_pred & ~keep_true))
    fn = int(np.sum(~keep_pred & keep_true))
    tn = int(np.sum(~keep_pred & ~keep_true))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    bins = []
    gap = 0.0
    for score in range(MIN_SCORE, MAX_SCORE + 1):
        in_bin = rounded == score
        count = int(in_bin.sum())
        if count:
            mean_p, mean_y = float(p[in_bin].mean()), float(y[in_bin].mean())
            gap += count * abs(mean_p - mean_y)
            bins.append({"predicted": score, "count": count, "meanPredicted": mean_p, "meanLabel": mean_y})
    confusion = [[int(np.sum((y == a) & (rounded == b))) for b in range(MIN_SCORE, MAX_SCORE + 1)]
                 for a in range(MIN_SCORE, MAX_SCORE + 1)]
    figures: dict[str, Any] = {
        "n": n,
        "accuracy": float(np.mean(rounded == y)),
        "mae": float(np.mean(np.abs(p - y))),
        "rmse": float(np.sqrt(np.mean((p - y) ** 2))),
        "binary": {
            "threshold": threshold,
            "agreement": (tp + tn) / n,
            "precision": precision, "recall": recall, "f1": f1,
            "confusion": {"truePositive": tp, "falsePositive": fp, "falseNegative": fn, "trueNegative": tn},
            "keptByModel": (tp + fp) / n, "keptByLabels": (tp + fn) / n,
        },
        "calibration": {"bins": bins, "meanAbsGap": gap / n},
        "scoreConfusion": {"rowsAreLabels": list(range(MIN_SCORE, MAX_SCORE + 1)), "matrix": confusion},
    }
    if baseline_score is not None:
        figures["baselineMae"] = float(np.mean(np.abs(baseline_score - y)))
    return figures


# ------------------------------------------------------------------------------------------------
# Export.

def export_onnx(model: ScoreModel, path: str | os.PathLike) -> None:
    """Writes the model as ONNX (see the module comment for names and shapes), checked with
    onnx.checker; written to a temporary name first, so a failure leaves no partial file."""
    import onnx  # only the export needs it

    export = copy.deepcopy(model).cpu().eval()
    indices = torch.zeros(2, 3, dtype=torch.int64)
    weights = torch.zeros(2, 3, dtype=torch.float32)
    tmp = f"{os.fspath(path)}.tmp"
    dynamic = {0: "batch", 1: "pairs"}
    with torch.no_grad():
        torch.onnx.export(
            export, (indices, weights), tmp,
            opset_version=ONNX_OPSET,
            input_names=list(ONNX_INPUT_NAMES),
            output_names=[ONNX_OUTPUT_NAME],
            dynamic_axes={"indices": dynamic, "weights": dynamic, ONNX_OUTPUT_NAME: {0: "batch"}},
            do_constant_folding=True,
        )
    onnx.checker.check_model(onnx.load(tmp))
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# The whole run, without any storage: split, train, evaluate, export.

@dataclass
class RunResult:
    model: ScoreModel
    metrics: dict[str, Any]


def train_and_evaluate(labels: list[Label], config: TrainConfig, onnx_path: str | os.PathLike,
                       on_epoch: Callable[[dict[str, float]], None] | None = None,
                       source: str = "labels") -> RunResult:
    """Checks the labels, holds out config.held_out_fraction of them by id, trains on the rest,
    scores the held-out ones, writes the ONNX model to `onnx_path` and returns the metrics."""
    check_trainable(labels, config.threshold, source)
    train, held_out = split_labels(labels, config.held_out_fraction, HELD_OUT_SALT)
    if not held_out or len(train) < MIN_LABELS // 2:
        raise LabelError(f"heldOutFraction: {config.held_out_fraction} splits {len(labels)} labels into "
                         f"{len(train)} to train and {len(held_out)} to hold out; both need labels "
                         f"(at least {MIN_LABELS // 2} to train)")
    started = time.perf_counter()
    lasso: LassoFit | None = None
    if config.model == "lasso":
        lasso = fit_lasso(train, config, on_epoch)
        trained = lasso.model
        n_fit, n_dev = lasso.n_train, 0
        training: dict[str, Any] = {"epochsRun": 0, "bestEpoch": 0, "history": []}
    else:
        result = fit(train, config, on_epoch)
        trained = result.model
        n_fit, n_dev = result.n_train, result.n_dev
        training = {"epochsRun": result.epochs_run, "bestEpoch": result.best_epoch, "history": result.history}
    seconds = time.perf_counter() - started
    held_features = featurize([label.text for label in held_out], config.features)
    predicted = predict(trained, held_features)
    model_figures: dict[str, Any] = {"kind": config.model}
    if lasso is not None:
        # The lasso is exported as the same graph with dim 1 and a linear head.
        model_figures.update({"dim": 1, "hidden": trained.hidden, "lambda": lasso.l1, "gamma": lasso.relax,
                              "nonZeroWeights": lasso.non_zero, "calibration": config.calibration})
        if lasso.knots is not None:
            model_figures["calibrationKnots"] = [{"score": round(float(x), 6), "calibrated": round(float(y), 6)}
                                                 for x, y in zip(*lasso.knots)]
        training["crossValidation"] = {"folds": config.cv_folds, "criterion": "mse of clipped scores",
                                       "grid": lasso.cross_validation}
    else:
        model_figures.update({"dim": config.dim, "hidden": config.hidden})
    model_figures["parameters"] = int(sum(p.numel() for p in trained.parameters()))
    mean_train = float(np.mean([label.score for label in train]))
    metrics = {
        "heldOut": evaluate(predicted, np.array([label.score for label in held_out]), config.threshold,
                            baseline_score=mean_train),
        "nTrain": len(train),
        "nVal": len(held_out),
        "nFit": n_fit,
        "nDev": n_dev,
        "trainScoreCounts": score_counts([label.score for label in train]),
        "heldOutScoreCounts": score_counts([label.score for label in held_out]),
        # Every held-out label with its prediction: the report measures agreement at the run's
        # threshold, which may differ from the one this model was trained under.
        "heldOutPredictions": [{"id": label.id, "label": label.score, "predicted": round(float(p), 4)}
                               for label, p in zip(held_out, predicted)],
        "features": {**config.features.to_dict(), "definition": "features.py v2: NFKC, lower, L/M/N runs, "
                     "unigrams, FNV-1a 32 mod buckets, presence weights (1 per distinct bucket)"},
        "model": model_figures,
        "config": config.to_json(),
        "training": {"seconds": seconds, **training, "torch": torch.__version__},
        "onnx": {"opset": ONNX_OPSET, "inputs": {"indices": "int64 [batch, pairs]",
                 "weights": "float32 [batch, pairs]"}, "output": {"score": "float32 [batch]"}},
    }
    export_onnx(trained, onnx_path)
    return RunResult(trained, metrics)


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="model.py", description="Train the refinery classifier locally.")
    sub = parser.add_subparsers(dest="command", required=True)
    fit_parser = sub.add_parser("fit", help="train on a JSONL file of {id, text, score}")
    fit_parser.add_argument("--labels", required=True)
    fit_parser.add_argument("--out", required=True, help="a folder for model.onnx and metrics.json")
    fit_parser.add_argument("--config", default="{}", help="TrainConfig as JSON, camelCase keys")
    fit_parser.add_argument("--score", help="a JSON list of texts to score into predictions.json")
    args = parser.parse_args(argv)
    config = TrainConfig.from_json(json.loads(args.config))
    with open(args.labels, "rb") as f:
        labels = parse_labels(f.read(), args.labels)
    os.makedirs(args.out, exist_ok=True)
    run = train_and_evaluate(labels, config, os.path.join(args.out, "model.onnx"), source=args.labels)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(run.metrics, f, indent=2)
    if args.score:
        with open(args.score, encoding="utf-8") as f:
            texts = json.load(f)
        scores = predict(run.model, featurize(texts, config.features))
        with open(os.path.join(args.out, "predictions.json"), "w") as f:
            json.dump([float(s) for s in scores], f)
    held = run.metrics["heldOut"]
    print(json.dumps({"nTrain": run.metrics["nTrain"], "nVal": run.metrics["nVal"],
                      "agreement": held["binary"]["agreement"], "f1": held["binary"]["f1"], "mae": held["mae"],
                      "seconds": run.metrics["training"]["seconds"]}))
    return 0


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
