"""PPO for the self-play trainer: its config (common/ppo_config.py's, with this job's defaults),
its rollout batch and one update over a batch, on the maths in common/ppo_core.py (gae, the
clipped loss), re-exported here.

No environment and no I/O here: the trainer collects rollouts, calls gae() for the advantages,
then ppo_update() for the gradient steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from policy import evaluate_actions
from ppo_config import PPOConfig as BasePPOConfig
from ppo_config import PPOConfigError  # noqa: F401 - part of this module's interface
from ppo_core import PPOLoss, RolloutRows, gae, normalize_advantages, ppo_epochs, ppo_loss  # noqa: F401 - part of this module's interface


@dataclass(frozen=True)
class PPOConfig(BasePPOConfig):
    """PPO hyperparameters (common/ppo_config.py) with this job's defaults; validated on construction."""

    json_name: ClassVar[str] = "ppo config"
    """What from_dict's errors call the object (not a field)."""

    learning_rate: float = 1e-3
    """Adam step size; > 0. With ~2,000-row minibatches, 1e-3 learned Connect Four 3-4x faster
    than 2.5e-4 (approx_kl stays under ~0.01); lower it for late generations to refine."""

    ent_coef: float = 0.01
    """Weight of the entropy bonus (subtracted from the total); >= 0."""

    update_epochs: int = 2
    """Passes over each rollout batch; >= 1. On one CPU core the update is most of an iteration,
    and 2 passes reached a given strength in less time than 4 (4 learn more per game: where games
    are the cost, as on a GPU, use 4)."""

    minibatches: int = 8
    """Minibatches per pass (the batch is shuffled and split evenly); >= 1. A 2,048-game rollout
    holds ~20,000 learner moves, so 8 gives ~2,500-row minibatches."""


@dataclass
class RolloutBatch(RolloutRows):
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


def ppo_update(net: nn.Module, optimizer: torch.optim.Optimizer, batch: RolloutBatch,
               config: PPOConfig, generator: torch.Generator | None = None) -> dict[str, float]:
    """ppo_core.ppo_epochs over the batch, scoring actions with their legal-move masks."""
    return ppo_epochs(net, optimizer, batch, config,
                      lambda rows: evaluate_actions(net, batch.obs[rows], batch.legal_mask[rows], batch.actions[rows]),
                      generator)
