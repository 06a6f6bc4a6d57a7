"""Content-aware cut detection, and the plan that turns cuts into clips.

The video is decoded once, downscaled to ANALYSIS_HEIGHT (160x90 for 16:9; area scaling also
averages away grain), and every frame gets a content score in the manner of PySceneDetect's
ContentDetector: the frame in HSV (OpenCV's scales: H 0-179, S and V 0-255), the mean absolute
difference from the previous frame of H, S and V, averaged with equal weights.

Detectors (settings.detector):

- `adaptive` (the default), PySceneDetect's AdaptiveDetector: a frame is a cut when its score is
  at least `threshold` times the mean score of the `windowFrames` frames either side of it (the
  ratio is capped at 255) and at least `minContentValue`. Dividing by the neighbourhood is what
  tells a cut inside fast motion (noise, a pan over fine texture: every frame scores 20-40) from
  the motion itself, which a fixed threshold cannot do. It fails between two fast textured shots
  (a scrolling cellular automaton cut into `life`): both score 35-60 every frame, so the cut's
  ratio is only 1.4-1.8. So a second signal: each frame's coarse colour histogram (HSV, 8 hue x
  4 saturation x 4 value bins), and its change, half the L1 distance between the mean histogram of
  the `windowFrames` frames before the frame and that of the `windowFrames` frames from it on.
  Means over windows, not frame-to-frame distances: a texture that flickers between palettes
  jumps frame to frame (inside a scrolling cellular automaton up to 0.66) but its window means
  stay put. A frame is also a cut when its change is at least HISTOGRAM_CHANGE (0.6) and its
  ratio at least HISTOGRAM_RATIO (1.35; the threshold if lower), and still at least
  `minContentValue`.
- `content`, PySceneDetect's ContentDetector: a frame is a cut when its score is at least
  `threshold` (PySceneDetect's default 27).

Either way, of candidates closer than `minSceneFrames` the strongest is kept (PySceneDetect keeps
the first, so a weak false cut a few frames early suppressed the true one), and no cut is taken
within `minSceneFrames` of either end (the fade to black closing a video made near-black frames
whose hue and saturation jump from frame to frame).

Defaults: adaptive, threshold 2.0, minContentValue 20, windowFrames 2, minSceneFrames 15.
Measured with measure.py on generated sets (cuts within 2 frames). PySceneDetect's own
AdaptiveDetector defaults (3.0, 15) missed cuts into fast textured motion (a scrolling cellular
automaton scores 35-60 every frame, so a cut scoring 80-95 has a ratio near 2): recall 0.88 on 42
cuts. Open-Sora's ratio 2.0 finds them, but with min content 15 a jittery fractal (scores
alternating 1.5 / 10 / 15.8) passed as cuts: precision 0.91. Raising the floor to 20 removed those
and lost no true cut: precision 1.0, recall 0.976 on those 42 cuts (the one miss: a cut between
two fast textured shots, ratio 1.8), and 1.0 / 1.0 on 45 cuts of a held-out seed (12 videos). A fixed threshold (content, 27 or 15) is far
worse (precision 0.14-0.24: fast shots score above it every frame). ffmpeg's scene score
(min(MAFD, |dMAFD|) / 100 on RGB, computed here for comparison) did as well as adaptive at 0.2-0.3
on a 3-video set but has no neighbourhood normalisation; not chosen.

The histogram rule, measured on seeds 0-4 (12 videos each, 246 cuts): the content ratio alone had
precision 1.0 on every seed and recall 0.98, 0.98, 1.0, 0.98, 0.938 (seeds 0-4; 6 misses, all
texture-to-texture cuts: ratios 1.41-1.8, histogram changes 0.65-0.99). With the rule: 1.0 / 1.0
on every seed; then on held-out seeds 5 and 6 (46 and 47 cuts): before 1.0 / 0.957 and 1.0 / 1.0,
after 1.0 / 1.0 on both. The margins: true cuts' changes are 0.57-1.0 (the six the ratio misses:
at least 0.646), while inside shots (frames scoring 20 or more, away from cuts) the change stays
under 0.56, its highest in cellular automaton pans, whose ratio is then at most 1.28 (ratios up to
1.57 come with changes near 0.3). Neither condition alone would do: change 0.5 at ratio 1.0 made 5
false cuts in those pans. The frame-to-frame histogram distance separated worse (true cuts from
0.65, inside shots up to 0.66), RGB bins (4 or 8 a channel) worse still (frame to frame: true cuts
from 0.36 or 0.56, inside shots up to 0.83). Comparing the score with the median of the previous
2-8 frames' instead of the mean of both sides lost existing cuts (recall 0.92-0.96 on seeds 1-2).
The histograms are counted from the HSV planes the score already needs (one bincount a batch):
scoring and deciding, decoding aside, went from ~90x to ~77x real time per CPU second;
measure.py's whole detection (decoding included) stayed at 19.2-19.4x on seed 0 on a loaded
machine. hsv() computes the HSV planes in integers with two lookup tables (the same numbers as
the float32 formula for every one of the 2^24 colours): scoring went from 0.51 to 0.32 ms a frame.

plan_clips turns cuts into segments and segments into clips: a segment shorter than
minClipSeconds is dropped (rule `too-short`); one longer than maxClipSeconds is split into the
fewest equal pieces no longer than it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

ANALYSIS_HEIGHT = 90
DETECTORS = ("adaptive", "content")
ADAPTIVE_RATIO_CAP = 255.0
# The colour histogram: hue x saturation x value bins (8 x 4 x 4 = 128).
HISTOGRAM_BINS = (8, 4, 4)
# adaptive: a frame whose colour histogram changes at least this much (half the L1 distance between
# the mean histograms of the windowFrames frames before it and from it on; 0 to 1) is a cut at a
# content ratio of HISTOGRAM_RATIO already (or the threshold, if lower). See the module docstring.
HISTOGRAM_CHANGE = 0.6
HISTOGRAM_RATIO = 1.35


def analysis_size(width: int, height: int) -> tuple[int, int]:
    """The size frames are scored at: ANALYSIS_HEIGHT high (or the video's own height when
    smaller), the width keeping the aspect, both even."""
    target = min(ANALYSIS_HEIGHT, height - height % 2) or 2
    return max(2, int(round(width * target / height / 2)) * 2), target


def hsv_reference(frames: np.ndarray) -> np.ndarray:
    """RGB uint8 frames (n, h, w, 3) as H, S, V planes (3, n, h, w) on OpenCV's uint8 scales:
    H in degrees / 2 (0-179; 180 where a hue just under 360 degrees rounds up), S and V 0-255,
    rounded to integers (as float32). The formula, in float32; hsv() gives the same numbers
    through lookup tables built with it."""
    r, g, b = np.moveaxis(frames, -1, 0).astype(np.float32)
    v = np.maximum(np.maximum(r, g), b)
    delta = v - np.minimum(np.minimum(r, g), b)
    # Hue in OpenCV's order of precedence (max is R, else G, else B), 30 = 60 degrees / 2.
    h = np.where(v == r, g - b, np.where(v == g, b - r + 2 * delta, r - g + 4 * delta))
    h *= np.divide(np.float32(30.0), delta, out=np.zeros_like(delta), where=delta > 0)
    h[h < 0] += 180
    s = np.divide(255 * delta, v, out=np.zeros_like(delta), where=v > 0)
    return np.rint(np.stack([h, s, v]))


def _hsv_tables() -> tuple[np.ndarray, np.ndarray]:
    """hsv()'s lookup tables, each entry computed with hsv_reference's float32 operations:
    hue by (numerator + 255) * 256 + delta, the numerator being the precedence formula's (-255 to
    1275, before the division by delta), and saturation by value * 256 + delta."""
    numerator = np.arange(-255, 1276, dtype=np.float32)[:, None]
    delta = np.arange(256, dtype=np.float32)[None, :]
    hue = numerator * np.divide(np.float32(30.0), delta, out=np.zeros_like(delta), where=delta > 0)
    hue[hue < 0] += 180
    value = np.arange(256, dtype=np.float32)[:, None]
    saturation = np.divide(255 * delta, value, out=np.zeros((256, 256), np.float32), where=(value > 0) & (delta <= value))
    return np.rint(hue).astype(np.uint8).ravel(), np.rint(saturation).astype(np.uint8).ravel()


HUE_TABLE, SATURATION_TABLE = _hsv_tables()


def hsv(frames: np.ndarray) -> np.ndarray:
    """RGB uint8 frames (n, h, w, 3) as H, S, V planes (3, n, h, w), uint8, the numbers of
    hsv_reference (OpenCV's scales) in integer arithmetic and two table lookups: about a third of
    the formula's time, which was most of detection's own (decoding aside)."""
    r, g, b = np.moveaxis(frames, -1, 0).astype(np.int16)
    v = np.maximum(np.maximum(r, g), b)
    delta = v - np.minimum(np.minimum(r, g), b)
    numerator = np.where(v == r, g - b, np.where(v == g, b - r + 2 * delta, r - g + 4 * delta))
    numerator += 255
    index = numerator.astype(np.int32)
    index <<= 8
    index += delta
    h = HUE_TABLE[index]
    index = v.astype(np.int32)
    index <<= 8
    index += delta
    s = SATURATION_TABLE[index]
    return np.stack([h, s, v.astype(np.uint8)])


class FrameScores(np.ndarray):
    """Every frame's content score (a float64 array), carrying `histograms`: each frame's coarse
    HSV colour histogram, (frames, HISTOGRAM_BINS) fractions of its pixels, or None."""

    histograms: np.ndarray | None

    def __new__(cls, scores: np.ndarray, histograms: np.ndarray | None) -> "FrameScores":
        made = np.asarray(scores, dtype=np.float64).view(cls)
        made.histograms = histograms
        return made

    def __array_finalize__(self, source: object) -> None:
        # A slice or a result of arithmetic would not line up with the histograms: it has none.
        self.histograms = None


HUE_BIN_TABLE = np.minimum(np.arange(181, dtype=np.float32) * np.float32(HISTOGRAM_BINS[0] / 180),
                           HISTOGRAM_BINS[0] - 1).astype(np.uint8)
"""Each hue (0-180) on OpenCV's scale to its histogram bin."""


def colour_histograms(planes: np.ndarray) -> np.ndarray:
    """H, S, V planes (3, n, h, w; uint8, as hsv() gives them) as each frame's joint histogram of
    HISTOGRAM_BINS (hue x saturation x value) bins, as fractions of the frame's pixels (float32,
    (n, product)). Saturation and value bins are equal spans of 0-255 (256 / bins values each)."""
    hue_bins, saturation_bins, value_bins = HISTOGRAM_BINS
    h, s, v = planes
    count = h.shape[0]
    index = HUE_BIN_TABLE[h].astype(np.int32)
    index *= saturation_bins
    index += s.astype(np.int32) * saturation_bins >> 8
    index *= value_bins
    index += v.astype(np.int32) * value_bins >> 8
    bins = hue_bins * saturation_bins * value_bins
    index = index.reshape(count, -1)
    index += (np.arange(count, dtype=np.int32) * bins)[:, None]
    counts = np.bincount(index.ravel(), minlength=count * bins).reshape(count, bins)
    return (counts / np.float32(index.shape[1])).astype(np.float32)


def content_scores(frames: Iterable[np.ndarray], batch: int = 64) -> FrameScores:
    """Every frame's content score: the mean over H, S and V of the mean absolute difference from
    the previous frame (frame 0 scores 0), with every frame's colour histogram attached. Takes any
    iterable of RGB frames, consumed once, in batches of `batch` frames (numpy's per-call cost
    dominates at this size one frame at a time)."""
    scores: list[np.ndarray] = [np.zeros(1)]
    histograms: list[np.ndarray] = []
    previous: np.ndarray | None = None
    pending: list[np.ndarray] = []

    def flush() -> None:
        nonlocal previous
        current = hsv(np.stack(pending))
        pending.clear()
        histograms.append(colour_histograms(current))
        stacked = (current if previous is None else np.concatenate([previous, current], axis=1)).astype(np.int16)
        if stacked.shape[1] > 1:
            # Integer sums, exact: the mean over the three planes and every pixel.
            total = np.abs(np.diff(stacked, axis=1)).sum(axis=(0, 2, 3), dtype=np.int64)
            scores.append(total / (3 * stacked.shape[2] * stacked.shape[3]))
        previous = current[:, -1:]

    for frame in frames:
        pending.append(frame)
        if len(pending) == batch:
            flush()
    if pending:
        flush()
    if previous is None:
        return FrameScores(np.zeros(0), np.zeros((0, int(np.prod(HISTOGRAM_BINS))), np.float32))
    return FrameScores(np.concatenate(scores), np.concatenate(histograms))


@dataclass(frozen=True)
class DetectorSettings:
    detector: str = "adaptive"
    threshold: float = 2.0
    """adaptive: the ratio to the neighbourhood's mean score; content: the score itself (27)."""
    min_content_value: float = 20.0
    """adaptive: the least score a cut may have, however calm its neighbourhood."""
    window_frames: int = 2
    """adaptive: frames either side whose scores make the neighbourhood."""
    min_scene_frames: int = 15
    """A cut closer than this to the previous one (or to the first frame) is ignored."""


def adaptive_ratios(scores: np.ndarray, window: int) -> np.ndarray:
    """Each frame's score over the mean score of up to `window` frames either side (frame 0 and
    frames whose neighbourhood scores 0 get the cap)."""
    count = len(scores)
    ratios = np.zeros(count)
    for i in range(1, count):
        neighbours = np.concatenate([scores[max(1, i - window):i], scores[i + 1:i + 1 + window]])
        mean = float(neighbours.mean()) if len(neighbours) else 0.0
        ratios[i] = ADAPTIVE_RATIO_CAP if mean < 1e-5 else min(scores[i] / mean, ADAPTIVE_RATIO_CAP)
    return ratios


def histogram_changes(histograms: np.ndarray, window: int) -> np.ndarray:
    """Each frame's colour change: half the L1 distance (0 to 1) between the mean histogram of the
    `window` frames before it and that of the `window` frames from it on (fewer at either end;
    frame 0 gets 0). Stable inside a shot, even a fast textured one; at a cut between two
    textures it nears 1 however alike their motion is."""
    count = len(histograms)
    changes = np.zeros(count)
    if count < 2:
        return changes
    total = np.concatenate([np.zeros((1, histograms.shape[1])), np.cumsum(histograms, axis=0, dtype=np.float64)])
    frames = np.arange(1, count)
    before, after = np.maximum(0, frames - window), np.minimum(count, frames + window)
    mean_before = (total[frames] - total[before]) / (frames - before)[:, None]
    mean_after = (total[after] - total[frames]) / (after - frames)[:, None]
    changes[1:] = np.abs(mean_before - mean_after).sum(axis=1) / 2
    return changes


def detect_cuts(scores: np.ndarray, settings: DetectorSettings, histograms: np.ndarray | None = None) -> list[dict]:
    """The frames where a new shot starts (never 0), each {frame, score, ratio}. `histograms`
    (each frame's colour histogram) defaults to the one content_scores attaches to `scores`; with
    none, adaptive uses the content ratio alone."""
    if histograms is None:
        histograms = getattr(scores, "histograms", None)
    scores = np.asarray(scores, dtype=np.float64)
    if settings.detector == "adaptive":
        ratios = adaptive_ratios(scores, settings.window_frames)
        candidate = ratios >= settings.threshold
        if histograms is not None and len(histograms) == len(scores):
            # A cut between two fast textured shots: the content ratio stays under the threshold
            # (both shots score high every frame) but the colours change at once.
            changes = histogram_changes(histograms, settings.window_frames)
            candidate |= (changes >= HISTOGRAM_CHANGE) & (ratios >= min(settings.threshold, HISTOGRAM_RATIO))
        candidate &= scores >= settings.min_content_value
    elif settings.detector == "content":
        ratios = None
        candidate = scores >= settings.threshold
    else:
        raise ValueError(f"unknown detector {settings.detector!r}")
    # Candidates closer than min_scene_frames to each other: the strongest wins (the greedy first-come
    # rule of PySceneDetect lets a weak false cut suppress the true one a few frames on). A cut
    # within min_scene_frames of either end would open or close a shot too short to be one.
    strength = ratios if ratios is not None else scores
    frames = [int(f) for f in np.flatnonzero(candidate)
              if settings.min_scene_frames <= f <= len(scores) - settings.min_scene_frames]
    kept: list[int] = []
    for frame in sorted(frames, key=lambda f: (-strength[f], -scores[f], f)):
        if all(abs(frame - other) >= settings.min_scene_frames for other in kept):
            kept.append(frame)
    return [{"frame": frame, "score": round(float(scores[frame]), 3),
             "ratio": None if ratios is None else round(float(ratios[frame]), 3)} for frame in sorted(kept)]


def plan_clips(cuts: list[int], total_frames: int, fps: float, min_seconds: float, max_seconds: float) -> tuple[list[dict], list[dict]]:
    """(clips, dropped) from the cut frames: segments under min_seconds are dropped as too-short,
    segments over max_seconds are split into equal pieces no longer than it. Frames are
    [startFrame, endFrame); times are frame / fps."""
    bounds = [0, *sorted(c for c in cuts if 0 < c < total_frames), total_frames]
    clips: list[dict] = []
    dropped: list[dict] = []
    longest = max(1, int(math.floor(max_seconds * fps + 1e-9)))
    for segment, (start, end) in enumerate(zip(bounds, bounds[1:])):
        length = end - start
        seconds = length / fps
        if seconds < min_seconds:
            dropped.append({"segment": segment, "startFrame": start, "endFrame": end, "start": round(start / fps, 4),
                            "end": round(end / fps, 4), "rule": "too-short", "value": round(seconds, 4),
                            "threshold": min_seconds})
            continue
        pieces = max(1, math.ceil(length / longest))
        edges = [start + round(k * length / pieces) for k in range(pieces + 1)]
        for piece, (a, b) in enumerate(zip(edges, edges[1:])):
            clips.append({"segment": segment, "piece": piece, "pieces": pieces, "startFrame": a, "endFrame": b,
                          "start": round(a / fps, 4), "end": round(b / fps, 4)})
    return clips, dropped


def match_cuts(found: list[int], truth: list[int], tolerance: int = 2) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives): each true cut matches at most one
    found cut within `tolerance` frames, nearest first."""
    unmatched = sorted(truth)
    hits = 0
    for frame in sorted(found):
        near = [t for t in unmatched if abs(t - frame) <= tolerance]
        if near:
            unmatched.remove(min(near, key=lambda t: abs(t - frame)))
            hits += 1
    return hits, len(found) - hits, len(unmatched)
