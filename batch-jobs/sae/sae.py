"""A TopK sparse autoencoder (SAE) over a model's activations: training, evaluation, files.

The design follows the TopK SAE of Gao et al. (OpenAI's sparse_autoencoder) and EleutherAI's
sparsify, written here from their descriptions (see shared/REFERENCES.md, section B):

- Encoder: pre = W_enc (x - b_pre) + b_lat; each token keeps its k largest pre-activations,
  with a ReLU on the kept values; every other latent is exactly zero.
- Decoder: x_hat = W_dec latents + b_pre. W_dec's columns are the latents' directions and are
  kept at unit norm: before each optimiser step the gradient component parallel to each column
  is removed, and after the step the columns are renormalised.
- Initialisation is tied, training is not: W_dec starts as a unit-column-normed copy of
  W_enc's transpose, and the two are trained as separate parameters. b_pre starts at the
  geometric median of up to 32,768 training activations (Weiszfeld iterations).
- Loss: the batch's fraction of variance unexplained,
  FVU = sum ||x - x_hat||^2 / sum ||x - batch mean||^2, plus auxk_coef x AuxK. AuxK lets the
  top-`auxk` pre-activations among *dead* latents (no firing for `dead_tokens` tokens)
  reconstruct the residual x - x_hat (detached), normalised the same way against the residual's
  own variance and scaled by min(1, dead / auxk); it is zero while no latent is dead. Of the
  latents, its gradient reaches only the dead ones' encoder rows, b_lat entries and decoder
  columns (plus b_pre), which is what revives them.
- Optimiser: Adam with eps 6.25e-10 (as the OpenAI reference) and, by default, sparsify's
  learning-rate rule 2e-4 / sqrt(width / 2**14). No warm-up and no schedule.

Compute. The one dense product, the (tokens, width) pre-activations, runs through
`tensors.linear` (oneDNN on Debian's CPU torch, plain F.linear elsewhere) without autograd; it
only chooses each token's latents. Everything downstream of the choice is sparse: the kept
values are read from it by `_GatherEncode`, whose backward touches only the chosen
(token, latent) pairs, and decoding sums k decoder columns per token with F.embedding_bag.
This is exact (TopK passes no gradient to unchosen latents) and, on one CPU thread at d_in 128,
width 1024, k 32, about 3x faster per step than dense products with dense gradients. The
dense `decode(latents)` stays available for callers that hold dense latents.

Files: `save_sae` writes a safetensors file with tensors W_enc, b_lat, W_dec, b_pre (float32)
and metadata {"format": "topk-sae-v1", "config": JSON, "metrics": JSON}; `load_sae` rebuilds
the model and checks every tensor's shape against the config.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tensors import CheckpointCorrupt, linear, read_safetensors, write_safetensors

FILE_FORMAT = "topk-sae-v1"
ADAM_EPS = 6.25e-10
GEOMETRIC_MEDIAN_POINTS = 32_768
TENSOR_NAMES = ("W_enc", "b_lat", "W_dec", "b_pre")


class SaeConfigError(ValueError):
    """A SaeConfig field is missing or out of range."""


# ---------------------------------------------------------------- configuration

@dataclass(frozen=True)
class SaeConfig:
    d_in: int
    """Width of the activations the SAE reads (the LM's d_model at the hook site)."""
    width: int
    """Number of latents (dictionary size)."""
    k: int
    """Latents kept per token."""
    auxk: int | None = None
    """Dead latents the AuxK loss may use per token; None -> d_in // 2 (Gao et al., B.1)."""
    auxk_coef: float = 1 / 32
    """Weight of the AuxK loss; 0 turns it off."""
    dead_tokens: int = 10_000_000
    """A latent that has not fired for this many training tokens counts as dead."""
    lr: float | None = None
    """Adam learning rate; None -> 2e-4 / sqrt(width / 2**14) (sparsify's rule for Adam)."""
    batch_size: int = 4096
    """Tokens per optimiser step."""
    seed: int = 0

    def __post_init__(self) -> None:
        for field in ("d_in", "width", "k", "auxk", "dead_tokens", "batch_size"):
            value = getattr(self, field)
            if field == "auxk" and value is None:
                object.__setattr__(self, "auxk", max(1, self.d_in // 2))
            elif not _is_int(value) or value < 1:
                raise SaeConfigError(f"{field}: must be a positive integer (got {value!r})")
        if self.lr is None:
            object.__setattr__(self, "lr", 2e-4 / math.sqrt(self.width / 2 ** 14))
        if not _is_int(self.seed) or self.seed < 0:
            raise SaeConfigError(f"seed: must be a non-negative integer (got {self.seed!r})")
        if self.k > self.width:
            raise SaeConfigError(f"k: {self.k} exceeds width {self.width} (each token keeps k of width latents)")
        if self.auxk > self.width:
            raise SaeConfigError(f"auxk: {self.auxk} exceeds width {self.width} "
                                 "(AuxK uses at most auxk of the width latents)")
        for field, lowest in (("auxk_coef", "zero or more"), ("lr", "above zero")):
            value = getattr(self, field)
            bad = (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                   or (value < 0 if field == "auxk_coef" else value <= 0))
            if bad:
                raise SaeConfigError(f"{field}: must be a finite number {lowest} (got {value!r})")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: Any) -> "SaeConfig":
        if not isinstance(data, dict):
            raise SaeConfigError(f"config: must be a JSON object (got {type(data).__name__})")
        known = {f.name for f in fields(SaeConfig)}
        unknown = set(data) - known
        if unknown:
            raise SaeConfigError(f"config: unknown fields {sorted(unknown)}")
        missing = {"d_in", "width", "k"} - set(data)
        if missing:
            raise SaeConfigError(f"config: missing fields {sorted(missing)}")
        return SaeConfig(**data)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------- input checks

def check_activations(x: Any, field: str = "activations", d_in: int | None = None) -> None:
    """Raises ValueError unless x is a finite 2-D float tensor (rows = tokens), naming the fault."""
    if not torch.is_tensor(x):
        raise ValueError(f"{field}: must be a torch.Tensor (got {type(x).__name__})")
    if x.dim() != 2:
        raise ValueError(f"{field}: must be 2-D (tokens, d_in) (got shape {tuple(x.shape)})")
    if not x.is_floating_point():
        raise ValueError(f"{field}: must be a float tensor (got {x.dtype})")
    if d_in is not None and x.shape[1] != d_in:
        raise ValueError(f"{field}: rows have {x.shape[1]} values, the SAE reads d_in={d_in}")
    if x.shape[0] == 0:
        raise ValueError(f"{field}: holds no rows")
    bad = ~torch.isfinite(x).all(dim=1)
    if bool(bad.any()):
        rows = bad.nonzero().flatten()
        raise ValueError(f"{field}: {rows.numel()} of {x.shape[0]} rows hold NaN or inf "
                         f"(first at row {int(rows[0])})")


# ---------------------------------------------------------------- geometric median

def geometric_median(x: torch.Tensor, iterations: int = 200, tol: float = 1e-7) -> torch.Tensor:
    """The point minimising the sum of Euclidean distances to x's rows (Weiszfeld's algorithm).

    Computed in float64 from the coordinate-wise mean; stops when an iteration moves the
    estimate by less than tol x the data's scale. Returns a (d,) tensor of x's dtype.
    """
    check_activations(x, "x")
    points = x.detach().to(torch.float64)
    median = points.mean(dim=0)
    scale = float((points - median).norm(dim=1).mean()) or 1.0
    floor = 1e-12 * scale  # keeps 1/distance finite when the estimate sits on a point
    for _ in range(iterations):
        weights = 1.0 / (points - median).norm(dim=1).clamp_min(floor)
        updated = (weights[:, None] * points).sum(dim=0) / weights.sum()
        moved = float((updated - median).norm())
        median = updated
        if moved <= tol * scale:
            break
    return median.to(x.dtype)


# ---------------------------------------------------------------- the model

class Encoding(NamedTuple):
    latents: torch.Tensor
    """(n, width) dense latents: k (or fewer, where the ReLU zeroes) nonzeros per row."""
    values: torch.Tensor
    """(n, k) the kept values after the ReLU (0 where the pre-activation was negative)."""
    indices: torch.Tensor
    """(n, k) the kept latents' indices."""


class _GatherEncode(torch.autograd.Function):
    """values[i, j] = W_enc[idx[i, j]] . xc[i] + b_lat[idx[i, j]], read from the dense
    pre-activations already computed; the backward touches only the selected entries.

    Only the k (or auxk) selected pre-activations of a token carry gradient (TopK passes none
    to the others), so the backward is sparse: embedding_bag for the input, a sparse-dense
    product for W_enc, index_add for b_lat. On the CPU this is ~10x cheaper than the dense
    (n, width) gradient products, which were most of a step's time.
    """

    @staticmethod
    def forward(ctx, xc, weight, bias, indices, pre):  # type: ignore[override]
        ctx.save_for_backward(xc, weight, indices)
        return pre.gather(1, indices)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        xc, weight, indices = ctx.saved_tensors
        grad = grad.contiguous()
        n, k = indices.shape
        grad_xc = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_xc = F.embedding_bag(indices, weight, per_sample_weights=grad, mode="sum")
        rows, flat = indices.reshape(-1), grad.reshape(-1)
        if ctx.needs_input_grad[1]:
            tokens = torch.arange(n, device=indices.device).repeat_interleave(k)
            selection = torch.sparse_coo_tensor(torch.stack([rows, tokens]), flat, (weight.shape[0], n))
            grad_weight = torch.sparse.mm(selection, xc)
        if ctx.needs_input_grad[2]:
            grad_bias = torch.zeros(weight.shape[0], dtype=grad.dtype, device=grad.device).index_add_(0, rows, flat)
        return grad_xc, grad_weight, grad_bias, None, None


class TopKSAE(nn.Module):
    def __init__(self, config: SaeConfig):
        super().__init__()
        self.config = config
        generator = torch.Generator().manual_seed(config.seed)
        bound = 1 / math.sqrt(config.d_in)  # nn.Linear's default range for the encoder
        w_enc = (torch.rand(config.width, config.d_in, generator=generator) * 2 - 1) * bound
        self.W_enc = nn.Parameter(w_enc)
        self.b_lat = nn.Parameter(torch.zeros(config.width))
        self.W_dec = nn.Parameter(w_enc.t().clone())
        self.b_pre = nn.Parameter(torch.zeros(config.d_in))
        self.normalize_decoder()
        # Training tokens since each latent last fired (not saved: it belongs to one run).
        self.register_buffer("tokens_since_fired", torch.zeros(config.width, dtype=torch.long), persistent=False)

    # -- forward pieces

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """(n, width) W_enc (x - b_pre) + b_lat."""
        return linear(x - self.b_pre, self.W_enc, self.b_lat)

    def select(self, x: torch.Tensor, pre: torch.Tensor, count: int,
               allowed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (values after the ReLU, indices), each (n, count): the top `count` pre-activations
        per row (among `allowed` latents when given), differentiable in the parameters."""
        with torch.no_grad():
            ranked = pre if allowed is None else pre.masked_fill(~allowed[None, :], -math.inf)
            indices = ranked.topk(count, dim=-1, sorted=False).indices
        raw = _GatherEncode.apply(x - self.b_pre, self.W_enc, self.b_lat, indices, pre.detach())
        return torch.relu(raw), indices

    def encode_sparse(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (values, indices), each (n, k): the kept latents of each row."""
        with torch.no_grad():
            pre = self.pre_activations(x)
        return self.select(x, pre, self.config.k)

    def encode(self, x: torch.Tensor) -> Encoding:
        values, indices = self.encode_sparse(x)
        latents = torch.zeros(x.shape[0], self.config.width, dtype=values.dtype, device=values.device)
        return Encoding(latents.scatter(-1, indices, values), values, indices)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Dense latents (n, width) -> (n, d_in): W_dec latents + b_pre."""
        return linear(latents, self.W_dec, self.b_pre)

    def decode_sparse(self, values: torch.Tensor, indices: torch.Tensor, bias: bool = True) -> torch.Tensor:
        """The same product from (values, indices): sums k decoder columns per row."""
        out = F.embedding_bag(indices, self.W_dec.t().contiguous(), per_sample_weights=values, mode="sum")
        return out + self.b_pre if bias else out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode_sparse(*self.encode_sparse(x))

    # -- decoder constraint

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        self.W_dec.div_(self.W_dec.norm(dim=0, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_gradient(self) -> None:
        """Drops the part of W_dec's gradient along each (unit) column: it would only change norms."""
        grad = self.W_dec.grad
        if grad is not None:
            grad.sub_((grad * self.W_dec).sum(dim=0, keepdim=True) * self.W_dec)

    # -- dead latents

    def dead_mask(self) -> torch.Tensor:
        return self.tokens_since_fired >= self.config.dead_tokens

    @torch.no_grad()
    def record_firing(self, values: torch.Tensor, indices: torch.Tensor) -> None:
        fired = torch.zeros(self.config.width, dtype=torch.bool, device=indices.device)
        fired[indices[values > 0]] = True
        self.tokens_since_fired += indices.shape[0]
        self.tokens_since_fired[fired] = 0


def _fvu(target: torch.Tensor, estimate: torch.Tensor) -> torch.Tensor:
    """sum ||target - estimate||^2 / sum ||target - mean(target)||^2 over a batch."""
    total = (target - target.mean(dim=0, keepdim=True)).pow(2).sum()
    return (target - estimate).pow(2).sum() / total.clamp_min(1e-12)


class StepLoss(NamedTuple):
    loss: torch.Tensor
    fvu: torch.Tensor
    auxk: torch.Tensor
    values: torch.Tensor
    indices: torch.Tensor


def sae_loss(model: TopKSAE, x: torch.Tensor) -> StepLoss:
    """The training loss of one batch: FVU + auxk_coef x AuxK, with the model's current dead mask."""
    config = model.config
    with torch.no_grad():
        pre = model.pre_activations(x)
    values, indices = model.select(x, pre, config.k)
    x_hat = model.decode_sparse(values, indices)
    fvu = _fvu(x, x_hat)
    aux = torch.zeros((), device=x.device)
    dead = model.dead_mask()
    num_dead = int(dead.sum())
    if config.auxk_coef > 0 and num_dead > 0:
        # The dead latents' best pre-activations try to explain what the live ones missed.
        aux_values, aux_indices = model.select(x, pre, min(config.auxk, num_dead), allowed=dead)
        residual = (x - x_hat).detach()
        aux = min(1.0, num_dead / config.auxk) * _fvu(residual, model.decode_sparse(aux_values, aux_indices, bias=False))
    return StepLoss(fvu + config.auxk_coef * aux, fvu, aux, values, indices)


# ---------------------------------------------------------------- training

def train_sae(activations: torch.Tensor, config: SaeConfig, *, steps: int | None = None,
              epochs: float | None = None, log_every: int = 50, model: TopKSAE | None = None,
              progress: Callable[[dict[str, float]], None] | None = None) -> tuple[TopKSAE, dict[str, Any]]:
    """Trains a TopK SAE on activations (N, d_in) float32 and returns (model, history).

    Give steps or epochs (passes over the rows; default 1 epoch). Each pass visits the rows in a
    fresh seeded permutation, in full batches of config.batch_size (a partial tail is skipped).
    `model`, if given, is trained further as it is (its b_pre kept); otherwise one is built
    from config.seed with b_pre at the geometric median of up to 32,768 rows.
    `progress`, if given, receives each logged record.

    history: {"step": [...], "loss": [...], "fvu": [...], "auxk_loss": [...], "dead_share":
    [...]} (loss, fvu and auxk_loss are means over each logging interval, dead_share the share of
    latents dead at its end), plus "steps", "tokens", "seconds" and "tokens_per_second" of the
    training loop by wall clock (the median initialisation excluded).
    """
    check_activations(activations, d_in=config.d_in)
    if steps is not None and epochs is not None:
        raise ValueError("steps and epochs: give one of them, not both")
    if steps is not None and (not _is_int(steps) or steps < 1):
        raise ValueError(f"steps: must be a positive integer (got {steps!r})")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or not epochs > 0):
        raise ValueError(f"epochs: must be a number above zero (got {epochs!r})")
    if not _is_int(log_every) or log_every < 1:
        raise ValueError(f"log_every: must be a positive integer (got {log_every!r})")
    rows = activations.shape[0]
    batch = config.batch_size
    if batch > rows:
        raise ValueError(f"batch_size: {batch} exceeds the {rows} activation rows")
    if model is not None and model.config != config:
        raise ValueError("model: its config differs from the config given")
    per_epoch = rows // batch
    if steps is None:
        steps = max(1, math.ceil((1.0 if epochs is None else epochs) * per_epoch))

    data = activations.detach().to(torch.float32)
    generator = torch.Generator().manual_seed(config.seed)
    if model is None:
        model = TopKSAE(config).to(data.device)
        sample = data
        if rows > GEOMETRIC_MEDIAN_POINTS:
            sample = data[torch.randperm(rows, generator=generator)[:GEOMETRIC_MEDIAN_POINTS].to(data.device)]
        with torch.no_grad():
            model.b_pre.copy_(geometric_median(sample))
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, eps=ADAM_EPS)

    history: dict[str, Any] = {"step": [], "loss": [], "fvu": [], "auxk_loss": [], "dead_share": []}
    sums = torch.zeros(3, dtype=torch.float64)
    logged_since = 0
    order, position = None, per_epoch  # forces a permutation on the first step
    started = time.perf_counter()
    for step in range(1, steps + 1):
        if position >= per_epoch:
            order, position = torch.randperm(rows, generator=generator).to(data.device), 0
        x = data[order[position * batch:(position + 1) * batch]]
        position += 1

        step_loss = sae_loss(model, x)
        optimizer.zero_grad(set_to_none=True)
        step_loss.loss.backward()
        model.remove_parallel_gradient()
        optimizer.step()
        model.normalize_decoder()
        model.record_firing(step_loss.values, step_loss.indices)

        sums += torch.stack([step_loss.loss, step_loss.fvu, step_loss.auxk]).detach().double().cpu()
        logged_since += 1
        if step % log_every == 0 or step == steps:
            means = (sums / logged_since).tolist()
            record = {"step": step, "loss": means[0], "fvu": means[1], "auxk_loss": means[2],
                      "dead_share": float(model.dead_mask().float().mean())}
            for key, value in record.items():
                history[key].append(value)
            if progress is not None:
                progress(record)
            sums.zero_()
            logged_since = 0
    seconds = time.perf_counter() - started
    history.update(steps=steps, tokens=steps * batch, seconds=seconds,
                   tokens_per_second=steps * batch / max(seconds, 1e-9))
    model.eval()
    return model, history


# ---------------------------------------------------------------- evaluation and use

@torch.no_grad()
def evaluate(model: TopKSAE, activations: torch.Tensor, batch_size: int = 8192) -> dict[str, Any]:
    """Metrics over a whole eval set, in batches of batch_size rows.

    -> {"fvu": sum ||x - x_hat||^2 / sum ||x - mean(x)||^2 (mean over the whole set),
        "l0": mean nonzero latents per token (at most k), "dead_share": share of latents that
        never fire on the set, "fire_counts": (width,) int64 tensor of tokens each latent fired
        on, "tokens": N}.
    """
    check_activations(activations, d_in=model.config.d_in)
    if not _is_int(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size: must be a positive integer (got {batch_size!r})")
    was_training = model.training
    model.eval()
    device = model.W_enc.device
    rows = activations.shape[0]
    mean = torch.zeros(model.config.d_in, dtype=torch.float64, device=device)
    for begin in range(0, rows, batch_size):
        mean += activations[begin:begin + batch_size].to(device, torch.float64).sum(dim=0)
    mean /= rows
    error = total = nonzero = 0.0
    counts = torch.zeros(model.config.width, dtype=torch.long, device=device)
    for begin in range(0, rows, batch_size):
        x = activations[begin:begin + batch_size].to(device, torch.float32)
        values, indices = model.encode_sparse(x)
        x_hat = model.decode_sparse(values, indices)
        error += float((x - x_hat).double().pow(2).sum())
        total += float((x.double() - mean).pow(2).sum())
        fired = values > 0
        nonzero += float(fired.sum())
        counts += torch.bincount(indices[fired], minlength=model.config.width)
    model.train(was_training)
    return {"fvu": error / total if total > 0 else math.nan, "l0": nonzero / rows,
            "dead_share": float((counts == 0).double().mean()), "fire_counts": counts.cpu(), "tokens": rows}


@torch.no_grad()
def reconstruct(model: TopKSAE, x: torch.Tensor) -> torch.Tensor:
    """The SAE's reconstruction of x (..., d_in), same shape and dtype, for splicing into an LM."""
    if x.shape[-1] != model.config.d_in:
        raise ValueError(f"x: last dimension is {x.shape[-1]}, the SAE reads d_in={model.config.d_in}")
    flat = x.reshape(-1, x.shape[-1]).to(model.W_enc.device, torch.float32)
    return model(flat).to(x.device, x.dtype).reshape(x.shape)


def loss_recovered(ce_clean: float, ce_ablated: float, ce_sae: float) -> float:
    """(ce_ablated - ce_sae) / (ce_ablated - ce_clean): 1 when splicing the SAE in costs nothing,
    0 when it is as bad as ablating the site (with zeros, as SAELens and dictionary_learning)."""
    for name, value in (("ce_clean", ce_clean), ("ce_ablated", ce_ablated), ("ce_sae", ce_sae)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name}: must be a finite number (got {value!r})")
    if ce_ablated <= ce_clean:
        raise ValueError(f"ce_ablated: {ce_ablated} is not above ce_clean {ce_clean}: "
                         "ablating the site costs nothing, so there is nothing to recover")
    return (ce_ablated - ce_sae) / (ce_ablated - ce_clean)


# ---------------------------------------------------------------- files

def _json_default(value: Any) -> Any:
    if torch.is_tensor(value):
        return value.tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"metrics: {type(value).__name__} is not JSON-serialisable")


def save_sae(path: str | os.PathLike, model: TopKSAE, config: SaeConfig | None = None,
             metrics: dict[str, Any] | None = None) -> None:
    """Writes the SAE as safetensors (float32) with the config and metrics as JSON metadata."""
    config = model.config if config is None else config
    if config != model.config:
        raise ValueError("config: differs from the model's own config")
    tensors = {name: getattr(model, name).detach().to("cpu", torch.float32) for name in TENSOR_NAMES}
    metadata = {"format": FILE_FORMAT, "config": json.dumps(config.to_json()),
                "metrics": json.dumps(metrics or {}, default=_json_default)}
    write_safetensors(path, tensors, metadata)


def load_sae(path: str | os.PathLike) -> tuple[TopKSAE, dict[str, Any]]:
    """-> (model, metrics). Raises CheckpointCorrupt naming the file and what does not fit."""
    name = os.path.basename(os.fspath(path))
    tensors, metadata = read_safetensors(path)
    if metadata.get("format") != FILE_FORMAT:
        raise CheckpointCorrupt(f"{name}: metadata format must be {FILE_FORMAT!r} (got {metadata.get('format')!r})")
    try:
        config = SaeConfig.from_json(json.loads(metadata.get("config", "")))
        metrics = json.loads(metadata.get("metrics", "{}"))
    except ValueError as err:  # JSONDecodeError and SaeConfigError are ValueErrors
        raise CheckpointCorrupt(f"{name}: bad config or metrics metadata: {err}") from err
    if set(tensors) != set(TENSOR_NAMES):
        raise CheckpointCorrupt(f"{name}: tensors must be {sorted(TENSOR_NAMES)} (got {sorted(tensors)})")
    expected = {"W_enc": (config.width, config.d_in), "b_lat": (config.width,),
                "W_dec": (config.d_in, config.width), "b_pre": (config.d_in,)}
    model = TopKSAE(config)
    with torch.no_grad():
        for tensor_name, shape in expected.items():
            array = tensors[tensor_name]
            if tuple(array.shape) != shape:
                raise CheckpointCorrupt(f"{name}: tensor {tensor_name} has shape {list(array.shape)}, "
                                        f"the config (d_in={config.d_in}, width={config.width}) "
                                        f"needs {list(shape)}")
            getattr(model, tensor_name).copy_(torch.from_numpy(np.asarray(array, dtype=np.float32)))
    model.eval()
    return model, metrics
