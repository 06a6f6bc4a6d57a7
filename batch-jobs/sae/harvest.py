"""One harvest of a language model's residual stream, which every sparse autoencoder reads.

The corpus's token stream is cut into windows of the model's context length; the first `tokens`
tokens' worth of windows are run through the model once, and the residual stream after the
chosen layer is kept for every token, with the token ids. Windows are split into a training part
and a held-out part by a fixed rule (every `held_out_every`-th window is held out), so every SAE
trains on the same tokens and is measured on the same others, and the contexts that explain a
feature never come from the windows that score its label.

Besides the shards, the harvest measures what every SAE's loss recovered needs from the model
alone: the held-out cross-entropy clean, with the layer's residual zeroed, and with it replaced by
the training tokens' mean residual. So training a new grid of SAEs reruns none of it.

Shard files (safetensors, the codec in common/tensors.py): `activations` (n, d) F32 and `tokens`
(n,) I32, n a whole number of windows; metadata {"split": "train"|"held-out", "windows": "...",
"window": "<tokens per window>", "firstWindow": "<index of the shard's first window>"}.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from tensors import read_safetensors, write_safetensors


class HarvestError(ValueError):
    """The corpus is too short, or the activations are not finite."""


@dataclass(frozen=True)
class HarvestSpec:
    tokens: int
    layer: int
    held_out_every: int = 10
    shard_tokens: int = 65_536
    batch_windows: int = 16


def check_finite(x: torch.Tensor, where: str) -> None:
    bad = ~torch.isfinite(x).all(dim=-1)
    if bool(bad.any()):
        rows = bad.nonzero().flatten()
        raise HarvestError(f"{where}: {int(rows.numel())} activation rows hold NaN or inf (the first is row {int(rows[0])})")


def windows_of(stream: torch.Tensor, window: int, tokens: int) -> torch.Tensor:
    """(count, window) consecutive windows covering at least `tokens` tokens of the stream."""
    count = math.ceil(tokens / window)
    available = stream.numel() // window
    if count > available:
        raise HarvestError(f"harvest.tokens: {tokens} tokens asked for, but the corpus has {stream.numel()} "
                           f"({available} windows of {window}); lower harvest.tokens or use a longer corpus")
    return stream[:count * window].view(count, window)


def is_held_out(window_index: int, every: int) -> bool:
    return window_index % every == every - 1


@torch.no_grad()
def harvest(model: Any, stream: torch.Tensor, spec: HarvestSpec, out_dir: str,
            progress: Callable[[dict], None] | None = None) -> dict:
    """Writes the shards to out_dir; -> a summary with the shard files and the model's losses."""
    window = model.block_size
    windows = windows_of(stream, window, spec.tokens)
    held = [i for i in range(windows.shape[0]) if is_held_out(i, spec.held_out_every)]
    train = [i for i in range(windows.shape[0]) if not is_held_out(i, spec.held_out_every)]
    if not held or not train:
        raise HarvestError(f"harvest.tokens: {spec.tokens} tokens make {windows.shape[0]} windows of {window}; "
                           f"at least {spec.held_out_every} are needed for a held-out part")
    per_shard = max(1, spec.shard_tokens // window)
    os.makedirs(out_dir, exist_ok=True)
    shards: list[dict] = []
    total = torch.zeros(model.d_model, dtype=torch.float64)
    counted = 0
    for split, indices in (("train", train), ("held-out", held)):
        for start in range(0, len(indices), per_shard):
            chunk = indices[start:start + per_shard]
            parts = []
            for b in range(0, len(chunk), spec.batch_windows):
                ids = windows[chunk[b:b + spec.batch_windows]]
                acts = model.residual(ids, spec.layer).float()
                check_finite(acts.reshape(-1, acts.shape[-1]), f"layer {spec.layer}, windows {chunk[b]}..{chunk[min(b + spec.batch_windows, len(chunk)) - 1]}")
                parts.append(acts.reshape(-1, acts.shape[-1]))
            acts = torch.cat(parts)
            if split == "train":
                total += acts.double().sum(dim=0)
                counted += acts.shape[0]
            name = f"{split}-{len([s for s in shards if s['split'] == split]):05d}.safetensors"
            write_safetensors(os.path.join(out_dir, name),
                              {"activations": acts, "tokens": windows[chunk].reshape(-1).to(torch.int32)},
                              metadata={"split": split, "windows": ",".join(map(str, chunk)), "window": str(window)})
            shards.append({"name": name, "split": split, "tokens": int(acts.shape[0]), "windows": len(chunk)})
            if progress:
                progress({"shard": name, "tokens": int(acts.shape[0])})
    mean = (total / counted).float()
    held_ids = windows[held]
    losses = held_out_losses(model, held_ids, spec.layer, mean, spec.batch_windows)
    return {"window": window, "layer": spec.layer, "d": model.d_model, "shards": shards, "meanActivation": mean.tolist(),
            "trainTokens": counted, "heldOutTokens": int(held_ids.numel()), **losses}


@torch.no_grad()
def mean_cross_entropy(model: Any, ids: torch.Tensor, layer: int | None, replace: Any, batch: int) -> float:
    total, count = 0.0, 0
    for b in range(0, ids.shape[0], batch):
        losses = model.losses(ids[b:b + batch], layer, replace)
        total += float(losses.double().sum())
        count += losses.numel()
    return total / count


def held_out_losses(model: Any, held_ids: torch.Tensor, layer: int, mean: torch.Tensor, batch: int) -> dict:
    return {
        "ceClean": mean_cross_entropy(model, held_ids, None, None, batch),
        "ceZeroAblated": mean_cross_entropy(model, held_ids, layer, torch.zeros_like, batch),
        "ceMeanAblated": mean_cross_entropy(model, held_ids, layer, lambda x: mean.to(x.dtype).expand_as(x).clone(), batch),
    }


def read_shard(path: str) -> tuple[torch.Tensor, torch.Tensor, dict[str, str]]:
    arrays, metadata = read_safetensors(path)
    if set(arrays) != {"activations", "tokens"}:
        raise HarvestError(f"{os.path.basename(path)}: a harvest shard holds activations and tokens (got {sorted(arrays)})")
    acts, tokens = arrays["activations"], arrays["tokens"]
    if acts.ndim != 2 or tokens.shape != (acts.shape[0],):
        raise HarvestError(f"{os.path.basename(path)}: activations {acts.shape} do not match tokens {tokens.shape}")
    return torch.from_numpy(np.ascontiguousarray(acts, dtype=np.float32)), torch.from_numpy(tokens.astype(np.int64)), metadata
