"""The task's shared test vectors (test-vectors.json beside this file) from the GPU job's side.

The task is written once (shared/humanoid/task.ts) and implemented twice: the CPU twin
(shared/humanoid/env.ts, which generated the vectors: shared/humanoid/test-vectors.ts) and
Playground's G1 joystick env in JAX over MJX, the one this job trains on. A vector is a state
(qpos, qvel and the env's `info`), its noise-free `state` observation, an action, and what one
control step with that action gave: the state, the observation, each reward term before its
weight (by upstream's name), the reward and whether the episode ended.

- Always (json and numpy only): the file's format and sizes, and each reward being the sum of
  weight x term x ctrlDt with the weights this job is sent: task.ts's constants as the state
  machine's gpuTaskSpec() (shared/humanoid/steps.ts) sends them, read from the TypeScript sources
  and checked by train.check_task, and the same as test_train.valid_spec()'s task.
- With JAX, Brax and Playground (the GPU image, whose build runs this on its CPU): Playground's env
  built by train.make_env (flat terrain, that task) with observation noise off is put in each
  vector's state; its own `_get_obs` must give `observationBefore`, and its `step` the state,
  observation, reward terms (`state.metrics["reward/<name>"]`, which hold weight x term), reward
  and done after it.

Every comparison with the twin is |MJX - twin| <= tolerance x max(1, |twin|), the rule the
TypeScript side uses: absolute for values within [-1, 1], relative above. The tolerances are the
file's own (`tolerance`): observationBefore for the observation of the restored state (a function
of the state alone), after for the state and observation after a step (MJX in float32 with its own
collision and solver code against MuJoCo's C solver in float64), reward for each reward term and
the reward.

Without the vectors every test here is skipped, saying so.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import checkpoints
import train
from test_train import valid_spec

HERE = Path(__file__).resolve().parent
SHARED_HUMANOID = HERE.parent.parent / "shared" / "humanoid"
# Beside this file, so the image (built from batch-jobs/) holds it too; the CPU twin writes it here.
VECTORS_FILE = HERE / "test-vectors.json"
TASK_TS = SHARED_HUMANOID / "task.ts"
STEPS_TS = SHARED_HUMANOID / "steps.ts"
NO_VECTORS = f"{VECTORS_FILE} is not here: the shared test vectors cannot be checked"
NO_TASK_TS = "shared/humanoid/task.ts and steps.ts are not beside this checkout (as in the image)"
NO_JAX = "JAX is not installed on this machine: the MJX side of the shared test vectors runs only in the GPU image"

ACTION_SIZE = checkpoints.ACTION_SIZE  # 29
NQ = 7 + ACTION_SIZE  # the free base (position, quaternion) and the 29 hinges
NV = 6 + ACTION_SIZE
# task.ts OBSERVATION_LAYOUT (the test below checks it against the file where the file is here).
OBSERVATION_LAYOUT = (
    ("linearVelocity", 3),
    ("gyro", 3),
    ("gravity", 3),
    ("command", 3),
    ("jointPositionOffset", 29),
    ("jointVelocity", 29),
    ("lastAction", 29),
    ("phase", 4),
)
PER_JOINT = {"jointPositionOffset", "jointVelocity", "lastAction"}
PHASE_PARTS = ("cos left", "cos right", "sin left", "sin right")
COMMAND_PARTS = ("forward", "lateral", "yaw")
VECTOR_KEYS = {"name", "before", "observationBefore", "action", "after"}
BEFORE_KEYS = {"qpos", "qvel", "command", "phase", "phaseDt", "stepCount", "lastAction", "feetAirTime", "lastContact"}
AFTER_KEYS = {"qpos", "qvel", "observation", "terms", "reward", "done"}
# What a file's `reward` may differ from sum(weight x term) x ctrlDt: the file is written from float64.
REWARD_SUM_TOLERANCE = 1e-9
# A push never falls due: a restored state has no pushes (the twin's restore turns them off).
NO_PUSH_INTERVAL = 2**30


# ---------------------------------------------------------------------------------------------
# The vectors and the task they were made for.

def load_vectors() -> dict:
    with open(VECTORS_FILE, encoding="utf-8") as f:
        return json.load(f)


def _without_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def ts_constant(source: str, name: str) -> Any:
    """`export const NAME = {...}` (or `[...]`) of a TypeScript source as JSON would give it, for
    task.ts's plain literals: numbers (with `_` separators), single-quoted strings, arrays, objects."""
    source = _without_comments(source)
    match = re.search(rf"export const {name}\b[^=]*=\s*", source)
    if match is None or source[match.end()] not in "{[":
        raise ValueError(f"task.ts has no object or array literal `export const {name} = ...`")
    start, depth = match.end(), 0
    for end in range(start, len(source)):
        if source[end] in "{[":
            depth += 1
        elif source[end] in "}]":
            depth -= 1
            if depth == 0:
                break
    text = source[start : end + 1]
    text = re.sub(r"'([^'\\]*)'", r'"\1"', text)
    text = re.sub(r"(?<=\d)_(?=\d)", "", text)
    text = re.sub(r"([{,]\s*)([A-Za-z_$][\w$]*)\s*:", r'\1"\2":', text)
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"task.ts {name}: not a plain literal ({error})") from error


def task_from_typescript() -> dict:
    """The `task` the state machine sends: gpuTaskSpec()'s fields (steps.ts), each the task.ts
    constant it names, as JSON.stringify would write them."""
    steps = STEPS_TS.read_text(encoding="utf-8")
    body = re.search(r"export function gpuTaskSpec\(\)\s*\{\s*return\s*\{(.*?)\};", steps, re.S)
    if body is None:
        raise ValueError("steps.ts has no `export function gpuTaskSpec() { return {...}; }`")
    fields = re.findall(r"(\w+):\s*([A-Z][A-Z0-9_]*)\s*,?", body.group(1))
    if not fields:
        raise ValueError("steps.ts gpuTaskSpec() names no task.ts constant")
    source = TASK_TS.read_text(encoding="utf-8")
    return {field: ts_constant(source, constant) for field, constant in fields}


def vector_task() -> dict:
    """The task of the vectors: task.ts's (via gpuTaskSpec) where the TypeScript sources are here,
    else test_train.valid_spec()'s copy of it (the image; a test below keeps the two equal)."""
    if TASK_TS.exists() and STEPS_TS.exists():
        return task_from_typescript()
    return valid_spec()["task"]


def upstream_weights(task: dict) -> dict[str, float]:
    """The reward weights by upstream's names, as the job turns the task's into config scales."""
    checked = train.check_task(task)
    return {train.REWARD_TERMS[ours]: weight for ours, weight in checked["rewardWeights"].items()}


# ---------------------------------------------------------------------------------------------
# Naming what differs.

def observation_name(index: int, joints: list[str] | None = None) -> str:
    """What observation component `index` is: 'jointVelocity[3] (left_knee_joint)'."""
    start = 0
    for part, size in OBSERVATION_LAYOUT:
        if index < start + size:
            i = index - start
            if part in PER_JOINT and joints:
                return f"{part}[{i}] ({joints[i]})"
            if part == "phase":
                return f"phase[{i}] ({PHASE_PARTS[i]})"
            if part == "command":
                return f"command[{i}] ({COMMAND_PARTS[i]})"
            return f"{part}[{'xyz'[i]}]" if size == 3 else f"{part}[{i}]"
        start += size
    return f"[{index}] (past the {start}-number layout)"


def layout_slice(part: str) -> slice:
    """Where `part` lies in the observation."""
    start = 0
    for name, size in OBSERVATION_LAYOUT:
        if name == part:
            return slice(start, start + size)
        start += size
    raise KeyError(part)


def qpos_name(index: int, joints: list[str] | None = None) -> str:
    if index < 3:
        return f"base position {'xyz'[index]}"
    if index < 7:
        return f"base quaternion {'wxyz'[index - 3]}"
    return f"joint {index - 7}" + (f" ({joints[index - 7]})" if joints else "")


def qvel_name(index: int, joints: list[str] | None = None) -> str:
    if index < 3:
        return f"base linear velocity {'xyz'[index]}"
    if index < 6:
        return f"base angular velocity {'xyz'[index - 3]}"
    return f"joint {index - 6}" + (f" ({joints[index - 6]})" if joints else "")


def differences(got: Any, want: Any, tolerance: float, name_of, what: str, vector: str) -> str | None:
    """None if every |got - want| <= tolerance x max(1, |want|); else a message naming the vector,
    each differing component by index and meaning, and both values."""
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        return f"{vector}: {what} has {got.size} numbers, the vector {want.size}"
    allowed = tolerance * np.maximum(1.0, np.abs(want))
    bad = [i for i in range(want.size) if not abs(got[i] - want[i]) <= allowed[i]]  # NaN fails too
    if not bad:
        return None
    lines = [f"{vector}: {what} differs in {len(bad)} of {want.size} numbers"
             f" (allowed: {tolerance:g} x max(1, |twin|)):"]
    for i in bad[:20]:
        lines.append(f"  [{i}] {name_of(i)}: MJX {got[i]:.6g}, twin {want[i]:.6g} (off by {got[i] - want[i]:+.3g})")
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Always: the file itself.

@unittest.skipUnless(VECTORS_FILE.exists(), NO_VECTORS)
class VectorFileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.vectors = load_vectors()

    def test_the_file_has_format_1_tolerances_and_the_task_s_timing(self) -> None:
        data = self.vectors
        self.assertEqual(data.get("format"), 1, "test-vectors.json: format")
        self.assertIsInstance(data.get("vectors"), list)
        self.assertGreater(len(data["vectors"]), 0, "test-vectors.json holds no vector")
        tolerance = data.get("tolerance")
        self.assertEqual(set(tolerance or {}), {"observationBefore", "after", "reward"}, "test-vectors.json: tolerance")
        for key, value in tolerance.items():
            self.assertTrue(isinstance(value, (int, float)) and 0 < value < 1, f"tolerance.{key}: {value!r}")
        timing = train.check_task(vector_task())["timing"]
        self.assertEqual((data["ctrlDt"], data["simDt"]), (timing["ctrlDt"], timing["simDt"]),
                         "the vectors' ctrlDt and simDt are not the task's")
        names = [v.get("name") for v in data["vectors"]]
        self.assertEqual(len(set(names)), len(names), f"vector names repeat: {names}")

    def test_every_vector_has_the_task_s_sizes(self) -> None:
        observation_size = sum(size for _, size in OBSERVATION_LAYOUT)
        self.assertEqual(observation_size, checkpoints.OBSERVATION_SIZE)
        terms = set(train.REWARD_TERMS.values())
        for index, vector in enumerate(self.vectors["vectors"]):
            name = vector.get("name", f"vector {index}")
            with self.subTest(vector=name):
                self.assertEqual(set(vector), VECTOR_KEYS, f"{name}: fields")
                before, after = vector["before"], vector["after"]
                self.assertEqual(set(before), BEFORE_KEYS, f"{name}: before's fields")
                self.assertEqual(set(after), AFTER_KEYS, f"{name}: after's fields")
                sizes = {
                    "before.qpos": (before["qpos"], NQ),
                    "before.qvel": (before["qvel"], NV),
                    "before.command": (before["command"], 3),
                    "before.phase": (before["phase"], 2),
                    "before.lastAction": (before["lastAction"], ACTION_SIZE),
                    "before.feetAirTime": (before["feetAirTime"], 2),
                    "observationBefore": (vector["observationBefore"], observation_size),
                    "action": (vector["action"], ACTION_SIZE),
                    "after.qpos": (after["qpos"], NQ),
                    "after.qvel": (after["qvel"], NV),
                    "after.observation": (after["observation"], observation_size),
                }
                for field, (values, size) in sizes.items():
                    self.assertIsInstance(values, list, f"{name}: {field}")
                    self.assertEqual(len(values), size, f"{name}: {field} has {len(values)} numbers, not {size}")
                    for i, value in enumerate(values):
                        self.assertTrue(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
                                        f"{name}: {field}[{i}] is {value!r}, not a finite number")
                self.assertTrue(isinstance(before["phaseDt"], (int, float)) and math.isfinite(before["phaseDt"]), f"{name}: before.phaseDt")
                self.assertTrue(isinstance(before["stepCount"], int) and not isinstance(before["stepCount"], bool)
                                and before["stepCount"] >= 0, f"{name}: before.stepCount {before['stepCount']!r}")
                self.assertEqual(len(before["lastContact"]), 2, f"{name}: before.lastContact")
                self.assertTrue(all(isinstance(c, bool) for c in before["lastContact"]), f"{name}: before.lastContact {before['lastContact']!r}")
                self.assertIsInstance(after["done"], bool, f"{name}: after.done")
                self.assertEqual(set(after["terms"]), terms, f"{name}: after.terms are not the task's terms by upstream's names")
                for term, value in after["terms"].items():
                    self.assertTrue(isinstance(value, (int, float)) and math.isfinite(value), f"{name}: after.terms.{term} {value!r}")
                self.assertTrue(math.isfinite(after["reward"]), f"{name}: after.reward")
                # The observation of a state carries its info: the command, last action and phase.
                observation = vector["observationBefore"]
                np.testing.assert_allclose(observation[layout_slice("command")], before["command"], atol=1e-12,
                                           err_msg=f"{name}: observationBefore's command is not before.command")
                np.testing.assert_allclose(observation[layout_slice("lastAction")], before["lastAction"], atol=1e-12,
                                           err_msg=f"{name}: observationBefore's lastAction is not before.lastAction")
                phase = np.concatenate([np.cos(before["phase"]), np.sin(before["phase"])])
                np.testing.assert_allclose(observation[layout_slice("phase")], phase, atol=1e-12,
                                           err_msg=f"{name}: observationBefore's phase is not [cos, sin] of before.phase")

    def test_each_reward_is_the_weighted_sum_of_its_terms_times_ctrl_dt(self) -> None:
        task = vector_task()
        weights = upstream_weights(task)
        ctrl_dt = train.check_task(task)["timing"]["ctrlDt"]
        for vector in self.vectors["vectors"]:
            with self.subTest(vector=vector["name"]):
                terms = vector["after"]["terms"]
                self.assertEqual(set(terms), set(weights), f"{vector['name']}: the terms are not the weighted ones")
                reward = sum(weights[name] * terms[name] for name in weights) * ctrl_dt
                self.assertLessEqual(abs(reward - vector["after"]["reward"]), REWARD_SUM_TOLERANCE,
                                     f"{vector['name']}: reward {vector['after']['reward']!r}, but sum(weight x term) x ctrlDt"
                                     f" with the job's weights is {reward!r}")

    def test_the_vectors_move_several_terms(self) -> None:
        vectors = self.vectors["vectors"]
        if len(vectors) < 2:
            self.skipTest("one vector: nothing varies")
        varying = [k for k in vectors[0]["after"]["terms"] if len({v["after"]["terms"][k] for v in vectors}) > 1]
        self.assertGreaterEqual(len(varying), 8, f"only these terms vary between the vectors: {varying}")


@unittest.skipUnless(TASK_TS.exists() and STEPS_TS.exists(), NO_TASK_TS)
class TaskSourceTest(unittest.TestCase):
    """The task is read from the TypeScript where it is here and from valid_spec() in the image."""

    def test_gpu_task_spec_is_task_ts_s_constants_and_valid_spec_s_task(self) -> None:
        task = task_from_typescript()
        self.assertEqual(set(task), {"timing", "actions", "commands", "rewardWeights", "rewardSettings",
                                     "observationNoise", "reset", "pushes"})
        train.check_task(task)  # the job accepts it
        self.assertEqual(task, valid_spec()["task"], "test_train.valid_spec()'s task is not task.ts's: update it")
        source = TASK_TS.read_text(encoding="utf-8")
        self.assertEqual(ts_constant(source, "REWARD_TERM_NAMES"), train.REWARD_TERMS)
        self.assertEqual([tuple(part) for part in ts_constant(source, "OBSERVATION_LAYOUT")], list(OBSERVATION_LAYOUT))


class TypeScriptLiteralTest(unittest.TestCase):
    def test_the_literal_reader_reads_task_ts_s_forms_and_refuses_others(self) -> None:
        source = """
/** A doc comment, {with braces}. */
export const A = {
  // a line comment: b is 1000
  b: 1_000,
  c: 'x',
  d: [1, -2.5,],
} as const satisfies Record<string, unknown>;
export const E: Record<'f', string> = { f: 'g' };
"""
        self.assertEqual(ts_constant(source, "A"), {"b": 1000, "c": "x", "d": [1, -2.5]})
        self.assertEqual(ts_constant(source, "E"), {"f": "g"})
        with self.assertRaisesRegex(ValueError, "no object or array literal"):
            ts_constant("export const A = 3;", "A")
        with self.assertRaisesRegex(ValueError, "not a plain literal"):
            ts_constant("export const A = { b: B.c };", "A")


# ---------------------------------------------------------------------------------------------
# With JAX: Playground's env against the vectors.

def vector_impl() -> str:
    """MJX's implementation for the check: the job's ("warp") on a GPU, MJX's JAX one elsewhere
    (warp needs a GPU; the image's build runs the tests on its CPU). HUMANOID_VECTORS_IMPL overrides."""
    import jax

    chosen = os.environ.get("HUMANOID_VECTORS_IMPL")
    if chosen:
        return chosen
    return "warp" if jax.default_backend() == "gpu" else "jax"


def make_vector_env(task: dict, impl: str):
    """train.make_env's env for the flat terrain and this task, with observation noise off (level 0:
    the vectors are noise-free), everything else exactly as the job configures it."""
    spec_json = valid_spec()
    spec_json["task"] = task
    spec_json["ppo"]["terrain"] = "flat"
    spec_json["ppo"]["impl"] = impl
    spec = train.check_spec(spec_json)
    job_overrides = train.playground_overrides

    def noiseless(task_: Any, ppo: Any) -> dict:
        overrides = job_overrides(task_, ppo)
        assert overrides["noise_config.level"] == 1.0, overrides["noise_config.level"]
        return {**overrides, "noise_config.level": 0.0}

    with mock.patch.object(train, "playground_overrides", noiseless):
        return spec, train.make_env(spec)


def run_vectors(env: Any, vectors: list[dict]) -> dict[str, np.ndarray]:
    """Each vector's state put into the env (vmapped over the vectors, as training vmaps the env),
    its observation by the env's own _get_obs, and one env.step with the vector's action."""
    import jax
    import jax.numpy as jp
    from mujoco import mjx

    feet_sensors = [int(env.mj_model.sensor_adr[sensor]) for sensor in env._feet_floor_found_sensor]

    def like(old: Any, value: Any) -> jax.Array:
        old = jp.asarray(old)
        return jp.asarray(value, dtype=old.dtype).reshape(old.shape)

    def start(rng, qpos, qvel, command, phase, phase_dt, step, last_act, feet_air_time, last_contact):
        # A reset gives every field of a state (info, metrics) with its shape and dtype; its data is
        # then the vector's: qpos and qvel set in fresh data (warm start zero, as the twin's
        # restore has it; ctrl zero as mj_resetData leaves it) and mjx.forward run.
        state = env.reset(rng)
        data = state.data.replace(qpos=qpos, qvel=qvel, ctrl=jp.zeros_like(state.data.ctrl))
        data = mjx.forward(env.mjx_model, data)
        info = dict(state.info)
        info["command"] = like(info["command"], command)
        info["phase"] = like(info["phase"], phase)
        info["phase_dt"] = like(info["phase_dt"], phase_dt)
        info["step"] = like(info["step"], step)
        info["last_act"] = like(info["last_act"], last_act)
        info["feet_air_time"] = like(info["feet_air_time"], feet_air_time)
        info["last_contact"] = like(info["last_contact"], last_contact)
        info["push_step"] = like(info["push_step"], 0)
        info["push_interval_steps"] = like(info["push_interval_steps"], NO_PUSH_INTERVAL)
        contact = jp.array([data.sensordata[adr] > 0 for adr in feet_sensors])
        obs = env._get_obs(data, dict(info), contact)  # a copy: _get_obs draws from info["rng"]
        return state.replace(data=data, obs=obs, info=info)

    befores = [v["before"] for v in vectors]
    stack = lambda key, dtype: jp.asarray(np.array([b[key] for b in befores]), dtype=dtype)
    rngs = jax.random.split(jax.random.PRNGKey(0), len(vectors))
    states = jax.jit(jax.vmap(start))(
        rngs, stack("qpos", jp.float32), stack("qvel", jp.float32), stack("command", jp.float32),
        stack("phase", jp.float32), stack("phaseDt", jp.float32), stack("stepCount", jp.int32),
        stack("lastAction", jp.float32), stack("feetAirTime", jp.float32), stack("lastContact", bool))
    actions = jp.asarray(np.array([v["action"] for v in vectors]), dtype=jp.float32)
    after = jax.jit(jax.vmap(env.step))(states, actions)
    results = {
        "observationBefore": states.obs["state"],
        "observation": after.obs["state"],
        "qpos": after.data.qpos,
        "qvel": after.data.qvel,
        "reward": after.reward,
        "done": after.done,
    }
    for name in train.REWARD_TERMS.values():
        results[f"reward/{name}"] = after.metrics[f"reward/{name}"]
    return {key: np.asarray(jax.device_get(value), dtype=np.float64) for key, value in results.items()}


@unittest.skipUnless(importlib.util.find_spec("jax"), NO_JAX)
@unittest.skipUnless(VECTORS_FILE.exists(), NO_VECTORS)
class MjxAgainstTheTwinTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if importlib.util.find_spec("mujoco_playground") is None:
            raise unittest.SkipTest("MuJoCo Playground is not installed on this machine (the GPU image has it)")
        from mujoco_playground._src import mjx_env

        if not (mjx_env.MENAGERIE_PATH / "unitree_g1").exists():
            raise unittest.SkipTest("MuJoCo Menagerie's unitree_g1 is not installed (the image bundles it)")
        cls.data = load_vectors()
        cls.vectors = cls.data["vectors"]
        cls.tolerance = cls.data["tolerance"]
        cls.task = vector_task()
        cls.impl = vector_impl()
        cls.spec, cls.env = make_vector_env(cls.task, cls.impl)
        cls.weights = upstream_weights(cls.task)
        cls.joints = [cls.env.mj_model.actuator(i).name for i in range(cls.env.mj_model.nu)]
        cls.results = run_vectors(cls.env, cls.vectors)

    def setUp(self) -> None:
        self.label = f"[MJX impl {self.impl}]"

    def check(self, got: Any, want: Any, tolerance: float, name_of, what: str, vector: str) -> None:
        message = differences(got, want, tolerance, name_of, what, f"{self.label} {vector}")
        if message:
            self.fail(message)

    def test_the_env_is_the_task_s_noise_free(self) -> None:
        self.assertEqual(self.env._config.noise_config.level, 0.0)
        self.assertEqual((self.env.dt, self.env.n_substeps), (self.data["ctrlDt"], round(self.data["ctrlDt"] / self.data["simDt"])))
        for name, weight in self.weights.items():
            self.assertEqual(self.env._config.reward_config.scales[name], weight, name)

    def test_the_observation_of_each_state_is_the_twin_s(self) -> None:
        for i, vector in enumerate(self.vectors):
            with self.subTest(vector=vector["name"]):
                self.check(self.results["observationBefore"][i], vector["observationBefore"], self.tolerance["observationBefore"],
                           lambda j: observation_name(j, self.joints), "the observation of the state before the step", vector["name"])

    def test_the_observation_after_a_step_is_the_twin_s(self) -> None:
        for i, vector in enumerate(self.vectors):
            with self.subTest(vector=vector["name"]):
                self.check(self.results["observation"][i], vector["after"]["observation"], self.tolerance["after"],
                           lambda j: observation_name(j, self.joints), "the observation after the step", vector["name"])

    def test_the_state_after_a_step_is_the_twin_s(self) -> None:
        for i, vector in enumerate(self.vectors):
            with self.subTest(vector=vector["name"]):
                self.check(self.results["qpos"][i], vector["after"]["qpos"], self.tolerance["after"],
                           lambda j: qpos_name(j, self.joints), "qpos after the step", vector["name"])
                self.check(self.results["qvel"][i], vector["after"]["qvel"], self.tolerance["after"],
                           lambda j: qvel_name(j, self.joints), "qvel after the step", vector["name"])

    def test_each_reward_term_the_reward_and_done_are_the_twin_s(self) -> None:
        names = list(self.weights)
        for i, vector in enumerate(self.vectors):
            with self.subTest(vector=vector["name"]):
                # Playground's metrics hold each term times its weight: divided back to the term.
                terms = [self.results[f"reward/{name}"][i] / self.weights[name] for name in names]
                self.check(terms, [vector["after"]["terms"][name] for name in names], self.tolerance["reward"],
                           lambda j: f"reward term {names[j]} (before its weight {self.weights[names[j]]:g})",
                           "the reward terms", vector["name"])
                self.check([self.results["reward"][i]], [vector["after"]["reward"]], self.tolerance["reward"],
                           lambda _: "reward (sum of weight x term x ctrlDt)", "the reward", vector["name"])
                self.assertEqual(bool(self.results["done"][i]), vector["after"]["done"],
                                 f"{self.label} {vector['name']}: done is {bool(self.results['done'][i])}, the twin's {vector['after']['done']}")


if __name__ == "__main__":
    unittest.main()
