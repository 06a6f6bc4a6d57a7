"""The MountainCar actor-critic, and policy.json: the data-only file the trusted grader reads.

Architecture (fixed: the grader accepts nothing else):
    actor  2 -> 64 -> 64 -> 3, tanh after each hidden layer, the last layer gives action logits
    critic 2 -> 64 -> 64 -> 1, the same shape, separate weights (training only: never exported)
Both read the observation normalised with FIXED constants, never learned statistics, so the
grader reproduces the input exactly:  x = (obs - OBS_OFFSET) * OBS_SCALE, which maps the
position range [-1.2, 0.6] and the velocity range [-0.07, 0.07] onto [-1, 1].

policy.json (format "mountaincar-mlp-v1"), exactly these keys and no others:
    {
      "format": "mountaincar-mlp-v1",
      "obs_offset": [-0.3, 0.0],                        # must equal OBS_OFFSET
      "obs_scale": [1.1111111111111112, 14.285714285714285],   # must equal OBS_SCALE (1/0.9, 1/0.07)
      "activation": "tanh",
      "layers": [                                       # input side first; weight is [out][in]
        {"weight": [[w, w], ... 64 rows], "bias": [b, ... 64]},
        {"weight": [[w, ... 64], ... 64 rows], "bias": [b, ... 64]},
        {"weight": [[w, ... 64], ... 3 rows], "bias": [b, b, b]}
      ]
    }
Every number finite with magnitude <= MAX_ABS_PARAMETER; the text at most MAX_POLICY_BYTES.
The greedy action is the argmax of the logits (the lowest index on a tie):
    h1 = tanh(W0 x + b0); h2 = tanh(W1 h1 + b1); logits = W2 h2 + b2
Weights are written as the shortest decimal of their float32 value, so loading the file back
into the float32 net is exact; greedy_actions() evaluates it in float64, as the grader does.

Plain nn.Linear layers: unlike the Connect Four job, no oneDNN path. With 64-wide layers the
conversion to oneDNN's layout cost more than it saved at every batch size measured on one core
(64 to 1,024 rows: 1.3-3.3 ms per PPO minibatch step on F.linear, 2.1-4.5 ms through oneDNN).
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from mountaincar import NUM_ACTIONS, OBSERVATION_SIZE

POLICY_FORMAT = "mountaincar-mlp-v1"
HIDDEN_SIZES = (64, 64)
ACTIVATION = "tanh"
OBS_OFFSET = (-0.3, 0.0)
OBS_SCALE = (1 / 0.9, 1 / 0.07)
MAX_POLICY_BYTES = 1024 * 1024
MAX_ABS_PARAMETER = 1e6
# (out, in) of each actor layer, input side first.
LAYER_SHAPES = ((HIDDEN_SIZES[0], OBSERVATION_SIZE), (HIDDEN_SIZES[1], HIDDEN_SIZES[0]),
                (NUM_ACTIONS, HIDDEN_SIZES[1]))
_KEYS = ("format", "obs_offset", "obs_scale", "activation", "layers")


class PolicyFormatError(ValueError):
    """A policy document that is not exactly the format above; names the field."""


def normalize_observations(obs: np.ndarray) -> np.ndarray:
    """[N, 2] raw (position, velocity) -> [N, 2] float64 network input."""
    return (np.asarray(obs, dtype=np.float64) - np.array(OBS_OFFSET)) * np.array(OBS_SCALE)


def _mlp(sizes: tuple[int, ...]) -> nn.ModuleList:
    return nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))


def _run_mlp(layers: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    for index, layer in enumerate(layers):
        x = layer(x)
        if index < len(layers) - 1:
            x = torch.tanh(x)
    return x


class ActorCritic(nn.Module):
    """The actor (exported to policy.json) and a separate critic, both on normalised inputs."""

    def __init__(self):
        super().__init__()
        self.actor = _mlp((OBSERVATION_SIZE, *HIDDEN_SIZES, NUM_ACTIONS))
        self.critic = _mlp((OBSERVATION_SIZE, *HIDDEN_SIZES, 1))
        # The usual PPO initialisation: orthogonal weights, zero biases, a near-uniform first
        # policy (output gain 0.01) and a unit-gain value output.
        for layers, output_gain in ((self.actor, 0.01), (self.critic, 1.0)):
            for index, layer in enumerate(layers):
                gain = output_gain if index == len(layers) - 1 else math.sqrt(2)
                nn.init.orthogonal_(layer.weight, gain)
                nn.init.zeros_(layer.bias)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 2] normalised -> action logits [B, 3]."""
        return _run_mlp(self.actor, x)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 2] normalised -> value [B]."""
        return _run_mlp(self.critic, x).squeeze(-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.logits(x), self.value(x)


def _float32_list(tensor: torch.Tensor) -> list:
    """The values as Python floats, each the shortest decimal that reads back as the same float32
    (about half the text of a float64 repr, and exact on the way back into the net)."""
    array = tensor.detach().cpu().numpy().astype(np.float32)
    if array.ndim == 1:
        return [float(str(v)) for v in array]
    return [_float32_list(torch.from_numpy(row)) for row in array]


def policy_document(net: ActorCritic) -> dict[str, Any]:
    """The actor as a policy.json document (a dict; json.dumps it)."""
    return {
        "format": POLICY_FORMAT,
        "obs_offset": list(OBS_OFFSET),
        "obs_scale": list(OBS_SCALE),
        "activation": ACTIVATION,
        "layers": [{"weight": _float32_list(layer.weight), "bias": _float32_list(layer.bias)}
                   for layer in net.actor],
    }


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or abs(value) > MAX_ABS_PARAMETER:
        raise PolicyFormatError(f"{where}: must be a finite number of magnitude at most "
                                f"{MAX_ABS_PARAMETER:g} (got {value!r:.60})")
    return float(value)


def _vector(value: Any, length: int, where: str) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        got = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
        raise PolicyFormatError(f"{where}: must be a list of {length} numbers (got {got})")
    return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]


def parse_policy(document: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Checks a policy document (a parsed dict, or its JSON text) and returns the actor's layers
    as float64 (weight [out, in], bias [out]) pairs; raises PolicyFormatError naming the field.
    The same checks as shared/rewards/mountaincar.ts's parsePolicy, which is the one the grader trusts."""
    if isinstance(document, (str, bytes)):
        if len(document) > MAX_POLICY_BYTES:
            raise PolicyFormatError(f"policy: {len(document)} bytes, more than the limit of {MAX_POLICY_BYTES}")
        try:
            document = json.loads(document)
        except ValueError as error:
            raise PolicyFormatError(f"policy: not valid JSON: {error}") from error
    if not isinstance(document, dict):
        raise PolicyFormatError(f"policy: must be a JSON object (got {type(document).__name__})")
    unknown = sorted(set(document) - set(_KEYS))
    if unknown:
        raise PolicyFormatError(f"policy: unknown field(s) {unknown}")
    for key in _KEYS:
        if key not in document:
            raise PolicyFormatError(f"{key}: missing")
    if document["format"] != POLICY_FORMAT:
        raise PolicyFormatError(f"format: must be {POLICY_FORMAT!r} (got {document['format']!r:.60})")
    if document["activation"] != ACTIVATION:
        raise PolicyFormatError(f"activation: must be {ACTIVATION!r} (got {document['activation']!r:.60})")
    for key, expected in (("obs_offset", OBS_OFFSET), ("obs_scale", OBS_SCALE)):
        if _vector(document[key], OBSERVATION_SIZE, key) != list(expected):
            raise PolicyFormatError(f"{key}: must be {list(expected)} (got {document[key]!r})")
    layers = document["layers"]
    if not isinstance(layers, list) or len(layers) != len(LAYER_SHAPES):
        raise PolicyFormatError(f"layers: must be a list of {len(LAYER_SHAPES)} layers (got "
                                f"{len(layers) if isinstance(layers, list) else type(layers).__name__})")
    parsed = []
    for index, ((rows, cols), layer) in enumerate(zip(LAYER_SHAPES, layers)):
        where = f"layers[{index}]"
        if not isinstance(layer, dict) or sorted(layer) != ["bias", "weight"]:
            raise PolicyFormatError(f"{where}: must be an object with exactly weight and bias")
        weight = layer["weight"]
        if not isinstance(weight, list) or len(weight) != rows:
            raise PolicyFormatError(f"{where}.weight: must be {rows} rows of {cols} numbers (got "
                                    f"{len(weight) if isinstance(weight, list) else type(weight).__name__} rows)")
        matrix = np.array([_vector(row, cols, f"{where}.weight[{r}]") for r, row in enumerate(weight)])
        bias = np.array(_vector(layer["bias"], rows, f"{where}.bias"))
        parsed.append((matrix, bias))
    return parsed


def greedy_actions(layers: list[tuple[np.ndarray, np.ndarray]], obs: np.ndarray) -> np.ndarray:
    """The greedy actions [N] (int64) of a parsed policy for raw observations [N, 2], in float64
    (the grader's arithmetic; argmax takes the lowest index on a tie)."""
    h = normalize_observations(obs)
    for index, (weight, bias) in enumerate(layers):
        h = h @ weight.T + bias
        if index < len(layers) - 1:
            h = np.tanh(h)
    return np.argmax(h, axis=1).astype(np.int64)


def load_actor(net: ActorCritic, document: Any) -> None:
    """Copies a policy document's layers into the net's actor (float32)."""
    with torch.no_grad():
        for layer, (weight, bias) in zip(net.actor, parse_policy(document)):
            layer.weight.copy_(torch.from_numpy(weight))
            layer.bias.copy_(torch.from_numpy(bias))
