"""The AWS path: a Hugging Face GPT-NeoX model (Pythia) read in the GPU job, behind the same three
questions the local model answers (lm.py): `residual(ids, layer)`, `losses(ids, layer, replace)`
and its sizes.

transformers is imported inside `load_hf` only: the local model and the tests run without it
(Debian's python3 here has none); the GPU image installs it. The residual stream after block
`layer` is read and replaced by a forward hook on that block (its output is a tuple whose first
element is the hidden state), not from `output_hidden_states`, whose last entry has the final
layer norm applied in GPT-NeoX.

A model's identity for the cache is the sha256 of its weights (names sorted, each tensor's bytes),
so a revision that moves (`main`) gives a new key when its weights change.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from lm import check_layer

Replace = Optional[Callable[[torch.Tensor], torch.Tensor]]


class RealModelUnavailable(RuntimeError):
    """The Hugging Face path needs transformers, which this environment does not have."""


def blocks_of(model: Any) -> Any:
    """The transformer blocks of a GPT-NeoX (gpt_neox.layers) or GPT-2 style (transformer.h) model."""
    for path in (("gpt_neox", "layers"), ("transformer", "h"), ("model", "layers")):
        node = model
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                break
        if node is not None:
            return node
    raise ValueError(f"lm.model: {type(model).__name__} has no gpt_neox.layers, transformer.h or model.layers")


class HfTokenizer:
    """A Hugging Face tokenizer with the local tokenizer's interface: documents are separated by
    the end-of-text token, as in Pythia's training."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        self.bos = int(eos if eos is not None else 0)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def token_text(self, token: int) -> str:
        return self.tokenizer.decode([int(token)])


class HfResidualModel:
    def __init__(self, model: Any, context: int, device: str = "cpu"):
        self.model = model.to(device).eval()
        self.device = device
        self.blocks = blocks_of(model)
        config = model.config
        self.n_layer = len(self.blocks)
        self.d_model = int(config.hidden_size)
        self.vocab_size = int(config.vocab_size)
        longest = int(getattr(config, "max_position_embeddings", context))
        if context > longest:
            raise ValueError(f"lm.context: {context} exceeds the model's {longest} positions")
        self.block_size = context

    def _hooked(self, ids: torch.Tensor, layer: int, action: Callable[[torch.Tensor], Optional[torch.Tensor]]) -> Any:
        def hook(_module: Any, _inputs: Any, output: Any) -> Any:
            hidden = output[0] if isinstance(output, tuple) else output
            replaced = action(hidden)
            if replaced is None:
                return None
            return (replaced,) + tuple(output[1:]) if isinstance(output, tuple) else replaced

        handle = self.blocks[layer].register_forward_hook(hook)
        try:
            return self.model(ids.to(self.device))
        finally:
            handle.remove()

    @torch.no_grad()
    def residual(self, ids: torch.Tensor, layer: int) -> torch.Tensor:
        check_layer(layer, self.n_layer)
        kept: list[torch.Tensor] = []
        self._hooked(ids, layer, lambda hidden: kept.append(hidden.detach()))
        return kept[0].float().cpu()

    @torch.no_grad()
    def losses(self, ids: torch.Tensor, layer: int | None = None, replace: Replace = None) -> torch.Tensor:
        inputs = ids[:, :-1]
        if layer is None or replace is None:
            logits = self.model(inputs.to(self.device)).logits
        else:
            check_layer(layer, self.n_layer)
            logits = self._hooked(inputs, layer, lambda hidden: replace(hidden.float()).to(hidden.device, hidden.dtype)).logits
        targets = ids[:, 1:].to(logits.device)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none").view(ids.shape[0], -1).cpu()


def weights_sha256(model: Any) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def load_hf(model_id: str, revision: str, context: int) -> tuple[HfResidualModel, HfTokenizer]:
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise RealModelUnavailable(f"lm.kind hf ({model_id}) needs the transformers package (the GPU image has it)") from error
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, torch_dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_id, revision=revision)
    return HfResidualModel(model, context, device), HfTokenizer(tokenizer)
