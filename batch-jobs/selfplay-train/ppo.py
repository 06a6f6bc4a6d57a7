"""PPO for the self-play trainer: its config, its rollout batch and one update over a batch,
on the maths in common/ppo_core.py (gae, the clipped loss), re-exported here.

No environment and no I/O here: the trainer collects rollouts, calls gae() for the advantages,
then ppo_update() for the gradient steps.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from policy import evaluate_actions
from ppo_core import PPOLoss, gae, normalize_advantages, ppo_epochs, ppo_loss  # noqa: F401 - part of this module's interface
from checks import positive_int


class PPOConfigError(ValueError):
    """A PPO hyperparameter outside its range; names the field and the value."""


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise PPOConfigError(f"{name}: must be a finite number (got {value!r})")
    return float(value)


def _integer(name: str, value: Any) -> int:
    return positive_int(name, value, PPOConfigError)


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; validated on construction."""

    learning_rate: float = 1e-3
    """Adam step size; > 0. With ~2,000-row minibatches, 1e-3 learned Connect Four 3-4x faster
    than 2.5e-4 (approx_kl stays under ~0.01); lower it for late generations to refine."""

    gamma: float = 0.99
    """Discount per step, in (0, 1]; below 1 a quicker win is worth more."""

    gae_lambda: float = 0.95
    """GAE's lambda, in [0, 1]: 0 is the one-step TD error, 1 the full discounted return."""

    clip: float = 0.2
    """Clip range epsilon of the probability ratio, in (0, 1): the ratio is held in [1-eps, 1+eps]."""

    vf_coef: float = 0.5
    """Weight of the value loss in the total; >= 0."""

    ent_coef: float = 0.01
    """Weight of the entropy bonus (subtracted from the total); >= 0."""

    max_grad_norm: float = 0.5
    """Gradients are rescaled to at most this global L2 norm before each step; > 0."""

    update_epochs: int = 2
    """Passes over each rollout batch; >= 1. On one CPU core the update is most of an iteration,
    and 2 passes reached a given strength in less time than 4 (4 learn more per game: where games
    are the cost, as on a GPU, use 4)."""

    minibatches: int = 8
    """Minibatches per pass (the batch is shuffled and split evenly); >= 1. A 2,048-game rollout
    holds ~20,000 learner moves, so 8 gives ~2,500-row minibatches."""

    normalize_advantages: bool = True
    """Scale each minibatch's advantages to mean 0, standard deviation 1."""

    def __post_init__(self) -> None:
        if _real("learning_rate", self.learning_rate) <= 0:
            raise PPOConfigError(f"learning_rate: must be > 0 (got {self.learning_rate!r})")
        gamma = _real("gamma", self.gamma)
        if not 0 < gamma <= 1:
            raise PPOConfigError(f"gamma: must be in (0, 1] (got {self.gamma!r})")
        if not 0 <= _real("gae_lambda", self.gae_lambda) <= 1:
            raise PPOConfigError(f"gae_lambda: must be in [0, 1] (got {self.gae_lambda!r})")
        if not 0 < _real("clip", self.clip) < 1:
            raise PPOConfigError(f"clip: must be in (0, 1) (got {self.clip!r})")
        for name in ("vf_coef", "ent_coef"):
            if _real(name, getattr(self, name)) < 0:
                raise PPOConfigError(f"{name}: must be >= 0 (got {getattr(self, name)!r})")
        if _real("max_grad_norm", self.max_grad_norm) <= 0:
            raise PPOConfigError(f"max_grad_norm: must be > 0 (got {self.max_grad_norm!r})")
        _integer("update_epochs", self.update_epochs)
        _integer("minibatches", self.minibatches)
        if not isinstance(self.normalize_advantages, bool):
            raise PPOConfigError(f"normalize_advantages: must be true or false (got {self.normalize_advantages!r})")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PPOConfig":
        """From parsed JSON; an unknown field is an error (a typo must not silently use a default)."""
        if not isinstance(data, dict):
            raise PPOConfigError(f"ppo config: expected an object (got {type(data).__name__})")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise PPOConfigError(f"ppo config: unknown field(s) {unknown}")
        return cls(**data)


@dataclass
class RolloutBatch:
    """Flattened rollout data, one row per learner decision: B rows in every field."""

    obs: torch.Tensor
    """[B, 126] float32 observations."""
    legal_mask: torch.Tensor
    """[B, 7] bool legal moves when the action was chosen."""
    actions: torch.Tensor
    """[B] int64 chosen columns."""
    log_probs: torch.Tensor
    """[B] log-probability of the action under the policy that collected it."""
    advantages: torch.Tensor
    """[B] from gae()."""
    returns: torch.Tensor
    """[B] value targets from gae()."""

    def __post_init__(self) -> None:
        size = self.obs.shape[0]
        for field in dataclasses.fields(self):
            rows = getattr(self, field.name).shape[0]
            if rows != size:
                raise ValueError(f"{field.name}: {rows} rows, but obs has {size}")

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])


def ppo_update(net: nn.Module, optimizer: torch.optim.Optimizer, batch: RolloutBatch,
               config: PPOConfig, generator: torch.Generator | None = None) -> dict[str, float]:
    """ppo_core.ppo_epochs over the batch, scoring actions with their legal-move masks."""
    return ppo_epochs(net, optimizer, batch, config,
                      lambda rows: evaluate_actions(net, batch.obs[rows], batch.legal_mask[rows], batch.actions[rows]),
                      generator)
