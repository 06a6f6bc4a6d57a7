"""The humanoid's checkpoints as the GPU job writes and reads them, and its policy as ONNX.

One layout serves both trainers (the CPU trainer's side is shared/humanoid/checkpoint.ts): under
`<checkpointPrefix><step, 12 digits>/` the files first (`policy.onnx`, and the trainer's raw
parameters: `params.msgpack` here), then `checkpoint.json` listing each file with its sha256 and
size. The upload of checkpoint.json is what starts a replay and what a resumed run looks for, so
it is written last: a step folder without it is an interrupted write and is ignored.

`policy.onnx` is Brax PPO's deterministic policy: normalise the `state` observation with the
running statistics, run the MLP (swish between layers, the last layer linear), keep the first half
of the 58 outputs (the tanh-normal distribution's loc; the second half is its scale) and squash it
with tanh. `policy_forward` is the same function in numpy, the reference the tests and the image's
parity test hold the ONNX graph and Brax itself to.

Pure Python with numpy and onnx (no JAX, no boto3): the S3 client is passed in, so the layout is
tested against an in-memory S3 on a machine without a GPU.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

FORMAT = 1
OBSERVATION_SIZE = 103
ACTION_SIZE = 29
# Brax's tanh-normal distribution reads loc and scale from one output vector: [loc | scale].
POLICY_OUTPUT_SIZE = 2 * ACTION_SIZE
CHECKPOINT_FILE = "checkpoint.json"
POLICY_FILE = "policy.onnx"
PARAMS_FILE = "params.msgpack"
POLICY_INPUT = "observation"
POLICY_OUTPUT = "action"
TRAINERS = ("ars", "ppo")
STEP_DIGITS = 12
MAX_STEP = 10**STEP_DIGITS - 1
MAX_FILES = 16
MAX_HISTORY = 10_000
# The same rules as shared/humanoid/checkpoint.ts, so either side reads what the other wrote.
RUN_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
ACTIVATIONS = ("swish", "relu", "tanh")
ONNX_OPSET = 13
# IR version 7 is the one that introduced opset 13: the oldest reader of opset 13 reads it too.
ONNX_IR_VERSION = 7


class CheckpointError(ValueError):
    """A checkpoint (its manifest, a listed file, a policy's weights) is not what the layout says."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def split_s3_uri(uri: str, field_name: str) -> tuple[str, str]:
    """(bucket, key) of an s3:// URI; the same rule as jobio's, without importing it."""
    match = re.match(r"^s3://([^/]+)/(.*)$", uri) if isinstance(uri, str) else None
    if not match:
        raise CheckpointError(f"{field_name}: {_show(uri)} must be an s3://bucket/key URI")
    return match.group(1), match.group(2)


def checkpoint_key(prefix: str, step: int) -> str:
    """The URI of a checkpoint's folder: the prefix, then the step zero-padded to 12 digits.

    Zero-padding makes keys sort by step, so the newest checkpoint is the last key listed; the
    checkpoint Lambda refuses a checkpoint.json found anywhere else.
    """
    split_s3_uri(prefix, "checkpointPrefix")
    if not prefix.endswith("/"):
        raise CheckpointError(f"checkpointPrefix: {_show(prefix)} must end with '/'")
    _check_step(step, "step")
    return f"{prefix}{step:0{STEP_DIGITS}d}/"


def _check_step(step: Any, field_name: str) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise CheckpointError(f"{field_name}: {_show(step)} must be an integer from 0 to 10^12 - 1")
    return step


def _finite(value: Any, field_name: str, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CheckpointError(f"{field_name}: {_show(value)} must be a finite number")
    if minimum is not None and value < minimum:
        raise CheckpointError(f"{field_name}: {_show(value)} must be at least {minimum}")
    return float(value)


def history_entry(steps: int, mean_return: float, mean_steps_upright: float, seconds: float,
                  mean_forward_speed: float | None = None) -> dict:
    """One evaluation as checkpoint.json's history keeps it (plain JSON numbers, checked)."""
    entry = {
        "steps": int(steps),
        "meanReturn": float(mean_return),
        "meanStepsUpright": float(mean_steps_upright),
        "meanForwardSpeed": None if mean_forward_speed is None else float(mean_forward_speed),
        "seconds": float(seconds),
    }
    check_history([entry], "history")
    return entry


def check_history(history: Any, field_name: str) -> list[dict]:
    """The history as checkpoint.ts's HistoryEntry schema allows it; NaN refused (JSON has none)."""
    if not isinstance(history, list):
        raise CheckpointError(f"{field_name}: {_show(history)} must be a list")
    if len(history) > MAX_HISTORY:
        raise CheckpointError(f"{field_name}: {len(history)} entries exceed the {MAX_HISTORY} a checkpoint may hold")
    checked = []
    for i, entry in enumerate(history):
        where = f"{field_name}[{i}]"
        if not isinstance(entry, dict):
            raise CheckpointError(f"{where}: {_show(entry)} must be an object")
        keys = {"steps", "meanReturn", "meanStepsUpright", "meanForwardSpeed", "seconds"}
        if set(entry) != keys:
            raise CheckpointError(f"{where}: has fields {sorted(entry)}, but a history entry has exactly {sorted(keys)}")
        steps = entry["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise CheckpointError(f"{where}.steps: {_show(steps)} must be a non-negative integer")
        _finite(entry["meanReturn"], f"{where}.meanReturn")
        _finite(entry["meanStepsUpright"], f"{where}.meanStepsUpright", 0)
        if entry["meanForwardSpeed"] is not None:
            _finite(entry["meanForwardSpeed"], f"{where}.meanForwardSpeed")
        _finite(entry["seconds"], f"{where}.seconds", 0)
        checked.append(dict(entry))
    return checked


def _check_files_listing(files: Any, field_name: str) -> list[dict]:
    if not isinstance(files, list) or not 1 <= len(files) <= MAX_FILES:
        raise CheckpointError(f"{field_name}: {_show(files)} must list 1 to {MAX_FILES} files")
    names = set()
    for i, listed in enumerate(files):
        where = f"{field_name}[{i}]"
        if not isinstance(listed, dict) or set(listed) != {"name", "sha256", "size"}:
            raise CheckpointError(f"{where}: {_show(listed)} must be {{name, sha256, size}}")
        name, sha256, size = listed["name"], listed["sha256"], listed["size"]
        if not isinstance(name, str) or not FILE_NAME.match(name) or name == CHECKPOINT_FILE:
            raise CheckpointError(f"{where}.name: {_show(name)} is not a checkpoint file name")
        if name in names:
            raise CheckpointError(f"{where}.name: {_show(name)} is listed twice")
        names.add(name)
        if not isinstance(sha256, str) or not SHA256_HEX.match(sha256):
            raise CheckpointError(f"{where}.sha256: {_show(sha256)} must be 64 lowercase hex digits")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise CheckpointError(f"{where}.size: {_show(size)} must be a non-negative integer")
    if POLICY_FILE not in names:
        raise CheckpointError(f"{field_name}: {sorted(names)} must include {POLICY_FILE}")
    return files


def check_manifest(manifest: Any, field_name: str = "checkpoint") -> dict:
    """checkpoint.json checked field by field, naming the field and the value it refuses."""
    if not isinstance(manifest, dict):
        raise CheckpointError(f"{field_name}: {_show(manifest)} must be a JSON object")
    keys = {"format", "trainer", "run", "step", "observationSize", "actionSize", "files", "history"}
    missing = sorted(keys - set(manifest))
    if missing:
        raise CheckpointError(f"{field_name}.{missing[0]}: missing")
    if manifest["format"] != FORMAT or isinstance(manifest["format"], bool):
        raise CheckpointError(f"{field_name}.format: {_show(manifest['format'])} is not format {FORMAT}")
    if manifest["trainer"] not in TRAINERS:
        raise CheckpointError(f"{field_name}.trainer: {_show(manifest['trainer'])} must be one of {list(TRAINERS)}")
    if not isinstance(manifest["run"], str) or not RUN_NAME.match(manifest["run"]):
        raise CheckpointError(f"{field_name}.run: {_show(manifest['run'])} must be 1-80 letters, digits, '_' or '-'")
    _check_step(manifest["step"], f"{field_name}.step")
    for name, expected in (("observationSize", OBSERVATION_SIZE), ("actionSize", ACTION_SIZE)):
        if manifest[name] != expected or isinstance(manifest[name], bool):
            raise CheckpointError(f"{field_name}.{name}: {_show(manifest[name])} is not the G1 policy's {expected}")
    _check_files_listing(manifest["files"], f"{field_name}.files")
    check_history(manifest["history"], f"{field_name}.history")
    return manifest


def _client_of(ctx_or_client: Any) -> Any:
    """A JobContext's S3 client, or the client itself: checkpoints live outside the job's output."""
    return getattr(ctx_or_client, "client", ctx_or_client)


def write_checkpoint(ctx_or_client: Any, prefix: str, step: int, files: Mapping[str, bytes],
                     history: Sequence[dict], run: str, trainer: str = "ppo") -> str:
    """Writes the files, then checkpoint.json listing them; returns checkpoint.json's URI.

    Everything is checked before the first upload, so a refused checkpoint leaves nothing behind;
    checkpoint.json goes last because its appearance is what marks the checkpoint complete.
    """
    client = _client_of(ctx_or_client)
    folder = checkpoint_key(prefix, step)
    if not isinstance(run, str) or not RUN_NAME.match(run):
        raise CheckpointError(f"run: {_show(run)} must be 1-80 letters, digits, '_' or '-'")
    if trainer not in TRAINERS:
        raise CheckpointError(f"trainer: {_show(trainer)} must be one of {list(TRAINERS)}")
    listed = []
    for name, body in files.items():
        if not isinstance(body, (bytes, bytearray)):
            raise CheckpointError(f"files.{name}: a file's body must be bytes (got {type(body).__name__})")
        listed.append({"name": name, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)})
    manifest = {
        "format": FORMAT,
        "trainer": trainer,
        "run": run,
        "step": step,
        "observationSize": OBSERVATION_SIZE,
        "actionSize": ACTION_SIZE,
        "files": listed,
        "history": [dict(entry) for entry in history],
    }
    check_manifest(manifest, "checkpoint")
    bucket, key = split_s3_uri(folder, "checkpointPrefix")
    for name, body in files.items():
        content_type = "application/json" if name.endswith(".json") else "application/octet-stream"
        client.put_object(Bucket=bucket, Key=f"{key}{name}", Body=bytes(body), ContentType=content_type)
    # allow_nan=False: a NaN would make checkpoint.json unreadable to the TypeScript side.
    body = json.dumps(manifest, indent=2, allow_nan=False).encode()
    client.put_object(Bucket=bucket, Key=f"{key}{CHECKPOINT_FILE}", Body=body, ContentType="application/json")
    return f"{folder}{CHECKPOINT_FILE}"


def _list_keys(client: Any, bucket: str, prefix: str) -> Iterable[str]:
    """Every key under the prefix, page by page (list_objects_v2 returns at most 1,000 a call)."""
    token = None
    while True:
        request = {"Bucket": bucket, "Prefix": prefix}
        if token:
            request["ContinuationToken"] = token
        page = client.list_objects_v2(**request)
        for item in page.get("Contents") or []:
            yield item["Key"]
        if not page.get("IsTruncated"):
            return
        token = page.get("NextContinuationToken")
        if not token:
            return


def latest_checkpoint(client: Any, prefix: str) -> str | None:
    """The checkpoint.json URI of the newest complete checkpoint under the prefix, or None.

    Only `<prefix><12 digits>/checkpoint.json` counts: a step folder whose checkpoint.json never
    arrived (an instance reclaimed mid-write) is skipped, and so is anything else under the prefix
    (a run's run.json, a replay's outputs).
    """
    bucket, key_prefix = split_s3_uri(prefix, "checkpointPrefix")
    pattern = re.compile(re.escape(key_prefix) + r"(\d{%d})/%s$" % (STEP_DIGITS, re.escape(CHECKPOINT_FILE)))
    newest: tuple[int, str] | None = None
    for key in _list_keys(client, bucket, key_prefix):
        match = pattern.match(key)
        if match and (newest is None or int(match.group(1)) > newest[0]):
            newest = (int(match.group(1)), key)
    return None if newest is None else f"s3://{bucket}/{newest[1]}"


@dataclass
class Checkpoint:
    """A checkpoint read back and checked: its manifest and every listed file's bytes."""

    uri: str
    manifest: dict
    sha256: str
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return self.manifest["step"]

    @property
    def trainer(self) -> str:
        return self.manifest["trainer"]

    @property
    def history(self) -> list[dict]:
        return [dict(entry) for entry in self.manifest["history"]]


def _get(client: Any, uri: str, field_name: str) -> bytes:
    bucket, key = split_s3_uri(uri, field_name)
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as error:  # noqa: BLE001 - a missing key gets a message naming the field
        code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "NotFound"):
            raise CheckpointError(f"{field_name}: {uri}: no such object") from error
        raise


def read_checkpoint(client: Any, uri: str, field_name: str = "checkpoint") -> Checkpoint:
    """Reads checkpoint.json at `uri` and every file it lists, checking each file's size and sha256.

    `field_name` names where the URI came from (the spec's `resume`, or the run's own folder) in
    every error, so a failed resume says which checkpoint and which file is at fault.
    """
    if not isinstance(uri, str) or not uri.endswith(f"/{CHECKPOINT_FILE}"):
        raise CheckpointError(f"{field_name}: {_show(uri)} must be the s3:// URI of a checkpoint's {CHECKPOINT_FILE}")
    body = _get(client, uri, field_name)
    try:
        manifest = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{field_name}: {uri} is not JSON ({error})") from error
    check_manifest(manifest, field_name)
    folder = uri[: -len(CHECKPOINT_FILE)]
    files = {}
    for listed in manifest["files"]:
        name = listed["name"]
        data = _get(client, f"{folder}{name}", f"{field_name}.files {name}")
        if len(data) != listed["size"]:
            raise CheckpointError(f"{field_name}.files: {name} has {len(data)} bytes, but {CHECKPOINT_FILE} lists {listed['size']}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != listed["sha256"]:
            raise CheckpointError(f"{field_name}.files: {name} has sha256 {digest}, but {CHECKPOINT_FILE} lists {listed['sha256']}")
        files[name] = data
    return Checkpoint(uri=uri, manifest=manifest, sha256=hashlib.sha256(body).hexdigest(), files=files)


# ---------------------------------------------------------------------------------------------
# The policy: Brax's parameters to layers, layers to ONNX, and the numpy reference.

Layers = list[tuple[np.ndarray, np.ndarray]]


def policy_layers(policy_params: Mapping[str, Any]) -> Layers:
    """[(W, b)] of a Brax MLP's parameters, input side first.

    Brax's MLP names its Dense layers hidden_0 ... hidden_n (flax: kernel [in, out], bias [out]),
    under flax's 'params' collection; numeric order, not string order, so hidden_10 follows hidden_9.
    """
    params = policy_params.get("params", policy_params) if isinstance(policy_params, Mapping) else None
    if not isinstance(params, Mapping):
        raise CheckpointError(f"policy params: {_show(policy_params)} must be a mapping of Dense layers")
    named = {}
    for name, layer in params.items():
        match = re.fullmatch(r"hidden_(\d+)", str(name))
        if not match or not isinstance(layer, Mapping) or set(layer) != {"kernel", "bias"}:
            raise CheckpointError(f"policy params.{name}: is not one of Brax's MLP layers (hidden_<i> with kernel and bias)")
        named[int(match.group(1))] = (np.asarray(layer["kernel"]), np.asarray(layer["bias"]))
    if sorted(named) != list(range(len(named))) or not named:
        raise CheckpointError(f"policy params: layers {sorted(params)} must be hidden_0 ... hidden_<n> without gaps")
    return [named[i] for i in range(len(named))]


def _check_policy(mean: Any, std: Any, layers: Sequence[tuple[Any, Any]], activation: str) -> tuple[np.ndarray, np.ndarray, Layers]:
    if activation not in ACTIVATIONS:
        raise CheckpointError(f"activation: {_show(activation)} must be one of {list(ACTIVATIONS)}")
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    for name, vector in (("normaliser mean", mean), ("normaliser std", std)):
        if vector.shape != (OBSERVATION_SIZE,):
            raise CheckpointError(f"{name}: shape {vector.shape} is not ({OBSERVATION_SIZE},)")
        if not np.all(np.isfinite(vector)):
            raise CheckpointError(f"{name}: holds a value that is not finite")
    if np.any(std <= 0):
        raise CheckpointError(f"normaliser std: {float(std.min())} is not positive (Brax keeps it at least 1e-6)")
    if not layers:
        raise CheckpointError("layers: [] must hold at least one (W, b)")
    checked = []
    width = OBSERVATION_SIZE
    for i, (weights, bias) in enumerate(layers):
        weights = np.asarray(weights, dtype=np.float64)
        bias = np.asarray(bias, dtype=np.float64)
        if weights.ndim != 2 or weights.shape[0] != width or bias.shape != (weights.shape[1],):
            raise CheckpointError(f"layers[{i}]: W {weights.shape} and b {bias.shape} do not take {width} inputs to W's outputs")
        if not (np.all(np.isfinite(weights)) and np.all(np.isfinite(bias))):
            raise CheckpointError(f"layers[{i}]: holds a value that is not finite")
        checked.append((weights, bias))
        width = weights.shape[1]
    if width != POLICY_OUTPUT_SIZE:
        raise CheckpointError(f"layers[{len(layers) - 1}]: {width} outputs, but the tanh-normal policy has {POLICY_OUTPUT_SIZE} (loc and scale of {ACTION_SIZE} actions)")
    return mean, std, checked


def _activate(x: np.ndarray, activation: str) -> np.ndarray:
    if activation == "swish":
        return x / (1.0 + np.exp(-x))  # x * sigmoid(x), flax's linen.swish
    if activation == "relu":
        return np.maximum(x, 0.0)
    return np.tanh(x)


def policy_forward(mean: Any, std: Any, layers: Sequence[tuple[Any, Any]], obs: Any, activation: str = "swish") -> np.ndarray:
    """Brax PPO's deterministic action, in float64: the reference the ONNX graph must match.

    (obs - mean) / std as running_statistics.normalize does it for PPO (no clipping: PPO passes no
    max_abs_value; std already holds Brax's epsilon and its 1e-6 floor), the MLP with the
    activation between layers and none after the last, then tanh of the loc half.
    """
    mean, std, layers = _check_policy(mean, std, layers, activation)
    x = np.asarray(obs, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != OBSERVATION_SIZE:
        raise CheckpointError(f"observations: shape {x.shape} is not [batch, {OBSERVATION_SIZE}]")
    x = (x - mean) / std
    for i, (weights, bias) in enumerate(layers):
        x = x @ weights + bias
        if i < len(layers) - 1:
            x = _activate(x, activation)
    return np.tanh(x[:, :ACTION_SIZE])


def policy_onnx(normaliser_mean: Any, normaliser_std: Any, layers: Sequence[tuple[Any, Any]], activation: str = "swish",
                doc_string: str = "G1 joystick policy: Brax PPO's deterministic action, tanh of the loc half of an MLP over the normalised state") -> bytes:
    """The deterministic policy as an ONNX model (opset 13): `observation` [batch, 103] float32 in,
    `action` [batch, 29] float32 out, the same function as `policy_forward`.

    Built from the standard ops every runtime has (Sub, Div, MatMul, Add, Sigmoid, Mul, Slice,
    Tanh); swish is spelled x * Sigmoid(x) because opset 13 has no Swish. The last layer keeps all
    58 outputs and a Slice takes the loc half, so the weights stay exactly Brax's.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    mean, std, layers = _check_policy(normaliser_mean, normaliser_std, layers, activation)
    f32 = np.float32
    initializers = [numpy_helper.from_array(mean.astype(f32), "normaliser_mean"),
                    numpy_helper.from_array(std.astype(f32), "normaliser_std")]
    nodes = [helper.make_node("Sub", [POLICY_INPUT, "normaliser_mean"], ["centred"], name="centre"),
             helper.make_node("Div", ["centred", "normaliser_std"], ["h0"], name="scale")]
    hidden = "h0"
    for i, (weights, bias) in enumerate(layers):
        initializers += [numpy_helper.from_array(weights.astype(f32), f"hidden_{i}_kernel"),
                         numpy_helper.from_array(bias.astype(f32), f"hidden_{i}_bias")]
        nodes += [helper.make_node("MatMul", [hidden, f"hidden_{i}_kernel"], [f"matmul_{i}"], name=f"matmul_{i}"),
                  helper.make_node("Add", [f"matmul_{i}", f"hidden_{i}_bias"], [f"dense_{i}"], name=f"dense_{i}")]
        hidden = f"dense_{i}"
        if i < len(layers) - 1:
            if activation == "swish":
                nodes += [helper.make_node("Sigmoid", [hidden], [f"sigmoid_{i}"], name=f"sigmoid_{i}"),
                          helper.make_node("Mul", [hidden, f"sigmoid_{i}"], [f"h{i + 1}"], name=f"swish_{i}")]
            else:
                op = "Relu" if activation == "relu" else "Tanh"
                nodes.append(helper.make_node(op, [hidden], [f"h{i + 1}"], name=f"{activation}_{i}"))
            hidden = f"h{i + 1}"
    initializers += [numpy_helper.from_array(np.array([0], dtype=np.int64), "loc_starts"),
                     numpy_helper.from_array(np.array([ACTION_SIZE], dtype=np.int64), "loc_ends"),
                     numpy_helper.from_array(np.array([1], dtype=np.int64), "loc_axes")]
    nodes += [helper.make_node("Slice", [hidden, "loc_starts", "loc_ends", "loc_axes"], ["loc"], name="loc"),
              helper.make_node("Tanh", ["loc"], [POLICY_OUTPUT], name="squash")]
    graph = helper.make_graph(
        nodes,
        "brax_ppo_policy",
        [helper.make_tensor_value_info(POLICY_INPUT, TensorProto.FLOAT, ["batch", OBSERVATION_SIZE])],
        [helper.make_tensor_value_info(POLICY_OUTPUT, TensorProto.FLOAT, ["batch", ACTION_SIZE])],
        initializer=initializers,
    )
    model = helper.make_model(graph, producer_name="frontier-pipelines", doc_string=doc_string,
                              opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
    model.ir_version = ONNX_IR_VERSION
    onnx.checker.check_model(model)
    return model.SerializeToString()
