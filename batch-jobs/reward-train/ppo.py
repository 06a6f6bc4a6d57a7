"""PPO's maths for the MountainCar trainer: its config, generalized advantage estimation, the
clipped loss, a running reward scale, and one update over a batch.

No environment and no I/O here: trainer.py collects rollouts, calls gae() for the advantages,
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


class PPOConfigError(ValueError):
    """A PPO hyperparameter outside its range; names the field and the value."""


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise PPOConfigError(f"{name}: must be a finite number (got {value!r})")
    return float(value)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PPOConfigError(f"{name}: must be a positive integer (got {value!r})")
    return int(value)


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; validated on construction. The defaults are the ones that solved
    MountainCar fastest with the shaped reference reward on one CPU thread (see trainer.py)."""

    learning_rate: float = 2.5e-3
    """Adam step size; > 0. The networks are small (2-64-64), so a large step is stable: 2.5e-3
    and 4e-3 solved MountainCar in about the same number of steps; 4e-3 varied more by seed."""

    gamma: float = 0.99
    """Discount per step, in (0, 1]."""

    gae_lambda: float = 0.95
    """GAE's lambda, in [0, 1]: 0 is the one-step TD error, 1 the full discounted return."""

    clip: float = 0.2
    """Clip range epsilon of the probability ratio, in (0, 1)."""

    vf_coef: float = 0.5
    """Weight of the value loss in the total; >= 0."""

    ent_coef: float = 0.0
    """Weight of the entropy bonus (subtracted from the total); >= 0."""

    max_grad_norm: float = 0.5
    """Gradients are rescaled to at most this global L2 norm before each step; > 0."""

    rollout_steps: int = 32
    """Steps each car takes per iteration: an iteration's batch is num_envs x rollout_steps."""

    update_epochs: int = 4
    """Passes over each rollout batch; >= 1."""

    minibatches: int = 4
    """Minibatches per pass (the batch is shuffled and split evenly); >= 1. What learns is the
    number of gradient steps per sample: 2 minibatches (or 1 with 8 epochs) left half the seeds
    unsolved at a budget where 4 solved nearly all; a minibatch step costs ~1.5 ms on one core
    whatever its size up to a few hundred rows, so more steps cost time almost linearly."""

    normalize_advantages: bool = True
    """Scale each minibatch's advantages to mean 0, standard deviation 1."""

    normalize_rewards: bool = True
    """Divide the training rewards by a running standard deviation of the discounted return
    (RewardScaler), so a candidate reward of any scale gives value targets of order 1. It matters
    most for sparse rewards: with the environment's own -1 per step and 50,000 steps of 8 cars,
    7 of 10 training seeds reached >= 0.9 greedy success with it and 4 without (mean 0.78 against
    0.41): the critic fits returns of a few units at once, not of -100."""

    def __post_init__(self) -> None:
        if _real("learning_rate", self.learning_rate) <= 0:
            raise PPOConfigError(f"learning_rate: must be > 0 (got {self.learning_rate!r})")
        if not 0 < _real("gamma", self.gamma) <= 1:
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
        for name in ("rollout_steps", "update_epochs", "minibatches"):
            _positive_int(name, getattr(self, name))
        for name in ("normalize_advantages", "normalize_rewards"):
            if not isinstance(getattr(self, name), bool):
                raise PPOConfigError(f"{name}: must be true or false (got {getattr(self, name)!r})")

    @classmethod
    def from_dict(cls, data: Any) -> "PPOConfig":
        """From parsed JSON; an unknown field is an error (a typo must not silently use a default)."""
        if not isinstance(data, dict):
            raise PPOConfigError(f"ppo: expected an object (got {type(data).__name__})")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise PPOConfigError(f"ppo: unknown field(s) {unknown}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def gae(rewards, values, dones, last_value, gamma: float, lam: float):
    """Generalized advantage estimation over T steps of N environments.

    rewards[t, n]  reward for the action taken at step t in environment n;
    values[t, n]   the value estimate of the observation at step t;
    dones[t, n]    true when step t ended environment n's episode: the next observation belongs
                   to a new episode, so nothing after step t is bootstrapped into it (a time-limit
                   end is bootstrapped by the caller, which adds gamma * V(final state) to its
                   reward);
    last_value[n]  the value of the observation after step T-1 (unused where dones[T-1, n]).

    delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}

    Returns (advantages, returns), both [T, N] float64 numpy arrays, returns = advantages + values.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    not_done = 1.0 - np.asarray(dones, dtype=np.float64)
    last_value = np.asarray(last_value, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"values: expected shape [T, N] (got {values.shape})")
    for name, array in (("rewards", rewards), ("dones", not_done)):
        if array.shape != values.shape:
            raise ValueError(f"{name}: shape {array.shape} does not match values {values.shape}")
    if last_value.shape != (values.shape[1],):
        raise ValueError(f"last_value: expected shape ({values.shape[1]},) (got {last_value.shape})")
    advantages = np.zeros_like(values)
    next_value, next_advantage = last_value, np.zeros_like(last_value)
    for t in reversed(range(values.shape[0])):  # vectorised over the N environments
        delta = rewards[t] + gamma * next_value * not_done[t] - values[t]
        next_advantage = delta + gamma * lam * not_done[t] * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages, advantages + values


class RewardScaler:
    """Scales rewards by a running standard deviation of each environment's discounted return
    G_t = gamma * G_{t-1} + r_t (G restarts at 0 after an episode ends), as gym's NormalizeReward
    does, but updated once per rollout rather than once per step: a rollout's rewards are divided
    by the deviation of all returns seen so far, this rollout's included. Per step, the first
    update would see N equal returns (every car's first reward, -1 for the environment's reward)
    and a deviation of 0, and scale those rewards up ten-thousandfold. The mean is not
    subtracted, so the sign of every reward (and so which behaviour the candidate favours) is kept.
    """

    def __init__(self, num_envs: int, gamma: float, eps: float = 1e-8):
        self.gamma = gamma
        self.eps = eps
        self.returns = np.zeros(num_envs)
        self.count = 0
        self.mean = 0.0
        self.var = 0.0

    def _update(self, batch: np.ndarray) -> None:
        """Chan et al.'s parallel update of the running mean and variance with a batch."""
        batch_mean, batch_var, batch_count = float(batch.mean()), float(batch.var()), batch.size
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * batch_count + delta ** 2 * self.count * batch_count / total
        self.mean += delta * batch_count / total
        self.var = m2 / total
        self.count = total

    def scale(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """A rollout's rewards [T, N] (dones [T, N]: step t ended the episode), scaled; updates
        the running returns and statistics first."""
        rewards = np.asarray(rewards, dtype=np.float64)
        returns = np.empty_like(rewards)
        running = self.returns
        for t in range(rewards.shape[0]):
            running = running * self.gamma + rewards[t]
            returns[t] = running
            running = np.where(dones[t], 0.0, running)
        self.returns = running
        self._update(returns)
        return rewards / self.std

    @property
    def std(self) -> float:
        return math.sqrt(self.var + self.eps)


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
    direction the advantage favours; there the policy gradient is zero, so one batch cannot push
    the policy far from the one that collected it.
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
    """Flattened rollout data, one row per decision: B rows in every field."""

    obs: torch.Tensor
    """[B, 2] float32 normalised observations."""
    actions: torch.Tensor
    """[B] int64 chosen actions."""
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


def evaluate_actions(net: nn.Module, obs: torch.Tensor, actions: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probability of each action, entropy, value), each [B]: straight from log_softmax
    (what torch.distributions.Categorical computes, without its per-call validation overhead)."""
    logits, value = net(obs)
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy, value


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
        order = torch.randperm(batch.size, generator=generator)
        for rows in order.chunk(config.minibatches):
            new_logp, entropy, new_values = evaluate_actions(net, batch.obs[rows], batch.actions[rows])
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
