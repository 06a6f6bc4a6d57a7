"""Loading and calling a candidate reward module: the interface a reward function is written to.

A reward module is one Python source file (at most MAX_SOURCE_BYTES) that defines `reward`, or
`reward_batch`, or both (then `reward_batch` is used). It may import math and numpy.

    def reward(obs, action, next_obs, done, info) -> float

        obs       (position, velocity) before the step: a tuple of two floats
        action    the action taken: int 0 = push left, 1 = no push, 2 = push right
        next_obs  (position, velocity) right after the step: a tuple of two floats. When the step
                  ended the episode this is its final state (never the next episode's start).
        done      bool: this step ended the episode (the goal was reached, or it was step 200)
        info      dict: {"step": int, this step's number in the episode, 1 to 200,
                         "goal_reached": bool, next_obs[0] >= 0.5 (success; the episode ends),
                         "time_limit": bool, step 200 ended the episode without the goal}
        returns   an int or float (not a bool) of magnitude at most MAX_ABS_REWARD (1e6), the
                  reward PPO maximises for this step

    def reward_batch(obs, action, next_obs, done, info) -> array of N floats

        The same for N cars at once, as numpy arrays: obs and next_obs [N, 2] float64, action [N]
        int64, done [N] bool, info {"step": [N] int64, "goal_reached": [N] bool,
        "time_limit": [N] bool}. Returns anything np.asarray(..., float64) makes shape (N,), every
        value within MAX_ABS_REWARD. The arrays are copies: changing them changes nothing else.

Ranges (MountainCar-v0): position in [-1.2, 0.6], velocity in [-0.07, 0.07]; the goal is
position >= 0.5; episodes start at rest at a position in [-0.6, -0.4] and last at most 200 steps.
The module is called once per step of every car. In the reward search it runs in a process of
its own, apart from the trainer (reward_channel.py: a second sandbox locally, another user on
AWS), so it can touch neither the trainer nor the policy; its reward is only what PPO trains on:
the policy is graded elsewhere, on the environment's own success rule.

An exception at load time is a RewardLoadError, one in a call a RewardCallError, a value that is
not a number within MAX_ABS_REWARD a RewardValueError; each fails the training job with a
message that names the function and the step.
"""
from __future__ import annotations

import math
import traceback
import types
from typing import Any, Callable

import numpy as np

MAX_SOURCE_BYTES = 64 * 1024
MAX_ABS_REWARD = 1e6
"""Larger rewards are refused: sums of them over episodes and iterations must stay finite (the
curves are JSON, which has no Infinity); PPO's reward scaling makes the scale irrelevant anyway."""


class RewardModuleError(ValueError):
    """A candidate reward module that cannot be used; the message says why."""


class RewardLoadError(RewardModuleError):
    """The source is too large, does not compile, raises when run, or defines no reward."""


class RewardCallError(RewardModuleError):
    """The reward function raised an exception during training."""


class RewardValueError(RewardModuleError):
    """The reward function returned something other than a number within MAX_ABS_REWARD (or the wrong shape)."""


def _where(error: BaseException, filename: str) -> str:
    """The innermost line of the candidate's own file in a traceback, as 'reward.py:12' ('' if none)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    return f" at {filename}:{frames[-1].lineno}" if frames else ""


class RewardFunction:
    """A loaded candidate: call it with one step of N cars, get N float64 rewards."""

    def __init__(self, module: types.ModuleType, filename: str):
        self.filename = filename
        batch = getattr(module, "reward_batch", None)
        scalar = getattr(module, "reward", None)
        if batch is None and scalar is None:
            raise RewardLoadError(f"{filename}: defines neither reward(obs, action, next_obs, done, info) "
                                  f"nor reward_batch(...)")
        for name, value in (("reward_batch", batch), ("reward", scalar)):
            if value is not None and not callable(value):
                raise RewardLoadError(f"{filename}: {name} must be a function (got {type(value).__name__})")
        self.vectorised = batch is not None
        self._function: Callable[..., Any] = batch if batch is not None else scalar
        self.name = "reward_batch" if self.vectorised else "reward"

    def __call__(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, done: np.ndarray,
                 step: np.ndarray, goal_reached: np.ndarray, time_limit: np.ndarray) -> np.ndarray:
        if self.vectorised:
            return self._call_batch(obs, action, next_obs, done, step, goal_reached, time_limit)
        rewards = np.empty(obs.shape[0])
        # Plain Python values, so a candidate's `if done:` or `max(...)` behaves as it reads.
        obs_rows, next_rows = obs.tolist(), next_obs.tolist()
        actions, dones = action.tolist(), done.tolist()
        steps, goals, limits = step.tolist(), goal_reached.tolist(), time_limit.tolist()
        for i in range(obs.shape[0]):
            info = {"step": steps[i], "goal_reached": goals[i], "time_limit": limits[i]}
            try:
                value = self._function(tuple(obs_rows[i]), actions[i], tuple(next_rows[i]), dones[i], info)
            except Exception as error:  # noqa: BLE001 - any failure of the candidate is its verdict
                raise RewardCallError(f"{self.name}() raised {type(error).__name__}: {error}"
                                      f"{_where(error, self.filename)} (car {i}, episode step {steps[i]})") from error
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value) or abs(value) > MAX_ABS_REWARD:
                raise RewardValueError(f"{self.name}() returned {value!r:.80} at episode step {steps[i]}: "
                                       f"must be an int or float of magnitude at most {MAX_ABS_REWARD:g}")
            rewards[i] = value
        return rewards

    def _call_batch(self, obs, action, next_obs, done, step, goal_reached, time_limit) -> np.ndarray:
        info = {"step": step.copy(), "goal_reached": goal_reached.copy(), "time_limit": time_limit.copy()}
        try:
            value = self._function(obs.copy(), action.copy(), next_obs.copy(), done.copy(), info)
        except Exception as error:  # noqa: BLE001 - any failure of the candidate is its verdict
            raise RewardCallError(f"reward_batch() raised {type(error).__name__}: {error}"
                                  f"{_where(error, self.filename)}") from error
        try:
            rewards = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise RewardValueError(f"reward_batch() returned {type(value).__name__}, not an array of numbers") from error
        if rewards.shape != (obs.shape[0],):
            raise RewardValueError(f"reward_batch() returned shape {rewards.shape}: must be ({obs.shape[0]},)")
        if not np.all(np.isfinite(rewards)):
            raise RewardValueError("reward_batch() returned a value that is not finite (nan or inf)")
        if np.any(np.abs(rewards) > MAX_ABS_REWARD):
            raise RewardValueError(f"reward_batch() returned a value of magnitude above {MAX_ABS_REWARD:g}")
        return rewards


def load_reward_source(source: str, filename: str = "reward.py") -> RewardFunction:
    """Compiles and runs a candidate's source as a fresh module; raises RewardLoadError."""
    if not isinstance(source, str):
        raise RewardLoadError(f"{filename}: source must be text (got {type(source).__name__})")
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise RewardLoadError(f"{filename}: {size} bytes, more than the limit of {MAX_SOURCE_BYTES}")
    module = types.ModuleType("candidate_reward")
    module.__file__ = filename
    try:
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)  # noqa: S102 - running the candidate is the point; the sandbox contains it
    except Exception as error:  # noqa: BLE001 - any failure to load is the candidate's verdict
        raise RewardLoadError(f"{filename}: loading raised {type(error).__name__}: {error}"
                              f"{_where(error, filename)}") from error
    return RewardFunction(module, filename)


def load_reward_file(path: str) -> RewardFunction:
    """load_reward_source on a file's text (its name kept for tracebacks)."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise RewardLoadError(f"{path}: more than the limit of {MAX_SOURCE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RewardLoadError(f"{path}: not UTF-8 text") from error
    return load_reward_source(text, path)
