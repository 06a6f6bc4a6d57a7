"""PPO's maths: generalized advantage estimation, the clipped loss, and one update over a batch.

No environment and no I/O here: the trainer collects rollouts, calls gae() for the advantages,
then ppo_update() for the gradient steps. Tested with hand-worked numbers (test_ppo.py).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from policy import evaluate_actions
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


def gae(rewards, values, dones, last_value, gamma: float, lam: float):
    """Generalized advantage estimation over T steps of N environments.

    rewards[t, n]  reward for the action taken at step t in environment n;
    values[t, n]   the value estimate of the observation at step t;
    dones[t, n]    true when step t ended environment n's episode: the next observation belongs
                   to a new episode, so nothing after step t is bootstrapped into it;
    last_value[n]  the value of the observation after step T-1 (unused where dones[T-1, n]).

    delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}

    Returns (advantages, returns), both [T, N], with returns = advantages + values (the value
    target). numpy in, numpy out; tensors in, tensors out (on the values' device).
    """
    as_numpy = not torch.is_tensor(values)
    values_t = torch.as_tensor(values)
    if not values_t.is_floating_point():
        values_t = values_t.float()
    like = {"dtype": values_t.dtype, "device": values_t.device}
    rewards_t = torch.as_tensor(rewards).to(**like)
    not_done = 1.0 - torch.as_tensor(dones).to(**like)
    last_t = torch.as_tensor(last_value).to(**like)
    if values_t.dim() != 2:
        raise ValueError(f"values: expected shape [T, N] (got {tuple(values_t.shape)})")
    steps, envs = values_t.shape
    for name, tensor in (("rewards", rewards_t), ("dones", not_done)):
        if tensor.shape != values_t.shape:
            raise ValueError(f"{name}: shape {tuple(tensor.shape)} does not match values {tuple(values_t.shape)}")
    if last_t.shape != (envs,):
        raise ValueError(f"last_value: expected shape ({envs},) (got {tuple(last_t.shape)})")

    advantages = torch.zeros_like(values_t)
    next_value, next_advantage = last_t, torch.zeros_like(last_t)
    for t in reversed(range(steps)):  # vectorised over the N environments
        delta = rewards_t[t] + gamma * next_value * not_done[t] - values_t[t]
        next_advantage = delta + gamma * lam * not_done[t] * next_advantage
        advantages[t] = next_advantage
        next_value = values_t[t]
    returns = advantages + values_t
    if as_numpy:
        return advantages.cpu().numpy(), returns.cpu().numpy()
    return advantages, returns


class PPOLoss(NamedTuple):
    """The loss to minimise and its parts (policy, value and entropy are means over the batch)."""

    total: torch.Tensor
    """policy + vf_coef * value - ent_coef * entropy."""
    policy: torch.Tensor
    """-mean(min(ratio * A, clip(ratio, 1-eps, 1+eps) * A))."""
    value: torch.Tensor
    """0.5 * mean((V - return)^2)."""
    entropy: torch.Tensor
    """mean entropy of the policy (a bonus: it lowers the total)."""
    clip_fraction: torch.Tensor
    """Fraction of samples whose ratio is outside [1-eps, 1+eps] (diagnostic, no gradient)."""
    approx_kl: torch.Tensor
    """mean((ratio - 1) - log ratio), an estimate of KL(old || new) (diagnostic, no gradient)."""


def ppo_loss(new_logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
             new_values: torch.Tensor, returns: torch.Tensor, entropy: torch.Tensor,
             clip: float, vf_coef: float, ent_coef: float) -> PPOLoss:
    """PPO's clipped surrogate loss. All inputs are [B]; old_logp, advantages and returns are
    constants of the rollout (no gradient flows into them).

    The min() takes the clipped term exactly when the ratio has left [1-eps, 1+eps] in the
    direction the advantage favours (above 1+eps for A > 0, below 1-eps for A < 0); there the
    policy gradient is zero, so one batch cannot push the policy far from the one that
    collected it. Leaving the range the other way is not clipped, so a step that made a good
    action less likely (or a bad one more likely) is always corrected.
    """
    log_ratio = new_logp - old_logp.detach()
    ratio = log_ratio.exp()
    advantages = advantages.detach()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    policy_loss = -torch.min(unclipped, clipped).mean()
    value_loss = 0.5 * (new_values - returns.detach()).pow(2).mean()
    entropy_mean = entropy.mean()
    total = policy_loss + vf_coef * value_loss - ent_coef * entropy_mean
    with torch.no_grad():
        clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
    return PPOLoss(total, policy_loss, value_loss, entropy_mean, clip_fraction, approx_kl)


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Mean 0 and standard deviation 1; a batch of one (or all equal) only loses its mean."""
    centered = advantages - advantages.mean()
    if advantages.numel() < 2:
        return centered
    return centered / (advantages.std() + eps)


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
    """config.update_epochs passes over the batch in config.minibatches shuffled minibatches,
    one optimizer step each. Returns the mean of each loss part over all minibatches."""
    if batch.size < config.minibatches:
        raise ValueError(f"batch: {batch.size} rows cannot fill minibatches={config.minibatches}")
    net.train()
    sums = dict.fromkeys(PPOLoss._fields, 0.0)
    steps = 0
    for _ in range(config.update_epochs):
        order = torch.randperm(batch.size, generator=generator).to(batch.obs.device)
        for rows in order.chunk(config.minibatches):
            new_logp, entropy, new_values = evaluate_actions(
                net, batch.obs[rows], batch.legal_mask[rows], batch.actions[rows])
            advantages = batch.advantages[rows]
            if config.normalize_advantages:
                advantages = normalize_advantages(advantages)
            loss = ppo_loss(new_logp, batch.log_probs[rows], advantages, new_values,
                            batch.returns[rows], entropy, config.clip, config.vf_coef, config.ent_coef)
            optimizer.zero_grad(set_to_none=True)
            loss.total.backward()
            nn.utils.clip_grad_norm_(net.parameters(), config.max_grad_norm)
            optimizer.step()
            for name, value in zip(PPOLoss._fields, loss):
                sums[name] += float(value.detach())
            steps += 1
    return {name: total / steps for name, total in sums.items()}
