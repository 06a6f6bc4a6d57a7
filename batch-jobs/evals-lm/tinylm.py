"""A small GPT-style character model, its greedy generation, and safe checkpoint files.

The model is a decoder-only transformer (learned token and position embeddings, pre-norm
blocks of causal self-attention and a 4x MLP, tied output head) over a fixed character
vocabulary that is stored in config.json, so a checkpoint loads without any training flags.

Checkpoint files (a directory, or the files a manifest names):
- config.json: {"format": "tinylm-v1", "architecture": {...}, "vocab": "<characters>"}.
- model.safetensors: the weights, written and read by the safetensors codec in
  common/tensors.py (with the fast CPU linear the model's layers use).
- model.pt (accepted instead of model.safetensors): a plain state_dict, read with
  torch.load(weights_only=True). A pickle that needs anything beyond tensors and plain
  containers is refused with CheckpointRefused and never executed.
"""
from __future__ import annotations

import json
import os
import pickle
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn as nn
from tensors import (  # noqa: F401 - re-exported for the eval and training modules
    CheckpointCorrupt, CheckpointError, Linear, linear, read_safetensors, write_safetensors)
from transformer import Block

CONFIG_FORMAT = "tinylm-v1"
PAD, BOS, STOP = "\x00", "\x02", "\n"
# Index 0 is padding, 1 begins every sequence, "\n" ends an answer (the stop token).
VOCAB = (PAD + BOS + STOP + " !\"#$%&'()*+,-./0123456789:;<=>?@"
         "ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz")

# What torch's weights-only unpickler says (1.13 and 2.x) when a pickle asks for a class or a
# call outside its allow-list: the signs of a pickle that would run code.
REFUSAL_MARKERS = ("Unsupported class", "Unsupported global", "unrecognized function", "Can only build",
                   "Can only create", "Unsupported type")


class CheckpointRefused(CheckpointError):
    """A model.pt pickle needs more than tensors and plain containers: never loaded."""


class UnknownCharacterError(ValueError):
    """A prompt holds a character outside the model's vocabulary."""


class PromptTooLongError(ValueError):
    """A prompt plus max_new_tokens does not fit the model's block_size."""


class ModelConfigError(ValueError):
    """An architecture field is missing or out of range."""


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
