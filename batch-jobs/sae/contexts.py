"""The contexts a feature is explained from and scored on.

For the SAE chosen for labelling, every harvested token is encoded once to find the features that
fire often enough to judge, then a seeded sample of those features gets:

- explain windows, from the training windows only: a quarter the strongest activations, half
  drawn across ten quantiles of the activating windows' peak (labels written from top
  activations alone were worse in the reference pipeline's review), and a quarter windows
  where the feature never fires;
- detect windows, from the held-out windows only: half activating, drawn across the same
  quantiles, and half where the feature never fires.

A shown window is `window_tokens` tokens of one harvest window around its peak (the peak four
tokens from the end, so the words that lead to it show). Tokens are given as text (the model's
own pieces) with the feature's activation at each; "active" means a token of the shown window
fires. Output format "sae-contexts-v1", the one shared/sae/explain.ts parses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from sae import TopKSAE

CONTEXTS_FORMAT = "sae-contexts-v1"
QUANTILES = 10
# A token's text at most this long (shared/sae/explain.ts MAX_TOKEN_CHARS): a word piece has no
# length bound (a 10,000-letter run in the corpus is one piece), the contexts' schema has.
MAX_TOKEN_CHARS = 200


class ContextsError(ValueError):
    """Too few features fire often enough to sample, or a setting is out of range."""


@dataclass(frozen=True)
class ContextsSpec:
    features: int = 40
    min_activating: int = 20
    explain_examples: int = 40
    detect_examples: int = 40
    window_tokens: int = 32
    seed: int = 0
    batch_windows: int = 64


@dataclass
class Split:
    """One split's harvest: activations (n, d) and token ids (n,) of whole windows of `window`."""

    activations: torch.Tensor
    tokens: torch.Tensor
    window: int

    @property
    def windows(self) -> int:
        return self.tokens.numel() // self.window


@torch.no_grad()
def activating_windows(sae: TopKSAE, split: Split, batch_windows: int) -> torch.Tensor:
    """(width,) how many of the split's windows each latent fires in."""
    counts = torch.zeros(sae.config.width, dtype=torch.long)
    device = sae.b_pre.device
    step = batch_windows * split.window
    for start in range(0, split.tokens.numel(), step):
        latents = sae.encode(split.activations[start:start + step].to(device)).latents
        counts += (latents.view(-1, split.window, latents.shape[-1]) > 0).any(dim=1).sum(dim=0).cpu()
    return counts


@torch.no_grad()
def feature_activations(sae: TopKSAE, split: Split, features: list[int], batch_windows: int) -> torch.Tensor:
    """(windows, window, len(features)) the chosen latents' activations on every token."""
    device = sae.b_pre.device
    index = torch.tensor(features, dtype=torch.long, device=device)
    parts = []
    step = batch_windows * split.window
    for start in range(0, split.tokens.numel(), step):
        parts.append(sae.encode(split.activations[start:start + step].to(device)).latents[:, index].cpu())
    return torch.cat(parts).view(split.windows, split.window, len(features))


def _spread(order: list[int], count: int, generator: torch.Generator) -> list[int]:
    """`count` items of `order` (sorted by peak, strongest first) drawn evenly across QUANTILES bins."""
    if count <= 0 or not order:
        return []
    bins = [order[math.floor(i * len(order) / QUANTILES):math.floor((i + 1) * len(order) / QUANTILES)] for i in range(QUANTILES)]
    bins = [b for b in bins if b]
    chosen: list[int] = []
    per_bin = [count // len(bins) + (1 if i < count % len(bins) else 0) for i in range(len(bins))]
    for items, wanted in zip(bins, per_bin):
        picks = torch.randperm(len(items), generator=generator)[:wanted].tolist()
        chosen.extend(items[p] for p in sorted(picks))
    return chosen


def _shown(tokens: torch.Tensor, acts: torch.Tensor, peak: int, size: int, token_text: Callable[[int], str]) -> dict:
    end = min(tokens.numel(), max(size, peak + 5))
    start = max(0, end - size)
    return {"tokens": [token_text(int(t))[:MAX_TOKEN_CHARS] for t in tokens[start:end]],
            "activations": [float(f"{float(a):.4g}") for a in acts[start:end]]}


def build_contexts(sae: TopKSAE, train: Split, held: Split, spec: ContextsSpec,
                   token_text: Callable[[int], str]) -> dict:
    generator = torch.Generator().manual_seed(spec.seed)
    train_counts = activating_windows(sae, train, spec.batch_windows)
    held_counts = activating_windows(sae, held, spec.batch_windows)
    explain_active = spec.explain_examples - spec.explain_examples // 4
    # Judgeable: fires in enough held-out windows, and leaves windows on both sides in each split.
    eligible = [
        f for f in range(sae.config.width)
        if held_counts[f] >= max(spec.min_activating, spec.detect_examples // 2)
        and held.windows - held_counts[f] >= spec.detect_examples // 2
        and train_counts[f] >= explain_active
        and train.windows - train_counts[f] >= spec.explain_examples // 4
    ]
    if len(eligible) < 2:
        raise ContextsError(
            f"labels.minActivating: only {len(eligible)} of {sae.config.width} features fire in at least "
            f"{max(spec.min_activating, spec.detect_examples // 2)} held-out windows (of {held.windows}) and leave enough "
            "windows without them; harvest more tokens or lower labels.minActivating / detectExamples")
    picks = torch.randperm(len(eligible), generator=generator)[:spec.features].tolist()
    features = sorted(eligible[p] for p in picks)
    train_acts = feature_activations(sae, train, features, spec.batch_windows)
    held_acts = feature_activations(sae, held, features, spec.batch_windows)
    train_windows = train.tokens.view(-1, train.window)
    held_windows = held.tokens.view(-1, held.window)
    out = []
    for column, feature in enumerate(features):
        explain = []
        peaks, where = train_acts[:, :, column].max(dim=1)
        active = [int(w) for w in torch.argsort(peaks, descending=True) if peaks[w] > 0]
        quiet = [w for w in range(train.windows) if peaks[w] <= 0]
        top = active[:spec.explain_examples // 4]
        rest = [w for w in active if w not in set(top)]
        sampled = _spread(rest, explain_active - len(top), generator)
        for source, chosen in (("top", top), ("quantile", sampled)):
            for w in chosen:
                explain.append({**_shown(train_windows[w], train_acts[w, :, column], int(where[w]), spec.window_tokens, token_text),
                                "source": source})
        for p in torch.randperm(len(quiet), generator=generator)[:spec.explain_examples // 4].tolist():
            w = quiet[p]
            centre = int(torch.randint(0, train.window, (1,), generator=generator))
            explain.append({**_shown(train_windows[w], train_acts[w, :, column], centre, spec.window_tokens, token_text),
                            "source": "inactive"})
        detect = []
        peaks, where = held_acts[:, :, column].max(dim=1)
        active = [int(w) for w in torch.argsort(peaks, descending=True) if peaks[w] > 0]
        quiet = [w for w in range(held.windows) if peaks[w] <= 0]
        for w in _spread(active, spec.detect_examples // 2, generator):
            shown = _shown(held_windows[w], held_acts[w, :, column], int(where[w]), spec.window_tokens, token_text)
            detect.append({**shown, "active": True})
        for p in torch.randperm(len(quiet), generator=generator)[:spec.detect_examples // 2].tolist():
            w = quiet[p]
            centre = int(torch.randint(0, held.window, (1,), generator=generator))
            detect.append({**_shown(held_windows[w], held_acts[w, :, column], centre, spec.window_tokens, token_text), "active": False})
        # Shown in a seeded order, so a scorer cannot read the answer from the position.
        order = torch.randperm(len(detect), generator=generator).tolist()
        out.append({
            "feature": feature,
            "firingRate": round(float((train_acts[:, :, column] > 0).float().mean()), 6),
            "maxActivation": round(float(train_acts[:, :, column].max()), 4),
            "explain": explain,
            "detect": [detect[i] for i in order],
        })
    return {"format": CONTEXTS_FORMAT, "eligible": len(eligible), "width": sae.config.width, "features": out}
