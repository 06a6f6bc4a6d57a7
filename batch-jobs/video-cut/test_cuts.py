"""The detector and the clip plan on hand-made numbers (no video)."""
from __future__ import annotations

import unittest

import numpy as np
from cuts import (HISTOGRAM_BINS, DetectorSettings, adaptive_ratios, content_scores, detect_cuts, histogram_changes,
                  hsv, hsv_reference, match_cuts, plan_clips)


class HsvTest(unittest.TestCase):
    def test_primaries_on_opencv_scales(self) -> None:
        pixels = np.array([[[[255, 0, 0], [0, 255, 0], [0, 0, 255], [128, 128, 128], [0, 0, 0]]]], dtype=np.uint8)
        h, s, v = hsv(pixels)[:, 0, 0]
        self.assertEqual(h.tolist(), [0, 60, 120, 0, 0])  # red, green, blue at 0, 120, 240 degrees, halved
        self.assertEqual(s.tolist(), [255, 255, 255, 0, 0])
        self.assertEqual(v.tolist(), [255, 255, 255, 128, 0])

    def test_tables_give_the_formulas_numbers(self) -> None:
        # Every 7th colour of the 2^24 (all residues of each channel), against the float32 formula;
        # both round the same float32 operations, so they agree to one unit (a rounding tie) at most.
        colours = np.arange(0, 1 << 24, 7, dtype=np.uint32)
        pixels = np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], axis=-1).astype(np.uint8)
        pixels = pixels[: len(pixels) // 1000 * 1000].reshape(-1, 1, 1000, 3)
        fast, formula = hsv(pixels), hsv_reference(pixels)
        self.assertEqual(fast.dtype, np.uint8)
        self.assertLessEqual(float(np.abs(fast.astype(np.float32) - formula).max()), 1.0)

    def test_scores_are_the_mean_hsv_difference(self) -> None:
        black = np.zeros((4, 4, 3), np.uint8)
        red = np.zeros((4, 4, 3), np.uint8)
        red[..., 0] = 255
        # black -> red: H 0, S +255, V +255: mean (0 + 255 + 255) / 3 = 170; batches split anywhere.
        for batch in (1, 2, 64):
            self.assertEqual(content_scores([black, black, red, red], batch=batch).tolist(), [0, 0, 170, 0])

    def test_scores_carry_colour_histograms(self) -> None:
        black = np.zeros((4, 4, 3), np.uint8)
        red = np.zeros((4, 4, 3), np.uint8)
        red[..., 0] = 255
        for batch in (1, 3, 64):
            histograms = content_scores([black, red, red], batch=batch).histograms
            self.assertEqual(histograms.shape, (3, int(np.prod(HISTOGRAM_BINS))))
            # black: hue 0, saturation 0, value 0 (bin 0); red: hue 0, saturation and value top.
            self.assertEqual(np.flatnonzero(histograms[0]).tolist(), [0])
            self.assertEqual(np.flatnonzero(histograms[1]).tolist(), [HISTOGRAM_BINS[1] * HISTOGRAM_BINS[2] - 1])
            self.assertTrue(np.allclose(histograms.sum(axis=1), 1.0))


class DetectTest(unittest.TestCase):
    def test_adaptive_ratio_divides_by_the_neighbourhood(self) -> None:
        scores = np.array([0, 2, 2, 40, 2, 2, 2], float)
        self.assertAlmostEqual(adaptive_ratios(scores, 2)[3], 20.0)

    def test_a_cut_inside_fast_motion(self) -> None:
        # Motion at 30 a frame defeats a fixed threshold of 27 everywhere; the ratio finds the cut.
        scores = np.full(100, 30.0)
        scores[0], scores[50] = 0.0, 90.0
        self.assertEqual([c["frame"] for c in detect_cuts(scores, DetectorSettings())], [50])
        content = detect_cuts(scores, DetectorSettings(detector="content", threshold=27.0))
        self.assertGreater(len(content), 3)

    def test_a_cut_between_two_fast_textures(self) -> None:
        # Two shots of coarse noise flickering every frame, red then yellow-green: each scores ~32 a
        # frame, the cut ~47 (ratio ~1.5, under 2), but every pixel's hue moves two bins at once.
        rng = np.random.default_rng(0)
        shades = {"red": ((250, 50, 50), (60, 12, 12)), "green": ((150, 250, 50), (36, 60, 12))}

        def shot(name: str, count: int) -> list[np.ndarray]:
            bright, dark = (np.array(c, np.uint8) for c in shades[name])
            return [np.where(rng.random((36, 64, 1)) < 0.5, bright, dark) for _ in range(count)]

        scores = content_scores(shot("red", 50) + shot("green", 50))
        self.assertTrue(20 < scores[10] < 40 and 20 < scores[70] < 40)
        self.assertLess(adaptive_ratios(np.asarray(scores), 2)[50], 2.0)
        self.assertEqual([c["frame"] for c in detect_cuts(np.asarray(scores), DetectorSettings())], [])  # no histograms
        self.assertGreater(histogram_changes(scores.histograms, 2)[50], 0.95)
        self.assertEqual([c["frame"] for c in detect_cuts(scores, DetectorSettings())], [50])
        # The content detector and its fixed threshold make no use of the histograms.
        content = DetectorSettings(detector="content", threshold=27.0)
        self.assertEqual(detect_cuts(scores, content), detect_cuts(np.asarray(scores), content))

    def test_colours_flickering_inside_a_shot_are_no_cut(self) -> None:
        # Every frame swaps between two palettes (the histogram jumps fully frame to frame) and scores
        # as high as at a cut; the mean of the windows either side stays put, so no cut is made.
        scores = np.full(100, 40.0)
        scores[0], scores[60] = 0.0, 60.0
        palettes = np.eye(2)[np.arange(100) % 2]
        self.assertLess(histogram_changes(palettes, 2)[1:].max(), 0.51)
        self.assertEqual(detect_cuts(scores, DetectorSettings(), palettes), [])
        # The same scores with the colours changing for good at frame 60: a cut (ratio 1.5).
        changed = np.eye(2)[(np.arange(100) >= 60).astype(int)]
        self.assertEqual([c["frame"] for c in detect_cuts(scores, DetectorSettings(), changed)], [60])
        # A colour change with no rise in the content score is not one (ratio 1.0).
        self.assertEqual(detect_cuts(np.r_[0.0, np.full(99, 40.0)], DetectorSettings(), changed), [])

    def test_the_strongest_of_close_candidates_wins(self) -> None:
        scores = np.full(100, 1.0)
        scores[40], scores[48] = 25.0, 80.0  # 8 frames apart, under min_scene_frames 15
        cuts = detect_cuts(scores, DetectorSettings())
        self.assertEqual([c["frame"] for c in cuts], [48])

    def test_no_cut_near_either_end(self) -> None:
        scores = np.full(100, 1.0)
        scores[5], scores[97], scores[50] = 90.0, 90.0, 90.0
        self.assertEqual([c["frame"] for c in detect_cuts(scores, DetectorSettings())], [50])

    def test_match_cuts_within_tolerance(self) -> None:
        self.assertEqual(match_cuts([10, 52, 90], [11, 50, 70]), (2, 1, 1))


class PlanTest(unittest.TestCase):
    def test_short_segments_drop_and_long_ones_split(self) -> None:
        # 25 fps: 0-100 (4 s) kept, 100-125 (1 s) dropped, 125-600 (19 s) split in two halves.
        clips, dropped = plan_clips([100, 125], 600, 25.0, 2.0, 15.0)
        self.assertEqual([(c["startFrame"], c["endFrame"]) for c in clips], [(0, 100), (125, 363), (363, 600)])
        self.assertEqual([c["segment"] for c in clips], [0, 2, 2])
        self.assertEqual(dropped, [{"segment": 1, "startFrame": 100, "endFrame": 125, "start": 4.0, "end": 5.0,
                                    "rule": "too-short", "value": 1.0, "threshold": 2.0}])

    def test_a_segment_of_exactly_the_maximum_stays_whole(self) -> None:
        clips, _ = plan_clips([], 375, 25.0, 2.0, 15.0)
        self.assertEqual(len(clips), 1)


if __name__ == "__main__":
    unittest.main()
