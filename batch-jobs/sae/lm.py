"""The local language model whose residual stream the sparse autoencoders read.

A decoder-only transformer (learned token and position embeddings; pre-norm blocks of causal
self-attention and a 4x GELU MLP; a tied output head), the layout of the evals pipeline's tiny
GPT, over the word-piece tokenizer in tokenizer.py. On AWS the pipeline reads Pythia-70m instead
(hf_model.py); both answer the same three questions through `ResidualModel`:

- `residual(ids, layer)`: the residual stream after block `layer` (0-based), (batch, length, d);
- `losses(ids, layer, replace)`: the next-token cross-entropy of every position with the
  residual after `layer` replaced by `replace(residual)`, or left alone when `replace` is None;
- `n_layer`, `d_model`, `block_size` and `vocab_size`.

Files: config.json ({"format": "sae-lm-v1", "architecture": {...}}), model.safetensors (the
codec in common/tensors.py) and tokenizer.json.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from tensors import CheckpointCorrupt, linear, read_safetensors, write_safetensors
from tokenizer import BOS, Tokenizer
from transformer import Block

LM_FORMAT = "sae-lm-v1"
Replace = Optional[Callable[[torch.Tensor], torch.Tensor]]


class LayerError(ValueError):
    """A layer index the model does not have."""


@dataclass(frozen=True)
class LmConfig:
    vocab_size: int
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    block_size: int = 128

    def __post_init__(self) -> None:
        for field in ("vocab_size", "n_layer", "n_embd", "n_head", "block_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"lm.{field}: must be a positive integer (got {value!r})")
        if self.n_embd % self.n_head:
            raise ValueError(f"lm.n_embd: must be a multiple of n_head={self.n_head} (got {self.n_embd})")


def check_layer(layer: Any, n_layer: int, field: str = "layer") -> int:
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layer:
        raise LayerError(f"{field}: the model has layers 0 to {n_layer - 1} (got {layer!r})")
    return layer


class LocalLM(nn.Module):
    def __init__(self, config: LmConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    @property
    def n_layer(self) -> int:
        return self.config.n_layer

    @property
    def d_model(self) -> int:
        return self.config.n_embd

    @property
    def block_size(self) -> int:
        return self.config.block_size

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    def _run(self, ids: torch.Tensor, stop_after: int | None = None, layer: int | None = None,
             replace: Replace = None) -> torch.Tensor:
        length = ids.shape[1]
        if length > self.config.block_size:
            raise ValueError(f"a sequence of {length} tokens exceeds block_size {self.config.block_size}")
        mask = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril().view(1, 1, length, length)
        x = self.wte(ids) + self.wpe(torch.arange(length, device=ids.device)).unsqueeze(0)
        for index, block in enumerate(self.blocks):
            x = block(x, mask)
            if index == layer and replace is not None:
                x = replace(x)
            if index == stop_after:
                return x
        return linear(self.ln_f(x), self.wte.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, length) -> logits (batch, length, vocab)."""
        return self._run(ids)

    def residual(self, ids: torch.Tensor, layer: int) -> torch.Tensor:
        return self._run(ids, stop_after=check_layer(layer, self.n_layer))

    def losses(self, ids: torch.Tensor, layer: int | None = None, replace: Replace = None) -> torch.Tensor:
        """Cross-entropy of predicting ids[:, 1:] from ids[:, :-1], per position (batch, length-1)."""
        if layer is not None:
            check_layer(layer, self.n_layer)
        logits = self._run(ids[:, :-1], layer=layer, replace=replace)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none").view(ids.shape[0], -1)


# ---------------------------------------------------------------- training and files

@dataclass(frozen=True)
class TrainLmSpec:
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 30
    seed: int = 0


def token_stream(tokenizer: Any, texts: list[str]) -> torch.Tensor:
    """Every text's tokens after the tokenizer's begin (or separator) token, end to end."""
    ids: list[int] = []
    bos = getattr(tokenizer, "bos", BOS)
    for text in texts:
        ids.append(bos)
        ids.extend(tokenizer.encode(text))
    return torch.tensor(ids, dtype=torch.long)


def train_lm(model: LocalLM, stream: torch.Tensor, spec: TrainLmSpec,
             progress: Callable[[dict], None] | None = None) -> dict:
    """AdamW with a linear warm-up and a cosine decay over random windows of the stream."""
    window = model.block_size + 1
    if stream.numel() < window + 1:
        raise ValueError(f"corpus: {stream.numel()} tokens, fewer than one training window of {window}")
    generator = torch.Generator().manual_seed(spec.seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=spec.lr, betas=(0.9, 0.95))
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(spec.steps):
        scale = (step + 1) / spec.warmup if step < spec.warmup else 0.5 * (1 + math.cos(math.pi * (step - spec.warmup) / max(1, spec.steps - spec.warmup)))
        for group in optimizer.param_groups:
            group["lr"] = spec.lr * max(scale, 0.05)
        starts = torch.randint(0, stream.numel() - window, (spec.batch_size,), generator=generator)
        batch = torch.stack([stream[s:s + window] for s in starts.tolist()])
        loss = model.losses(batch).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss))
        if progress and (step % 50 == 0 or step == spec.steps - 1):
            progress({"step": step, "loss": losses[-1]})
    model.eval()
    seconds = time.perf_counter() - started
    return {"steps": spec.steps, "finalLoss": sum(losses[-20:]) / len(losses[-20:]), "firstLoss": losses[0],
            "seconds": seconds, "tokensPerSecond": spec.steps * spec.batch_size * (window - 1) / seconds}


@torch.no_grad()
def mean_loss(model: Any, stream: torch.Tensor, max_windows: int = 64) -> float:
    """Mean next-token cross-entropy over consecutive windows of a held-out stream."""
    window = model.block_size + 1
    count = min(max_windows, (stream.numel() - 1) // model.block_size)
    if count < 1:
        raise ValueError(f"held-out stream: {stream.numel()} tokens, fewer than one window of {window}")
    batch = torch.stack([stream[i * model.block_size:i * model.block_size + window] for i in range(count)])
    return float(model.losses(batch).mean())


def save_lm(directory: str, model: LocalLM, tokenizer: Tokenizer) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as out:
        json.dump({"format": LM_FORMAT, "architecture": asdict(model.config)}, out, indent=2)
    write_safetensors(os.path.join(directory, "model.safetensors"), dict(model.state_dict()), metadata={"format": "pt"})
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    return ["config.json", "model.safetensors", "tokenizer.json"]


def load_lm(directory: str) -> tuple[LocalLM, Tokenizer]:
    with open(os.path.join(directory, "config.json")) as source:
        data = json.load(source)
    if not isinstance(data, dict) or data.get("format") != LM_FORMAT or not isinstance(data.get("architecture"), dict):
        raise CheckpointCorrupt(f"config.json: format must be {LM_FORMAT!r} with an architecture object")
    config = LmConfig(**data["architecture"])
    tokenizer = Tokenizer.load(os.path.join(directory, "tokenizer.json"))
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointCorrupt(f"tokenizer.json: {tokenizer.vocab_size} tokens, the model has {config.vocab_size}")
    arrays, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
    model = LocalLM(config)
    try:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})
    except RuntimeError as err:
        raise CheckpointCorrupt(f"model.safetensors: does not match config.json: {str(err).splitlines()[0][:300]}") from err
    model.eval()
    return model, tokenizer
