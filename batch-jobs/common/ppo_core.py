"""PPO's maths shared by the training jobs: generalized advantage estimation, the clipped loss,
advantage normalisation, and the update loop over a batch. The config is ppo_config.py's (each
job subclasses it for its own defaults); each job keeps its rollout batch and how its network
scores actions (the self-play net masks illegal moves).

No environment and no I/O here. Tested with hand-worked numbers (test_ppo_core.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import torch
from torch import nn


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


def ppo_epochs(net: nn.Module, optimizer: torch.optim.Optimizer, batch: Any, config: Any,
               evaluate: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
               generator: torch.Generator | None = None) -> dict[str, float]:
    """config.update_epochs passes over the batch in config.minibatches shuffled minibatches,
    one optimizer step each. Returns the mean of each loss part over all minibatches.

    batch has .size, .obs, .log_probs, .advantages and .returns (B rows each); evaluate(rows)
    gives (log-probability of the chosen actions, entropy, value) for those rows under the
    current net. config has update_epochs, minibatches, normalize_advantages, clip, vf_coef,
    ent_coef and max_grad_norm.
    """
    if batch.size < config.minibatches:
        raise ValueError(f"batch: {batch.size} rows cannot fill minibatches={config.minibatches}")
    net.train()
    sums = dict.fromkeys(PPOLoss._fields, 0.0)
    steps = 0
    for _ in range(config.update_epochs):
        order = torch.randperm(batch.size, generator=generator).to(batch.obs.device)
        for rows in order.chunk(config.minibatches):
            new_logp, entropy, new_values = evaluate(rows)
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


@dataclasses.dataclass
class RolloutRows:
    """Base of a job's rollout batch (a dataclass of tensors, `obs` first): every field has one
    row per decision, checked on construction; `size` is that number of rows."""

    def __post_init__(self) -> None:
        size = self.obs.shape[0]  # type: ignore[attr-defined]
        for field in dataclasses.fields(self):
            rows = getattr(self, field.name).shape[0]
            if rows != size:
                raise ValueError(f"{field.name}: {rows} rows, but obs has {size}")

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])  # type: ignore[attr-defined]
