"""The improved aesthetic predictor's head with torch (here), and the CLIP model (GPU image only:
transformers is not installable here)."""
from __future__ import annotations

import importlib.util
import io
import os
import unittest

import numpy as np
import torch
from aesthetic_clip import (DEFAULT_CLIP_MODEL, DEFAULT_HEAD_URL, AestheticHead, ClipAestheticScorer, HeadError,
                            RealModelUnavailable, head_from_bytes, head_state, load_clip_embedder, load_head,
                            score_embeddings)

# The state-dict names and shapes of sac+logos+ava1-l14-linearMSE.pth (the repository's MLP).
PUBLISHED_SHAPES = {
    "layers.0.weight": (1024, 768), "layers.0.bias": (1024,),
    "layers.2.weight": (128, 1024), "layers.2.bias": (128,),
    "layers.4.weight": (64, 128), "layers.4.bias": (64,),
    "layers.6.weight": (16, 64), "layers.6.bias": (16,),
    "layers.7.weight": (1, 16), "layers.7.bias": (1,),
}


def published_like(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=generator) * 0.05 for name, shape in PUBLISHED_SHAPES.items()}


class HeadTest(unittest.TestCase):
    def test_architecture_matches_the_published_state_dict(self) -> None:
        head = AestheticHead()
        self.assertEqual({k: tuple(v.shape) for k, v in head.state_dict().items()}, PUBLISHED_SHAPES)
        kinds = [type(layer).__name__ for layer in head.layers]
        self.assertEqual(kinds, ["Linear", "Dropout", "Linear", "Dropout", "Linear", "Dropout", "Linear", "Linear"])
        self.assertEqual([layer.p for layer in head.layers if isinstance(layer, torch.nn.Dropout)], [0.2, 0.2, 0.1])

    def test_loads_a_state_dict_and_scores_one_number_per_embedding(self) -> None:
        state = published_like()
        head = load_head(state)
        self.assertFalse(head.training)
        scores = head(torch.randn(5, 768))
        self.assertEqual(tuple(scores.shape), (5,))
        self.assertTrue(torch.equal(head.layers[7].weight, state["layers.7.weight"]))

    def test_effectively_one_affine_map(self) -> None:
        state = published_like(1)
        head = load_head(state)
        weight = torch.eye(768)
        bias = torch.zeros(768)
        for index in (0, 2, 4, 6, 7):
            w, b = state[f"layers.{index}.weight"].double(), state[f"layers.{index}.bias"].double()
            weight, bias = w @ weight.double(), w @ bias.double() + b
        x = torch.randn(4, 768)
        expected = (x.double() @ weight.T + bias).squeeze(-1)
        self.assertTrue(torch.allclose(head(x).double(), expected, atol=1e-4))
        self.assertTrue(torch.equal(head(x), head(x)))  # eval mode: no dropout

    def test_embeddings_are_l2_normalised_first(self) -> None:
        head = load_head(published_like(2))
        x = torch.randn(3, 768)
        self.assertTrue(torch.allclose(score_embeddings(head, x), score_embeddings(head, 7.5 * x), atol=1e-5))
        normalised = x / x.norm(dim=-1, keepdim=True)
        self.assertTrue(torch.allclose(score_embeddings(head, x), head(normalised), atol=1e-5))

    def test_file_round_trip_and_wrapped_checkpoints(self) -> None:
        state = published_like(3)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        head = head_from_bytes(buffer.getvalue())
        self.assertTrue(torch.equal(head.layers[0].bias, state["layers.0.bias"]))
        wrapped = head_state({"state_dict": {f"mlp.{k}": v for k, v in state.items()}})
        self.assertEqual(sorted(wrapped), sorted(state))

    def test_wrong_weights_are_named(self) -> None:
        state = published_like()
        with self.assertRaisesRegex(HeadError, r"missing \['layers.7.bias'\], unexpected \[\]"):
            load_head({k: v for k, v in state.items() if k != "layers.7.bias"})
        with self.assertRaisesRegex(HeadError, r"layers.0.weight has shape \(1024, 512\), expected \(1024, 768\)"):
            load_head({**state, "layers.0.weight": torch.zeros(1024, 512)})
        with self.assertRaisesRegex(HeadError, "aestheticModel.headUri: not a torch state dict"):
            head_from_bytes(b"not a checkpoint")

    def test_defaults_name_the_published_models(self) -> None:
        self.assertEqual(DEFAULT_CLIP_MODEL, "openai/clip-vit-large-patch14")
        self.assertTrue(DEFAULT_HEAD_URL.endswith("improved-aesthetic-predictor/raw/main/sac+logos+ava1-l14-linearMSE.pth"))


class ClipModelTest(unittest.TestCase):
    @unittest.skipIf(importlib.util.find_spec("transformers") is not None, "transformers is installed here")
    def test_without_transformers_the_error_is_named(self) -> None:
        with self.assertRaisesRegex(RealModelUnavailable, "needs the transformers package"):
            load_clip_embedder(DEFAULT_CLIP_MODEL, "main")

    @unittest.skipUnless(importlib.util.find_spec("transformers") is not None and os.environ.get("VIDEO_SCORE_REAL_MODELS") == "1",
                         "the real CLIP model needs transformers (not installable here: Debian's python3 has no package "
                         "and no PyPI) and Hub access; the GPU image runs it with VIDEO_SCORE_REAL_MODELS=1")
    def test_real_clip_scores_frames(self) -> None:
        embedder = load_clip_embedder(DEFAULT_CLIP_MODEL, "main")
        frames = [np.random.default_rng(i).integers(0, 256, (360, 640, 3), dtype=np.uint8) for i in range(3)]
        embeddings = embedder.embed(frames)
        self.assertEqual(tuple(embeddings.shape), (3, 768))
        score = ClipAestheticScorer(embedder, load_head(published_like()))(frames)
        self.assertTrue(np.isfinite(score))


if __name__ == "__main__":
    unittest.main()
