"""Writes the MountainCar fixtures that both implementations are tested against, so they cannot
drift: test/fixtures/mountaincar/vectors.json and test/fixtures/mountaincar/policy-velocity.json.

    PYTHONPATH=batch-jobs/common /usr/bin/python3 batch-jobs/rewards-train/make_vectors.py          # write
    PYTHONPATH=batch-jobs/common /usr/bin/python3 batch-jobs/rewards-train/make_vectors.py --check  # exit 1 if stale

(torch and numpy needed; --check compares within the stated tolerances, see below).

vectors.json holds:
- starts: the first start positions of several seeds (negative and beyond 2^32 too);
- steps: single steps from given states, including ones no episode reaches (the speed limit:
  a car never swings faster than ~0.06) and the clips at both ends;
- trajectories: a seed's start state, a fixed action sequence, and after every step the state,
  the done flag and whether the goal was reached; chosen so that together they hit the left
  wall (velocity zeroed), reach the goal and run into the time limit;
- policy: for policy-velocity.json, the float64 logits and greedy actions at sample observations
  and the outcome of greedy episodes on a few seeds (what gradePolicy must report);
- tolerances: how far another correct implementation may be from each float here (both
  languages' tests read them), and the margin every discrete outcome keeps from its boundary.

The floats that come from cos, tanh or a matrix product differ in the last bits between
machines (numpy's kernels are chosen by the CPU) and between languages, so "fresh" means equal
within those tolerances, not the same text (--check and the Python test compare that way).
Before writing, the generator proves the vectors do not hang on those bits: it replays every
trajectory and every graded episode with cos pushed COS_NUDGE either way, and refuses vectors
whose states move more than the tolerance or whose done flags, goal flags, greedy actions or
grades change, or in which a greedy choice or a goal test is closer than DECISION_MARGIN to a tie.

policy-velocity.json is a small valid policy in the data-only format: one path through the
network pushes in the direction of the velocity (the textbook way to pump energy, which solves
MountainCar), and every other weight is a small seeded value rounded to two decimals, so that
the whole forward pass is exercised while the file stays small.
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

from mountaincar import (GOAL_POSITION, MAX_POSITION, MAX_SPEED, MIN_POSITION, TIME_LIMIT, StartStream,
                         reached_goal, start_positions, step, step_arrays)
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

# Tolerances, absolute, for floats that another correct implementation computes (another CPU's
# numpy kernels, glibc's or V8's cos, another BLAS). Every cos is within a few ulps (< 1e-15) of
# the true value; a step scales it by GRAVITY = 0.0025, so one step from the same state differs by
# at most an ulp or two of the result (< 5e-16 at |x| <= 1.2): 1e-15. An episode compounds that
# over 200 steps; the replays below measure it (4.3e-15 at most for these vectors): 1e-12. The logits
# are three small layers in float64 (sums of 64 products, each rounded; tanh within an ulp): well
# under 1e-13 apart on any BLAS: 1e-12. A real bug (a wrong force, a missed clip, a wrong
# normalisation) moves these by 1e-6 or more.
TOLERANCES = {
    "step": 1e-15,
    "trajectory": 1e-12,
    "logit": 1e-12,
    "decisionMargin": 1e-9,
}
# How far the replays push cos (4.5 ulps or more of any |cos| <= 1).
COS_NUDGE = 1e-15
# Every greedy choice and every goal test in the vectors is at least this far from a tie.
DECISION_MARGIN = TOLERANCES["decisionMargin"]


def _nudged(cos, sign: int):
    """cos, pushed COS_NUDGE towards +inf (sign 1) or -inf (sign -1): another machine's cos."""
    return lambda x: cos(x) + sign * COS_NUDGE


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
    for case in cases:
        _check_trajectory_is_robust(case)
    return cases


def _check_trajectory_is_robust(case: dict) -> float:
    """Replays the case's actions with cos nudged both ways; refuses the case if a state moves
    more than the trajectory tolerance, a flag changes, or a state lies within DECISION_MARGIN of
    the goal line. Returns the largest deviation seen."""
    worst = 0.0
    for position, _ in case["states"]:
        if abs(position - GOAL_POSITION) < DECISION_MARGIN:
            raise SystemExit(f"make_vectors: trajectory {case['name']}: position {position!r} is within "
                             f"{DECISION_MARGIN} of the goal line; choose another case")
    for sign in (1, -1):
        position, velocity = case["start"]
        for t, action in enumerate(case["actions"]):
            position, velocity = step(position, velocity, action, cos=_nudged(math.cos, sign))
            want = case["states"][t]
            worst = max(worst, abs(position - want[0]), abs(velocity - want[1]))
            if reached_goal(position) != case["goalReached"][t]:
                raise SystemExit(f"make_vectors: trajectory {case['name']}: a cos {sign * COS_NUDGE:+} off "
                                 f"changes the goal flag at step {t + 1}; choose another case")
    if worst > TOLERANCES["trajectory"]:
        raise SystemExit(f"make_vectors: trajectory {case['name']}: a cos {COS_NUDGE} off moves a state "
                         f"by {worst!r}, over the stated tolerance {TOLERANCES['trajectory']}")
    return worst


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
    top_two = np.sort(logits, axis=1)[:, -2:]
    if (top_two[:, 1] - top_two[:, 0]).min() < DECISION_MARGIN:
        raise SystemExit("make_vectors: a sample observation's greedy action is a near-tie; choose another")
    grade = evaluate_policy(document, GRADE_SEEDS, GRADE_EPISODES_PER_SEED)
    _check_grade_is_robust(document, grade)
    return {"file": os.path.basename(POLICY_PATH), "observations": observations,
            "logits": logits.tolist(), "actions": actions.tolist(),
            "grade": {"seeds": GRADE_SEEDS, "episodesPerSeed": GRADE_EPISODES_PER_SEED, **grade}}


def _greedy_episodes(document: dict, cos) -> tuple[list[dict], float, float]:
    """The graded episodes played as evaluate_policy plays them, with the given cos; returns
    per-seed {successes, meanSteps}, the smallest gap between a greedy action's logit and the
    runner-up's, and the smallest distance of a live car from the goal line."""
    starts = np.array([p for seed in GRADE_SEEDS for p in start_positions(seed, GRADE_EPISODES_PER_SEED)])
    position, velocity = starts.copy(), np.zeros_like(starts)
    finished_at = np.full(starts.shape, -1, dtype=np.int64)
    closest_tie = closest_goal = math.inf
    for t in range(1, TIME_LIMIT + 1):
        live = finished_at < 0
        if not live.any():
            break
        logits = logits64(document, np.stack([position[live], velocity[live]], axis=1))
        top_two = np.sort(logits, axis=1)[:, -2:]
        closest_tie = min(closest_tie, float((top_two[:, 1] - top_two[:, 0]).min()))
        actions = np.argmax(logits, axis=1)
        position[live], velocity[live] = step_arrays(position[live], velocity[live], actions, cos=cos)
        closest_goal = min(closest_goal, float(np.abs(position[live] - GOAL_POSITION).min()))
        finished_at[live & (position >= GOAL_POSITION)] = t
    lengths = np.where(finished_at > 0, finished_at, TIME_LIMIT)
    per_seed = []
    for index, _ in enumerate(GRADE_SEEDS):
        rows = slice(index * GRADE_EPISODES_PER_SEED, (index + 1) * GRADE_EPISODES_PER_SEED)
        per_seed.append({"successes": int((finished_at[rows] > 0).sum()), "meanSteps": float(lengths[rows].mean())})
    return per_seed, closest_tie, closest_goal


def _check_grade_is_robust(document: dict, grade: dict) -> None:
    """Refuses a grade that a cos a few ulps off could change, or whose episodes pass within
    DECISION_MARGIN of a tie between two actions or of the goal line."""
    recorded = [{"successes": s["successes"], "meanSteps": s["meanSteps"]} for s in grade["perSeed"]]
    for cos in (np.cos, _nudged(np.cos, 1), _nudged(np.cos, -1)):
        per_seed, closest_tie, closest_goal = _greedy_episodes(document, cos)
        if per_seed != recorded:
            raise SystemExit(f"make_vectors: the policy's grade changes with a cos a few ulps off: {per_seed} "
                             f"against {recorded}")
        if closest_tie < DECISION_MARGIN or closest_goal < DECISION_MARGIN:
            raise SystemExit(f"make_vectors: a graded episode passes within {min(closest_tie, closest_goal)!r} of "
                             f"a tie or of the goal line (margin {DECISION_MARGIN}); choose other seeds")


# Where a float in vectors.json came from, and so how it is compared: the tolerance's name in
# TOLERANCES, or None for bit for bit (start positions: integer arithmetic and one multiply-add,
# the same in every language and on every CPU; the grade: counts, and means of counts).
_COMPARED_WITH = {"starts": None, "steps": "step", "trajectories": "trajectory", "policy": "logit",
                  "tolerances": None, "generator": None}


def differences(fresh: dict, stored: dict) -> list[str]:
    """Where `stored` (vectors.json as read) differs from `fresh` (as made here) by more than the
    stated tolerances: a list of 'path: what' lines, empty when the fixture is up to date."""
    found: list[str] = []

    def walk(a, b, path: str, tolerance: float | None) -> None:
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            if isinstance(a, dict) and isinstance(b, dict):
                if sorted(a) != sorted(b):
                    found.append(f"{path}: keys {sorted(a)} != {sorted(b)}")
                    return
                for key in a:
                    walk(a[key], b[key], f"{path}.{key}", tolerance)
            elif isinstance(a, list) and isinstance(b, list):
                if len(a) != len(b):
                    found.append(f"{path}: {len(a)} items != {len(b)}")
                    return
                for index, (x, y) in enumerate(zip(a, b)):
                    walk(x, y, f"{path}[{index}]", tolerance)
            elif a != b or type(a) is not type(b):
                found.append(f"{path}: {a!r} != {b!r}")
        elif isinstance(a, int) and isinstance(b, int) or tolerance is None or path.startswith("policy.grade"):
            if a != b:
                found.append(f"{path}: {a!r} != {b!r}")
        elif not abs(a - b) <= tolerance:
            found.append(f"{path}: {a!r} != {b!r} (tolerance {tolerance})")

    if sorted(fresh) != sorted(stored):
        return [f"keys {sorted(fresh)} != {sorted(stored)}"]
    for key, value in fresh.items():
        name = _COMPARED_WITH[key]
        walk(value, stored[key], key, None if name is None else TOLERANCES[name])
    return found


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
    """The fixture files' text as this machine makes it, by path."""
    document = velocity_policy()
    vectors = {
        "generator": "batch-jobs/rewards-train/make_vectors.py",
        "tolerances": TOLERANCES,
        "starts": [{"seed": s, "positions": start_positions(s, STARTS_PER_SEED)} for s in START_SEEDS],
        "steps": step_vectors(),
        "trajectories": trajectories(),
        "policy": policy_vectors(document),
    }
    for value in (vectors, document):  # every number must survive JSON in both languages
        json.dumps(value, allow_nan=False)
    return {VECTORS_PATH: _render_vectors(vectors),
            POLICY_PATH: json.dumps(document, separators=(",", ":")) + "\n"}


def stale_files(files: dict[str, str]) -> list[str]:
    """The fixture files that differ from what this machine makes: the policy (rounded seeded
    weights, made with basic arithmetic only) text for text, vectors.json within its tolerances."""
    stale = []
    for path, text in files.items():
        if not os.path.exists(path):
            stale.append(f"{os.path.relpath(path)}: missing")
            continue
        with open(path, encoding="utf-8") as handle:
            stored = handle.read()
        if path == VECTORS_PATH:
            stale += [f"{os.path.relpath(path)}: {line}" for line in differences(json.loads(text), json.loads(stored))]
        elif stored != text:
            stale.append(f"{os.path.relpath(path)}: differs")
    return stale


def main(argv: list[str]) -> int:
    files = render()
    if "--check" in argv:
        stale = stale_files(files)
        if stale:
            print("make_vectors: out of date; run PYTHONPATH=batch-jobs/common python3 batch-jobs/rewards-train/make_vectors.py\n  "
                  + "\n  ".join(stale[:20]), file=sys.stderr)
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
