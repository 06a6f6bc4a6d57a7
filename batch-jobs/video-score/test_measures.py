"""The measures on hand-made arrays, each against numbers worked by hand in the comments."""
from __future__ import annotations

import math
import unittest

import numpy as np
from measures import (QUALITY_FORMULA, ClipStats, FrameQuality, area_matrix, area_resize, clip_quality, colourfulness,
                      dct_matrix, frame_quality, hamming, key_indices, laplacian_variance, luma, phash, sampled)


def flat(value: tuple[int, int, int], height: int = 36, width: int = 64) -> np.ndarray:
    return np.broadcast_to(np.array(value, dtype=np.uint8), (height, width, 3)).copy()


def checkerboard(low: int, high: int, height: int = 36, width: int = 64) -> np.ndarray:
    rows, columns = np.indices((height, width))
    y = np.where((rows + columns) % 2 == 0, low, high).astype(np.uint8)
    return np.repeat(y[..., None], 3, axis=2)


class LumaSharpnessColourTest(unittest.TestCase):
    def test_luma_is_bt601(self) -> None:
        # 0.299*200 + 0.587*100 + 0.114*50 = 59.8 + 58.7 + 5.7 = 124.2
        self.assertAlmostEqual(float(luma(flat((200, 100, 50))).mean()), 124.2, places=6)

    def test_laplacian_variance(self) -> None:
        self.assertEqual(laplacian_variance(luma(flat((90, 90, 90)))), 0.0)
        # A 0/255 checkerboard: each interior Laplacian is +-4*255, so the variance is (4*255)^2 = 1,040,400.
        self.assertAlmostEqual(laplacian_variance(luma(checkerboard(0, 255))), 1_040_400.0, delta=1e-3)

    def test_colourfulness(self) -> None:
        self.assertAlmostEqual(colourfulness(flat((128, 128, 128))), 0.0, places=9)
        # Pure red: rg = 255, yb = 127.5 everywhere, no spread: M = 0.3 * sqrt(255^2 + 127.5^2) = 85.5264.
        self.assertAlmostEqual(colourfulness(flat((255, 0, 0))), 0.3 * math.hypot(255, 127.5), places=6)


class QualityFormulaTest(unittest.TestCase):
    def test_terms_and_score_by_hand(self) -> None:
        frame = FrameQuality(laplacian_var=99.0, mean_luma=0.4, luma_std=0.125, dark_share=0.1, bright_share=0.0,
                             colourfulness=50.0)
        # S = log10(100)/3 = 2/3; E = (1 - 2*0.1) * (1 - 0.1) = 0.72; C = 0.125/0.25 = 0.5; K = 0.5
        self.assertAlmostEqual(frame.sharpness, 2 / 3, places=9)
        self.assertAlmostEqual(frame.exposure, 0.72, places=9)
        self.assertAlmostEqual(frame.contrast, 0.5, places=9)
        self.assertAlmostEqual(frame.colour, 0.5, places=9)
        # 1 + 9 * (0.35*2/3 + 0.25*0.72 + 0.25*0.5 + 0.15*0.5) = 1 + 9 * 0.61333... = 6.52
        self.assertAlmostEqual(frame.aesthetic, 6.52, places=6)
        self.assertIn("1 + 9*(0.35*S + 0.25*E + 0.25*C + 0.15*K)", QUALITY_FORMULA)

    def test_extremes_and_order(self) -> None:
        black, white = frame_quality(flat((0, 0, 0))), frame_quality(flat((255, 255, 255)))
        self.assertEqual((black.aesthetic, white.aesthetic), (1.0, 1.0))
        self.assertEqual((black.dark_share, white.bright_share), (1.0, 1.0))
        rng = np.random.default_rng(0)
        detailed = rng.integers(0, 256, (36, 64, 3), dtype=np.uint8)
        grey = (detailed.astype(np.float64) * 0.2 + 100).astype(np.uint8)
        self.assertGreater(frame_quality(detailed).aesthetic, frame_quality(grey).aesthetic + 2)

    def test_clip_quality_is_the_mean_over_frames_and_deterministic(self) -> None:
        frames = [checkerboard(60, 200), flat((120, 60, 30)), flat((0, 0, 0))]
        score, components = clip_quality(frames)
        self.assertAlmostEqual(score, np.mean([frame_quality(f).aesthetic for f in frames]), places=5)
        self.assertEqual((score, components), clip_quality([f.copy() for f in frames]))
        with self.assertRaisesRegex(ValueError, "quality: no frames"):
            clip_quality([])


class MotionAndExposureTest(unittest.TestCase):
    def test_still_frames_have_no_motion(self) -> None:
        frame = checkerboard(30, 220, 90, 160)
        stats = ClipStats(160)
        for _ in range(5):
            stats.add(frame)
        result = stats.to_json()
        self.assertEqual(result["motion"], 0.0)
        self.assertAlmostEqual(result["meanLuma"], (30 + 220) / 2 / 255, places=5)
        self.assertAlmostEqual(result["lumaStd"], 95 / 255, places=5)

    def test_motion_is_the_mean_absolute_luma_change(self) -> None:
        # Grey levels 10, 30, 70: steps of 20 and 40, mean 30 (0-255 units).
        stats = ClipStats(32)
        for level in (10, 30, 70):
            stats.add(flat((level, level, level), 18, 32))
        result = stats.to_json()
        self.assertAlmostEqual(result["motion"], 30.0, places=6)
        self.assertAlmostEqual(result["darkShare"], 1 / 3, places=6)  # the level-10 frame is near-black
        with self.assertRaisesRegex(ValueError, r"motion: 1 frame\(s\) sampled"):
            one = ClipStats()
            one.add(flat((1, 2, 3)))
            one.to_json()

    def test_sampling_and_key_frames(self) -> None:
        self.assertEqual([i for i in range(26) if sampled(i, 25.0, 5.0)], [0, 5, 10, 15, 20, 25])
        self.assertEqual([i for i in range(4) if sampled(i, 25.0, 30.0)], [0, 1, 2, 3])
        self.assertEqual(key_indices(50), [5, 25, 45])
        self.assertEqual(key_indices(1), [0, 0, 0])


class PerceptualHashTest(unittest.TestCase):
    def test_dct_matrix_is_scipys_unnormalised_dct2(self) -> None:
        x = np.arange(8, dtype=np.float64) ** 1.5
        naive = [2 * sum(x[n] * math.cos(math.pi * k * (2 * n + 1) / 16) for n in range(8)) for k in range(8)]
        np.testing.assert_allclose(dct_matrix(8) @ x, naive, atol=1e-9)

    def test_area_resampling(self) -> None:
        self.assertTrue(np.allclose(area_matrix(7, 3).sum(axis=1), 1.0))
        y = np.arange(64, dtype=np.float64).reshape(8, 8)
        np.testing.assert_allclose(area_resize(y, 4, 4), y.reshape(4, 2, 4, 2).mean(axis=(1, 3)))

    def test_flat_frames_and_format(self) -> None:
        self.assertEqual(phash(flat((200, 200, 200))), "8000000000000000")
        self.assertEqual(phash(flat((0, 0, 0))), "0000000000000000")
        rng = np.random.default_rng(1)
        picture = rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)
        code = phash(picture)
        self.assertRegex(code, r"^[0-9a-f]{16}$")
        self.assertEqual(bin(int(code, 16)).count("1"), 32)  # median threshold: half the bits set (no ties here)

    def test_hamming(self) -> None:
        self.assertEqual(hamming("ff00000000000000", "0f00000000000001"), 5)
        with self.assertRaisesRegex(ValueError, "different lengths"):
            hamming("ff", "fff")


if __name__ == "__main__":
    unittest.main()
