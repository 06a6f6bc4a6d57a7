"""The transformer block of the jobs' small GPT models (evals-lm's TinyLM, the SAE pipeline's
local model): pre-norm causal self-attention and a 4x GELU MLP, each added to the residual.
The parameter names (ln_1, attn, proj, ln_2, fc, fc_out) are the checkpoints' keys.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from tensors import Linear


class Block(nn.Module):
    def __init__(self, config: Any):
        """config: anything with n_embd and n_head (n_embd a multiple of n_head)."""
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
