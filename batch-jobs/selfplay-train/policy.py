"""The Connect Four policy: an MLP with a move head and a value head, its masking, ONNX export
and checkpoints.

The network reads the 126-value observation of connect4_env.encode_observation (the player to
move's view) and gives 7 move logits and one value (the mover's expected outcome). Only the
logits head is exported to ONNX: the match and arena Lambdas run it with onnxruntime-node and
never need the value.

A checkpoint holds the architecture config next to the weights, so it loads without the training
flags, and it is read with torch.load(weights_only=True), which refuses to run pickled code.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from connect4_env import COLS, OBSERVATION_SIZE
from checks import positive_int

# Logit given to an illegal move. Finite on purpose: with -inf, log_softmax gives -inf for an
# illegal move and the entropy term 0 * -inf is NaN; -1e9 still underflows exp() to exactly 0.
ILLEGAL_LOGIT = -1e9

ONNX_OPSET = 13
ONNX_INPUT_NAME = "obs"
ONNX_OUTPUT_NAME = "logits"

CHECKPOINT_FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be loaded: unreadable, unsafe, or the wrong layout."""



@dataclass(frozen=True)
class PolicyConfig:
    """The architecture of PolicyNet; saved with every checkpoint."""

    observation_size: int = OBSERVATION_SIZE
    """Inputs per position: 126 = 3 planes (own, opponent, empty) x 42 cells."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    """Width of each hidden ReLU layer of the shared trunk, input side first; at least one."""

    num_actions: int = COLS
    """Move logits: one per column."""

    def __post_init__(self) -> None:
        positive_int("observation_size", self.observation_size)
        positive_int("num_actions", self.num_actions)
        sizes = self.hidden_sizes
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (tuple, list)) or len(sizes) == 0:
            raise ValueError(f"hidden_sizes: must be a non-empty list of positive integers (got {sizes!r})")
        for i, size in enumerate(sizes):
            positive_int(f"hidden_sizes[{i}]", size)
        # Frozen dataclass: normalise a list (from JSON) to a tuple so configs compare and hash.
        object.__setattr__(self, "hidden_sizes", tuple(int(s) for s in sizes))

    def to_dict(self) -> dict[str, Any]:
        return {"observation_size": self.observation_size, "hidden_sizes": list(self.hidden_sizes),
                "num_actions": self.num_actions}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PolicyConfig":
        if not isinstance(data, dict):
            raise ValueError(f"policy config: expected an object (got {type(data).__name__})")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"policy config: unknown field(s) {unknown}")
        return cls(**data)


def _mkldnn_linear_works() -> bool:
    """True when torch's oneDNN inner product runs here, forward and backward, and agrees with
    F.linear. Probed once at import; any failure (no oneDNN, an API gone) keeps F.linear."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch._C._nn, "mkldnn_linear"):
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.rand(5, 3, generator=generator, requires_grad=True)
        w = torch.rand(4, 3, generator=generator, requires_grad=True)
        b = torch.rand(4, generator=generator, requires_grad=True)
        out = torch._C._nn.mkldnn_linear(x.to_mkldnn(), w, b).to_dense()
        out.sum().backward()
        expected = F.linear(x.detach(), w.detach(), b.detach())
        return bool(torch.allclose(out.detach(), expected, atol=1e-5)) and all(
            t.grad is not None for t in (x, w, b))
    except Exception:  # noqa: BLE001 - any failure means "do not use it"
        return False


MKLDNN_LINEAR = _mkldnn_linear_works()
"""Whether linear() takes the oneDNN path for CPU float32 inputs (decided once, at import)."""


def _mkldnn_path(x: torch.Tensor) -> bool:
    return MKLDNN_LINEAR and not torch.jit.is_tracing() and not torch.onnx.is_in_onnx_export() \
        and x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2 and x.shape[0] > 0


def linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """layer(x), through oneDNN's inner product on the CPU when it works here.

    Why: a torch linked against the reference BLAS (Debian's torch with libblas3, which the local
    trainer runs) does a 126-256-256 MLP's matrix products at ~2-5 GFLOP/s on one core; oneDNN,
    which every CPU build of torch carries, does them 15-30x faster, with autograd. CUDA, other
    dtypes, an empty batch and ONNX export (which must trace plain ops) keep F.linear.
    """
    if _mkldnn_path(x):
        return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), layer.weight, layer.bias).to_dense()
    return F.linear(x, layer.weight, layer.bias)


class PolicyNet(nn.Module):
    """MLP observation -> hidden ReLU layers -> (move logits, value)."""

    def __init__(self, config: PolicyConfig | None = None):
        super().__init__()
        self.config = config or PolicyConfig()
        layers: list[nn.Module] = []
        width = self.config.observation_size
        for size in self.config.hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.trunk = nn.Sequential(*layers)
        self.policy_head = nn.Linear(width, self.config.num_actions)
        self.value_head = nn.Linear(width, 1)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """The trunk's output [B, last hidden size]; the layers run through linear()."""
        h = obs
        for layer in self.trunk:
            h = linear(h, layer) if isinstance(layer, nn.Linear) else layer(h)
        return h

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, observation_size] -> (logits [B, num_actions], value [B])."""
        features = self.features(obs)
        return linear(features, self.policy_head), linear(features, self.value_head).squeeze(-1)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """The move logits alone (no value head computed)."""
        return linear(self.features(obs), self.policy_head)


def masked_logits(logits: torch.Tensor, legal_mask: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Logits with every illegal move set to ILLEGAL_LOGIT: softmax gives it probability 0.

    legal_mask is [B, num_actions] bool (True = legal). A row with no legal move (a finished
    game) comes out uniform rather than NaN; callers must not use its sample.
    """
    mask = torch.as_tensor(legal_mask, dtype=torch.bool, device=logits.device)
    if mask.shape != logits.shape:
        raise ValueError(f"legal_mask: shape {tuple(mask.shape)} does not match logits {tuple(logits.shape)}")
    return torch.where(mask, logits, torch.full_like(logits, ILLEGAL_LOGIT))


def evaluate_actions(net: PolicyNet, obs: torch.Tensor, legal_mask: torch.Tensor,
                     actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probability of each action, entropy, value), each [B], under the masked policy.

    Computed directly from log_softmax (what torch.distributions.Categorical does, without its
    per-call validation and broadcasting overhead): an illegal move has probability exactly 0,
    so its term p * log p is 0 * (about -1e9) = 0 and adds nothing to the entropy.
    """
    logits, value = net(obs)
    log_probs = torch.log_softmax(masked_logits(logits, legal_mask), dim=-1)
    chosen = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy, value


class _LogitsOnly(nn.Module):
    """What gets exported: the trunk and the move head, not the value head."""

    def __init__(self, net: PolicyNet):
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net.logits(obs)


def export_onnx(net: PolicyNet, path: str | os.PathLike) -> None:
    """Writes the logits head as ONNX (opset 13): input `obs` [batch, 126] float32, output
    `logits` [batch, 7], the batch axis dynamic. Checked with onnx.checker before returning."""
    import onnx  # only the export needs it

    # Export a CPU copy in eval mode, so a net training on the GPU is neither moved nor switched.
    model = _LogitsOnly(copy.deepcopy(net).cpu().eval())
    dummy = torch.zeros(1, net.config.observation_size, dtype=torch.float32)
    tmp = f"{os.fspath(path)}.tmp"
    with torch.no_grad():
        torch.onnx.export(
            model, (dummy,), tmp,
            opset_version=ONNX_OPSET,
            input_names=[ONNX_INPUT_NAME],
            output_names=[ONNX_OUTPUT_NAME],
            dynamic_axes={ONNX_INPUT_NAME: {0: "batch"}, ONNX_OUTPUT_NAME: {0: "batch"}},
            do_constant_folding=True,
        )
    onnx.checker.check_model(onnx.load(tmp))
    os.replace(tmp, path)


# torch 1.13 added torch.load(weights_only=True), but its restricted unpickler has no opcode for
# Python floats (pickle's BINFLOAT; later versions read it), and an optimizer's param_groups hold
# floats (lr, betas, eps). So everything that is not a tensor is stored as a JSON string, which
# every version's weights-only unpickler reads; tensors stay tensors.
def save_checkpoint(path: str | os.PathLike, net: PolicyNet,
                    optimizer: torch.optim.Optimizer | None = None,
                    progress: dict[str, Any] | None = None) -> None:
    """Writes the weights, the architecture config, and optionally the optimizer state and a
    JSON-serialisable progress record (iteration, curves) for resuming. Atomic: a job killed
    mid-write leaves the previous checkpoint in place."""
    payload: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "policy_config_json": json.dumps(net.config.to_dict()),
        "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()},
        "progress_json": json.dumps(progress if progress is not None else {}),
    }
    if optimizer is not None:
        opt_state = optimizer.state_dict()
        # A non-tensor entry (an older optimizer's int step) becomes a 0-d tensor, which torch's
        # optimizers accept in its place; a float could not be read back otherwise.
        payload["optimizer_state"] = {
            str(index): {k: (v.detach().cpu() if torch.is_tensor(v) else torch.tensor(v))
                         for k, v in state.items()}
            for index, state in opt_state["state"].items()
        }
        payload["optimizer_param_groups_json"] = json.dumps(opt_state["param_groups"])
    tmp = f"{os.fspath(path)}.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)


@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt net, and what is needed to resume training."""

    net: PolicyNet
    progress: dict[str, Any]
    optimizer_state: dict[str, Any] | None
    """Pass to optimizer.load_state_dict(); None when the checkpoint was saved without one."""


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Rebuilds the net from the config stored with its weights; raises CheckpointError."""
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # the unpickler raises UnpicklingError, RuntimeError, EOFError...
        raise CheckpointError(f"checkpoint {os.fspath(path)!r}: cannot be read safely: {err}") from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {os.fspath(path)!r}: format must be {CHECKPOINT_FORMAT} (got {found!r})")
    try:
        config = PolicyConfig.from_dict(json.loads(payload["policy_config_json"]))
        net = PolicyNet(config)
        net.load_state_dict(payload["state_dict"])
        progress = json.loads(payload["progress_json"])
        optimizer_state = None
        if "optimizer_state" in payload:
            optimizer_state = {
                "state": {int(i): state for i, state in payload["optimizer_state"].items()},
                "param_groups": json.loads(payload["optimizer_param_groups_json"]),
            }
    except (KeyError, ValueError, RuntimeError, TypeError) as err:
        raise CheckpointError(f"checkpoint {os.fspath(path)!r}: wrong layout: {err}") from err
    return Checkpoint(net=net.to(map_location), progress=progress, optimizer_state=optimizer_state)
