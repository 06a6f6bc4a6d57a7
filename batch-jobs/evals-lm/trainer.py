"""The training loop for TinyLM: batches from task samplers, next-token loss on completions.

No AWS here: train_main.py wires the callbacks to S3. Each phase (base, fine-tune) gets a
fresh AdamW with a short linear warm-up, then a constant learning rate, gradient norm clipped
at 1.0. A sequence is [begin] + prompt + completion + [stop]; the loss covers the completion
and the stop token only (the whole sentence for text, whose prompt is empty), so fine-tuning
teaches the answer rather than the story.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from tasks import ArithmeticOptions, Example, TaskError, train_sampler
from tinylm import TinyLM

WARMUP_STEPS = 20
CURVE_POINTS = 50  # loss points kept per phase, so result.json stays small


def collate(examples: list[Example], model: TinyLM) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (inputs, targets), right-padded; targets are -100 where no loss is taken."""
    tok = model.tokenizer
    rows = []
    for e in examples:
        prompt = [tok.bos] + tok.encode(e.prompt)
        completion = tok.encode(e.completion) + [tok.stop]
        seq = prompt + completion
        if len(seq) - 1 > model.config.block_size:
            raise ValueError(f"example {e.id!r}: {len(seq) - 1} tokens exceed block_size {model.config.block_size}")
        target = [-100] * (len(prompt) - 1) + completion
        rows.append((seq[:-1], target))
    width = max(len(r[0]) for r in rows)
    inputs = torch.tensor([r[0] + [tok.pad] * (width - len(r[0])) for r in rows])
    targets = torch.tensor([r[1] + [-100] * (width - len(r[1])) for r in rows])
    return inputs, targets


class MixedSampler:
    """Draws a batch from tasks by weight: a fixed share from each (largest remainders)."""

    def __init__(self, weights: dict[str, float], rng: random.Random, arithmetic: ArithmeticOptions | None = None):
        if not weights or any(not isinstance(w, (int, float)) or isinstance(w, bool) or w < 0 for w in weights.values()) \
                or sum(weights.values()) <= 0:
            raise TaskError(f"mix: must map task names to non-negative weights with a positive sum (got {weights!r})")
        total = sum(weights.values())
        self.weights = {k: v / total for k, v in weights.items() if v > 0}
        self.samplers = {k: train_sampler(k, rng, arithmetic) for k in self.weights}
        self.rng = rng

    def counts(self, batch_size: int) -> dict[str, int]:
        exact = {k: w * batch_size for k, w in self.weights.items()}
        counts = {k: int(v) for k, v in exact.items()}
        for k in sorted(exact, key=lambda k: counts[k] - exact[k])[:batch_size - sum(counts.values())]:
            counts[k] += 1
        return counts

    def batch(self, batch_size: int) -> list[Example]:
        out = [self.samplers[k]() for k, n in self.counts(batch_size).items() for _ in range(n)]
        self.rng.shuffle(out)
        return out


@dataclass
class PhaseResult:
    steps: int
    seconds: float
    curve: list[dict[str, float]] = field(default_factory=list)
    """[{step, loss}]: the mean loss over each stretch of steps, at most CURVE_POINTS points."""


def train_phase(model: TinyLM, draw_batch: Callable[[], list[Example]], steps: int, lr: float,
                on_checkpoint: Callable[[int, float], None] | None = None, checkpoint_every: int = 0,
                on_progress: Callable[[dict], None] | None = None, device: str = "cpu") -> PhaseResult:
    """Trains `steps` steps; calls on_checkpoint(step, recent loss) every checkpoint_every steps
    and at the last step (when checkpoint_every > 0)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)
    model.train()
    every = max(1, steps // CURVE_POINTS)
    curve: list[dict[str, float]] = []
    window: list[float] = []
    started = time.perf_counter()
    for step in range(1, steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, step / WARMUP_STEPS)
        inputs, targets = collate(draw_batch(), model)
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        window.append(float(loss))
        if step % every == 0 or step == steps:
            point = {"step": step, "loss": round(sum(window) / len(window), 4)}
            curve.append(point)
            window = []
            if on_progress:
                on_progress({**point, "seconds": round(time.perf_counter() - started, 2)})
        if on_checkpoint and checkpoint_every > 0 and (step % checkpoint_every == 0 or step == steps):
            on_checkpoint(step, curve[-1]["loss"] if curve else float(loss))
            model.train()
    return PhaseResult(steps=steps, seconds=time.perf_counter() - started, curve=curve)
