"""sae: the sparse-autoencoder pipeline's Batch job, one image for its four stages.

The spec's `stage` picks the work (each stage is its own cached step of the state machine):

- `lm`: the local language model trained on the corpus (the tokenizer, then the model); writes
  config.json, model.safetensors and tokenizer.json. Checks first that the corpus holds
  `harvestTokens` tokens, so a corpus too short fails before any training.
- `harvest`: the model run once over `tokens` tokens of the corpus; the residual stream after
  `layer` stored as shards with token ids, and the held-out losses (clean, zero- and
  mean-ablated) every SAE's loss recovered needs. Writes shards/*.safetensors and summary.json.
- `sae`: one TopK SAE of the grid (width, k) trained on the harvest's training shards, measured
  on its held-out shards (FVU, L0, dead latents) and spliced into the model on the held-out
  windows for loss recovered. Writes sae.safetensors and metrics.json.
- `contexts`: the contexts of a sample of the chosen SAE's features (contexts.py).

The corpus is a manifest of JSONL shards ({"shards": [{"uri": ...}]}, the refinery's
`refined-corpus` manifest.json) or one JSONL file; rows are {id, text}. Token ids come from the
model's own tokenizer, so the harvest reads exactly the stream the model was trained on.

Started by the sae state machine through jobio's contract; the result is small (URIs and figures).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from typing import Any

import torch
from contexts import ContextsSpec, Split, build_contexts
from harvest import HarvestError, HarvestSpec, harvest, mean_cross_entropy, read_shard
from hf_model import load_hf, weights_sha256
from jobio import JobContext, get_bytes, run
from lm import LmConfig, LocalLM, TrainLmSpec, load_lm, mean_loss, save_lm, token_stream, train_lm
from sae import SaeConfig, evaluate, load_sae, loss_recovered, reconstruct, save_sae, train_sae
from tokenizer import Tokenizer

# One in this many documents is held out of the model's training (its loss is reported).
LM_HELD_OUT_EVERY = 20


class SpecError(ValueError):
    """A spec field is missing or malformed."""


def field(spec: dict, name: str, kind: type | tuple[type, ...]) -> Any:
    value = spec.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise SpecError(f"{name}: expected {getattr(kind, '__name__', kind)} (got {value!r})")
    return value


def download(client: Any, uri: str, field_name: str) -> bytes:
    return get_bytes(client, uri, field_name, missing=SpecError)


def corpus_texts(client: Any, uri: str) -> list[str]:
    """The corpus's texts in manifest order: a manifest.json of shards, or one JSONL file."""
    body = download(client, uri, "corpusUri")
    shard_uris = [uri]
    if not uri.endswith((".jsonl", ".ndjson")):
        manifest = json.loads(body)
        shards = manifest.get("shards") if isinstance(manifest, dict) else None
        if not isinstance(shards, list) or not all(isinstance(s, dict) and isinstance(s.get("uri"), str) for s in shards):
            raise SpecError(f"corpusUri: {uri}: a corpus manifest lists shards as [{{uri}}] (got {body[:200]!r})")
        shard_uris = [s["uri"] for s in shards]
    texts: list[str] = []
    for index, shard_uri in enumerate(shard_uris):
        data = body if shard_uri == uri else download(client, shard_uri, f"corpus shards[{index}]")
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            text = row.get("text") if isinstance(row, dict) else None
            if not isinstance(text, str):
                raise SpecError(f"corpus {shard_uri} line {number}: a row is {{id, text}} with text a string")
            texts.append(text)
    if not texts:
        raise SpecError(f"corpusUri: {uri}: the corpus holds no documents")
    return texts


def put_file(ctx: JobContext, name: str, path: str, content_type: str = "application/octet-stream") -> dict:
    with open(path, "rb") as source:
        data = source.read()
    written = ctx.put_bytes(name, data, content_type)
    return {**written, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def download_prefix(client: Any, prefix_uri: str, names: list[str], directory: str) -> None:
    for name in names:
        with open(os.path.join(directory, name), "wb") as out:
            out.write(download(client, prefix_uri + name, f"{prefix_uri}{name}"))


LM_FILES = ["config.json", "model.safetensors", "tokenizer.json"]
# What kind of model an lm prefix holds: {"kind": "local"} beside LM_FILES, or {"kind": "hf",
# "model", "revision", "context", "sha256"} alone (the weights stay on the Hub).
LM_KIND_FILE = "lm.json"


def load_model(client: Any, lm_uri: str, workdir: str) -> tuple[Any, Any]:
    """(model, tokenizer) of an lm prefix: the local model, or the Hugging Face model it names."""
    kind = json.loads(download(client, lm_uri + LM_KIND_FILE, "lmUri"))
    if kind.get("kind") == "hf":
        model, tokenizer = load_hf(kind["model"], kind["revision"], int(kind["context"]))
        if weights_sha256(model.model) != kind["sha256"]:
            raise SpecError(f"lmUri: {kind['model']}@{kind['revision']} no longer has the weights this run's model "
                            f"step hashed ({kind['sha256'][:12]}...): pin lm.revision to a commit")
        return model, tokenizer
    directory = os.path.join(workdir, "lm")
    os.makedirs(directory, exist_ok=True)
    download_prefix(client, lm_uri, LM_FILES, directory)
    return load_lm(directory)


def stage_lm_hf(spec: dict, ctx: JobContext, lm: dict, texts: list[str]) -> dict:
    """The Hugging Face model, read (not trained): its weights' hash is its identity for the cache."""
    started = time.perf_counter()
    model, tokenizer = load_hf(field(lm, "model", str), field(lm, "revision", str), field(lm, "context", int))
    stream = token_stream(tokenizer, texts)
    wanted = field(spec, "harvestTokens", int)
    if stream.numel() < wanted:
        raise HarvestError(f"harvest.tokens: {wanted} tokens asked for, but the corpus has {stream.numel()} "
                           f"({len(texts)} documents); lower harvest.tokens or use a longer corpus")
    sha256 = weights_sha256(model.model)
    held_texts = [t for i, t in enumerate(texts) if i % LM_HELD_OUT_EVERY == LM_HELD_OUT_EVERY - 1] or texts[-1:]
    held_loss = mean_loss(model, token_stream(tokenizer, held_texts))
    seconds = time.perf_counter() - started
    kind = ctx.put_json(LM_KIND_FILE, {"kind": "hf", "model": lm["model"], "revision": lm["revision"],
                                       "context": lm["context"], "sha256": sha256})
    metrics = {"corpusDocuments": len(texts), "corpusTokens": int(stream.numel()), "vocab": model.vocab_size,
               "parameters": sum(p.numel() for p in model.model.parameters()), "heldOutLoss": held_loss,
               "finalLoss": held_loss, "steps": 0, "seconds": seconds, "tokensPerSecond": 0}
    written = ctx.put_json("lm-metrics.json", metrics)
    return {"lmUri": kind["uri"][: -len(LM_KIND_FILE)], "lmSha256": sha256,
            "metrics": {**metrics, "layers": model.n_layer, "width": model.d_model},
            "files": [{"name": LM_KIND_FILE, "uri": kind["uri"]}, {"name": "lm-metrics.json", "uri": written["uri"]}],
            "layers": model.n_layer, "width": model.d_model, "corpusTokens": int(stream.numel()), "heldOutLoss": held_loss,
            "metricsUri": written["uri"],
            "s3Outputs": [{"Bucket": kind["Bucket"], "Key": kind["Key"]}, {"Bucket": written["Bucket"], "Key": written["Key"]}]}


# ---------------------------------------------------------------- stages

def stage_lm(spec: dict, ctx: JobContext) -> dict:
    lm = field(spec, "lm", dict)
    texts = corpus_texts(ctx.client, field(spec, "corpusUri", str))
    if lm.get("kind") == "hf":
        return stage_lm_hf(spec, ctx, lm, texts)
    if lm.get("kind") != "local":
        raise SpecError(f"lm.kind: must be local or hf (got {lm.get('kind')!r})")
    seed = field(spec, "seed", int)
    torch.manual_seed(seed)
    tokenizer = Tokenizer.train(texts, field(lm, "vocab", int))
    train_texts = [t for i, t in enumerate(texts) if i % LM_HELD_OUT_EVERY != LM_HELD_OUT_EVERY - 1]
    held_texts = [t for i, t in enumerate(texts) if i % LM_HELD_OUT_EVERY == LM_HELD_OUT_EVERY - 1] or texts[-1:]
    stream = token_stream(tokenizer, texts)
    wanted = field(spec, "harvestTokens", int)
    if stream.numel() < wanted:
        raise HarvestError(f"harvest.tokens: {wanted} tokens asked for, but the corpus has {stream.numel()} "
                           f"({len(texts)} documents); lower harvest.tokens or use a longer corpus")
    ctx.progress(stage="tokenizer", documents=len(texts), tokens=int(stream.numel()), vocab=tokenizer.vocab_size)
    config = LmConfig(vocab_size=tokenizer.vocab_size, n_layer=field(lm, "layers", int), n_embd=field(lm, "width", int),
                      n_head=field(lm, "heads", int), block_size=field(lm, "context", int))
    model = LocalLM(config)
    train_spec = TrainLmSpec(steps=field(lm, "steps", int), batch_size=field(lm, "batchSize", int),
                             lr=float(field(lm, "learningRate", (int, float))), warmup=min(100, max(1, field(lm, "steps", int) // 10)),
                             seed=seed)
    training = train_lm(model, token_stream(tokenizer, train_texts), train_spec, progress=lambda r: ctx.progress(stage="lm", **r))
    held_loss = mean_loss(model, token_stream(tokenizer, held_texts))
    with tempfile.TemporaryDirectory() as workdir:
        save_lm(workdir, model, tokenizer)
        files = {name: put_file(ctx, name, os.path.join(workdir, name)) for name in LM_FILES}
    kind = ctx.put_json(LM_KIND_FILE, {"kind": "local"})
    lm_sha256 = hashlib.sha256("".join(files[n]["sha256"] for n in LM_FILES).encode()).hexdigest()
    metrics = {"corpusDocuments": len(texts), "corpusTokens": int(stream.numel()), "vocab": tokenizer.vocab_size,
               "parameters": sum(p.numel() for p in model.parameters()), "heldOutLoss": held_loss, **training}
    written = ctx.put_json("lm-metrics.json", metrics)
    prefix = files["config.json"]["uri"][: -len("config.json")]
    flat = {k: metrics[k] for k in ("corpusDocuments", "corpusTokens", "vocab", "parameters", "heldOutLoss", "finalLoss",
                                     "steps", "seconds", "tokensPerSecond")}
    return {"lmUri": prefix, "lmSha256": lm_sha256, "metrics": {**flat, "layers": config.n_layer, "width": config.n_embd},
            "files": [{"name": n, "uri": files[n]["uri"]} for n in LM_FILES]
            + [{"name": LM_KIND_FILE, "uri": kind["uri"]}, {"name": "lm-metrics.json", "uri": written["uri"]}], "layers": config.n_layer, "width": config.n_embd,
            "corpusTokens": int(stream.numel()), "heldOutLoss": held_loss, "metricsUri": written["uri"],
            "s3Outputs": [{"Bucket": f["Bucket"], "Key": f["Key"]} for f in [*files.values(), kind, written]]}


def stage_harvest(spec: dict, ctx: JobContext) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        model, tokenizer = load_model(ctx.client, field(spec, "lmUri", str), workdir)
        texts = corpus_texts(ctx.client, field(spec, "corpusUri", str))
        harvest_spec = HarvestSpec(tokens=field(spec, "tokens", int), layer=field(spec, "layer", int),
                                   held_out_every=field(spec, "heldOutEvery", int))
        out_dir = os.path.join(workdir, "shards")
        started = time.perf_counter()
        summary = harvest(model, token_stream(tokenizer, texts), harvest_spec, out_dir,
                          progress=lambda r: ctx.progress(stage="harvest", **r))
        seconds = time.perf_counter() - started
        outputs = []
        for shard in summary["shards"]:
            written = put_file(ctx, f"shards/{shard['name']}", os.path.join(out_dir, shard["name"]))
            shard.update(uri=written["uri"], sha256=written["sha256"], bytes=written["bytes"])
            outputs.append({"Bucket": written["Bucket"], "Key": written["Key"]})
    summary.update(seconds=seconds, lmUri=spec["lmUri"])
    data = json.dumps(summary, indent=2).encode()
    written = ctx.put_bytes("summary.json", data, "application/json")
    return {"harvestUri": written["uri"], "harvestSha256": hashlib.sha256(data).hexdigest(), "shards": len(summary["shards"]), "trainTokens": summary["trainTokens"],
            "heldOutTokens": summary["heldOutTokens"], "ceClean": summary["ceClean"], "ceZeroAblated": summary["ceZeroAblated"],
            "ceMeanAblated": summary["ceMeanAblated"], "seconds": seconds,
            "s3Outputs": outputs + [{"Bucket": written["Bucket"], "Key": written["Key"]}]}


def read_split(ctx: JobContext, summary: dict, split: str, workdir: str) -> Split:
    acts, tokens = [], []
    for shard in summary["shards"]:
        if shard["split"] != split:
            continue
        path = os.path.join(workdir, shard["name"])
        with open(path, "wb") as out:
            out.write(download(ctx.client, shard["uri"], f"harvest shard {shard['name']}"))
        a, t, _ = read_shard(path)
        os.remove(path)
        acts.append(a)
        tokens.append(t)
    return Split(torch.cat(acts), torch.cat(tokens), int(summary["window"]))


def read_summary(ctx: JobContext, spec: dict) -> dict:
    return json.loads(download(ctx.client, field(spec, "harvestUri", str), "harvestUri"))


def device() -> str:
    """The GPU when the job has one (AWS), else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@torch.no_grad()
def spliced_loss(model: Any, sae: Any, held: Split, layer: int, batch_windows: int = 16) -> float:
    ids = held.tokens.view(-1, held.window)
    at = sae.b_pre.device

    def splice(x: torch.Tensor) -> torch.Tensor:
        return reconstruct(sae, x.reshape(-1, x.shape[-1]).to(at)).view_as(x).to(x.device)

    return mean_cross_entropy(model, ids, layer, splice, batch_windows)


def stage_sae(spec: dict, ctx: JobContext) -> dict:
    summary = read_summary(ctx, spec)
    ablation = field(spec, "ablation", str)
    if ablation not in ("zero", "mean"):
        raise SpecError(f"ablation: must be zero or mean (got {ablation!r})")
    lr = spec.get("learningRate")
    config = SaeConfig(d_in=int(summary["d"]), width=field(spec, "width", int), k=field(spec, "k", int),
                       auxk=spec.get("auxk"), auxk_coef=float(field(spec, "auxkCoef", (int, float))),
                       dead_tokens=field(spec, "deadTokens", int), lr=None if lr is None else float(lr),
                       batch_size=field(spec, "batchSize", int), seed=field(spec, "seed", int))
    with tempfile.TemporaryDirectory() as workdir:
        train = read_split(ctx, summary, "train", workdir)
        held = read_split(ctx, summary, "held-out", workdir)
        batch = min(config.batch_size, train.activations.shape[0])
        if batch != config.batch_size:
            config = SaeConfig(**{**config.to_json(), "batch_size": batch})
        sae, history = train_sae(train.activations.to(device()), config, epochs=float(field(spec, "epochs", (int, float))),
                                 progress=lambda r: ctx.progress(stage="sae", **r))
        del train
        held_metrics = evaluate(sae, held.activations.to(device()))
        model, _ = load_model(ctx.client, summary["lmUri"], workdir)
        ce_sae = spliced_loss(model, sae, held, int(summary["layer"]))
        ce_ablated = summary["ceZeroAblated"] if ablation == "zero" else summary["ceMeanAblated"]
        metrics = {
            "width": config.width, "k": config.k, "fvu": held_metrics["fvu"], "l0": held_metrics["l0"],
            "deadShare": held_metrics["dead_share"], "trainingDeadShare": history["dead_share"][-1] if history["dead_share"] else None,
            "ceClean": summary["ceClean"], "ceAblated": ce_ablated, "ceSae": ce_sae, "ablation": ablation,
            "lossRecovered": loss_recovered(summary["ceClean"], ce_ablated, ce_sae),
            "trainTokens": history["tokens"], "trainSeconds": history["seconds"], "tokensPerSecond": history["tokens_per_second"],
            "threads": torch.get_num_threads(),
        }
        path = os.path.join(workdir, "sae.safetensors")
        save_sae(path, sae.cpu(), config, metrics)
        written = put_file(ctx, "sae.safetensors", path)
    metrics_file = ctx.put_json("metrics.json", {**metrics, "config": config.to_json(), "history": history})
    return {"saeUri": written["uri"], "saeSha256": written["sha256"], "metricsUri": metrics_file["uri"],
            **{k: metrics[k] for k in ("width", "k", "fvu", "l0", "deadShare", "lossRecovered", "tokensPerSecond")},
            "s3Outputs": [{"Bucket": written["Bucket"], "Key": written["Key"]},
                          {"Bucket": metrics_file["Bucket"], "Key": metrics_file["Key"]}]}


def stage_contexts(spec: dict, ctx: JobContext) -> dict:
    summary = read_summary(ctx, spec)
    labels = field(spec, "labels", dict)
    contexts_spec = ContextsSpec(features=field(labels, "features", int), min_activating=field(labels, "minActivating", int),
                                 explain_examples=field(labels, "explainExamples", int),
                                 detect_examples=field(labels, "detectExamples", int),
                                 window_tokens=field(labels, "windowTokens", int), seed=field(spec, "seed", int))
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "sae.safetensors")
        with open(path, "wb") as out:
            out.write(download(ctx.client, field(spec, "saeUri", str), "saeUri"))
        sae, _ = load_sae(path)
        sae = sae.to(device())
        _, tokenizer = load_model(ctx.client, summary["lmUri"], workdir)
        train = read_split(ctx, summary, "train", workdir)
        held = read_split(ctx, summary, "held-out", workdir)
        document = build_contexts(sae, train, held, contexts_spec, tokenizer.token_text)
    document["saeUri"] = spec["saeUri"]
    data = json.dumps(document).encode()
    written = ctx.put_bytes("contexts.json", data, "application/json")
    return {"contextsUri": written["uri"], "contextsSha256": hashlib.sha256(data).hexdigest(), "features": len(document["features"]), "eligible": document["eligible"],
            "s3Outputs": [{"Bucket": written["Bucket"], "Key": written["Key"]}]}


STAGES = {"lm": stage_lm, "harvest": stage_harvest, "sae": stage_sae, "contexts": stage_contexts}


def main(spec: dict, ctx: JobContext) -> dict:
    if not isinstance(spec, dict):
        raise SpecError(f"spec: expected an object (got {type(spec).__name__})")
    stage = spec.get("stage")
    if stage not in STAGES:
        raise SpecError(f"stage: must be one of {sorted(STAGES)} (got {stage!r})")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    return STAGES[stage](spec, ctx)


if __name__ == "__main__":
    run(main)
