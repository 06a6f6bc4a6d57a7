"""The local model's tokenizer, training, residual access and the harvest."""
from __future__ import annotations

import os
import tempfile
import unittest

import torch
from harvest import HarvestError, HarvestSpec, harvest, read_shard, windows_of
from lm import LayerError, LmConfig, LocalLM, TrainLmSpec, load_lm, mean_loss, save_lm, token_stream, train_lm
from tokenizer import BOS, PIECE_BASE, Tokenizer, TokenizerError

TEXTS = [
    "The function returns a list of strings. Each string is a line of the file.\n",
    "Use os.path.join() to build a path; it returns a string.\n",
    "Déjà vu: the café serves crème brûlée at 7 o'clock.\n",
] * 20


def stream_and_model(layers: int = 2, width: int = 32, context: int = 16) -> tuple[Tokenizer, torch.Tensor, LocalLM]:
    torch.manual_seed(0)
    tokenizer = Tokenizer.train(TEXTS, 300)
    stream = token_stream(tokenizer, TEXTS)
    model = LocalLM(LmConfig(vocab_size=tokenizer.vocab_size, n_layer=layers, n_embd=width, n_head=2, block_size=context))
    return tokenizer, stream, model


class TokenizerTest(unittest.TestCase):
    def test_round_trip_and_pieces(self) -> None:
        tokenizer = Tokenizer.train(TEXTS, 300)
        for text in TEXTS[:3] + ["unseen wörds ☃ and\ttabs  \n\n"]:
            self.assertEqual(tokenizer.decode(tokenizer.encode(text)), text)
        ids = tokenizer.encode("The function returns")
        self.assertTrue(all(i >= PIECE_BASE for i in ids), ids)
        self.assertEqual([tokenizer.token_text(i) for i in ids], ["The", " function", " returns"])
        # A piece seen once is spelled in bytes; a non-ASCII byte shows as <0xNN>.
        self.assertEqual([tokenizer.token_text(i) for i in tokenizer.encode("☃")], ["<0xE2>", "<0x98>", "<0x83>"])

    def test_deterministic_and_bounded(self) -> None:
        a, b = Tokenizer.train(TEXTS, 270), Tokenizer.train(list(TEXTS), 270)
        self.assertEqual(a.pieces, b.pieces)
        self.assertEqual(a.vocab_size, 270)
        with self.assertRaisesRegex(TokenizerError, r"vocab_size: .*got 100"):
            Tokenizer.train(TEXTS, 100)
        with self.assertRaisesRegex(TokenizerError, "format"):
            Tokenizer.from_json({"format": "other"})


class ModelTest(unittest.TestCase):
    def test_training_lowers_the_loss(self) -> None:
        _, stream, model = stream_and_model()
        before = mean_loss(model, stream)
        result = train_lm(model, stream, TrainLmSpec(steps=40, batch_size=8, lr=3e-3, warmup=5))
        after = mean_loss(model, stream)
        self.assertLess(after, before - 1.0, (before, after, result))
        self.assertGreater(result["tokensPerSecond"], 0)

    def test_residual_and_splice(self) -> None:
        _, stream, model = stream_and_model()
        ids = stream[:17].view(1, 17)
        # Replacing the residual by itself changes nothing; zeroing it changes the loss.
        clean = model.losses(ids)
        same = model.losses(ids, 1, lambda x: x.clone())
        self.assertTrue(torch.allclose(clean, same, atol=1e-6))
        self.assertFalse(torch.allclose(clean, model.losses(ids, 1, torch.zeros_like), atol=1e-3))
        residual = model.residual(ids[:, :16], 1)
        self.assertEqual(tuple(residual.shape), (1, 16, 32))
        with self.assertRaisesRegex(LayerError, r"layer: the model has layers 0 to 1 \(got 2\)"):
            model.residual(ids[:, :16], 2)

    def test_save_and_load(self) -> None:
        tokenizer, stream, model = stream_and_model()
        with tempfile.TemporaryDirectory() as d:
            save_lm(d, model, tokenizer)
            loaded, loaded_tokenizer = load_lm(d)
        ids = stream[:17].view(1, 17)
        self.assertTrue(torch.allclose(model.losses(ids), loaded.losses(ids), atol=1e-6))
        self.assertEqual(loaded_tokenizer.pieces, tokenizer.pieces)
        self.assertEqual(int(stream[0]), BOS)


class HarvestTest(unittest.TestCase):
    def test_shards_split_and_losses(self) -> None:
        _, stream, model = stream_and_model(context=16)
        train_lm(model, stream, TrainLmSpec(steps=40, batch_size=8, lr=3e-3, warmup=5))
        with tempfile.TemporaryDirectory() as d:
            summary = harvest(model, stream, HarvestSpec(tokens=320, layer=1, held_out_every=4, shard_tokens=64), d)
            shards = summary["shards"]
            self.assertEqual(sum(s["tokens"] for s in shards), 320)
            self.assertEqual(summary["heldOutTokens"], 5 * 16)
            acts, tokens, meta = read_shard(os.path.join(d, shards[0]["name"]))
            windows = [int(w) for w in meta["windows"].split(",")]
            # Each shard's activations are the model's residual over its own windows.
            ids = windows_of(stream, 16, 320)[windows]
            self.assertTrue(torch.equal(tokens.view(-1, 16), ids))
            expected = model.residual(ids, 1).reshape(-1, 32)
            self.assertTrue(torch.allclose(acts, expected, atol=1e-5))
            self.assertTrue(all(w % 4 != 3 for w in windows))
        # A trained model needs its residual: zeroing it or replacing it by its mean costs loss.
        self.assertLess(summary["ceClean"] + 0.5, summary["ceZeroAblated"])
        self.assertLess(summary["ceClean"] + 0.1, summary["ceMeanAblated"])
        self.assertEqual(len(summary["meanActivation"]), 32)

    def test_corpus_too_short(self) -> None:
        _, stream, model = stream_and_model()
        with tempfile.TemporaryDirectory() as d, self.assertRaisesRegex(HarvestError, r"harvest.tokens: 100000 tokens asked for"):
            harvest(model, stream, HarvestSpec(tokens=100_000, layer=1), d)

    def test_nan_activations_named(self) -> None:
        _, stream, model = stream_and_model()
        with torch.no_grad():
            model.blocks[0].fc_out.bias[3] = float("nan")
        with tempfile.TemporaryDirectory() as d, self.assertRaisesRegex(HarvestError, r"layer 1, windows .*: \d+ activation rows hold NaN"):
            harvest(model, stream, HarvestSpec(tokens=160, layer=1, held_out_every=2), d)


if __name__ == "__main__":
    unittest.main()
