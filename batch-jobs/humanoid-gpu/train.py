"""humanoid-gpu: the humanoid pipeline's GPU training job, Brax PPO over MuJoCo MJX.

It trains the Unitree G1 to walk and run on MuJoCo Playground's G1 joystick task
(google-deepmind/mujoco_playground at d5e6b47, `_src/locomotion/g1/joystick.py`) made into this
pipeline's task (shared/humanoid/task.ts, sent in the spec's `task`), with Brax's PPO and
Playground's G1 settings (the spec's `ppo`), thousands of environments on one GPU.

The order matters and is why the module is split as it is:

1. The spec is checked first, in pure Python, so a wrong field fails in a second, before an image
   of several GB has even imported JAX, and so the checks run in the tests on a machine without
   a GPU or JAX. Task values that upstream's code hard-codes (not its config) are checked against
   those constants: the job refuses a task it cannot honour rather than train a different one.
2. Where to start: the newest complete checkpoint already under the run's own prefix (Batch reran
   the job: a reclaimed spot instance, a retry), else the spec's `resume`, else fresh weights.
3. Training (JAX imported only here): Playground's env with its config overridden from the task,
   `brax.training.agents.ppo.train`, a checkpoint (checkpoints.py) every `checkpointEverySteps`
   at an evaluation boundary and always at the end.

Brax's `restore_params` restores the normaliser, policy and value parameters, not the optimiser's
moments or the step count: a resumed run restarts Adam and counts its steps from the checkpoint's.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import checkpoints
from jobio import JobContext, run

TRAINER = "ppo"
CHECKPOINTS_KEY_PREFIX = "runs/humanoid/checkpoints/"
# A run writes at most this many checkpoints (as the CPU trainer: shared/humanoid/jobs.ts).
MAX_CHECKPOINTS = 64
TERRAIN_TASKS = {"flat": "flat_terrain", "rough": "rough_terrain"}
IMPLS = ("warp", "jax")
DEFAULT_NUM_EVAL_ENVS = 128  # Brax's and Playground's default
# Playground's G1 config (locomotion_params.py) values the spec does not carry.
NUM_RESETS_PER_EVAL = 1
REWARD_SCALING = 1.0
# Upstream's naconmax is 8 contacts per world times 8,192 worlds (warp's limit is across worlds).
CONTACTS_PER_WORLD = 8

# Our reward names (task.ts REWARD_WEIGHTS) and upstream's (reward_config.scales), as
# task.ts REWARD_TERM_NAMES pairs them.
REWARD_TERMS = {
    "trackingLinVel": "tracking_lin_vel",
    "trackingAngVel": "tracking_ang_vel",
    "feetAirTime": "feet_air_time",
    "feetPhase": "feet_phase",
    "orientation": "orientation",
    "angVelXy": "ang_vel_xy",
    "feetSlip": "feet_slip",
    "collision": "collision",
    "contactForce": "contact_force",
    "standStill": "stand_still",
    "knee": "joint_deviation_knee",
    "hip": "joint_deviation_hip",
    "dofPosLimits": "dof_pos_limits",
    "pose": "pose",
    "termination": "termination",
}
# Every reward_config.scales name of joystick.py's default_config at d5e6b47 (24): the 15 above
# and 9 whose upstream weight is 0, which task.ts leaves out and this job sets to 0 explicitly,
# so a change of upstream's defaults cannot slip a term in. The image's test checks the list.
UPSTREAM_SCALES = (
    "tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "ang_vel_xy", "orientation", "base_height",
    "torques", "action_rate", "energy", "dof_acc", "feet_clearance", "feet_air_time", "feet_slip",
    "feet_height", "feet_phase", "alive", "stand_still", "termination", "collision", "contact_force",
    "joint_deviation_knee", "joint_deviation_hip", "dof_pos_limits", "pose",
)
ZERO_WEIGHT_SCALES = tuple(name for name in UPSTREAM_SCALES if name not in REWARD_TERMS.values())
NOISE_SCALES = {"jointPosition": "joint_pos", "jointVelocity": "joint_vel", "gravity": "gravity",
                "linearVelocity": "linvel", "gyro": "gyro"}
# What joystick.py writes as literals rather than reading from its config: the job checks that
# the task asks for exactly these (it cannot change them without rewriting reset and step).
UPSTREAM_FIXED: dict[str, Any] = {
    "task.actions.keyframe": "knees_bent",  # _post_init: keyframe("knees_bent")
    "task.actions.size": 29,  # the model's 29 actuators
    "task.commands.zeroShare": 0.1,  # sample_command: bernoulli(p=0.1)
    "task.commands.resampleAfterSteps": 500,  # step: info["step"] > 500
    "task.reset.xy": 0.5,  # reset: dxy ~ U(-0.5, 0.5)
    "task.reset.yaw": 3.14,  # reset: yaw ~ U(-3.14, 3.14)
    "task.reset.jointScale": (0.5, 1.5),  # reset: qpos[7:] *= U(0.5, 1.5)
    "task.reset.baseVelocity": 0.5,  # reset: qvel[0:6] ~ U(-0.5, 0.5)
    "task.reset.gaitHz": (1.25, 1.5),  # reset: gait_freq ~ U(1.25, 1.5)
}


class SpecError(ValueError):
    """A spec field is missing or has a value this job cannot use; the message names both."""


# ---------------------------------------------------------------------------------------------
# The spec, checked without JAX.

def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _fail(field_name: str, value: Any, problem: str) -> None:
    raise SpecError(f"{field_name}: {_show(value)} {problem}")


def _object(value: Any, field_name: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """A JSON object with exactly these fields: an unknown one is refused, not ignored, since it
    would be a setting (or a typo of one) this job silently does not honour. `field_name` ''
    is the spec itself, whose fields are named bare (`trainer`, not `spec.trainer`)."""
    if not isinstance(value, dict):
        _fail(field_name or "spec", value, "must be an object")
    path = f"{field_name}." if field_name else ""
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise SpecError(f"{path}{unknown[0]}: is not a field this job reads (it reads {', '.join(required + optional)})")
    for name in required:
        if name not in value:
            raise SpecError(f"{path}{name}: missing")
    return value


def _positive_int(value: Any, field_name: str, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(field_name, value, "must be a positive integer")
    if maximum is not None and value > maximum:
        _fail(field_name, value, f"must be a positive integer of at most {maximum}")
    return value


def _number(value: Any, field_name: str, *, above: float | None = None, at_least: float | None = None,
            at_most: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(field_name, value, "must be a finite number")
    if above is not None and not value > above:
        _fail(field_name, value, f"must be greater than {above}")
    if at_least is not None and value < at_least:
        _fail(field_name, value, f"must be at least {at_least}")
    if at_most is not None and value > at_most:
        _fail(field_name, value, f"must be at most {at_most}")
    return float(value)


def _pair(value: Any, field_name: str, *, at_least: float | None = None) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        _fail(field_name, value, "must be [low, high]")
    low = _number(value[0], f"{field_name}[0]", at_least=at_least)
    high = _number(value[1], f"{field_name}[1]", at_least=at_least)
    if low > high:
        _fail(field_name, value, "must be [low, high] with low <= high")
    return (low, high)


def _hidden_sizes(value: Any, field_name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 8:
        _fail(field_name, value, "must be a list of 1 to 8 layer widths")
    return tuple(_positive_int(width, f"{field_name}[{i}]", 8192) for i, width in enumerate(value))


@dataclass(frozen=True)
class PpoSettings:
    terrain: str
    num_timesteps: int
    num_envs: int
    batch_size: int
    num_minibatches: int
    unroll_length: int
    num_updates_per_batch: int
    discounting: float
    learning_rate: float
    entropy_cost: float
    clipping_epsilon: float
    max_grad_norm: float
    num_evals: int
    policy_hidden_layer_sizes: tuple[int, ...]
    value_hidden_layer_sizes: tuple[int, ...]
    checkpoint_every_steps: int
    episode_length: int
    impl: str = "warp"
    num_eval_envs: int = DEFAULT_NUM_EVAL_ENVS

    @property
    def steps_per_training_step(self) -> int:
        """Environment steps one PPO update consumes (Brax: batch x unroll x minibatches)."""
        return self.batch_size * self.unroll_length * self.num_minibatches


@dataclass(frozen=True)
class Spec:
    run: str
    seed: int
    checkpoint_prefix: str
    resume: str | None
    task: dict
    ppo: PpoSettings


PPO_FIELDS = ("terrain", "numTimesteps", "numEnvs", "batchSize", "numMinibatches", "unrollLength",
              "numUpdatesPerBatch", "discounting", "learningRate", "entropyCost", "clippingEpsilon",
              "maxGradNorm", "numEvals", "checkpointEverySteps")
# Optional, with Playground's G1 values: the pipeline's config need not repeat them.
PPO_OPTIONAL = ("policyHiddenLayerSizes", "valueHiddenLayerSizes", "episodeLength", "impl", "numEvalEnvs")
G1_HIDDEN_LAYER_SIZES = [512, 256, 128]


def check_ppo(raw: Any, episode_steps: int) -> PpoSettings:
    """`ppo`, with Playground's G1 network sizes and the task's episode length where it has none."""
    p = _object(raw, "ppo", PPO_FIELDS, PPO_OPTIONAL)
    if p["terrain"] not in TERRAIN_TASKS:
        _fail("ppo.terrain", p["terrain"], f"must be one of {sorted(TERRAIN_TASKS)}")
    impl = p.get("impl", "warp")
    if impl not in IMPLS:
        _fail("ppo.impl", impl, f"must be one of {list(IMPLS)}")
    settings = PpoSettings(
        terrain=p["terrain"],
        num_timesteps=_positive_int(p["numTimesteps"], "ppo.numTimesteps", 100_000_000_000),
        num_envs=_positive_int(p["numEnvs"], "ppo.numEnvs", 65_536),
        batch_size=_positive_int(p["batchSize"], "ppo.batchSize", 65_536),
        num_minibatches=_positive_int(p["numMinibatches"], "ppo.numMinibatches", 4_096),
        unroll_length=_positive_int(p["unrollLength"], "ppo.unrollLength", 10_000),
        num_updates_per_batch=_positive_int(p["numUpdatesPerBatch"], "ppo.numUpdatesPerBatch", 1_000),
        discounting=_number(p["discounting"], "ppo.discounting", above=0, at_most=1),
        learning_rate=_number(p["learningRate"], "ppo.learningRate", above=0, at_most=1),
        entropy_cost=_number(p["entropyCost"], "ppo.entropyCost", at_least=0, at_most=1),
        clipping_epsilon=_number(p["clippingEpsilon"], "ppo.clippingEpsilon", above=0, at_most=1),
        max_grad_norm=_number(p["maxGradNorm"], "ppo.maxGradNorm", above=0),
        num_evals=_positive_int(p["numEvals"], "ppo.numEvals", 1_000),
        policy_hidden_layer_sizes=_hidden_sizes(p.get("policyHiddenLayerSizes", G1_HIDDEN_LAYER_SIZES), "ppo.policyHiddenLayerSizes"),
        value_hidden_layer_sizes=_hidden_sizes(p.get("valueHiddenLayerSizes", G1_HIDDEN_LAYER_SIZES), "ppo.valueHiddenLayerSizes"),
        checkpoint_every_steps=_positive_int(p["checkpointEverySteps"], "ppo.checkpointEverySteps"),
        episode_length=_positive_int(p.get("episodeLength", episode_steps), "ppo.episodeLength", 100_000),
        impl=impl,
        num_eval_envs=_positive_int(p.get("numEvalEnvs", DEFAULT_NUM_EVAL_ENVS), "ppo.numEvalEnvs", 65_536),
    )
    # Brax's own assertion (ppo/train.py): every minibatch draws whole environments' unrolls.
    if (settings.batch_size * settings.num_minibatches) % settings.num_envs:
        _fail("ppo.numEnvs", settings.num_envs,
              f"must divide ppo.batchSize x ppo.numMinibatches ({settings.batch_size} x {settings.num_minibatches}"
              f" = {settings.batch_size * settings.num_minibatches}), as Brax's PPO requires")
    writes = math.ceil(settings.num_timesteps / settings.checkpoint_every_steps)
    if writes > MAX_CHECKPOINTS:
        _fail("ppo.checkpointEverySteps", settings.checkpoint_every_steps,
              f"makes {writes} checkpoints of {settings.num_timesteps} steps, over the {MAX_CHECKPOINTS} a run may write")
    return settings


def check_task(raw: Any) -> dict:
    """The task's constants, checked and returned as plain floats, ints and pairs."""
    t = _object(raw, "task", ("timing", "actions", "commands", "rewardWeights", "rewardSettings",
                              "observationNoise", "reset", "pushes"))
    timing = _object(t["timing"], "task.timing", ("ctrlDt", "simDt", "episodeSteps", "replaySteps"))
    ctrl_dt = _number(timing["ctrlDt"], "task.timing.ctrlDt", above=0, at_most=1)
    sim_dt = _number(timing["simDt"], "task.timing.simDt", above=0, at_most=ctrl_dt)
    substeps = ctrl_dt / sim_dt
    if abs(substeps - round(substeps)) > 1e-6:
        _fail("task.timing.simDt", timing["simDt"],
              f"must divide task.timing.ctrlDt ({timing['ctrlDt']}) into a whole number of physics steps")
    actions = _object(t["actions"], "task.actions", ("keyframe", "actionScale", "size"))
    commands = _object(t["commands"], "task.commands", ("forward", "lateral", "yaw", "zeroShare", "resampleAfterSteps"))
    weights = _object(t["rewardWeights"], "task.rewardWeights", tuple(REWARD_TERMS))
    settings = _object(t["rewardSettings"], "task.rewardSettings", ("trackingSigma", "swingHeight", "maxContactForce"))
    noise = _object(t["observationNoise"], "task.observationNoise", tuple(NOISE_SCALES))
    reset = _object(t["reset"], "task.reset", ("xy", "yaw", "jointScale", "baseVelocity", "gaitHz"))
    pushes = _object(t["pushes"], "task.pushes", ("intervalSeconds", "magnitude"))
    if not isinstance(actions["keyframe"], str):
        _fail("task.actions.keyframe", actions["keyframe"], "must be a keyframe's name")
    task = {
        "timing": {
            "ctrlDt": ctrl_dt,
            "simDt": sim_dt,
            "episodeSteps": _positive_int(timing["episodeSteps"], "task.timing.episodeSteps", 100_000),
            "replaySteps": _positive_int(timing["replaySteps"], "task.timing.replaySteps", 100_000),
        },
        "actions": {
            "keyframe": actions["keyframe"],
            "actionScale": _number(actions["actionScale"], "task.actions.actionScale", above=0),
            "size": _positive_int(actions["size"], "task.actions.size"),
        },
        "commands": {
            "forward": _pair(commands["forward"], "task.commands.forward"),
            "lateral": _pair(commands["lateral"], "task.commands.lateral"),
            "yaw": _pair(commands["yaw"], "task.commands.yaw"),
            "zeroShare": _number(commands["zeroShare"], "task.commands.zeroShare", at_least=0, at_most=1),
            "resampleAfterSteps": _positive_int(commands["resampleAfterSteps"], "task.commands.resampleAfterSteps"),
        },
        "rewardWeights": {name: _number(weights[name], f"task.rewardWeights.{name}") for name in REWARD_TERMS},
        "rewardSettings": {
            "trackingSigma": _number(settings["trackingSigma"], "task.rewardSettings.trackingSigma", above=0),
            "swingHeight": _number(settings["swingHeight"], "task.rewardSettings.swingHeight", above=0),
            "maxContactForce": _number(settings["maxContactForce"], "task.rewardSettings.maxContactForce", at_least=0),
        },
        "observationNoise": {name: _number(noise[name], f"task.observationNoise.{name}", at_least=0) for name in NOISE_SCALES},
        "reset": {
            "xy": _number(reset["xy"], "task.reset.xy", at_least=0),
            "yaw": _number(reset["yaw"], "task.reset.yaw", at_least=0),
            "jointScale": _pair(reset["jointScale"], "task.reset.jointScale", at_least=0),
            "baseVelocity": _number(reset["baseVelocity"], "task.reset.baseVelocity", at_least=0),
            "gaitHz": _pair(reset["gaitHz"], "task.reset.gaitHz", at_least=0),
        },
        "pushes": {
            # Upstream rounds the interval to control steps and takes the step count modulo it:
            # an interval under one control step would be a modulo by zero.
            "intervalSeconds": _pair(pushes["intervalSeconds"], "task.pushes.intervalSeconds", at_least=ctrl_dt),
            "magnitude": _pair(pushes["magnitude"], "task.pushes.magnitude", at_least=0),
        },
    }
    for path, expected in UPSTREAM_FIXED.items():
        _, group, name = path.split(".")
        value = task[group][name]
        if isinstance(expected, tuple):
            same = all(abs(a - b) <= 1e-9 for a, b in zip(value, expected))
            value, expected = list(value), list(expected)
        elif isinstance(expected, float):
            same = abs(value - expected) <= 1e-9
        else:
            same = value == expected
        if not same:
            _fail(path, value, f"cannot be honoured: upstream's G1 joystick task hard-codes {expected!r} in its code"
                               " (not its config), and this job does not rewrite upstream's code")
    return task


def check_spec(raw: Any) -> Spec:
    """The spec, every field checked, each error naming the field and the value refused."""
    spec = _object(raw, "", ("trainer", "run", "seed", "checkpointPrefix", "resume", "task", "ppo"))
    if spec["trainer"] != TRAINER:
        _fail("trainer", spec["trainer"], "is not this job's trainer (it trains 'ppo'; the CPU job trains 'ars')")
    name = spec["run"]
    if not isinstance(name, str) or not checkpoints.RUN_NAME.match(name):
        _fail("run", name, "must be 1-80 letters, digits, '_' or '-'")
    seed = spec["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**30:
        _fail("seed", seed, "must be an integer from 0 to 2^30")
    prefix = spec["checkpointPrefix"]
    match = re.match(r"^s3://([^/]+)/(.*)$", prefix) if isinstance(prefix, str) else None
    # The checkpoint Lambda accepts a checkpoint.json only at runs/humanoid/checkpoints/<run>/<step>/.
    if not match or match.group(2) != f"{CHECKPOINTS_KEY_PREFIX}{name}/":
        _fail("checkpointPrefix", prefix, f"must be s3://<bucket>/{CHECKPOINTS_KEY_PREFIX}{name}/ (the run's own folder)")
    resume = spec["resume"]
    if resume is not None and (not isinstance(resume, str) or not re.match(r"^s3://[^/]+/.+/checkpoint\.json$", resume)):
        _fail("resume", resume, "must be null or the s3:// URI of a checkpoint.json")
    task = check_task(spec["task"])
    ppo = check_ppo(spec["ppo"], task["timing"]["episodeSteps"])
    if ppo.episode_length != task["timing"]["episodeSteps"]:
        _fail("ppo.episodeLength", ppo.episode_length,
              f"differs from task.timing.episodeSteps ({task['timing']['episodeSteps']}): the task is written once")
    return Spec(run=name, seed=seed, checkpoint_prefix=prefix, resume=resume, task=task, ppo=ppo)


def playground_overrides(task: Mapping[str, Any], ppo: PpoSettings) -> dict[str, Any]:
    """The task as overrides of joystick.py's default_config, flattened ('a.b.c': value).

    Every value the task sets is here under upstream's name; the nine upstream reward terms the task
    leaves out are set to 0 (upstream's own value) so the reward is exactly the task's.
    """
    overrides: dict[str, Any] = {
        "ctrl_dt": task["timing"]["ctrlDt"],
        "sim_dt": task["timing"]["simDt"],
        "episode_length": task["timing"]["episodeSteps"],
        "action_scale": task["actions"]["actionScale"],
        # sample_command draws each component uniformly from these config ranges.
        "lin_vel_x": list(task["commands"]["forward"]),
        "lin_vel_y": list(task["commands"]["lateral"]),
        "ang_vel_yaw": list(task["commands"]["yaw"]),
        "reward_config.tracking_sigma": task["rewardSettings"]["trackingSigma"],
        # feet_phase's swing height is read from max_foot_height.
        "reward_config.max_foot_height": task["rewardSettings"]["swingHeight"],
        "reward_config.max_contact_force": task["rewardSettings"]["maxContactForce"],
        "noise_config.level": 1.0,
        "push_config.enable": True,
        "push_config.interval_range": list(task["pushes"]["intervalSeconds"]),
        "push_config.magnitude_range": list(task["pushes"]["magnitude"]),
        "impl": ppo.impl,
        "naconmax": CONTACTS_PER_WORLD * max(ppo.num_envs, ppo.num_eval_envs),
    }
    for ours, theirs in REWARD_TERMS.items():
        overrides[f"reward_config.scales.{theirs}"] = task["rewardWeights"][ours]
    for theirs in ZERO_WEIGHT_SCALES:
        overrides[f"reward_config.scales.{theirs}"] = 0.0
    for ours, theirs in NOISE_SCALES.items():
        overrides[f"noise_config.scales.{theirs}"] = task["observationNoise"][ours]
    return overrides


# ---------------------------------------------------------------------------------------------
# Where to start, and the checkpoints along the way (pure: the tests drive them with fakes).

@dataclass
class Start:
    """What a run continues from: a checkpoint's step, history and raw parameters, or nothing."""

    uri: str | None = None
    step: int = 0
    history: list = field(default_factory=list)
    params: bytes | None = None
    own: bool = False

    @property
    def seconds(self) -> float:
        return float(self.history[-1]["seconds"]) if self.history else 0.0


def find_start(client: Any, spec: Spec) -> Start:
    """The run's own newest checkpoint (Batch reran the job), else `resume`, else a fresh start."""
    own = checkpoints.latest_checkpoint(client, spec.checkpoint_prefix)
    uri = own or spec.resume
    if uri is None:
        return Start()
    field_name = "checkpoint" if own else "resume"
    checkpoint = checkpoints.read_checkpoint(client, uri, field_name)
    if checkpoint.trainer != TRAINER:
        raise SpecError(f"{field_name}: {uri} is a {checkpoint.trainer} checkpoint: this job continues only ppo checkpoints")
    if checkpoints.PARAMS_FILE not in checkpoint.files:
        raise SpecError(f"{field_name}: {uri} lists no {checkpoints.PARAMS_FILE}, the Brax parameters a run resumes from")
    return Start(uri=uri, step=checkpoint.step, history=checkpoint.history,
                 params=checkpoint.files[checkpoints.PARAMS_FILE], own=bool(own))


class Recorder:
    """Brax's two callbacks turned into progress lines, history and checkpoints.

    Brax calls policy_params_fn(step, make_policy, params) and then progress_fn(step, metrics) at
    each evaluation, its steps counted from 0 in this job. The params are kept until the
    evaluation of the same step arrives, so a checkpoint's history always ends with its own
    evaluation; a checkpoint is written once `every` steps have passed since the last one, and
    `finish` writes the final one. `export` turns Brax's params into the checkpoint's files.
    """

    def __init__(self, client: Any, spec: Spec, start: Start, export: Callable[[Any], dict[str, bytes]],
                 progress: Callable[..., None], clock: Callable[[], float] = time.monotonic):
        self.client, self.spec, self.start, self.export = client, spec, start, export
        self.progress, self.clock = progress, clock
        self.history = list(start.history)
        self.started = clock()
        self.pending: tuple[int, Any] | None = None
        self.latest_step = 0  # Brax's step of the newest params seen
        self.last_step = start.step
        self.last_uri = start.uri if start.own else None
        self.written: list[str] = []

    def seconds(self) -> float:
        return self.start.seconds + (self.clock() - self.started)

    def on_params(self, step: int, params: Any) -> None:
        self.pending = (int(step), params)
        self.latest_step = max(self.latest_step, int(step))

    def on_progress(self, step: int, metrics: Mapping[str, Any]) -> None:
        step = int(step)
        if step == 0 and self.start.uri is not None:
            return  # Brax's first evaluation of the restored policy: the checkpoint's history has it.
        total = self.start.step + step
        mean_return = float(metrics.get("eval/episode_reward", float("nan")))
        length = float(metrics.get("eval/avg_episode_length", float("nan")))
        if not (math.isfinite(mean_return) and math.isfinite(length)):
            raise RuntimeError(f"the evaluation at step {total} gave a return of {mean_return} over {length} steps:"
                               " training diverged (the last good checkpoint stands)")
        sps = metrics.get("training/sps")
        self.history.append(checkpoints.history_entry(total, mean_return, length, self.seconds()))
        self.progress(steps=total, meanReturn=mean_return, episodeLength=length,
                      stepsPerSecond=None if sps is None else float(sps))
        if self.pending is not None and self.pending[0] == step and total - self.last_step >= self.spec.ppo.checkpoint_every_steps:
            self._write(total, self.pending[1])

    def _write(self, total: int, params: Any) -> str:
        uri = checkpoints.write_checkpoint(self.client, self.spec.checkpoint_prefix, total, self.export(params),
                                           self.history, self.spec.run, TRAINER)
        self.last_step, self.last_uri = total, uri
        self.written.append(uri)
        self.progress(steps=total, checkpoint=uri)
        return uri

    def finish(self, step: int, params: Any) -> str:
        """The final checkpoint (unless the last evaluation's already is it); returns its URI."""
        total = self.start.step + int(step)
        if self.last_uri is not None and self.last_step == total:
            return self.last_uri
        return self._write(total, params)


def resumed_num_evals(num_evals: int, num_timesteps: int, remaining: int) -> int:
    """Evaluations for the steps left, keeping Brax's epoch (steps between evaluations) the same.

    Brax splits num_timesteps into num_evals - 1 epochs (at least 1) after an initial evaluation.
    """
    if num_evals <= 1 or remaining >= num_timesteps:
        return num_evals
    return 1 + max(1, math.ceil((num_evals - 1) * remaining / num_timesteps))


def resumed_seed(seed: int, step: int) -> int:
    """A resumed run's seed: fresh environments and noise, not a replay of the first run's."""
    return seed if step == 0 else (seed * 1_000_003 + step) % 2**31


# ---------------------------------------------------------------------------------------------
# Training (JAX from here on, imported lazily).

def make_env(spec: Spec):
    """Playground's G1 joystick env with its config overridden from the task."""
    from mujoco_playground._src import mjx_env
    from mujoco_playground._src.locomotion.g1 import joystick

    # Playground clones Menagerie from GitHub on first use; the image has it (pinned) already,
    # and a job with no network must say so rather than hang on a clone.
    g1_models = mjx_env.MENAGERIE_PATH / "unitree_g1"
    if not g1_models.exists():
        raise RuntimeError(f"MuJoCo Menagerie's unitree_g1 is not at {g1_models}: the image must bundle it")
    config = joystick.default_config()  # a fresh one: Joystick's default argument is shared
    apply_overrides(config, playground_overrides(spec.task, spec.ppo))
    env = joystick.Joystick(task=TERRAIN_TASKS[spec.ppo.terrain], config=config)
    if env.action_size != checkpoints.ACTION_SIZE:
        raise RuntimeError(f"the G1 model has {env.action_size} actuators, not the task's {checkpoints.ACTION_SIZE}")
    sizes = env.observation_size
    if tuple(sizes["state"]) != (checkpoints.OBSERVATION_SIZE,):
        raise RuntimeError(f"the env's state observation is {sizes['state']}, not the task's ({checkpoints.OBSERVATION_SIZE},)")
    return env


def apply_overrides(config: Any, overrides: Mapping[str, Any]) -> None:
    """Sets each 'a.b.c' of an ml_collections ConfigDict, refusing a name upstream does not have.

    Locked first, so a misspelt name raises instead of adding a field joystick.py never reads.
    """
    config.lock()
    for path, value in overrides.items():
        node = config
        parts = path.split(".")
        for i, part in enumerate(parts):
            if part not in node:
                raise KeyError(f"Playground's G1 joystick config has no {'.'.join(parts[: i + 1])} (setting {path})")
            if i < len(parts) - 1:
                node = node[part]
        setattr(node, parts[-1], value)


def network_factory(ppo: PpoSettings):
    """Brax's PPO networks as Playground configures the G1: the policy reads `state`, the value
    network the `privileged_state`; Brax's defaults otherwise (swish, tanh-normal, lecun init)."""
    from brax.training.agents.ppo import networks as ppo_networks

    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=ppo.policy_hidden_layer_sizes,
        value_hidden_layer_sizes=ppo.value_hidden_layer_sizes,
        policy_obs_key="state",
        value_obs_key="privileged_state",
    )


def param_templates(env: Any, ppo: PpoSettings, seed: int = 0):
    """(normaliser, policy, value) of the right structure and shapes, to restore params into."""
    import jax
    import numpy as np
    from brax.training.acme import running_statistics, specs

    sizes = {key: tuple(shape) for key, shape in env.observation_size.items()}
    networks = network_factory(ppo)(sizes, env.action_size, preprocess_observations_fn=running_statistics.normalize)
    key_policy, key_value = jax.random.split(jax.random.PRNGKey(seed))
    normaliser = running_statistics.init_state({key: specs.Array(shape, np.dtype("float32")) for key, shape in sizes.items()})
    return normaliser, networks.policy_network.init(key_policy), networks.value_network.init(key_value)


PARAM_PARTS = ("normaliser", "policy", "value")


def serialize_params(params: Any) -> bytes:
    """Brax's (normaliser, policy, value) as flax msgpack of a {normaliser, policy, value} state dict."""
    from flax import serialization

    return serialization.msgpack_serialize({part: serialization.to_state_dict(value) for part, value in zip(PARAM_PARTS, params)})


def restore_params(data: bytes, templates: Any, source: str):
    """params.msgpack read back into Brax's structures, each array's shape checked against this run's."""
    import jax
    import numpy as np
    from flax import serialization

    state = serialization.msgpack_restore(data)
    if not isinstance(state, dict) or set(state) != set(PARAM_PARTS):
        raise SpecError(f"{source} {checkpoints.PARAMS_FILE}: holds {sorted(state) if isinstance(state, dict) else type(state).__name__}, not {list(PARAM_PARTS)}")
    restored = []
    for part, template in zip(PARAM_PARTS, templates):
        value = serialization.from_state_dict(template, state[part])
        want = [np.shape(x) for x in jax.tree_util.tree_leaves(template)]
        got = [np.shape(x) for x in jax.tree_util.tree_leaves(value)]
        if want != got:
            raise SpecError(f"{source} {checkpoints.PARAMS_FILE}: its {part} parameters have shapes {got}, this run's network {want}"
                            " (were the hidden layer sizes changed?)")
        restored.append(value)
    return tuple(restored)


def export_files(params: Any) -> dict[str, bytes]:
    """A checkpoint's files from Brax's params (numpy, from jax.device_get): the ONNX policy first."""
    normaliser, policy, _ = params
    onnx = checkpoints.policy_onnx(normaliser.mean["state"], normaliser.std["state"], checkpoints.policy_layers(policy))
    return {checkpoints.POLICY_FILE: onnx, checkpoints.PARAMS_FILE: serialize_params(params)}


def train(spec: Spec, ctx: JobContext, start: Start) -> dict:
    os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
    import jax
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground._src import wrapper

    ppo_settings = spec.ppo
    env = make_env(spec)
    restored = None
    if start.params is not None:
        restored = restore_params(start.params, param_templates(env, ppo_settings), "checkpoint" if start.own else "resume")
    remaining = ppo_settings.num_timesteps - start.step
    recorder = Recorder(ctx.client, spec, start, export_files, ctx.progress)
    ctx.progress(stage="train", startedFrom=start.uri, step=start.step, remaining=remaining,
                 devices=[str(d) for d in jax.devices()])
    began = time.monotonic()
    _, params, _ = ppo.train(
        environment=env,
        num_timesteps=remaining,
        num_envs=ppo_settings.num_envs,
        episode_length=ppo_settings.episode_length,
        action_repeat=1,
        wrap_env_fn=wrapper.wrap_for_brax_training,
        learning_rate=ppo_settings.learning_rate,
        entropy_cost=ppo_settings.entropy_cost,
        discounting=ppo_settings.discounting,
        unroll_length=ppo_settings.unroll_length,
        batch_size=ppo_settings.batch_size,
        num_minibatches=ppo_settings.num_minibatches,
        num_updates_per_batch=ppo_settings.num_updates_per_batch,
        num_resets_per_eval=NUM_RESETS_PER_EVAL,
        normalize_observations=True,
        reward_scaling=REWARD_SCALING,
        clipping_epsilon=ppo_settings.clipping_epsilon,
        max_grad_norm=ppo_settings.max_grad_norm,
        network_factory=network_factory(ppo_settings),
        seed=resumed_seed(spec.seed, start.step),
        num_evals=resumed_num_evals(ppo_settings.num_evals, ppo_settings.num_timesteps, remaining),
        num_eval_envs=ppo_settings.num_eval_envs,
        progress_fn=recorder.on_progress,
        policy_params_fn=lambda step, _make_policy, p: recorder.on_params(step, jax.device_get(p)),
        restore_params=restored,
        run_evals=True,
    )
    seconds = time.monotonic() - began
    # Brax returns the params of its last epoch, the step its last policy_params_fn call named.
    uri = recorder.finish(recorder.latest_step, jax.device_get(params))
    steps = recorder.last_step
    return result(ctx.client, uri, steps, recorder.seconds(),
                  round((steps - start.step) / seconds, 3) if seconds > 0 else 0.0, recorder.written, start.uri)


def result(client: Any, uri: str, steps: int, seconds: float, steps_per_second: float, written: list[str],
           started_from: str | None) -> dict:
    """result.json, the same fields the CPU trainer's has: the state machine's replays key by the
    final checkpoint.json's sha256, and the report lists the run's checkpoints."""
    return {"checkpoint": uri, "checkpointSha256": hashlib.sha256(checkpoints._get(client, uri, "checkpoint")).hexdigest(),
            "steps": steps, "seconds": round(seconds, 3), "stepsPerSecond": steps_per_second,
            "checkpoints": list(written) or [uri], "startedFrom": started_from}


def main(raw: dict, ctx: JobContext) -> dict:
    spec = check_spec(raw)
    start = find_start(ctx.client, spec)
    if start.step >= spec.ppo.num_timesteps:
        if start.own:  # Batch reran a job that had already written its final checkpoint.
            ctx.progress(stage="done", checkpoint=start.uri, step=start.step)
            return result(ctx.client, start.uri, start.step, start.seconds, 0.0, [], start.uri)
        _fail("ppo.numTimesteps", spec.ppo.num_timesteps, f"is not more than the resumed checkpoint's step ({start.step}): nothing to train")
    return train(spec, ctx, start)


if __name__ == "__main__":
    run(main)
