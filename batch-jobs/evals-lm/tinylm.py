"""A small GPT-style character model, its greedy generation, and safe checkpoint files.

The model is a decoder-only transformer (learned token and position embeddings, pre-norm
blocks of causal self-attention and a 4x MLP, tied output head) over a fixed character
vocabulary that is stored in config.json, so a checkpoint loads without any training flags.

Checkpoint files (a directory, or the files a manifest names):
- config.json: {"format": "tinylm-v1", "architecture": {...}, "vocab": "<characters>"}.
- model.safetensors: the weights, written and read by the minimal safetensors codec below
  (numpy only; the real `safetensors` package reads our files and we read its files).
- model.pt (accepted instead of model.safetensors): a plain state_dict, read with
  torch.load(weights_only=True). A pickle that needs anything beyond tensors and plain
  containers is refused with CheckpointRefused and never executed.

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
import pickle
import struct
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG_FORMAT = "tinylm-v1"
PAD, BOS, STOP = "\x00", "\x02", "\n"
# Index 0 is padding, 1 begins every sequence, "\n" ends an answer (the stop token).
VOCAB = (PAD + BOS + STOP + " !\"#$%&'()*+,-./0123456789:;<=>?@"
         "ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz")

# The safetensors dtype names and their little-endian numpy types. BF16 has no numpy type; it
# is read as uint16 and widened to float32 (a bf16 is the top half of a float32).
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "BOOL": "?", "BF16": "<u2"}
CODE_OF_DTYPE = {np.dtype(t): code for code, t in DTYPES.items() if code != "BF16"}
# What torch's weights-only unpickler says (1.13 and 2.x) when a pickle asks for a class or a
# call outside its allow-list: the signs of a pickle that would run code.
REFUSAL_MARKERS = ("Unsupported class", "Unsupported global", "unrecognized function", "Can only build",
                   "Can only create", "Unsupported type")
MAX_HEADER_BYTES = 100 * 1024 * 1024


class CheckpointError(ValueError):
    """Base of the checkpoint errors below."""


class CheckpointCorrupt(CheckpointError):
    """A checkpoint file is truncated, malformed, or does not match its config."""


class CheckpointRefused(CheckpointError):
    """A model.pt pickle needs more than tensors and plain containers: never loaded."""


class UnknownCharacterError(ValueError):
    """A prompt holds a character outside the model's vocabulary."""


class PromptTooLongError(ValueError):
    """A prompt plus max_new_tokens does not fit the model's block_size."""


class ModelConfigError(ValueError):
    """An architecture field is missing or out of range."""


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


def load_state_dict_pt(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A model.pt state_dict through torch's weights-only unpickler; anything else is refused."""
    name = os.path.basename(os.fspath(path))
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # The weights-only unpickler names the class or call it would not allow; an opcode it
        # does not know ("Unsupported operand") is what random bytes look like, so corrupt.
        if any(s in str(err) for s in REFUSAL_MARKERS):
            raise CheckpointRefused(
                f"{name}: refused: the pickle needs more than tensors and plain containers "
                f"({str(err).splitlines()[-1][:300]})") from err
        raise CheckpointCorrupt(f"{name}: not a readable torch file: {err}") from err
    except Exception as err:  # noqa: BLE001 - zip and stream errors come as RuntimeError, EOFError...
        raise CheckpointCorrupt(f"{name}: not a readable torch file: {err}") from err
    if not isinstance(payload, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in payload.items()):
        raise CheckpointCorrupt(f"{name}: expected a state_dict of name -> tensor (got {type(payload).__name__})")
    return dict(payload)


# ---------------------------------------------------------------- a fast CPU linear

# Debian's python3-torch links the reference BLAS (torch.__config__.show() says
# BLAS_INFO=generic): a float matmul runs at ~2.5 GFLOP/s there, which made a 2-layer,
# 128-wide training step take ~3.5 s. The same build has oneDNN, whose linear is ~10x faster,
# but its autograd does not work on dense tensors in torch 1.13; so on such a build, and on the
# CPU only, linear layers run forward and backward through oneDNN explicitly. Elsewhere (the
# CUDA image, an MKL build) this is plain F.linear. The weights are nn.Linear's either way.
_SLOW_BLAS = "BLAS_INFO=generic" in torch.__config__.show() and torch.backends.mkldnn.is_available()


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


# ---------------------------------------------------------------- tokenizer and model

@dataclass(frozen=True)
class ModelConfig:
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    block_size: int = 128
    """Longest sequence (prompt + generation, plus the begin token) the model can see."""
    vocab: str = VOCAB

    def __post_init__(self) -> None:
        for field in ("n_layer", "n_embd", "n_head", "block_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelConfigError(f"{field}: must be a positive integer (got {value!r})")
        if self.n_embd % self.n_head:
            raise ModelConfigError(f"n_embd: must be a multiple of n_head={self.n_head} (got {self.n_embd})")
        if not isinstance(self.vocab, str) or self.vocab[:3] != PAD + BOS + STOP or len(set(self.vocab)) != len(self.vocab):
            raise ModelConfigError("vocab: must start with pad, begin and stop and hold each character once")

    def to_json(self) -> dict[str, Any]:
        fields = asdict(self)
        vocab = fields.pop("vocab")
        return {"format": CONFIG_FORMAT, "architecture": fields, "vocab": vocab}

    @staticmethod
    def from_json(data: Any) -> "ModelConfig":
        if not isinstance(data, dict) or data.get("format") != CONFIG_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise CheckpointCorrupt(f"config.json: format must be {CONFIG_FORMAT!r} (got {found!r})")
        arch = data.get("architecture")
        if not isinstance(arch, dict):
            raise CheckpointCorrupt("config.json: architecture must be an object")
        unknown = set(arch) - {"n_layer", "n_embd", "n_head", "block_size"}
        if unknown:
            raise CheckpointCorrupt(f"config.json: unknown architecture fields {sorted(unknown)}")
        try:
            return ModelConfig(**arch, vocab=data.get("vocab"))
        except ModelConfigError as err:
            raise CheckpointCorrupt(f"config.json: {err}") from err


class CharTokenizer:
    def __init__(self, vocab: str):
        self.vocab = vocab
        self.index = {c: i for i, c in enumerate(vocab)}
        self.pad, self.bos, self.stop = 0, 1, 2

    def encode(self, text: str) -> list[int]:
        try:
            return [self.index[c] for c in text]
        except KeyError as err:
            raise UnknownCharacterError(f"character {err.args[0]!r} in {text[:80]!r} is not in the vocabulary") from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.vocab[i] for i in ids if i > 1)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_head = config.n_head
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = Linear(config.n_embd, 3 * config.n_embd)
        self.proj = Linear(config.n_embd, config.n_embd)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.fc = Linear(config.n_embd, 4 * config.n_embd)
        self.fc_out = Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(width, dim=2)
        shape = (batch, length, self.n_head, width // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        # Written out (not scaled_dot_product_attention): torch 1.13 does not have it.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.n_head)
        scores = scores.masked_fill(~mask, float("-inf"))
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, length, width)
        x = x + self.proj(y)
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class TinyLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tokenizer = CharTokenizer(config.vocab)
        self.wte = nn.Embedding(len(config.vocab), config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids (batch, length) -> logits (batch, length, vocab). pad_mask marks real tokens;
        with left padding, positions count from each row's first real token."""
        length = ids.shape[1]
        if length > self.config.block_size:
            raise ValueError(f"sequence of {length} tokens exceeds block_size {self.config.block_size}")
        causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()
        if pad_mask is None:
            positions = torch.arange(length, device=ids.device).unsqueeze(0)
            mask = causal.view(1, 1, length, length)
        else:
            positions = (pad_mask.long().cumsum(dim=1) - 1).clamp(min=0)
            mask = causal.view(1, 1, length, length) & pad_mask.view(-1, 1, 1, length)
            # A padding query row would see no key at all (NaN); let it see itself.
            mask = mask | torch.eye(length, dtype=torch.bool, device=ids.device).view(1, 1, length, length)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x, mask)
        return linear(self.ln_f(x), self.wte.weight)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def generate(self, prompts: list[str], max_new_tokens: int, batch_size: int = 64) -> list[str]:
        """Greedy continuations, stopping at the stop token (not included) or max_new_tokens."""
        was_training = self.training
        self.eval()
        device = self.wte.weight.device
        tok = self.tokenizer
        outputs: list[str] = []
        try:
            for start in range(0, len(prompts), batch_size):
                encoded = [[tok.bos] + tok.encode(p) for p in prompts[start:start + batch_size]]
                width = max(len(e) for e in encoded)
                if width + max_new_tokens > self.config.block_size:
                    raise PromptTooLongError(f"a prompt of {width} tokens (with the begin token) + max_new_tokens "
                                             f"{max_new_tokens} exceeds block_size {self.config.block_size}")
                ids = torch.tensor([[tok.pad] * (width - len(e)) + e for e in encoded], device=device)
                real = ids != tok.pad
                generated = torch.zeros(len(encoded), 0, dtype=torch.long, device=device)
                done = torch.zeros(len(encoded), dtype=torch.bool, device=device)
                for _ in range(max_new_tokens):
                    logits = self(ids, real)[:, -1, :]
                    logits[:, tok.pad] = float("-inf")
                    logits[:, tok.bos] = float("-inf")
                    nxt = logits.argmax(dim=-1)
                    nxt = torch.where(done, torch.full_like(nxt, tok.stop), nxt)
                    generated = torch.cat([generated, nxt.unsqueeze(1)], dim=1)
                    done |= nxt == tok.stop
                    if bool(done.all()):
                        break
                    ids = torch.cat([ids, nxt.unsqueeze(1)], dim=1)
                    real = torch.cat([real, torch.ones_like(done).unsqueeze(1)], dim=1)
                for row in generated.tolist():
                    cut = row.index(tok.stop) if tok.stop in row else len(row)
                    outputs.append(tok.decode(row[:cut]))
        finally:
            self.train(was_training)
        return outputs


# ---------------------------------------------------------------- checkpoint directory

def save_model(directory: str | os.PathLike, model: TinyLM) -> list[str]:
    """Writes config.json and model.safetensors; -> the file names written."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as out:
        json.dump(model.config.to_json(), out, indent=2)
    write_safetensors(os.path.join(directory, "model.safetensors"),
                      {k: v for k, v in model.state_dict().items()}, metadata={"format": "pt"})
    return ["config.json", "model.safetensors"]


def load_model(config_path: str | os.PathLike, weights_path: str | os.PathLike) -> TinyLM:
    """Rebuilds a TinyLM from config.json and model.safetensors or model.pt (by extension)."""
    try:
        with open(config_path) as source:
            config = ModelConfig.from_json(json.load(source))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointCorrupt(f"config.json: not JSON ({err})") from err
    weights = os.fspath(weights_path)
    if weights.endswith(".safetensors"):
        arrays, _ = read_safetensors(weights)
        state = {k: torch.from_numpy(v) for k, v in arrays.items()}
    elif weights.endswith(".pt"):
        state = load_state_dict_pt(weights)
    else:
        raise CheckpointCorrupt(f"{os.path.basename(weights)}: weights must be .safetensors or .pt")
    model = TinyLM(config)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise CheckpointCorrupt(f"{os.path.basename(weights)}: does not match config.json: "
                                f"{str(err).splitlines()[0][:300]}") from err
    return model
