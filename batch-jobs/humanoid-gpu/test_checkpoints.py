"""Tests of checkpoints.py: the ONNX export against its numpy reference, and the checkpoint layout
against an in-memory S3. No JAX and no onnxruntime here: the ONNX graph is evaluated by a small
numpy interpreter of the ops the export uses, so what is checked is the graph itself."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import unittest
from types import SimpleNamespace

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

import checkpoints
import make_fixture
from checkpoints import CheckpointError
from memory_s3 import MemoryS3

SIZES = (103, 512, 256, 128, 58)
PREFIX = "s3://bucket/runs/humanoid/checkpoints/run-1/"


class ListingS3(MemoryS3):
    """MemoryS3 with list_objects_v2, paged small so the tests walk several pages."""

    page_size = 2

    def list_objects_v2(self, Bucket: str, Prefix: str = "", ContinuationToken: str | None = None, **_: object) -> dict:  # noqa: N803
        keys = sorted(k for (b, k) in self.objects if b == Bucket and k.startswith(Prefix))
        start = int(ContinuationToken or 0)
        page = keys[start:start + self.page_size]
        more = start + self.page_size < len(keys)
        return {"Contents": [{"Key": k} for k in page], "IsTruncated": more,
                **({"NextContinuationToken": str(start + self.page_size)} if more else {})}


def run_onnx(model_bytes: bytes, observations: np.ndarray) -> np.ndarray:
    """The graph evaluated node by node in float32, for exactly the ops a policy export may use."""
    model = onnx.load_from_string(model_bytes)
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = np.asarray(observations, dtype=np.float32)

    def slice_(data, starts, ends, axes=None, steps=None):
        index = [slice(None)] * data.ndim
        axes = range(len(starts)) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        for start, end, axis, step in zip(starts, ends, axes, steps):
            index[int(axis)] = slice(int(start), int(end), int(step))
        return data[tuple(index)]

    ops = {
        "Sub": lambda a, b: a - b,
        "Div": lambda a, b: a / b,
        "Add": lambda a, b: a + b,
        "Mul": lambda a, b: a * b,
        "MatMul": np.matmul,
        "Sigmoid": lambda x: (1.0 / (1.0 + np.exp(-x))).astype(np.float32),
        "Tanh": np.tanh,
        "Relu": lambda x: np.maximum(x, np.float32(0)),
        "Slice": slice_,
    }
    for node in model.graph.node:
        if node.op_type not in ops:
            raise AssertionError(f"the interpreter does not know {node.op_type}")
        result = ops[node.op_type](*[values[name] for name in node.input])
        values[node.output[0]] = np.asarray(result, dtype=np.float32) if node.op_type != "Slice" else result
    return values[model.graph.output[0].name]


def random_policy(seed: int = 0, sizes: tuple[int, ...] = SIZES):
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(3.0 / fan_in)
        layers.append((rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                       rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)))
    mean = rng.normal(0, 0.5, sizes[0]).astype(np.float32)
    std = rng.uniform(0.2, 2.0, sizes[0]).astype(np.float32)
    return mean, std, layers


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


class PolicyOnnxTest(unittest.TestCase):
    def setUp(self) -> None:
        self.mean, self.std, self.layers = random_policy()
        self.model_bytes = checkpoints.policy_onnx(self.mean, self.std, self.layers)
        self.model = onnx.load_from_string(self.model_bytes)

    def test_the_checker_accepts_it_with_the_policy_contract_names_and_shapes(self) -> None:
        onnx.checker.check_model(self.model, full_check=True)
        graph = self.model.graph
        self.assertEqual([i.name for i in graph.input], ["observation"])
        self.assertEqual([o.name for o in graph.output], ["action"])
        self.assertEqual(dims(graph.input[0]), ["batch", 103])
        self.assertEqual(dims(graph.output[0]), ["batch", 29])
        self.assertEqual(graph.input[0].type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual(graph.output[0].type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual([(o.domain, o.version) for o in self.model.opset_import], [("", 13)])
        self.assertEqual(self.model.ir_version, 7)

    def test_shape_inference_gives_the_loc_half_batch_by_29(self) -> None:
        inferred = shape_inference.infer_shapes(self.model)
        shapes = {v.name: dims(v) for v in inferred.graph.value_info}
        self.assertEqual(shapes["h0"], ["batch", 103])
        self.assertEqual(shapes["dense_3"], ["batch", 58])
        self.assertEqual(shapes["loc"], ["batch", 29])

    def test_it_uses_only_standard_ops(self) -> None:
        self.assertEqual({n.op_type for n in self.model.graph.node},
                         {"Sub", "Div", "MatMul", "Add", "Sigmoid", "Mul", "Slice", "Tanh"})

    def test_the_graph_matches_the_numpy_reference_at_the_real_sizes(self) -> None:
        rng = np.random.default_rng(1)
        for batch in (1, 64):
            obs = (rng.normal(0, 1, (batch, 103)) * 3).astype(np.float32)
            got = run_onnx(self.model_bytes, obs)
            want = checkpoints.policy_forward(self.mean, self.std, self.layers, obs)
            self.assertEqual(got.shape, (batch, 29))
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
            # Not a saturated policy that would match anything: the actions spread over (-1, 1).
            self.assertGreater(float(np.std(want)), 0.05)

    def test_only_the_loc_half_of_the_last_layer_acts(self) -> None:
        obs = np.random.default_rng(2).normal(0, 1, (8, 103)).astype(np.float32)
        weights, bias = self.layers[-1]
        scale_changed = self.layers[:-1] + [(np.concatenate([weights[:, :29], weights[:, 29:] * 5], axis=1),
                                              np.concatenate([bias[:29], bias[29:] + 3]))]
        loc_changed = self.layers[:-1] + [(np.concatenate([weights[:, :29] * 2, weights[:, 29:]], axis=1), bias)]
        base = run_onnx(self.model_bytes, obs)
        np.testing.assert_allclose(run_onnx(checkpoints.policy_onnx(self.mean, self.std, scale_changed), obs), base, atol=1e-6)
        self.assertGreater(float(np.abs(run_onnx(checkpoints.policy_onnx(self.mean, self.std, loc_changed), obs) - base).max()), 1e-3)

    def test_normalisation_is_not_clipped(self) -> None:
        # Brax's PPO normalises without max_abs_value: an observation 1,000 std out stays 1,000 out.
        mean, std = np.zeros(103, np.float32), np.ones(103, np.float32)
        weights = np.zeros((103, 58), np.float32)
        weights[0, 0] = 1e-3  # action 0 = tanh(x0 / 1000)
        model = checkpoints.policy_onnx(mean, std, [(weights, np.zeros(58, np.float32))])
        obs = np.zeros((1, 103), np.float32)
        obs[0, 0] = 1000.0
        self.assertAlmostEqual(float(run_onnx(model, obs)[0, 0]), float(np.tanh(1.0)), places=6)

    def test_the_reference_is_swish_between_layers_and_linear_after_the_last(self) -> None:
        mean, std = np.zeros(103), np.ones(103)
        first = np.zeros((103, 1))
        first[0, 0] = 1.0
        last = np.zeros((1, 58))
        last[0, 0] = 1.0
        obs = np.zeros((1, 103))
        obs[0, 0] = 2.0
        got = checkpoints.policy_forward(mean, std, [(first, np.zeros(1)), (last, np.full(58, 0.5))], obs)
        self.assertAlmostEqual(float(got[0, 0]), float(np.tanh(2.0 / (1.0 + np.exp(-2.0)) + 0.5)), places=12)

    def test_other_activations_match_their_reference_too(self) -> None:
        mean, std, layers = random_policy(3, (103, 16, 8, 58))
        obs = np.random.default_rng(4).normal(0, 1, (5, 103)).astype(np.float32)
        for activation in ("relu", "tanh"):
            model = checkpoints.policy_onnx(mean, std, layers, activation=activation)
            np.testing.assert_allclose(run_onnx(model, obs), checkpoints.policy_forward(mean, std, layers, obs, activation), atol=1e-5)

    def test_it_refuses_weights_that_are_not_the_g1_policy(self) -> None:
        w, b = self.layers[-1]
        cases = [
            ((self.mean[:100], self.std, self.layers), "normaliser mean"),
            ((self.mean, np.zeros(103), self.layers), "normaliser std"),
            ((self.mean, self.std, self.layers[:-1] + [(w[:, :29], b[:29])]), "layers[3]: 29 outputs"),
            ((self.mean, self.std, [(np.zeros((100, 58)), np.zeros(58))]), "layers[0]"),
            ((self.mean, self.std, self.layers[:-1] + [(np.where(w == w[0, 0], np.nan, w), b)]), "layers[3]: holds a value that is not finite"),
            ((self.mean, self.std, []), "layers"),
        ]
        for args, message in cases:
            with self.assertRaises(CheckpointError) as raised:
                checkpoints.policy_onnx(*args)
            self.assertIn(message, str(raised.exception))
        with self.assertRaisesRegex(CheckpointError, "activation: 'gelu'"):
            checkpoints.policy_onnx(self.mean, self.std, self.layers, activation="gelu")

    def test_the_same_weights_give_the_same_bytes(self) -> None:
        self.assertEqual(checkpoints.policy_onnx(self.mean, self.std, self.layers), self.model_bytes)

    def test_policy_layers_reads_brax_params_in_numeric_order(self) -> None:
        sizes = (103,) + (4,) * 10 + (58,)
        _, _, layers = random_policy(5, sizes)
        params = {f"hidden_{i}": {"kernel": w, "bias": b} for i, (w, b) in enumerate(layers)}
        shuffled = dict(sorted(params.items()))  # string order: hidden_0, hidden_1, hidden_10, hidden_2 ...
        read = checkpoints.policy_layers({"params": shuffled})
        self.assertEqual(len(read), 11)
        for (w, b), (rw, rb) in zip(layers, read):
            np.testing.assert_array_equal(w, rw)
            np.testing.assert_array_equal(b, rb)
        del params["hidden_3"]
        with self.assertRaisesRegex(CheckpointError, "without gaps"):
            checkpoints.policy_layers({"params": params})
        with self.assertRaisesRegex(CheckpointError, "policy params.std_param"):
            checkpoints.policy_layers({"params": {"std_param": {"value": 1}}})


def files(policy: bytes = b"onnx-bytes", params: bytes = b"msgpack-bytes") -> dict[str, bytes]:
    return {"policy.onnx": policy, "params.msgpack": params}


def history(*steps: int) -> list[dict]:
    return [checkpoints.history_entry(s, 10.0 + i, 500.0, 60.0 * (i + 1)) for i, s in enumerate(steps)]


class CheckpointLayoutTest(unittest.TestCase):
    def setUp(self) -> None:
        self.s3 = ListingS3()

    def test_checkpoint_key_pads_the_step_to_12_digits(self) -> None:
        self.assertEqual(checkpoints.checkpoint_key(PREFIX, 163840), PREFIX + "000000163840/")
        with self.assertRaisesRegex(CheckpointError, "step: -1"):
            checkpoints.checkpoint_key(PREFIX, -1)
        with self.assertRaisesRegex(CheckpointError, "step: 1000000000000"):
            checkpoints.checkpoint_key(PREFIX, 10**12)
        with self.assertRaisesRegex(CheckpointError, "must end with '/'"):
            checkpoints.checkpoint_key(PREFIX.rstrip("/"), 0)

    def test_a_checkpoint_round_trips_and_checkpoint_json_goes_last(self) -> None:
        uri = checkpoints.write_checkpoint(self.s3, PREFIX, 163840, files(), history(0, 163840), "run-1")
        self.assertEqual(uri, PREFIX + "000000163840/checkpoint.json")
        self.assertEqual(self.s3.order[-1], "runs/humanoid/checkpoints/run-1/000000163840/checkpoint.json")
        self.assertEqual(self.s3.order[:2], ["runs/humanoid/checkpoints/run-1/000000163840/policy.onnx",
                                             "runs/humanoid/checkpoints/run-1/000000163840/params.msgpack"])
        read = checkpoints.read_checkpoint(self.s3, uri)
        self.assertEqual(read.step, 163840)
        self.assertEqual(read.trainer, "ppo")
        self.assertEqual(read.files, files())
        self.assertEqual(read.history, history(0, 163840))
        manifest = read.manifest
        self.assertEqual((manifest["format"], manifest["run"], manifest["observationSize"], manifest["actionSize"]), (1, "run-1", 103, 29))
        self.assertEqual(manifest["files"][0], {"name": "policy.onnx", "sha256": hashlib.sha256(b"onnx-bytes").hexdigest(), "size": 10})
        self.assertEqual(manifest["history"][1], {"steps": 163840, "meanReturn": 11.0, "meanStepsUpright": 500.0,
                                                  "meanForwardSpeed": None, "seconds": 120.0})
        body = self.s3.objects[("bucket", "runs/humanoid/checkpoints/run-1/000000163840/checkpoint.json")]
        self.assertEqual(read.sha256, hashlib.sha256(body).hexdigest())

    def test_a_job_context_writes_through_its_client(self) -> None:
        ctx = SimpleNamespace(client=self.s3, output_uri="s3://bucket/out/")
        uri = checkpoints.write_checkpoint(ctx, PREFIX, 0, files(), [], "run-1")
        self.assertEqual(checkpoints.read_checkpoint(self.s3, uri).step, 0)

    def test_latest_checkpoint_is_the_newest_complete_one(self) -> None:
        self.assertIsNone(checkpoints.latest_checkpoint(self.s3, PREFIX))
        for step in (0, 163840, 9_999_360, 20_152_320):
            checkpoints.write_checkpoint(self.s3, PREFIX, step, files(), [], "run-1")
        # An instance reclaimed mid-write: the files of a later step, but no checkpoint.json.
        for name, body in files().items():
            self.s3.put_object(Bucket="bucket", Key=f"runs/humanoid/checkpoints/run-1/000030000000/{name}", Body=body)
        # Things under the prefix that are not checkpoints, and another run's newer checkpoint.
        for key in ("runs/humanoid/checkpoints/run-1/run.json",
                    "runs/humanoid/checkpoints/run-1/000040000000/checkpoint.json.part",
                    "runs/humanoid/checkpoints/run-1/latest/checkpoint.json",
                    "runs/humanoid/checkpoints/run-10/000050000000/checkpoint.json"):
            self.s3.put_object(Bucket="bucket", Key=key, Body=b"{}")
        self.assertEqual(checkpoints.latest_checkpoint(self.s3, PREFIX), PREFIX + "000020152320/checkpoint.json")

    def test_a_tampered_file_is_refused_naming_it(self) -> None:
        uri = checkpoints.write_checkpoint(self.s3, PREFIX, 5, files(), [], "run-1")
        key = ("bucket", "runs/humanoid/checkpoints/run-1/000000000005/params.msgpack")
        self.s3.objects[key] = b"MSGPACK-bytes"  # same size, other bytes
        with self.assertRaises(CheckpointError) as raised:
            checkpoints.read_checkpoint(self.s3, uri, "resume")
        self.assertIn("resume.files: params.msgpack has sha256", str(raised.exception))
        self.s3.objects[key] = b"short"
        with self.assertRaisesRegex(CheckpointError, "params.msgpack has 5 bytes, but checkpoint.json lists 13"):
            checkpoints.read_checkpoint(self.s3, uri)
        del self.s3.objects[key]
        with self.assertRaisesRegex(CheckpointError, "params.msgpack: .*no such object"):
            checkpoints.read_checkpoint(self.s3, uri)

    def test_a_manifest_is_checked_field_by_field(self) -> None:
        uri = checkpoints.write_checkpoint(self.s3, PREFIX, 7, files(), history(7), "run-1")
        key = ("bucket", "runs/humanoid/checkpoints/run-1/000000000007/checkpoint.json")
        good = json.loads(self.s3.objects[key])
        cases = [
            ({"format": 2}, "checkpoint.format: 2 is not format 1"),
            ({"trainer": "sac"}, "checkpoint.trainer: 'sac'"),
            ({"run": "a/b"}, "checkpoint.run: 'a/b'"),
            ({"step": 1.5}, "checkpoint.step: 1.5"),
            ({"observationSize": 104}, "checkpoint.observationSize: 104 is not the G1 policy's 103"),
            ({"actionSize": 12}, "checkpoint.actionSize: 12 is not the G1 policy's 29"),
            ({"files": [good["files"][1]]}, "must include policy.onnx"),
            ({"files": good["files"] + [good["files"][0]]}, "checkpoint.files[2].name: 'policy.onnx' is listed twice"),
            ({"files": [dict(good["files"][0], sha256="ABC")]}, "checkpoint.files[0].sha256: 'ABC'"),
            ({"history": [dict(good["history"][0], meanReturn=float("nan"))]}, "checkpoint.history[0].meanReturn: nan must be a finite number"),
            ({"history": [dict(good["history"][0], meanStepsUpright=-1)]}, "checkpoint.history[0].meanStepsUpright: -1 must be at least 0"),
        ]
        for change, message in cases:
            self.s3.objects[key] = json.dumps({**good, **change}).encode()
            with self.assertRaises(CheckpointError, msg=message) as raised:
                checkpoints.read_checkpoint(self.s3, uri)
            self.assertIn(message, str(raised.exception))
        self.s3.objects[key] = json.dumps({k: v for k, v in good.items() if k != "history"}).encode()
        with self.assertRaisesRegex(CheckpointError, "checkpoint.history: missing"):
            checkpoints.read_checkpoint(self.s3, uri)
        self.s3.objects[key] = b"{not json"
        with self.assertRaisesRegex(CheckpointError, "is not JSON"):
            checkpoints.read_checkpoint(self.s3, uri)

    def test_read_refuses_a_uri_that_is_not_a_checkpoint_json(self) -> None:
        with self.assertRaisesRegex(CheckpointError, "resume: 's3://bucket/x/policy.onnx' must be the s3:// URI of a checkpoint's checkpoint.json"):
            checkpoints.read_checkpoint(self.s3, "s3://bucket/x/policy.onnx", "resume")
        with self.assertRaisesRegex(CheckpointError, "resume: s3://bucket/x/checkpoint.json: no such object"):
            checkpoints.read_checkpoint(self.s3, "s3://bucket/x/checkpoint.json", "resume")

    def test_a_refused_checkpoint_writes_nothing(self) -> None:
        bad_history = [dict(history(1)[0], meanReturn=float("inf"))]
        for args, message in (
            ((PREFIX, 1, files(), bad_history, "run-1"), "history[0].meanReturn"),
            ((PREFIX, 1, {"params.msgpack": b"x"}, [], "run-1"), "must include policy.onnx"),
            ((PREFIX, 1, {**files(), "checkpoint.json": b"{}"}, [], "run-1"), "checkpoint.files[2].name: 'checkpoint.json'"),
            ((PREFIX, 1, files(), [], "run 1"), "run: 'run 1'"),
            ((PREFIX, 1, {"policy.onnx": "text"}, [], "run-1"), "files.policy.onnx"),
        ):
            with self.assertRaises(CheckpointError) as raised:
                checkpoints.write_checkpoint(self.s3, *args)
            self.assertIn(message, str(raised.exception))
        self.assertEqual(self.s3.objects, {})


class FixtureTest(unittest.TestCase):
    def test_the_fixture_is_the_export_and_its_reference_actions(self) -> None:
        with tempfile.TemporaryDirectory() as out:
            expected = make_fixture.make_fixture(out)
            with open(os.path.join(out, "policy.onnx"), "rb") as f:
                model = f.read()
            with open(os.path.join(out, "expected.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f), expected)
            with tempfile.TemporaryDirectory() as again:
                make_fixture.make_fixture(again)
                with open(os.path.join(again, "policy.onnx"), "rb") as f:
                    self.assertEqual(f.read(), model)
        self.assertEqual(sorted(expected), ["actions", "observations"])
        obs = np.array(expected["observations"], dtype=np.float32)
        self.assertEqual(obs.shape, (5, 103))
        self.assertEqual(np.array(expected["actions"]).shape, (5, 29))
        # The observations are float32 values written exactly: both sides feed the same input.
        np.testing.assert_array_equal(obs.astype(np.float64), np.array(expected["observations"]))
        np.testing.assert_allclose(run_onnx(model, obs), np.array(expected["actions"]), atol=1e-5, rtol=0)
        onnx.checker.check_model(onnx.load_from_string(model), full_check=True)


if __name__ == "__main__":
    unittest.main()
