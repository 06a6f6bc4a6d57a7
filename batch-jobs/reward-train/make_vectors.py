"""Writes the MountainCar fixtures that both implementations are tested against, so they cannot
drift: test/fixtures/mountaincar/vectors.json and test/fixtures/mountaincar/policy-velocity.json.

    /usr/bin/python3 batch-jobs/reward-train/make_vectors.py           # write (needs torch, numpy)
    /usr/bin/python3 batch-jobs/reward-train/make_vectors.py --check   # exit 1 if the files differ

vectors.json holds:
- starts: the first start positions of several seeds (negative and beyond 2^32 too);
- steps: single steps from given states, including ones no episode reaches (the speed limit:
  a car never swings faster than ~0.06) and the clips at both ends;
- trajectories: a seed's start state, a fixed action sequence, and after every step the state,
  the done flag and whether the goal was reached; chosen so that together they hit the left
  wall (velocity zeroed), reach the goal and run into the time limit;
- policy: for policy-velocity.json, the float64 logits and greedy actions at sample observations
  and the outcome of greedy episodes on a few seeds (what gradePolicy must report).

policy-velocity.json is a small valid policy in the data-only format: one path through the
network pushes in the direction of the velocity (the textbook way to pump energy, which solves
MountainCar), and every other weight is a small seeded value rounded to two decimals, so that
the whole forward pass is exercised while the file stays small.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from mountaincar import (MAX_POSITION, MAX_SPEED, MIN_POSITION, TIME_LIMIT, StartStream, reached_goal,
                         start_positions, step)
from policy import (ACTIVATION, LAYER_SHAPES, OBS_OFFSET, OBS_SCALE, POLICY_FORMAT, greedy_actions,
                    normalize_observations, parse_policy)
from trainer import evaluate_policy

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "test", "fixtures", "mountaincar")
VECTORS_PATH = os.path.join(FIXTURES, "vectors.json")
POLICY_PATH = os.path.join(FIXTURES, "policy-velocity.json")

START_SEEDS = [0, 1, 2, -1, 42, 123456789, 2 ** 32, 2 ** 40 + 5, -(2 ** 53 - 1), 2 ** 53 - 1]
STARTS_PER_SEED = 6
GRADE_SEEDS = [7, 1001, -5]
GRADE_EPISODES_PER_SEED = 20


def _trajectory(name: str, description: str, seed: int, choose) -> dict:
    """Plays one episode from the seed's first start position; choose(t, position, velocity)."""
    position, velocity = StartStream(seed).start_position(), 0.0
    start = position
    actions, states, dones, goals = [], [], [], []
    for t in range(1, TIME_LIMIT + 1):
        action = int(choose(t, position, velocity))
        position, velocity = step(position, velocity, action)
        goal = reached_goal(position)
        actions.append(action)
        states.append([position, velocity])
        goals.append(goal)
        dones.append(goal or t == TIME_LIMIT)
        if dones[-1]:
            break
    return {"name": name, "description": description, "seed": seed, "start": [start, 0.0],
            "actions": actions, "states": states, "done": dones, "goalReached": goals}


def trajectories() -> list[dict]:
    rng = np.random.default_rng(20240611)
    random_actions = [int(a) for a in rng.integers(0, 3, TIME_LIMIT)]
    cases = [
        _trajectory("pump-energy", "push in the direction of motion (right at rest): reaches the goal",
                    0, lambda t, p, v: 2 if v >= 0 else 0),
        _trajectory("pump-energy-left-first", "as pump-energy but left at rest: a swing to the "
                    "left first, then the goal", 5, lambda t, p, v: 2 if v > 0 else 0),
        _trajectory("always-right", "the engine alone cannot climb the hill: the time limit ends it",
                    1, lambda t, p, v: 2),
        _trajectory("always-left", "pushes into the left wall again and again", 2, lambda t, p, v: 0),
        _trajectory("no-push", "gravity alone: swings about the valley floor until the time limit",
                    42, lambda t, p, v: 1),
        _trajectory("random", "a fixed random action sequence", -1, lambda t, p, v: random_actions[t - 1]),
        _trajectory("pump-then-coast", "builds speed, then stops pushing on every third step",
                    123456789, lambda t, p, v: 1 if t % 3 == 0 else (2 if v >= 0 else 0)),
    ]
    states = [s for case in cases for s in case["states"]]
    # The vectors must exercise every rule of the dynamics, or a bug in one could hide.
    checks = {
        "the left wall zeroes the velocity": any(p == MIN_POSITION and v == 0.0 for p, v in states),
        "some case reaches the goal": any(case["goalReached"][-1] for case in cases),
        "some case runs into the time limit": any(len(c["states"]) == TIME_LIMIT and not c["goalReached"][-1]
                                                  for c in cases),
    }
    missing = [name for name, ok in checks.items() if not ok]
    if missing:
        raise SystemExit(f"make_vectors: the trajectories miss: {missing}")
    return cases


STEP_CASES = [
    # (position, velocity, action): plain steps, each action, both signs of velocity
    (-0.5, 0.0, 0), (-0.5, 0.0, 1), (-0.5, 0.0, 2), (0.1, 0.03, 2), (0.1, -0.03, 0), (-0.9, 0.02, 1),
    (-0.52359877559829887, 0.0, 1),
    # the speed limit, both ways
    (-0.5, 0.0695, 2), (-0.5, -0.0695, 0), (-0.3, 0.07, 1), (-0.7, -0.07, 1),
    # the right end: the position is clipped at 0.6 (the velocity is kept)
    (0.58, 0.05, 2), (0.6, 0.0, 2),
    # the left wall: the position is clipped at -1.2 and a leftward velocity zeroed
    (-1.19, -0.03, 0), (-1.2, 0.0, 0), (-1.2, 0.0, 2), (-1.18, -0.02, 1),
    # the goal line
    (0.49, 0.0105, 2), (0.4999, 0.0001, 1),
]


def step_vectors() -> list[dict]:
    cases = []
    for position, velocity, action in STEP_CASES:
        next_position, next_velocity = step(position, velocity, action)
        cases.append({"state": [position, velocity], "action": action, "next": [next_position, next_velocity],
                      "goalReached": reached_goal(next_position)})
    checks = {
        "the speed limit is hit": any(abs(c["next"][1]) == MAX_SPEED for c in cases),
        "the right end clips": any(c["next"][0] == MAX_POSITION for c in cases),
        "the left wall zeroes": any(c["next"][0] == MIN_POSITION and c["state"][1] < 0 for c in cases),
        "the goal is reached": any(c["goalReached"] for c in cases),
    }
    missing = [name for name, ok in checks.items() if not ok]
    if missing:
        raise SystemExit(f"make_vectors: the steps miss: {missing}")
    return cases


def velocity_policy() -> dict:
    """policy-velocity.json's document (see the module docstring)."""
    rng = np.random.default_rng(7)
    layers = []
    for rows, cols in LAYER_SHAPES:
        weight = np.round(rng.uniform(-0.05, 0.05, (rows, cols)), 2)
        bias = np.round(rng.uniform(-0.05, 0.05, rows), 2)
        layers.append([weight, bias])
    layers[0][0][0] = [0.0, 5.0]        # h1[0] = tanh(5 * velocity / 0.07 + ...): the sign of the velocity
    layers[1][0][0, 0] = 3.0            # h2[0] = tanh(3 * h1[0] + ...)
    layers[2][0][0, 0] = -4.0           # logit of "left" falls with h2[0] ...
    layers[2][0][2, 0] = 4.0            # ... and that of "right" rises with it
    def clean(array: np.ndarray) -> list:
        """Nested lists of floats, -0.0 written as 0.0."""
        return [clean(row) for row in array] if array.ndim > 1 else [float(v) + 0.0 for v in array]

    return {"format": POLICY_FORMAT, "obs_offset": list(OBS_OFFSET), "obs_scale": list(OBS_SCALE),
            "activation": ACTIVATION,
            "layers": [{"weight": clean(w), "bias": clean(b)} for w, b in layers]}


def logits64(document: dict, obs: np.ndarray) -> np.ndarray:
    h = normalize_observations(obs)
    parsed = parse_policy(document)
    for index, (weight, bias) in enumerate(parsed):
        h = h @ weight.T + bias
        if index < len(parsed) - 1:
            h = np.tanh(h)
    return h


def policy_vectors(document: dict) -> dict:
    observations = [[-0.5, 0.0], [-0.5, 0.01], [-0.5, -0.01], [-1.2, 0.0], [0.6, 0.07], [0.3, -0.07],
                    [-0.9, 0.0005], [0.45, -0.0003], [-0.3, 0.02], [0.0, -0.035]]
    obs = np.array(observations)
    logits = logits64(document, obs)
    actions = greedy_actions(parse_policy(document), obs)
    grade = evaluate_policy(document, GRADE_SEEDS, GRADE_EPISODES_PER_SEED)
    return {"file": os.path.basename(POLICY_PATH), "observations": observations,
            "logits": logits.tolist(), "actions": actions.tolist(),
            "grade": {"seeds": GRADE_SEEDS, "episodesPerSeed": GRADE_EPISODES_PER_SEED, **grade}}


def _render_vectors(vectors: dict) -> str:
    """JSON with one line per list item of each top-level key: readable diffs, a small file."""
    compact = lambda value: json.dumps(value, separators=(",", ":"), allow_nan=False)  # noqa: E731
    parts = []
    for key, value in vectors.items():
        if isinstance(value, list):
            items = ",\n".join(f"  {compact(item)}" for item in value)
            parts.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {compact(value)}")
    text = "{\n" + ",\n".join(parts) + "\n}\n"
    if json.loads(text) != vectors:
        raise SystemExit("make_vectors: the rendered vectors do not read back")
    return text


def render() -> dict[str, str]:
    """The fixture files' exact text, by path."""
    document = velocity_policy()
    vectors = {
        "generator": "batch-jobs/reward-train/make_vectors.py",
        "starts": [{"seed": s, "positions": start_positions(s, STARTS_PER_SEED)} for s in START_SEEDS],
        "steps": step_vectors(),
        "trajectories": trajectories(),
        "policy": policy_vectors(document),
    }
    for value in (vectors, document):  # every number must survive JSON in both languages
        json.dumps(value, allow_nan=False)
    return {VECTORS_PATH: _render_vectors(vectors),
            POLICY_PATH: json.dumps(document, separators=(",", ":")) + "\n"}


def main(argv: list[str]) -> int:
    files = render()
    if "--check" in argv:
        stale = []
        for path, text in files.items():
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
                stale.append(os.path.relpath(path))
        if stale:
            print(f"make_vectors: out of date: {stale}; run python3 batch-jobs/reward-train/make_vectors.py",
                  file=sys.stderr)
            return 1
        return 0
    os.makedirs(FIXTURES, exist_ok=True)
    for path, text in files.items():
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        print(f"wrote {os.path.relpath(path)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
