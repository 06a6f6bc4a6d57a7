"""Tensor files and a fast CPU linear, shared by the jobs that hold PyTorch models.

- `write_safetensors` / `read_safetensors`: a minimal safetensors codec (numpy only; the real
  `safetensors` package, which Debian does not carry, reads our files and we read its files).
- `linear` / `Linear`: nn.Linear's product through oneDNN where Debian's torch would otherwise
  use its reference BLAS (see below); plain F.linear everywhere else.

The safetensors format (https://github.com/huggingface/safetensors, "Format"):

    [8 bytes]  N, the header length: an unsigned 64-bit little-endian integer
    [N bytes]  a UTF-8 JSON object: {tensor name: {"dtype": "F32", "shape": [d0, d1, ...],
               "data_offsets": [begin, end]}, optionally "__metadata__": {str: str}}.
               Writers pad it with spaces (0x20) so the data starts 8-byte aligned.
    [rest]     the byte buffer: every tensor's elements, row-major (C order), little-endian,
               at [begin, end) relative to the start of the buffer (not of the file).

Readers must check that each tensor's end - begin equals prod(shape) * itemsize, that the
tensors cover the buffer exactly with no overlap or hole, and that the header length fits
the file; `read_safetensors` does all of that and names what is wrong (CheckpointCorrupt).
"""
from __future__ import annotations

import json
import math
import os
import struct
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The safetensors dtype names and their little-endian numpy types. BF16 has no numpy type; it
# is read as uint16 and widened to float32 (a bf16 is the top half of a float32).
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "BOOL": "?", "BF16": "<u2"}
CODE_OF_DTYPE = {np.dtype(t): code for code, t in DTYPES.items() if code != "BF16"}
MAX_HEADER_BYTES = 100 * 1024 * 1024


class CheckpointError(ValueError):
    """Base of the checkpoint errors below."""


class CheckpointCorrupt(CheckpointError):
    """A checkpoint file is truncated, malformed, or does not match its config."""



# ---------------------------------------------------------------- safetensors codec

def write_safetensors(path: str | os.PathLike, tensors: dict[str, Any],
                      metadata: dict[str, str] | None = None) -> None:
    """Writes numpy arrays or torch tensors (names sorted, data in that order). Atomic."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks, offset = [], 0
    for name in sorted(tensors):
        value = tensors[name]
        array = value.detach().cpu().numpy() if torch.is_tensor(value) else np.asarray(value)
        code = CODE_OF_DTYPE.get(array.dtype.newbyteorder("<"))
        if code is None:
            raise TypeError(f"{name}: dtype {array.dtype} has no safetensors code here")
        data = np.ascontiguousarray(array, dtype=np.dtype(DTYPES[code])).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-(8 + len(encoded)) % 8)
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for data in chunks:
            out.write(data)
    os.replace(tmp, path)


def read_safetensors(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """-> ({name: array}, metadata). Raises CheckpointCorrupt naming the file and the fault."""
    name_of_file = os.path.basename(os.fspath(path))
    with open(path, "rb") as source:
        blob = source.read()

    def corrupt(reason: str) -> CheckpointCorrupt:
        return CheckpointCorrupt(f"{name_of_file}: not a valid safetensors file: {reason}")

    if len(blob) < 8:
        raise corrupt(f"{len(blob)} bytes, shorter than the 8-byte header length")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > MAX_HEADER_BYTES or 8 + length > len(blob):
        raise corrupt(f"header length {length} does not fit the file's {len(blob)} bytes")
    try:
        header = json.loads(blob[8:8 + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise corrupt(f"header is not UTF-8 JSON ({err})") from err
    if not isinstance(header, dict):
        raise corrupt("header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise corrupt("__metadata__ must map strings to strings")
    buffer = memoryview(blob)[8 + length:]
    spans, tensors = [], {}
    for name, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise corrupt(f"tensor {name!r}: entry must have exactly dtype, shape, data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            raise corrupt(f"tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise corrupt(f"tensor {name!r}: shape must be a list of non-negative integers (got {shape!r})")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= len(buffer)):
            raise corrupt(f"tensor {name!r}: data_offsets {offsets!r} outside the {len(buffer)}-byte buffer")
        np_type = np.dtype(DTYPES[dtype])
        if offsets[1] - offsets[0] != math.prod(shape) * np_type.itemsize:
            raise corrupt(f"tensor {name!r}: {offsets[1] - offsets[0]} bytes for shape {shape} of {dtype}")
        array = np.frombuffer(buffer[offsets[0]:offsets[1]], dtype=np_type).reshape(shape)
        if dtype == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.copy()
        spans.append((offsets[0], offsets[1], name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise corrupt(f"tensor {name!r} starts at {begin}, expected {position} (overlap or hole)")
        position = end
    if position != len(buffer):
        raise corrupt(f"tensors cover {position} of the {len(buffer)} data bytes")
    return tensors, metadata


# ---------------------------------------------------------------- a fast CPU linear

# Debian's python3-torch links the reference BLAS (torch.__config__.show() says
# BLAS_INFO=generic): a float matmul runs at ~2.5 GFLOP/s there, which made a 2-layer,
# 128-wide training step take ~3.5 s. The same build has oneDNN, whose linear is ~10x faster,
# but its autograd does not work on dense tensors in torch 1.13; so on such a build, and on the
# CPU only, linear layers run forward and backward through oneDNN explicitly. Elsewhere (the
# CUDA image, an MKL build) this is plain F.linear. The weights are nn.Linear's either way.
# Debian's build calls whatever libblas.so.3 the system's alternatives name, though: with
# OpenBLAS installed there (another package may pull it in) plain F.linear is the faster one,
# about 2x oneDNN's path with its format conversions, so the library actually loaded decides.
FAST_BLAS_LIBRARIES = ("openblas", "libmkl", "libblis", "atlas")


def _reference_blas() -> bool:
    if "BLAS_INFO=generic" not in torch.__config__.show() or not torch.backends.mkldnn.is_available():
        return False
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # loads the BLAS library, if it is not loaded yet
    try:
        with open("/proc/self/maps") as maps:
            loaded = maps.read()
    except OSError:
        return True
    return not any(name in loaded for name in FAST_BLAS_LIBRARIES)


_SLOW_BLAS = _reference_blas()


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (n, in) @ weight (out, in)^T + bias, computed by oneDNN."""
    out = torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), weight.contiguous().to_mkldnn(),
                                     None if bias is None else bias.to_mkldnn())
    return out.to_dense()


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = _onednn(grad, weight.t(), None)           # grad @ weight
        grad_w = _onednn(grad.t(), x.t(), None)            # grad^T @ x
        grad_b = grad.sum(dim=0) if ctx.has_bias else None
        return grad_x, grad_w, grad_b


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if not (_SLOW_BLAS and x.device.type == "cpu" and x.dtype == torch.float32):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    return _OneDnnLinear.apply(flat, weight, bias).view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
