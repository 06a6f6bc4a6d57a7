"""Tests of train.py's pure parts: the spec's checks, the task as Playground config overrides,
where a run starts, and the checkpoints Brax's callbacks lead to (driven here as Brax calls
them, with an in-memory S3 and a fake export). The training itself needs the GPU image."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import unittest

import checkpoints
import train
from checkpoints import CheckpointError
from test_checkpoints import ListingS3, files, history

HERE = os.path.dirname(os.path.abspath(__file__))
TASK_TS = os.path.join(HERE, "..", "..", "shared", "humanoid", "task.ts")
PREFIX = "s3://bucket/runs/humanoid/checkpoints/g1-run/"


def valid_spec() -> dict:
    """The spec the pipeline sends: task.ts's constants as JSON (integral numbers as ints, as
    JSON.stringify writes them) and Playground's G1 PPO settings."""
    return {
        "trainer": "ppo",
        "run": "g1-run",
        "seed": 0,
        "checkpointPrefix": PREFIX,
        "resume": None,
        "task": {
            "timing": {"ctrlDt": 0.02, "simDt": 0.002, "episodeSteps": 1000, "replaySteps": 500},
            "actions": {"keyframe": "knees_bent", "actionScale": 0.5, "size": 29},
            "commands": {"forward": [0, 2.5], "lateral": [-0.25, 0.25], "yaw": [-0.5, 0.5], "zeroShare": 0.1, "resampleAfterSteps": 500},
            "rewardWeights": {
                "trackingLinVel": 1.5, "trackingAngVel": 0.75, "feetAirTime": 2.5, "feetPhase": 1, "orientation": -2,
                "angVelXy": -0.15, "feetSlip": -0.25, "collision": -0.1, "contactForce": -0.01, "standStill": -1,
                "knee": -0.1, "hip": -0.25, "dofPosLimits": -1, "pose": -0.1, "termination": -100,
            },
            "rewardSettings": {"trackingSigma": 0.25, "swingHeight": 0.15, "maxContactForce": 500},
            "observationNoise": {"jointPosition": 0.03, "jointVelocity": 1.5, "gravity": 0.05, "linearVelocity": 0.1, "gyro": 0.2},
            "reset": {"xy": 0.5, "yaw": 3.14, "jointScale": [0.5, 1.5], "baseVelocity": 0.5, "gaitHz": [1.25, 1.5]},
            "pushes": {"intervalSeconds": [5, 10], "magnitude": [0.1, 2]},
        },
        "ppo": {
            "terrain": "flat", "numTimesteps": 150_000_000, "numEnvs": 8192, "batchSize": 256, "numMinibatches": 32,
            "unrollLength": 20, "numUpdatesPerBatch": 4, "discounting": 0.97, "learningRate": 0.0003,
            "entropyCost": 0.005, "clippingEpsilon": 0.2, "maxGradNorm": 1.0, "numEvals": 20,
            "policyHiddenLayerSizes": [512, 256, 128], "valueHiddenLayerSizes": [512, 256, 128],
            "checkpointEverySteps": 10_000_000, "episodeLength": 1000,
        },
    }


def changed(path: str, value: object) -> dict:
    """valid_spec() with one field set (path 'a.b.c'), or removed when value is DELETE."""
    spec = valid_spec()
    *parents, name = path.split(".")
    node = spec
    for part in parents:
        node = node[part]
    if value is DELETE:
        del node[name]
    else:
        node[name] = value
    return spec


DELETE = object()


class SpecTest(unittest.TestCase):
    def refused(self, spec: dict, message: str) -> None:
        with self.assertRaises(train.SpecError) as raised:
            train.check_spec(spec)
        self.assertEqual(str(raised.exception)[: len(message)], message, str(raised.exception))

    def test_the_pipeline_spec_is_accepted(self) -> None:
        spec = train.check_spec(valid_spec())
        self.assertEqual((spec.run, spec.seed, spec.resume), ("g1-run", 0, None))
        self.assertEqual(spec.ppo.num_envs, 8192)
        self.assertEqual(spec.ppo.policy_hidden_layer_sizes, (512, 256, 128))
        self.assertEqual((spec.ppo.impl, spec.ppo.num_eval_envs), ("warp", 128))
        self.assertEqual(spec.ppo.steps_per_training_step, 256 * 20 * 32)
        self.assertEqual(spec.task["commands"]["forward"], (0.0, 2.5))
        self.assertIsInstance(spec.task["rewardWeights"]["termination"], float)

    def test_each_refusal_names_the_field_and_the_value(self) -> None:
        cases = [
            ("ppo.numEnvs", 0, "ppo.numEnvs: 0 must be a positive integer"),
            ("ppo.numEnvs", 8192.0, "ppo.numEnvs: 8192.0 must be a positive integer"),
            ("ppo.numEnvs", True, "ppo.numEnvs: True must be a positive integer"),
            ("ppo.numEnvs", 3000, "ppo.numEnvs: 3000 must divide ppo.batchSize x ppo.numMinibatches (256 x 32 = 8192)"),
            ("trainer", "ars", "trainer: 'ars' is not this job's trainer"),
            ("ppo.terrain", "hilly", "ppo.terrain: 'hilly' must be one of ['flat', 'rough']"),
            ("ppo.impl", "cuda", "ppo.impl: 'cuda' must be one of ['warp', 'jax']"),
            ("ppo.discounting", 1.5, "ppo.discounting: 1.5 must be at most 1"),
            ("ppo.learningRate", 0, "ppo.learningRate: 0 must be greater than 0"),
            ("ppo.entropyCost", float("nan"), "ppo.entropyCost: nan must be a finite number"),
            ("ppo.policyHiddenLayerSizes", [], "ppo.policyHiddenLayerSizes: [] must be a list of 1 to 8 layer widths"),
            ("ppo.valueHiddenLayerSizes", [512, -1], "ppo.valueHiddenLayerSizes[1]: -1 must be a positive integer"),
            ("ppo.checkpointEverySteps", 1_000_000, "ppo.checkpointEverySteps: 1000000 makes 150 checkpoints"),
            ("ppo.episodeLength", 500, "ppo.episodeLength: 500 differs from task.timing.episodeSteps (1000)"),
            ("ppo.numTimesteps", DELETE, "ppo.numTimesteps: missing"),
            ("ppo.checkpointEverySteps", DELETE, "ppo.checkpointEverySteps: missing"),
            ("ppo.numEnvironments", 8, "ppo.numEnvironments: is not a field this job reads"),
            ("run", "my run", "run: 'my run' must be 1-80 letters"),
            ("seed", -1, "seed: -1 must be an integer from 0 to 2^30"),
            ("checkpointPrefix", "s3://bucket/runs/humanoid/checkpoints/other/",
             "checkpointPrefix: 's3://bucket/runs/humanoid/checkpoints/other/' must be s3://<bucket>/runs/humanoid/checkpoints/g1-run/"),
            ("resume", "s3://bucket/x/policy.onnx", "resume: 's3://bucket/x/policy.onnx' must be null or the s3:// URI of a checkpoint.json"),
            ("extra", 1, "extra: is not a field this job reads"),
            ("task", DELETE, "task: missing"),
            ("task.actions.size", 30, "task.actions.size: 30 cannot be honoured: upstream's G1 joystick task hard-codes 29"),
            ("task.actions.keyframe", "home", "task.actions.keyframe: 'home' cannot be honoured"),
            ("task.actions.actionScale", 0, "task.actions.actionScale: 0 must be greater than 0"),
            ("task.commands.zeroShare", 0.2, "task.commands.zeroShare: 0.2 cannot be honoured: upstream's G1 joystick task hard-codes 0.1"),
            ("task.commands.resampleAfterSteps", 250, "task.commands.resampleAfterSteps: 250 cannot be honoured"),
            ("task.commands.forward", [2.5, 0], "task.commands.forward: [2.5, 0] must be [low, high] with low <= high"),
            ("task.commands.lateral", [-0.25], "task.commands.lateral: [-0.25] must be [low, high]"),
            ("task.reset.xy", 0.4, "task.reset.xy: 0.4 cannot be honoured"),
            ("task.reset.gaitHz", [1.0, 1.5], "task.reset.gaitHz: [1.0, 1.5] cannot be honoured: upstream's G1 joystick task hard-codes [1.25, 1.5]"),
            ("task.rewardWeights.alive", 1.0, "task.rewardWeights.alive: is not a field this job reads"),
            ("task.rewardWeights.pose", DELETE, "task.rewardWeights.pose: missing"),
            ("task.rewardWeights.pose", "0.1", "task.rewardWeights.pose: '0.1' must be a finite number"),
            ("task.rewardSettings.trackingSigma", 0, "task.rewardSettings.trackingSigma: 0 must be greater than 0"),
            ("task.observationNoise.gyro", -0.2, "task.observationNoise.gyro: -0.2 must be at least 0"),
            ("task.timing.simDt", 0.003, "task.timing.simDt: 0.003 must divide task.timing.ctrlDt (0.02) into a whole number of physics steps"),
            ("task.pushes.intervalSeconds", [0.01, 10], "task.pushes.intervalSeconds[0]: 0.01 must be at least 0.02"),
        ]
        for path, value, message in cases:
            with self.subTest(path=path, value=value):
                self.refused(changed(path, value), message)
        self.refused([], "spec: [] must be an object")

    def test_the_network_sizes_and_episode_length_default_to_the_g1_s(self) -> None:
        spec = valid_spec()
        for name in ("policyHiddenLayerSizes", "valueHiddenLayerSizes", "episodeLength"):
            del spec["ppo"][name]
        settings = train.check_spec(spec).ppo
        self.assertEqual(settings.policy_hidden_layer_sizes, (512, 256, 128))
        self.assertEqual(settings.value_hidden_layer_sizes, (512, 256, 128))
        self.assertEqual(settings.episode_length, 1000)

    def test_settings_within_bounds_other_than_playgrounds_are_accepted(self) -> None:
        spec = changed("ppo.numEnvs", 4096)
        spec["ppo"]["impl"] = "jax"
        spec["ppo"]["numEvalEnvs"] = 64
        spec["ppo"]["terrain"] = "rough"
        settings = train.check_spec(spec).ppo
        self.assertEqual((settings.num_envs, settings.impl, settings.num_eval_envs, settings.terrain), (4096, "jax", 64, "rough"))


class OverridesTest(unittest.TestCase):
    def setUp(self) -> None:
        spec = train.check_spec(valid_spec())
        self.overrides = train.playground_overrides(spec.task, spec.ppo)

    def test_every_upstream_reward_scale_is_set_the_task_s_or_zero(self) -> None:
        scales = {k.split(".")[-1]: v for k, v in self.overrides.items() if k.startswith("reward_config.scales.")}
        self.assertEqual(sorted(scales), sorted(train.UPSTREAM_SCALES))
        self.assertEqual(len(scales), 24)
        self.assertEqual(scales["tracking_lin_vel"], 1.5)  # ours, not upstream's 1.0
        self.assertEqual(scales["feet_air_time"], 2.5)  # ours, not upstream's 2.0
        self.assertEqual(scales["joint_deviation_knee"], -0.1)
        self.assertEqual(scales["joint_deviation_hip"], -0.25)
        self.assertEqual(scales["termination"], -100.0)
        for name in ("lin_vel_z", "base_height", "torques", "action_rate", "energy", "dof_acc", "feet_clearance", "feet_height", "alive"):
            self.assertEqual(scales[name], 0.0, name)

    def test_commands_timing_noise_pushes_and_reward_settings(self) -> None:
        o = self.overrides
        self.assertEqual((o["lin_vel_x"], o["lin_vel_y"], o["ang_vel_yaw"]), ([0.0, 2.5], [-0.25, 0.25], [-0.5, 0.5]))
        self.assertEqual((o["ctrl_dt"], o["sim_dt"], o["episode_length"], o["action_scale"]), (0.02, 0.002, 1000, 0.5))
        self.assertEqual({k: v for k, v in o.items() if k.startswith("noise_config.")},
                         {"noise_config.level": 1.0, "noise_config.scales.joint_pos": 0.03, "noise_config.scales.joint_vel": 1.5,
                          "noise_config.scales.gravity": 0.05, "noise_config.scales.linvel": 0.1, "noise_config.scales.gyro": 0.2})
        self.assertEqual((o["push_config.enable"], o["push_config.interval_range"], o["push_config.magnitude_range"]),
                         (True, [5.0, 10.0], [0.1, 2.0]))
        self.assertEqual((o["reward_config.tracking_sigma"], o["reward_config.max_foot_height"], o["reward_config.max_contact_force"]),
                         (0.25, 0.15, 500.0))
        self.assertEqual((o["impl"], o["naconmax"]), ("warp", 8 * 8192))

    @unittest.skipUnless(os.path.exists(TASK_TS), "shared/humanoid/task.ts is not beside this checkout (as in the image)")
    def test_the_reward_names_are_task_ts_s(self) -> None:
        with open(TASK_TS, encoding="utf-8") as f:
            source = f.read()
        block = re.search(r"REWARD_TERM_NAMES[^{]*\{(.*?)\};", source, re.S)
        self.assertIsNotNone(block)
        self.assertEqual(dict(re.findall(r"(\w+): '(\w+)'", block.group(1))), train.REWARD_TERMS)


class StartTest(unittest.TestCase):
    def setUp(self) -> None:
        self.s3 = ListingS3()
        self.spec = train.check_spec(valid_spec())

    def test_a_fresh_run_starts_from_nothing(self) -> None:
        start = train.find_start(self.s3, self.spec)
        self.assertEqual((start.uri, start.step, start.history, start.params, start.own), (None, 0, [], None, False))

    def test_the_run_s_own_newest_checkpoint_wins_over_resume(self) -> None:
        other = checkpoints.write_checkpoint(self.s3, "s3://bucket/runs/humanoid/checkpoints/old/", 50_000_000,
                                             files(params=b"old"), history(50_000_000), "old")
        spec = train.check_spec(changed("resume", other))
        self.assertEqual(train.find_start(self.s3, spec).params, b"old")
        own = checkpoints.write_checkpoint(self.s3, PREFIX, 20_000_000, files(params=b"own"), history(0, 20_000_000), "g1-run")
        start = train.find_start(self.s3, spec)
        self.assertEqual((start.uri, start.step, start.params, start.own, start.seconds), (own, 20_000_000, b"own", True, 120.0))

    def test_a_checkpoint_of_the_other_trainer_or_without_params_is_refused(self) -> None:
        ars = checkpoints.write_checkpoint(self.s3, "s3://bucket/runs/humanoid/checkpoints/cpu/", 100,
                                           {"policy.onnx": b"x", "params.json": b"{}"}, [], "cpu", "ars")
        with self.assertRaisesRegex(train.SpecError, "resume: .* is a ars checkpoint: this job continues only ppo checkpoints"):
            train.find_start(self.s3, train.check_spec(changed("resume", ars)))
        bare = checkpoints.write_checkpoint(self.s3, "s3://bucket/runs/humanoid/checkpoints/bare/", 100, {"policy.onnx": b"x"}, [], "bare")
        with self.assertRaisesRegex(train.SpecError, "resume: .* lists no params.msgpack"):
            train.find_start(self.s3, train.check_spec(changed("resume", bare)))
        with self.assertRaisesRegex(CheckpointError, "resume: s3://bucket/nowhere/checkpoint.json: no such object"):
            train.find_start(self.s3, train.check_spec(changed("resume", "s3://bucket/nowhere/checkpoint.json")))

    def test_a_rerun_after_the_final_checkpoint_returns_it_without_training(self) -> None:
        final = checkpoints.write_checkpoint(self.s3, PREFIX, 150_076_416, files(), history(150_076_416), "g1-run")
        lines = []
        ctx = type("Ctx", (), {"client": self.s3, "progress": lambda _self, **f: lines.append(f)})()
        result = train.main(valid_spec(), ctx)
        body = checkpoints._get(self.s3, final, "checkpoint")
        self.assertEqual(result, {"checkpoint": final, "checkpointSha256": hashlib.sha256(body).hexdigest(), "steps": 150_076_416,
                                  "seconds": 60.0, "stepsPerSecond": 0.0, "checkpoints": [final], "startedFrom": final})
        self.assertEqual(lines[0]["stage"], "done")

    def test_resuming_from_a_finished_checkpoint_of_another_run_is_refused(self) -> None:
        other = checkpoints.write_checkpoint(self.s3, "s3://bucket/runs/humanoid/checkpoints/old/", 200_000_000, files(), [], "old")
        ctx = type("Ctx", (), {"client": self.s3, "progress": lambda _self, **f: None})()
        with self.assertRaisesRegex(train.SpecError, r"ppo.numTimesteps: 150000000 is not more than the resumed checkpoint's step \(200000000\)"):
            train.main(changed("resume", other), ctx)

    def test_a_resumed_run_keeps_brax_s_epoch_length_and_draws_new_seeds(self) -> None:
        self.assertEqual(train.resumed_num_evals(20, 150_000_000, 150_000_000), 20)
        self.assertEqual(train.resumed_num_evals(20, 150_000_000, 70_000_000), 1 + 9)
        self.assertEqual(train.resumed_num_evals(20, 150_000_000, 1), 2)
        self.assertEqual(train.resumed_num_evals(1, 150_000_000, 70_000_000), 1)
        self.assertEqual(train.resumed_seed(7, 0), 7)
        self.assertNotEqual(train.resumed_seed(7, 20_000_000), 7)
        self.assertLess(train.resumed_seed(2**30, 10**11), 2**31)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def brax_calls(recorder: train.Recorder, clock: Clock, epoch: int, epochs: int, rewards=None) -> None:
    """What Brax's PPO calls, in its order: an evaluation of the starting policy, its params, then
    per epoch the params and the evaluation of the same step."""
    recorder.on_progress(0, {"eval/episode_reward": 1.0, "eval/avg_episode_length": 20.0})
    recorder.on_params(0, {"step": 0})
    for i in range(1, epochs + 1):
        clock.now += 100.0
        recorder.on_params(i * epoch, {"step": i * epoch})
        reward = (rewards or {}).get(i, 10.0 * i)
        recorder.on_progress(i * epoch, {"eval/episode_reward": reward, "eval/avg_episode_length": 900.0, "training/sps": 1e5})


class RecorderTest(unittest.TestCase):
    def setUp(self) -> None:
        self.s3 = ListingS3()
        self.lines: list[dict] = []
        self.exported: list = []

    def export(self, params) -> dict[str, bytes]:
        self.exported.append(params)
        return files(params=repr(params).encode())

    def recorder(self, start: train.Start, every: int = 10_000_000) -> tuple[train.Recorder, Clock]:
        spec = train.check_spec(changed("ppo.checkpointEverySteps", every))
        clock = Clock()
        return train.Recorder(self.s3, spec, start, self.export, lambda **f: self.lines.append(f), clock), clock

    def test_checkpoints_fall_on_evaluations_once_every_steps_have_passed_and_at_the_end(self) -> None:
        recorder, clock = self.recorder(train.Start())
        brax_calls(recorder, clock, 7_864_320, 4)
        steps = [checkpoints.read_checkpoint(self.s3, uri).step for uri in recorder.written]
        self.assertEqual(steps, [15_728_640, 31_457_280])
        self.assertEqual(self.exported, [{"step": 15_728_640}, {"step": 31_457_280}])
        first = checkpoints.read_checkpoint(self.s3, recorder.written[0])
        # Its history ends with its own evaluation, the untrained policy's first.
        self.assertEqual([h["steps"] for h in first.history], [0, 7_864_320, 15_728_640])
        self.assertEqual(first.history[-1], {"steps": 15_728_640, "meanReturn": 20.0, "meanStepsUpright": 900.0,
                                             "meanForwardSpeed": None, "seconds": 200.0})
        # The last epoch's checkpoint is the final one: finish writes no second copy.
        self.assertEqual(recorder.finish(recorder.latest_step, {"step": 31_457_280}), recorder.written[-1])
        self.assertEqual(len(recorder.written), 2)
        progress = [line for line in self.lines if "meanReturn" in line]
        self.assertEqual(progress[1], {"steps": 7_864_320, "meanReturn": 10.0, "episodeLength": 900.0, "stepsPerSecond": 1e5})
        self.assertEqual(progress[0]["stepsPerSecond"], None)
        self.assertEqual([line["checkpoint"] for line in self.lines if "checkpoint" in line], recorder.written)

    def test_finish_writes_the_final_checkpoint_when_the_last_evaluation_did_not(self) -> None:
        recorder, clock = self.recorder(train.Start())
        brax_calls(recorder, clock, 7_864_320, 3)
        self.assertEqual(len(recorder.written), 1)
        uri = recorder.finish(recorder.latest_step, {"step": "final"})
        final = checkpoints.read_checkpoint(self.s3, uri)
        self.assertEqual(final.step, 23_592_960)
        self.assertEqual(final.history[-1]["steps"], 23_592_960)
        self.assertEqual(latest := checkpoints.latest_checkpoint(self.s3, PREFIX), uri, latest)

    def test_a_resumed_run_counts_from_the_checkpoint_and_keeps_its_history(self) -> None:
        own = checkpoints.write_checkpoint(self.s3, PREFIX, 15_728_640, files(), history(0, 15_728_640), "g1-run")
        start = train.find_start(self.s3, train.check_spec(valid_spec()))
        recorder, clock = self.recorder(start)
        brax_calls(recorder, clock, 7_864_320, 2)
        self.assertEqual(len(recorder.written), 1)
        resumed = checkpoints.read_checkpoint(self.s3, recorder.written[0])
        self.assertEqual(resumed.step, 31_457_280)
        # The restored policy's re-evaluation at step 0 is not recorded twice.
        self.assertEqual([h["steps"] for h in resumed.history], [0, 15_728_640, 23_592_960, 31_457_280])
        self.assertEqual(resumed.history[-1]["seconds"], 120.0 + 200.0)
        self.assertNotEqual(own, recorder.written[0])

    def test_a_rerun_whose_last_checkpoint_is_already_final_returns_it(self) -> None:
        own = checkpoints.write_checkpoint(self.s3, PREFIX, 15_728_640, files(), history(15_728_640), "g1-run")
        recorder, _ = self.recorder(train.find_start(self.s3, train.check_spec(valid_spec())))
        self.assertEqual(recorder.finish(0, {}), own)
        self.assertEqual(recorder.written, [])

    def test_a_diverged_evaluation_stops_the_run_without_a_checkpoint(self) -> None:
        recorder, clock = self.recorder(train.Start(), every=5_000_000)
        with self.assertRaisesRegex(RuntimeError, "the evaluation at step 15728640 gave a return of nan"):
            brax_calls(recorder, clock, 7_864_320, 3, rewards={2: float("nan")})
        self.assertEqual([checkpoints.read_checkpoint(self.s3, u).step for u in recorder.written], [7_864_320])


class LazyImportTest(unittest.TestCase):
    def test_importing_the_job_imports_neither_jax_nor_boto3(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.join(HERE, "..", "common"), os.environ.get("PYTHONPATH", "")]),
                   PYTHONDONTWRITEBYTECODE="1")
        code = "import sys, train, checkpoints; bad = [m for m in ('jax', 'brax', 'flax', 'mujoco', 'boto3') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
        result = subprocess.run([sys.executable, "-c", code], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main()
