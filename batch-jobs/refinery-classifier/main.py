"""refinery-classifier: trains the corpus refinery's cheap quality classifier (a Batch CPU job).

1. Read the spec: labelsUri (JSONL rows {id, text, score}, score an integer 0-5, from the
   labeler) and the training fields of model.TrainConfig in camelCase (threshold,
   heldOutFraction, seed, buckets, maxTokens, model ("lasso", the default, or "mlp"); the
   lasso's l1Grid, relaxGrid, cvFolds, lassoIterations; the MLP's dim, hidden, epochs, batchSize,
   learningRate, tableLearningRate, patience, devFraction; all but labelsUri optional, and the
   fields of the model not chosen are accepted and ignored).
2. Download and check the labels: a malformed row, fewer than 20 labels, one score only or all
   on one side of the threshold fail the job with a LabelError naming the field and the value.
3. Hold out heldOutFraction of the labels by a hash of their id (the same labels always split the
   same way), train on the rest (the lasso: its penalty and relaxation chosen by
   cross-validation over the training labels; the MLP: seeded SGD), and score the held-out
   labels once.
4. Upload model.onnx (inputs `indices` int64 [batch, pairs] and `weights` float32 [batch, pairs],
   output `score` float32 [batch]) and metrics.json (held-out accuracy, MAE, keep/drop agreement,
   F1 and confusion at the threshold, the reliability table, the split sizes, the feature and
   model settings (for the lasso also the chosen lambda and gamma, the non-zero weights and the
   cross-validation score of every grid point), the training time), and return a small result
   for the state machine.

The scoring Lambdas compute features with shared/refinery/features.ts and must use the
`features` settings of the result (buckets, maxTokens) with this model.

Started by the corpus refinery state machine's classifier-training step through jobio's contract.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from jobio import JobContext, get_bytes, run, split_s3_uri
from model import LabelError, TrainConfig, parse_labels, train_and_evaluate


def parse_spec(spec: Any) -> tuple[str, TrainConfig]:
    """The spec -> (labelsUri, TrainConfig); errors name the field and the value."""
    if not isinstance(spec, dict):
        raise ValueError(f"spec: expected an object (got {type(spec).__name__})")
    fields = dict(spec)
    labels_uri = fields.pop("labelsUri", None)
    if not isinstance(labels_uri, str) or not labels_uri.startswith("s3://"):
        raise ValueError(f"labelsUri: must be an s3:// URI (got {labels_uri!r})")
    split_s3_uri(labels_uri)
    return labels_uri, TrainConfig.from_json(fields)


def main(spec: dict, ctx: JobContext) -> dict:
    labels_uri, config = parse_spec(spec)
    labels = parse_labels(get_bytes(ctx.client, labels_uri, "labelsUri", missing=LabelError), source=f"labelsUri {labels_uri}")
    ctx.progress(stage="labels", count=len(labels))
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "model.onnx")
        result = train_and_evaluate(labels, config, path, source=f"labelsUri {labels_uri}",
                                    on_epoch=lambda record: ctx.progress(stage="train", **record))
        with open(path, "rb") as f:
            model_bytes = f.read()
    metrics = {**result.metrics, "labelsUri": labels_uri}
    model = ctx.put_bytes("model.onnx", model_bytes)
    written = ctx.put_json("metrics.json", metrics)
    held = metrics["heldOut"]
    ctx.progress(stage="done", agreement=held["binary"]["agreement"], mae=held["mae"])
    return {
        "modelUri": model["uri"],
        "metricsUri": written["uri"],
        "modelSha256": hashlib.sha256(model_bytes).hexdigest(),
        "modelBytes": len(model_bytes),
        "features": config.features.to_dict(),
        "threshold": config.threshold,
        "nTrain": metrics["nTrain"],
        "nVal": metrics["nVal"],
        "heldOut": {"agreement": held["binary"]["agreement"], "f1": held["binary"]["f1"], "mae": held["mae"],
                    "accuracy": held["accuracy"]},
        "s3Outputs": [{"Bucket": model["Bucket"], "Key": model["Key"]},
                      {"Bucket": written["Bucket"], "Key": written["Key"]}],
    }


if __name__ == "__main__":
    run(main)
