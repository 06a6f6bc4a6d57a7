"""The Hugging Face adapter against a module shaped as transformers' GPT-NeoX (gpt_neox.layers
blocks returning tuples, a config, an output with .logits): transformers itself is not here."""
from __future__ import annotations

import importlib.util
import math
import types
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F
from hf_model import HfResidualModel, HfTokenizer, RealModelUnavailable, blocks_of, load_hf, weights_sha256
from lm import LayerError


class TupleBlock(nn.Module):
    """A residual MLP block that returns (hidden, extra) as GPT-NeoX layers do."""

    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return x + torch.tanh(self.fc(x)), None


class NeoxShaped(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 16, layers: int = 3):
        super().__init__()
        torch.manual_seed(0)
        self.config = types.SimpleNamespace(hidden_size=width, vocab_size=vocab, max_position_embeddings=64)
        self.embed = nn.Embedding(vocab, width)
        self.gpt_neox = nn.Module()
        self.gpt_neox.layers = nn.ModuleList(TupleBlock(width) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> types.SimpleNamespace:
        x = self.embed(ids)
        for block in self.gpt_neox.layers:
            x = block(x)[0]
        return types.SimpleNamespace(logits=self.head(x))

    def after(self, ids: torch.Tensor, layer: int) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.gpt_neox.layers[:layer + 1]:
            x = block(x)[0]
        return x


class AdapterTest(unittest.TestCase):
    def setUp(self) -> None:
        self.inner = NeoxShaped()
        self.model = HfResidualModel(self.inner, context=32)
        self.ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))

    def test_residual_is_the_block_output(self) -> None:
        self.assertEqual((self.model.n_layer, self.model.d_model, self.model.block_size), (3, 16, 32))
        got = self.model.residual(self.ids, 1)
        self.assertTrue(torch.allclose(got, self.inner.after(self.ids, 1), atol=1e-6))
        with self.assertRaisesRegex(LayerError, r"layer: the model has layers 0 to 2 \(got 3\)"):
            self.model.residual(self.ids, 3)

    def test_losses_with_and_without_a_replacement(self) -> None:
        clean = self.model.losses(self.ids)
        logits = self.inner(self.ids[:, :-1]).logits
        expected = F.cross_entropy(logits.reshape(-1, 50), self.ids[:, 1:].reshape(-1), reduction="none").view(2, -1)
        self.assertTrue(torch.allclose(clean, expected, atol=1e-5))
        self.assertTrue(torch.allclose(self.model.losses(self.ids, 1, lambda x: x.clone()), clean, atol=1e-5))
        zeroed = self.model.losses(self.ids, 1, torch.zeros_like)
        self.assertFalse(torch.allclose(zeroed, clean, atol=1e-3))
        self.assertTrue(math.isfinite(float(zeroed.mean())))

    def test_context_and_structure_errors(self) -> None:
        with self.assertRaisesRegex(ValueError, r"lm.context: 128 exceeds the model's 64 positions"):
            HfResidualModel(NeoxShaped(), context=128)
        with self.assertRaisesRegex(ValueError, r"lm.model: Linear has no gpt_neox.layers"):
            blocks_of(nn.Linear(2, 2))

    def test_weights_hash_follows_the_weights(self) -> None:
        first = weights_sha256(self.inner)
        self.assertEqual(first, weights_sha256(self.inner))
        with torch.no_grad():
            self.inner.head.bias[0] += 1
        self.assertNotEqual(first, weights_sha256(self.inner))

    def test_tokenizer_separates_documents_by_end_of_text(self) -> None:
        fake = types.SimpleNamespace(eos_token_id=0, encode=lambda text, add_special_tokens: [len(w) for w in text.split()],
                                     decode=lambda ids: "<%d>" % ids[0])
        tokenizer = HfTokenizer(fake)
        self.assertEqual((tokenizer.bos, tokenizer.encode("ab c"), tokenizer.token_text(7)), (0, [2, 1], "<7>"))

    @unittest.skipIf(importlib.util.find_spec("transformers") is not None, "transformers is installed here")
    def test_without_transformers_the_error_is_named(self) -> None:
        with self.assertRaisesRegex(RealModelUnavailable, "needs the transformers package"):
            load_hf("EleutherAI/pythia-70m", "main", 128)


if __name__ == "__main__":
    unittest.main()
