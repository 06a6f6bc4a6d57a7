"""What the score stage measures on decoded frames: pure numpy, no decoding and no AWS.

Frames are uint8 RGB arrays (height, width, 3) as media.frames returns them. Luma is BT.601,
Y = 0.299 R + 0.587 G + 0.114 B, on the 0-255 RGB values ffmpeg hands over.

**quality-v1**, the local aesthetic score (scorer `quality`). Per frame, on the frame scaled to
360 lines (the clips' own size):

- sharpness  S = clip(log10(1 + V) / 3, 0, 1), V the variance of the 4-neighbour Laplacian of
  luma (0-255 units): a heavily blurred or smooth frame has V of 1-10 (S 0.1-0.35), a crisp 360p
  frame 300-1,000 or more (S 0.83-1).
- exposure   E = clip(1 - 2 |mu - 0.5|, 0, 1) * (1 - dark - bright), mu the mean luma (0-1),
  dark and bright the shares of pixels with luma <= 16 and >= 240.
- contrast   C = clip(sigma / 0.25, 0, 1), sigma the luma standard deviation (0-1).
- colour     K = clip(M / 100, 0, 1), M the Hasler-Suesstrunk colourfulness,
  sqrt(sd(rg)^2 + sd(yb)^2) + 0.3 sqrt(mean(rg)^2 + mean(yb)^2), rg = R - G, yb = (R + G) / 2 - B
  (0-255 units; about 33 is "moderately", 59 "quite", 82 "highly" colourful in their scale).

  aesthetic = 1 + 9 (0.35 S + 0.25 E + 0.25 C + 0.15 K), averaged over the frames at 0.1, 0.5
  and 0.9 of the clip (frame int(p * frames), as Open-Sora averages its aesthetic predictor over
  those three frames).

It runs 1 (a flat black or white frame) to 10, the range CLIP aesthetic predictors use, so a
curate threshold has the same form for both scorers; it is not calibrated to their 5.5 "fair" /
6.5 "high", only monotone in the faults it sees (blur, bad exposure, flatness, greyness).

**motion**: the mean absolute luma difference (0-255) between consecutive sampled frames, the
median over the clip's pairs (so a fade or a flash at one end does not make a held frame move).
Frames are sampled at `motionFps` (5 by default: the first frame at or after each 0.2 s, every
5th frame at 25 frames/s) and their luma area-resampled to 160 pixels wide. A held still frame gives about 0 (coding noise only), a slow zoom or small moving parts a few units, a
pan or fast change 15 or more. The exposure statistics (meanLuma as the median of the frames'
mean luma, lumaStd as the mean of their standard deviations, darkShare, brightShare) come from
the same sampled frames at 360 lines, so they describe the whole clip, not only its key frames.

**phash**: a 64-bit DCT perceptual hash, imagehash's `phash` definition: luma area-resampled to
32x32, the 2-D DCT-II (unnormalised, as scipy's default), its top-left 8x8 block (DC included),
each bit = coefficient > the block's median, row-major, the first bit most significant, as 16 hex
digits. The resampler is our own (area weights), so a hash can differ from imagehash's by a few
bits. A flat frame hashes to 8000000000000000 (only DC is above the median), 0 if it is pure black.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

QUALITY_VERSION = "quality-v1"
QUALITY_FORMULA = ("aesthetic = 1 + 9*(0.35*S + 0.25*E + 0.25*C + 0.15*K), mean over the frames at 0.1/0.5/0.9 of the clip "
                   "(360 lines); S = clip(log10(1+V)/3,0,1), V = variance of the 4-neighbour Laplacian of luma (0-255); "
                   "E = clip(1-2|mu-0.5|,0,1)*(1-dark-bright), mu = mean luma (0-1), dark/bright = shares of luma <=16 / >=240; "
                   "C = clip(sigma/0.25,0,1), sigma = luma std (0-1); K = clip(M/100,0,1), M = Hasler-Suesstrunk colourfulness "
                   "(0-255); luma = BT.601")
MOTION_VERSION = "luma-mad-v1"
MOTION_DEFINITION = ("mean absolute difference of BT.601 luma (0-255) between consecutive frames sampled at motionFps "
                     "(first frame at or after each 1/motionFps s), area-resampled to 160 pixels wide, the median over the clip's pairs")
PHASH_VERSION = "phash-dct32-v1"
PHASH_DEFINITION = ("64-bit DCT hash of each frame at 0.1/0.5/0.9 of the clip: luma area-resampled to 32x32, DCT-II, "
                    "top-left 8x8 with DC, bit = coefficient > median, row-major, first bit most significant")

# Key-frame positions as fractions of the clip (Open-Sora's 3-frame points).
KEY_POSITIONS = (0.1, 0.5, 0.9)
# Width (pixels) of the luma motion is measured on.
MOTION_WIDTH = 160
# Luma (0-255) at or below which a pixel is near-black, at or above which near-white.
DARK_LUMA = 16
BRIGHT_LUMA = 240
_BT601 = np.array([0.299, 0.587, 0.114], dtype=np.float64)
WEIGHTS = {"sharpness": 0.35, "exposure": 0.25, "contrast": 0.25, "colour": 0.15}


def luma(rgb: np.ndarray) -> np.ndarray:
    """BT.601 luma (0-255, float64) of an RGB uint8 frame; a 2-D frame is taken as luma already."""
    if rgb.ndim == 2:
        return rgb.astype(np.float64)
    return rgb @ _BT601  # one pass over the pixels, in float64


def laplacian_variance(y: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian over the interior pixels of a luma image."""
    if y.shape[0] < 3 or y.shape[1] < 3:
        return 0.0
    lap = y[:-2, 1:-1] + y[2:, 1:-1] + y[1:-1, :-2] + y[1:-1, 2:] - 4.0 * y[1:-1, 1:-1]
    return float(lap.var())


def colourfulness(rgb: np.ndarray) -> float:
    """Hasler and Suesstrunk's (2003) colourfulness M of an RGB frame, in 0-255 units."""
    pixels = rgb.astype(np.float64)
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    rg = r - g
    yb = 0.5 * (r + g) - b
    return float(np.sqrt(rg.std() ** 2 + yb.std() ** 2) + 0.3 * np.sqrt(rg.mean() ** 2 + yb.mean() ** 2))


@dataclass(frozen=True)
class FrameQuality:
    """One frame's raw measures and the quality-v1 terms built from them."""

    laplacian_var: float
    mean_luma: float
    luma_std: float
    dark_share: float
    bright_share: float
    colourfulness: float

    @property
    def sharpness(self) -> float:
        return float(np.clip(np.log10(1.0 + self.laplacian_var) / 3.0, 0.0, 1.0))

    @property
    def exposure(self) -> float:
        centred = float(np.clip(1.0 - 2.0 * abs(self.mean_luma - 0.5), 0.0, 1.0))
        return centred * max(0.0, 1.0 - self.dark_share - self.bright_share)

    @property
    def contrast(self) -> float:
        return float(np.clip(self.luma_std / 0.25, 0.0, 1.0))

    @property
    def colour(self) -> float:
        return float(np.clip(self.colourfulness / 100.0, 0.0, 1.0))

    @property
    def aesthetic(self) -> float:
        q = (WEIGHTS["sharpness"] * self.sharpness + WEIGHTS["exposure"] * self.exposure
             + WEIGHTS["contrast"] * self.contrast + WEIGHTS["colour"] * self.colour)
        return 1.0 + 9.0 * q


def frame_quality(rgb: np.ndarray) -> FrameQuality:
    y = luma(rgb)
    return FrameQuality(laplacian_var=laplacian_variance(y), mean_luma=float(y.mean() / 255.0),
                        luma_std=float(y.std() / 255.0), dark_share=float((y <= DARK_LUMA).mean()),
                        bright_share=float((y >= BRIGHT_LUMA).mean()), colourfulness=colourfulness(rgb))


def clip_quality(frames: list[np.ndarray]) -> tuple[float, dict]:
    """(aesthetic, components) of a clip's key frames: each figure is the mean over the frames."""
    if not frames:
        raise ValueError("quality: no frames")
    measured = [frame_quality(frame) for frame in frames]

    def mean(name: str) -> float:
        return round(float(np.mean([getattr(m, name) for m in measured])), 6)

    components = {"sharpness": mean("sharpness"), "exposure": mean("exposure"), "contrast": mean("contrast"),
                  "colour": mean("colour"), "laplacianVar": mean("laplacian_var"), "colourfulness": mean("colourfulness"),
                  "keyMeanLuma": mean("mean_luma"), "keyLumaStd": mean("luma_std")}
    return mean("aesthetic"), components


class ClipStats:
    """Motion and exposure over a clip's sampled frames, accumulated one frame at a time so a long
    clip never sits in memory. Exposure is measured on the frames as given; motion on their luma
    area-resampled to `motion_width` pixels wide (aspect kept)."""

    def __init__(self, motion_width: int = MOTION_WIDTH):
        self.motion_width = motion_width
        self.frames = 0
        self.pixels = 0
        self.frame_lumas: list[float] = []
        self.std_sum = 0.0
        self.dark = 0
        self.bright = 0
        self.differences: list[float] = []
        self._previous: np.ndarray | None = None
        self._resample: tuple[np.ndarray, np.ndarray] | None = None

    def _small(self, y: np.ndarray) -> np.ndarray:
        if self._resample is None:
            height = max(2, 2 * round(self.motion_width * y.shape[0] / y.shape[1] / 2))
            self._resample = (area_matrix(y.shape[0], height), area_matrix(y.shape[1], self.motion_width).T)
        rows, columns = self._resample
        return rows @ y @ columns

    def add(self, rgb: np.ndarray) -> None:
        y = luma(rgb)
        small = self._small(y)
        if self._previous is not None:
            self.differences.append(float(np.abs(small - self._previous).mean()))
        self._previous = small
        self.frames += 1
        self.pixels += y.size
        self.frame_lumas.append(float(y.mean()))
        self.std_sum += float(y.std())
        self.dark += int((y <= DARK_LUMA).sum())
        self.bright += int((y >= BRIGHT_LUMA).sum())

    def to_json(self) -> dict:
        """motion (0-255), meanLuma and lumaStd (0-1: meanLuma the median of the frames' means, lumaStd the mean of their std), and the
        shares of near-black and near-white pixels over all sampled frames."""
        if self.frames < 2:
            raise ValueError(f"motion: {self.frames} frame(s) sampled; at least 2 are needed")
        return {"motion": round(float(np.median(self.differences)), 6),
                # The typical frame's mean: the median over the frames, so a fade at one end does
                # not make a white clip look grey or a black one look lit.
                "meanLuma": round(float(np.median(self.frame_lumas)) / 255.0, 6),
                "lumaStd": round(self.std_sum / self.frames / 255.0, 6),
                "darkShare": round(self.dark / self.pixels, 6), "brightShare": round(self.bright / self.pixels, 6)}


def clip_stats(frames: Iterable[np.ndarray], motion_width: int = MOTION_WIDTH) -> dict:
    stats = ClipStats(motion_width)
    for frame in frames:
        stats.add(frame)
    return stats.to_json()


def sampled(index: int, fps: float, sample_fps: float) -> bool:
    """Whether frame `index` of a clip at `fps` is the first at or after a multiple of
    1 / sample_fps seconds (every 5th frame of a 25 frames/s clip at 5 samples/s)."""
    if index == 0 or sample_fps >= fps:
        return True
    return int(index * sample_fps / fps + 1e-9) != int((index - 1) * sample_fps / fps + 1e-9)


def key_indices(frame_count: int) -> list[int]:
    """The frames at KEY_POSITIONS of a clip of frame_count frames: int(position * count), as
    Open-Sora's extract_frames picks them."""
    return [min(frame_count - 1, int(position * frame_count)) for position in KEY_POSITIONS]


# ---------------------------------------------------------------- perceptual hash

def area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights averaging each output cell over the input pixels it covers (area
    resampling); rows sum to 1. For downsampling (n_in >= n_out)."""
    scale = n_in / n_out
    edges = np.arange(n_out + 1, dtype=np.float64) * scale
    j = np.arange(n_in, dtype=np.float64)[None, :]
    overlap = np.minimum(edges[1:, None], j + 1.0) - np.maximum(edges[:-1, None], j)
    return np.clip(overlap, 0.0, None) / scale


def area_resize(y: np.ndarray, height: int, width: int) -> np.ndarray:
    return area_matrix(y.shape[0], height) @ y @ area_matrix(y.shape[1], width).T


def dct_matrix(n: int) -> np.ndarray:
    """The unnormalised DCT-II as a matrix, scipy.fftpack.dct's default:
    X[k] = 2 sum_n x[n] cos(pi k (2n + 1) / (2N))."""
    k = np.arange(n, dtype=np.float64)[:, None]
    m = np.arange(n, dtype=np.float64)[None, :]
    return 2.0 * np.cos(np.pi * k * (2.0 * m + 1.0) / (2.0 * n))


_DCT32 = dct_matrix(32)


def phash(frame: np.ndarray) -> str:
    """The 64-bit perceptual hash of a frame (RGB or luma) as 16 hex digits (module docstring)."""
    small = area_resize(luma(frame), 32, 32)
    # Rounded so a flat frame's AC coefficients are exactly 0, not rounding noise that would set
    # bits at random.
    coefficients = np.round(_DCT32 @ small @ _DCT32.T, 6)
    low = coefficients[:8, :8]
    bits = (low > np.median(low)).flatten()
    value = 0
    for bit in bits:
        value = (value << 1) | int(bit)
    return f"{value:016x}"


def hamming(a: str, b: str) -> int:
    """Bits that differ between two hex hashes of the same length."""
    if len(a) != len(b):
        raise ValueError(f"hamming: hashes of different lengths ({a!r}, {b!r})")
    return bin(int(a, 16) ^ int(b, 16)).count("1")
