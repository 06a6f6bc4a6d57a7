"""Tests of the TopK SAE (sae.py): recovery of a known sparse dictionary, the TopK and decoder
constraints, AuxK reviving dead latents, determinism, the geometric median, files and errors.

Run from this folder with batch-jobs/common on PYTHONPATH; the whole file takes ~15 s on 2 cores.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import unittest

import torch
from tensors import CheckpointCorrupt, write_safetensors

from sae import (SaeConfig, SaeConfigError, TopKSAE, check_activations, evaluate, geometric_median,
                 load_sae, loss_recovered, reconstruct, sae_loss, save_sae, train_sae)

torch.set_num_threads(1)


def sparse_dictionary_data(rows: int, d_in: int = 64, atoms: int = 128, seed: int = 0,
                           noise: float = 0.01, offset: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """rows x d_in samples, each 3-5 random unit atoms with coefficients in [0.5, 1.5], plus a
    constant offset (for b_pre to find) and Gaussian noise. -> (samples, atoms)."""
    generator = torch.Generator().manual_seed(seed)
    dictionary = torch.randn(atoms, d_in, generator=generator)
    dictionary /= dictionary.norm(dim=1, keepdim=True)
    active = torch.randint(3, 6, (rows,), generator=generator)
    rank = torch.rand(rows, atoms, generator=generator).argsort(dim=1).argsort(dim=1)
    coefficients = (0.5 + torch.rand(rows, atoms, generator=generator)) * (rank < active[:, None])
    samples = coefficients @ dictionary + offset + noise * torch.randn(rows, d_in, generator=generator)
    return samples, dictionary


# Measured on this data (d_in 64, 128 atoms, 8,192 rows), 400 steps of 256 tokens at lr 1e-2:
# k 8 reaches FVU 0.059-0.075 over seeds 0-4 (L0 7.8-7.9); k 1 stays at 0.58-0.59.
FIT = dict(d_in=64, batch_size=256, lr=1e-2, dead_tokens=256 * 50)
FIT_STEPS = 400


class TrainedSaeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.data, _ = sparse_dictionary_data(8192)
        cls.config = SaeConfig(width=128, k=8, **FIT)
        cls.model, cls.history = train_sae(cls.data, cls.config, steps=FIT_STEPS, log_every=100)
        cls.metrics = evaluate(cls.model, cls.data)

    def test_recovers_a_sparse_dictionary(self) -> None:
        print(f"\n  k=8 FVU {self.metrics['fvu']:.4f}, L0 {self.metrics['l0']:.2f}, "
              f"dead {self.metrics['dead_share']:.3f}, {self.history['tokens_per_second']:.0f} tokens/s")
        self.assertLess(self.metrics["fvu"], 0.1)
        self.assertLess(self.history["fvu"][-1], self.history["fvu"][0])

    def test_k1_is_clearly_worse_than_k8(self) -> None:
        model, _ = train_sae(self.data, SaeConfig(width=128, k=1, **FIT), steps=FIT_STEPS, log_every=100)
        fvu = evaluate(model, self.data)["fvu"]
        print(f"\n  k=1 FVU {fvu:.4f} (k=8: {self.metrics['fvu']:.4f})")
        self.assertGreater(fvu, 0.3)
        self.assertGreater(fvu, 3 * self.metrics["fvu"])

    def test_at_most_k_nonzeros_per_row(self) -> None:
        encoding = self.model.encode(self.data[:1000])
        nonzero = (encoding.latents != 0).sum(dim=1)
        self.assertTrue(bool((nonzero <= self.config.k).all()))
        self.assertTrue(torch.equal(nonzero, (encoding.values > 0).sum(dim=1)))
        self.assertEqual(tuple(encoding.indices.shape), (1000, self.config.k))
        self.assertTrue(bool((encoding.indices.sort(dim=1).values.diff(dim=1) > 0).all()), "indices repeat in a row")
        self.assertLessEqual(self.metrics["l0"], self.config.k)
        self.assertGreater(self.metrics["l0"], self.config.k - 1)
        self.assertEqual(int(self.metrics["fire_counts"].sum()), round(self.metrics["l0"] * len(self.data)))

    def test_exactly_k_nonzeros_when_every_preactivation_is_positive(self) -> None:
        model = TopKSAE(SaeConfig(d_in=16, width=64, k=5))
        with torch.no_grad():
            model.b_lat.fill_(100.0)
        latents = model.encode(torch.randn(50, 16)).latents
        self.assertTrue(bool(((latents != 0).sum(dim=1) == 5).all()))

    def test_decoder_columns_stay_unit_norm(self) -> None:
        norms = self.model.W_dec.norm(dim=0)
        self.assertLess(float((norms - 1).abs().max()), 1e-5)

    def test_dense_and_sparse_decoding_agree(self) -> None:
        x = self.data[:300]
        encoding = self.model.encode(x)
        dense = self.model.decode(encoding.latents)
        sparse = self.model.decode_sparse(encoding.values, encoding.indices)
        self.assertLess(float((dense - sparse).abs().max()), 1e-4)
        torch.testing.assert_close(reconstruct(self.model, x), sparse.detach(), rtol=0, atol=1e-5)

    def test_reconstruct_keeps_shape_and_dtype(self) -> None:
        x = self.data[:24].reshape(2, 12, 64).double()
        out = reconstruct(self.model, x)
        self.assertEqual((out.shape, out.dtype), (x.shape, torch.float64))
        self.assertFalse(out.requires_grad)
        with self.assertRaisesRegex(ValueError, "d_in=64"):
            reconstruct(self.model, torch.zeros(3, 65))

    def test_history_reports_throughput(self) -> None:
        history = self.history
        self.assertEqual(history["step"], [100, 200, 300, 400])
        self.assertEqual(len(history["loss"]), len(history["fvu"]))
        self.assertEqual(len(history["fvu"]), len(history["dead_share"]))
        self.assertEqual(history["tokens"], FIT_STEPS * 256)
        self.assertGreater(history["tokens_per_second"], 0)


class AuxKTest(unittest.TestCase):
    def test_auxk_revives_dead_latents(self) -> None:
        # 224 of 256 latents start with encoder rows shrunk 50x: they lose every TopK contest,
        # so without AuxK they never get a gradient and stay dead. With AuxK their (small,
        # positive) pre-activations are asked to explain the residual that 32 live latents
        # leave of a 128-atom dictionary, and they come back. Measured over seeds 0-4 (300
        # steps): dead share 0.863-0.875 without AuxK, 0.18-0.27 with it; FVU ~0.42 vs ~0.056.
        data, _ = sparse_dictionary_data(8192, seed=3)
        results = {}
        for coef in (0.0, 1 / 32):
            config = SaeConfig(width=256, k=8, **dict(FIT, dead_tokens=256 * 5), auxk_coef=coef, seed=3)
            model = TopKSAE(config)
            with torch.no_grad():
                model.b_pre.copy_(geometric_median(data))
                model.W_enc[32:] *= 0.02
            model, _ = train_sae(data, config, steps=300, log_every=100, model=model)
            results[coef] = evaluate(model, data)
        without, with_auxk = results[0.0], results[1 / 32]
        print(f"\n  dead share {without['dead_share']:.3f} without AuxK, {with_auxk['dead_share']:.3f} with; "
              f"FVU {without['fvu']:.3f} vs {with_auxk['fvu']:.3f}")
        self.assertGreater(without["dead_share"], 0.8)
        self.assertLess(with_auxk["dead_share"], without["dead_share"] - 0.3)
        self.assertLess(with_auxk["fvu"], without["fvu"] / 2)

    def test_auxk_is_zero_while_no_latent_is_dead(self) -> None:
        config = SaeConfig(d_in=16, width=64, k=4, dead_tokens=1000)
        model = TopKSAE(config)
        x = torch.randn(100, 16)
        self.assertEqual(float(sae_loss(model, x).auxk), 0.0)
        model.tokens_since_fired[:10] = 1000  # ten dead latents
        step = sae_loss(model, x)
        self.assertGreater(float(step.auxk), 0.0)
        self.assertAlmostEqual(float(step.loss), float(step.fvu) + float(step.auxk) / 32, places=5)


class DeterminismTest(unittest.TestCase):
    def test_same_seed_same_history(self) -> None:
        data, _ = sparse_dictionary_data(4096, d_in=32, atoms=64, seed=5)
        config = SaeConfig(d_in=32, width=64, k=4, batch_size=256, lr=1e-2, dead_tokens=256 * 3, seed=7)
        runs = [train_sae(data, config, steps=120, log_every=10)[1] for _ in range(2)]
        self.assertEqual(len(runs[0]["loss"]), 12)
        for first, second in zip(runs[0]["loss"], runs[1]["loss"]):
            self.assertLess(abs(first - second), 1e-6)
        other = train_sae(data, SaeConfig(**dict(config.to_json(), seed=8)), steps=120, log_every=10)[1]
        self.assertGreater(max(abs(a - b) for a, b in zip(runs[0]["loss"], other["loss"])), 1e-4)


class GeometricMedianTest(unittest.TestCase):
    def test_collinear_points_give_the_middle_one(self) -> None:
        points = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [1000.0, 0.0]])
        median = geometric_median(points)
        self.assertLess(float((median - torch.tensor([2.0, 0.0])).norm()), 1e-3)
        self.assertGreater(float(points.mean(dim=0)[0]), 200)  # the mean follows the outlier

    def test_robust_to_an_outlier(self) -> None:
        generator = torch.Generator().manual_seed(0)
        cluster = torch.randn(200, 8, generator=generator) * 0.1 + 3.0
        points = torch.cat([cluster, torch.full((1, 8), 1e4)])
        median = geometric_median(points)
        self.assertLess(float((median - 3.0).abs().max()), 0.1)
        self.assertGreater(float((points.mean(dim=0) - 3.0).abs().min()), 40)

    def test_symmetric_square_gives_its_centre(self) -> None:
        square = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]]) + torch.tensor([5.0, -2.0])
        torch.testing.assert_close(geometric_median(square), torch.tensor([5.0, -2.0]), rtol=0, atol=1e-5)


class ConfigTest(unittest.TestCase):
    def test_defaults(self) -> None:
        config = SaeConfig(d_in=128, width=4096, k=32)
        self.assertEqual(config.auxk, 64)
        self.assertAlmostEqual(config.lr, 2e-4 / math.sqrt(4096 / 2 ** 14))
        self.assertEqual((config.auxk_coef, config.dead_tokens, config.batch_size), (1 / 32, 10_000_000, 4096))
        self.assertEqual(SaeConfig(**config.to_json()), config)

    def test_k_above_width(self) -> None:
        with self.assertRaisesRegex(SaeConfigError, r"^k: 80 exceeds width 64 \(each token keeps k of width latents\)$"):
            SaeConfig(d_in=16, width=64, k=80)

    def test_auxk_above_width(self) -> None:
        with self.assertRaisesRegex(SaeConfigError, "auxk: 100 exceeds width 64"):
            SaeConfig(d_in=16, width=64, k=8, auxk=100)

    def test_non_positive_integers(self) -> None:
        for field, value in (("d_in", 0), ("width", -3), ("k", 2.5), ("dead_tokens", 0), ("batch_size", True)):
            arguments = dict(d_in=16, width=64, k=8)
            arguments[field] = value
            with self.subTest(field=field), self.assertRaisesRegex(SaeConfigError, f"^{field}: .*{value!r}"):
                SaeConfig(**arguments)
        with self.assertRaisesRegex(SaeConfigError, "lr: .*-0.1"):
            SaeConfig(d_in=16, width=64, k=8, lr=-0.1)
        with self.assertRaisesRegex(SaeConfigError, "auxk_coef: .*nan"):
            SaeConfig(d_in=16, width=64, k=8, auxk_coef=math.nan)

    def test_batch_larger_than_the_data(self) -> None:
        with self.assertRaisesRegex(ValueError, "batch_size: 4096 exceeds the 100 activation rows"):
            train_sae(torch.randn(100, 8), SaeConfig(d_in=8, width=16, k=2), steps=1)


class ActivationCheckTest(unittest.TestCase):
    def test_nan_and_inf_rows_are_named(self) -> None:
        x = torch.randn(10, 4)
        x[3, 1] = math.nan
        x[7, 0] = math.inf
        with self.assertRaisesRegex(ValueError, r"^activations: 2 of 10 rows hold NaN or inf \(first at row 3\)$"):
            check_activations(x)
        with self.assertRaisesRegex(ValueError, "eval: 2 of 10 rows"):
            check_activations(x, field="eval")
        with self.assertRaisesRegex(ValueError, "first at row 3"):
            train_sae(x, SaeConfig(d_in=4, width=8, k=2, batch_size=4), steps=1)

    def test_shape_is_checked(self) -> None:
        check_activations(torch.randn(5, 4))
        with self.assertRaisesRegex(ValueError, "must be 2-D"):
            check_activations(torch.randn(5))
        with self.assertRaisesRegex(ValueError, "rows have 5 values, the SAE reads d_in=4"):
            check_activations(torch.randn(3, 5), d_in=4)


class FileTest(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.directory.name, "sae.safetensors")

    def tearDown(self) -> None:
        self.directory.cleanup()

    def test_round_trip(self) -> None:
        data = torch.randn(512, 16)
        config = SaeConfig(d_in=16, width=32, k=4, batch_size=128, seed=2)
        model, _ = train_sae(data, config, steps=5)
        metrics = evaluate(model, data)
        save_sae(self.path, model, config, metrics)
        loaded, loaded_metrics = load_sae(self.path)
        self.assertEqual(loaded.config, config)
        for name in ("W_enc", "b_lat", "W_dec", "b_pre"):
            torch.testing.assert_close(getattr(loaded, name), getattr(model, name), rtol=0, atol=1e-7)
        torch.testing.assert_close(reconstruct(loaded, data), reconstruct(model, data), rtol=0, atol=1e-6)
        self.assertAlmostEqual(loaded_metrics["fvu"], metrics["fvu"], places=9)
        self.assertEqual(loaded_metrics["fire_counts"], metrics["fire_counts"].tolist())

    def test_shape_mismatch_is_named(self) -> None:
        config = SaeConfig(d_in=16, width=32, k=4)
        model = TopKSAE(config)
        save_sae(self.path, model)
        wrong = os.path.join(self.directory.name, "wrong.safetensors")
        tensors = {name: getattr(model, name) for name in ("W_enc", "b_lat", "W_dec", "b_pre")}
        tensors["W_dec"] = torch.zeros(16, 31)
        metadata = {"format": "topk-sae-v1", "config": json.dumps(config.to_json()), "metrics": "{}"}
        write_safetensors(wrong, tensors, metadata)
        with self.assertRaisesRegex(CheckpointCorrupt, r"wrong.safetensors: tensor W_dec has shape \[16, 31\], "
                                                      r"the config \(d_in=16, width=32\) needs \[16, 32\]"):
            load_sae(wrong)

    def test_bad_metadata(self) -> None:
        model = TopKSAE(SaeConfig(d_in=16, width=32, k=4))
        tensors = {name: getattr(model, name) for name in ("W_enc", "b_lat", "W_dec", "b_pre")}
        write_safetensors(self.path, tensors, {"format": "topk-sae-v1", "config": '{"d_in": 16, "width": 32, "k": 40}'})
        with self.assertRaisesRegex(CheckpointCorrupt, "k: 40 exceeds width 32"):
            load_sae(self.path)
        write_safetensors(self.path, tensors, {"format": "other"})
        with self.assertRaisesRegex(CheckpointCorrupt, "format must be 'topk-sae-v1'"):
            load_sae(self.path)
        del tensors["b_lat"]
        write_safetensors(self.path, tensors, {"format": "topk-sae-v1", "config": '{"d_in": 16, "width": 32, "k": 4}'})
        with self.assertRaisesRegex(CheckpointCorrupt, "tensors must be"):
            load_sae(self.path)


class LossRecoveredTest(unittest.TestCase):
    def test_formula(self) -> None:
        self.assertAlmostEqual(loss_recovered(3.0, 5.0, 3.5), 0.75)
        self.assertAlmostEqual(loss_recovered(3.0, 5.0, 3.0), 1.0)
        self.assertAlmostEqual(loss_recovered(3.0, 5.0, 5.0), 0.0)
        self.assertAlmostEqual(loss_recovered(3.0, 5.0, 6.0), -0.5)

    def test_nothing_to_recover(self) -> None:
        with self.assertRaisesRegex(ValueError, "ce_ablated: 3.0 is not above ce_clean 3.0"):
            loss_recovered(3.0, 3.0, 3.1)
        with self.assertRaisesRegex(ValueError, "ce_sae: must be a finite number"):
            loss_recovered(3.0, 4.0, math.nan)


if __name__ == "__main__":
    unittest.main()
