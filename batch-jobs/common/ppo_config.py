"""PPO's hyperparameters shared by the training jobs: the base config, validated on construction,
with from_dict/to_dict for the JSON a job's spec carries and its result.json reports.

Each job's ppo.py keeps a small frozen subclass named PPOConfig: it re-declares only the fields
whose default it measured to be better for its problem (with the measurement in the field's
docstring), adds its own fields, and validates them after calling super().__post_init__().
The defaults here are CleanRL's ppo.py where a job overrides them. Tested in test_ppo_config.py.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

C = TypeVar("C", bound="PPOConfig")


class PPOConfigError(ValueError):
    """A PPO hyperparameter outside its range; names the field and the value."""


def real(name: str, value: Any) -> float:
    """`value` as a float; booleans, strings, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise PPOConfigError(f"{name}: must be a finite number (got {value!r})")
    return float(value)


def positive_int(name: str, value: Any) -> int:
    """`value` as an int >= 1; booleans are refused although Python counts them as ints."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PPOConfigError(f"{name}: must be a positive integer (got {value!r})")
    return int(value)


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PPOConfigError(f"{name}: must be true or false (got {value!r})")
    return value


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; validated on construction."""

    json_name: ClassVar[str] = "ppo"
    """What from_dict's errors call the object (not a field)."""

    learning_rate: float = 2.5e-4
    """Adam step size; > 0. CleanRL's default; each job sets its own."""

    gamma: float = 0.99
    """Discount per step, in (0, 1]; below 1 a quicker win (or a quicker goal) is worth more."""

    gae_lambda: float = 0.95
    """GAE's lambda, in [0, 1]: 0 is the one-step TD error, 1 the full discounted return."""

    clip: float = 0.2
    """Clip range epsilon of the probability ratio, in (0, 1): the ratio is held in [1-eps, 1+eps]."""

    vf_coef: float = 0.5
    """Weight of the value loss in the total; >= 0."""

    ent_coef: float = 0.01
    """Weight of the entropy bonus (subtracted from the total); >= 0. CleanRL's default; each job
    sets its own."""

    max_grad_norm: float = 0.5
    """Gradients are rescaled to at most this global L2 norm before each step; > 0."""

    update_epochs: int = 4
    """Passes over each rollout batch; >= 1. CleanRL's default; each job sets its own."""

    minibatches: int = 4
    """Minibatches per pass (the batch is shuffled and split evenly); >= 1. CleanRL's default;
    each job sets its own."""

    normalize_advantages: bool = True
    """Scale each minibatch's advantages to mean 0, standard deviation 1."""

    def __post_init__(self) -> None:
        if real("learning_rate", self.learning_rate) <= 0:
            raise PPOConfigError(f"learning_rate: must be > 0 (got {self.learning_rate!r})")
        if not 0 < real("gamma", self.gamma) <= 1:
            raise PPOConfigError(f"gamma: must be in (0, 1] (got {self.gamma!r})")
        if not 0 <= real("gae_lambda", self.gae_lambda) <= 1:
            raise PPOConfigError(f"gae_lambda: must be in [0, 1] (got {self.gae_lambda!r})")
        if not 0 < real("clip", self.clip) < 1:
            raise PPOConfigError(f"clip: must be in (0, 1) (got {self.clip!r})")
        for name in ("vf_coef", "ent_coef"):
            if real(name, getattr(self, name)) < 0:
                raise PPOConfigError(f"{name}: must be >= 0 (got {getattr(self, name)!r})")
        if real("max_grad_norm", self.max_grad_norm) <= 0:
            raise PPOConfigError(f"max_grad_norm: must be > 0 (got {self.max_grad_norm!r})")
        positive_int("update_epochs", self.update_epochs)
        positive_int("minibatches", self.minibatches)
        boolean("normalize_advantages", self.normalize_advantages)

    @classmethod
    def from_dict(cls: type[C], data: Any) -> C:
        """From parsed JSON; an unknown field is an error (a typo must not silently use a default)."""
        if not isinstance(data, dict):
            raise PPOConfigError(f"{cls.json_name}: expected an object (got {type(data).__name__})")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise PPOConfigError(f"{cls.json_name}: unknown field(s) {unknown}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Every field, in declaration order (the base's, then the job's own)."""
        return dataclasses.asdict(self)
