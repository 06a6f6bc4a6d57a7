"""MountainCar-v0, the classic dynamics exactly, vectorised over N cars, with seeded start states
that shared/rewards/mountaincar.ts reproduces bit for bit and dynamics it reproduces to a stated tolerance.

The car (one dimension, a valley between two hills) is too weak to drive up the right hill
directly: it has to swing back and forth to build up energy.

State: (position, velocity), position in [-1.2, 0.6], velocity in [-0.07, 0.07], float64.
Actions: 0 = push left, 1 = no push, 2 = push right.
One step (the gym implementation's arithmetic, in its order):

    velocity = velocity + ((action - 1) * FORCE + cos(3 * position) * (-GRAVITY))
    velocity = clip(velocity, -MAX_SPEED, MAX_SPEED)
    position = clip(position + velocity, MIN_POSITION, MAX_POSITION)
    if position == MIN_POSITION and velocity < 0: velocity = 0     (the left wall is inelastic)

The episode ends when position >= GOAL_POSITION after a step (success: "terminated"), or after
TIME_LIMIT steps without reaching it ("truncated"). Gym's goal test also asks velocity >= 0; it
never matters, because the position can only cross 0.5 while moving right (every start is below
it), so the success rule here and in the grader is simply "position >= 0.5 within 200 steps".
The environment's own reward is -1 per step.

Start states: position = START_LOW + START_WIDTH * u with u uniform in [0, 1), velocity 0. The u's
come from StartStream(seed): shared/random.ts's seededRandom (sfc32 seeded through splitmix32),
ported here on Python integers, so a seed gives the same start positions in both languages. A
batch draws them in order: the initial reset takes draws 0..N-1 for cars 0..N-1; afterwards the
cars whose episodes ended in a step are reset in increasing index order, each taking the next
draw. The grader plays episode k of a seed from draw k of that seed's stream.

Numbers across code paths. The start positions are integer arithmetic and one multiply-add,
which IEEE 754 rounds the same way in every language and on every CPU: they agree bit for bit.
A step calls cos, which does not: numpy picks its kernel by the CPU at run time (AVX-512 and
AVX2 kernels and the scalar one differ in the last place), glibc's libm and V8's Math.cos are
other implementations again. Cos is within a few ulps (< 1e-15) of the true value on each; times
GRAVITY that is < 3e-18 in the velocity, so one step from the same state agrees to 1e-15 on every
path, and 200 steps (an episode) to 1e-12 (make_vectors.py measures it by replaying the
fixtures with cos pushed 1e-15 either way). A discrete outcome (the goal line, the left wall,
a greedy action) could still flip where a state lies within that distance of the boundary; the
fixtures are chosen far from every boundary, and where it matters for a recorded result, the
grader's TypeScript (shared/rewards/mountaincar.ts) decides: the trainer's own evaluation is a log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.5
FORCE = 0.001
GRAVITY = 0.0025
TIME_LIMIT = 200
START_LOW = -0.6
START_WIDTH = 0.2
NUM_ACTIONS = 3
OBSERVATION_SIZE = 2
ENV_REWARD_PER_STEP = -1.0

_MASK32 = 0xFFFFFFFF
_MAX_SAFE_INTEGER = 2 ** 53 - 1
# shared/random.ts throws away the generator's first outputs; the port must too.
_DISCARDED_OUTPUTS = 12


class SeedError(ValueError):
    """A seed that shared/random.ts would refuse: not an integer, or beyond 2^53 - 1 in size."""


def check_seed(seed: Any) -> int:
    """`seed` as an int, if JavaScript's seededRandom accepts it (a safe integer, negative too)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or abs(int(seed)) > _MAX_SAFE_INTEGER:
        raise SeedError(f"seed: must be an integer of magnitude at most 2^53 - 1 (got {seed!r})")
    return int(seed)


def _imul(a: int, b: int) -> int:
    """JavaScript's Math.imul on uint32 bit patterns: the low 32 bits of the product."""
    return (a * b) & _MASK32


class StartStream:
    """shared/random.ts's seededRandom(seed), on Python integers (every value kept as its uint32
    bit pattern, which is all JavaScript's int32 arithmetic depends on).

    JavaScript folds the seed in as (seed | 0) ^ imul(floor(seed / 2^32) | 0, 0x9e3779b1): its low
    32 bits, and its high bits times a constant. splitmix32 then fills sfc32's four words.
    """

    def __init__(self, seed: int):
        seed = check_seed(seed)
        self._mix = (seed & _MASK32) ^ _imul((seed >> 32) & _MASK32, 0x9E3779B1)
        self._a = self._splitmix32()
        self._b = self._splitmix32()
        self._c = self._splitmix32()
        self._counter = self._splitmix32()
        for _ in range(_DISCARDED_OUTPUTS):
            self.next_uint32()

    def _splitmix32(self) -> int:
        self._mix = (self._mix + 0x9E3779B9) & _MASK32
        z = self._mix
        z = _imul(z ^ (z >> 16), 0x85EBCA6B)
        z = _imul(z ^ (z >> 13), 0xC2B2AE35)
        return (z ^ (z >> 16)) & _MASK32

    def next_uint32(self) -> int:
        """sfc32's next output, an integer in [0, 2^32)."""
        a, b, c = self._a, self._b, self._c
        t = (a + b + self._counter) & _MASK32
        self._counter = (self._counter + 1) & _MASK32
        self._a = b ^ (b >> 9)
        self._b = (c + (c << 3)) & _MASK32
        c = ((c << 21) | (c >> 11)) & _MASK32
        self._c = (c + t) & _MASK32
        return t

    def random(self) -> float:
        """A uniform draw in [0, 1): the next output over 2^32 (exact in float64)."""
        return self.next_uint32() / 4294967296

    def start_position(self) -> float:
        """The next start position, in [START_LOW, START_LOW + START_WIDTH)."""
        return START_LOW + START_WIDTH * self.random()


def start_positions(seed: int, count: int) -> list[float]:
    """The first `count` start positions of a seed: episode k of that seed starts at item k."""
    stream = StartStream(seed)
    return [stream.start_position() for _ in range(count)]


def step(position: float, velocity: float, action: int,
         cos: Callable[[float], float] = math.cos) -> tuple[float, float]:
    """One step of one car: (position, velocity) after `action` (0, 1 or 2). The reference the
    vectorised batch is tested against. `cos` is there for make_vectors.py, which replays the
    fixtures with a cos a few ulps off to prove they do not hang on its last bits."""
    if action not in (0, 1, 2):
        raise ValueError(f"action: must be 0, 1 or 2 (got {action!r})")
    velocity = velocity + ((action - 1) * FORCE + cos(3 * position) * (-GRAVITY))
    velocity = min(max(velocity, -MAX_SPEED), MAX_SPEED)
    position = min(max(position + velocity, MIN_POSITION), MAX_POSITION)
    if position == MIN_POSITION and velocity < 0:
        velocity = 0.0
    return position, velocity


def reached_goal(position: float) -> bool:
    return position >= GOAL_POSITION


def step_arrays(position: np.ndarray, velocity: np.ndarray, action: np.ndarray,
                cos: Callable[[np.ndarray], np.ndarray] = np.cos) -> tuple[np.ndarray, np.ndarray]:
    """step() over arrays of cars (float64 positions and velocities, int actions); new arrays.
    numpy picks its cos kernel by the CPU at run time (AVX-512, AVX2 or scalar), so the result
    may differ from step()'s by an ulp: see "Numbers across code paths" in the module docstring."""
    velocity = velocity + ((action - 1) * FORCE + cos(3 * position) * (-GRAVITY))
    velocity = np.clip(velocity, -MAX_SPEED, MAX_SPEED)
    position = np.clip(position + velocity, MIN_POSITION, MAX_POSITION)
    velocity = np.where((position == MIN_POSITION) & (velocity < 0), 0.0, velocity)
    return position, velocity


@dataclass
class BatchStep:
    """What one step of a MountainCarBatch returns; every field has one row per car."""

    next_obs: np.ndarray
    """[N, 2] float64 (position, velocity) right after the step, BEFORE any reset: for a car
    whose episode just ended this is its final state."""
    terminated: np.ndarray
    """[N] bool: the car reached the goal in this step (success)."""
    truncated: np.ndarray
    """[N] bool: the step was the episode's TIME_LIMIT-th and the goal was not reached."""
    episode_steps: np.ndarray
    """[N] int64: steps of the episode so far, this one included (1 on an episode's first step)."""

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


class MountainCarBatch:
    """N cars stepped in lock-step; a car whose episode ends is reset at once (auto-reset).

    Start positions come from one StartStream(seed), in the order the module docstring gives.
    """

    def __init__(self, num_envs: int, seed: int):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs: must be a positive integer (got {num_envs!r})")
        self.num_envs = int(num_envs)
        self._stream = StartStream(seed)
        self.position = np.array([self._stream.start_position() for _ in range(self.num_envs)])
        self.velocity = np.zeros(self.num_envs)
        self.episode_steps = np.zeros(self.num_envs, dtype=np.int64)

    def observation(self) -> np.ndarray:
        """[N, 2] float64 (position, velocity): what the policy acts on next (a copy)."""
        return np.stack([self.position, self.velocity], axis=1)

    def step(self, actions: np.ndarray) -> BatchStep:
        """Advances every car by its action, then resets the cars whose episodes ended."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions: expected shape ({self.num_envs},) (got {actions.shape})")
        if not np.issubdtype(actions.dtype, np.integer) or actions.min() < 0 or actions.max() >= NUM_ACTIONS:
            raise ValueError(f"actions: must be integers 0, 1 or 2 (got {actions!r})")
        position, velocity = step_arrays(self.position, self.velocity, actions.astype(np.int64))
        self.episode_steps = self.episode_steps + 1
        terminated = position >= GOAL_POSITION
        truncated = ~terminated & (self.episode_steps >= TIME_LIMIT)
        result = BatchStep(next_obs=np.stack([position, velocity], axis=1), terminated=terminated,
                           truncated=truncated, episode_steps=self.episode_steps.copy())
        done = terminated | truncated
        for i in np.flatnonzero(done):  # increasing index order: the draw order is part of the contract
            position[i] = self._stream.start_position()
            velocity[i] = 0.0
        self.position, self.velocity = position, velocity
        self.episode_steps = np.where(done, 0, self.episode_steps)
        return result


def run_episode(choose_action, start_position: float) -> dict[str, Any]:
    """Plays one episode from (start_position, 0) with the scalar step(); choose_action(position,
    velocity) -> 0, 1 or 2. Returns {success, steps} (steps = TIME_LIMIT when it failed)."""
    position, velocity = start_position, 0.0
    for steps in range(1, TIME_LIMIT + 1):
        position, velocity = step(position, velocity, int(choose_action(position, velocity)))
        if reached_goal(position):
            return {"success": True, "steps": steps}
    return {"success": False, "steps": TIME_LIMIT}
