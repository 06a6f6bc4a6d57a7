"""ffmpeg and ffprobe for the video jobs: what a file holds, and its frames as numpy arrays.

Every failure is a MediaError naming the field the file came from and why, so one bad source is
recorded with its reason and the others go on. Frames are decoded by ffmpeg and streamed through a
pipe as raw pixels, one frame at a time, so an hours-long video never sits in memory.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from typing import Iterator

import numpy as np

FFMPEG = "ffmpeg"
FFPROBE = "ffprobe"


class MediaError(ValueError):
    """A file that is not a usable video, or an ffmpeg run that failed; the message names the field."""


@dataclass(frozen=True)
class Probe:
    """What ffprobe says of a file's first video stream."""

    duration: float
    fps: float
    width: int
    height: int
    codec: str
    frames: int | None
    size_bytes: int
    sar: float = 1.0
    """The sample (pixel) aspect ratio, 1 for square pixels; not in to_json()."""

    def to_json(self) -> dict:
        return {"duration": self.duration, "fps": self.fps, "width": self.width, "height": self.height,
                "codec": self.codec, "frames": self.frames, "sizeBytes": self.size_bytes}


def _tail(text: str, lines: int = 4) -> str:
    """ffmpeg's last lines, without the decoder's memory addresses (they differ run to run)."""
    kept = [re.sub(r" @ 0x[0-9a-f]+", "", line.strip()) for line in text.strip().splitlines()[-lines:] if line.strip()]
    return " | ".join(kept) or "no message"


def _rate(value: str | None) -> float:
    if not value or value in ("0/0", "0"):
        return 0.0
    if "/" in value:
        num, den = value.split("/", 1)
        return float(num) / float(den) if float(den) else 0.0
    return float(value)


def probe(path: str, field: str = "source") -> Probe:
    """The first video stream's duration, frame rate and size. Raises MediaError when the file is
    not media ffprobe can read, has no video stream, or lasts no time at all."""
    run = subprocess.run([FFPROBE, "-v", "error", "-print_format", "json", "-show_format", "-show_streams", path],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise MediaError(f"{field}: not a video ffprobe can read ({_tail(run.stderr)})")
    info = json.loads(run.stdout or "{}")
    streams = [s for s in info.get("streams", []) if s.get("codec_type") == "video"
               and not (s.get("disposition") or {}).get("attached_pic")]
    if not streams:
        kinds = sorted({s.get("codec_type", "unknown") for s in info.get("streams", [])}) or ["none"]
        raise MediaError(f"{field}: no video stream (streams: {', '.join(kinds)})")
    stream = streams[0]
    fmt = info.get("format", {})
    duration = float(stream.get("duration") or fmt.get("duration") or 0.0)
    fps = _rate(stream.get("avg_frame_rate")) or _rate(stream.get("r_frame_rate"))
    if duration <= 0 or fps <= 0:
        raise MediaError(f"{field}: the video stream lasts no time (duration {duration} s, {fps} frames/s)")
    frames = int(stream["nb_frames"]) if str(stream.get("nb_frames", "")).isdigit() else None
    return Probe(duration=duration, fps=fps, width=int(stream.get("width") or 0), height=int(stream.get("height") or 0),
                 codec=str(stream.get("codec_name", "unknown")), frames=frames, size_bytes=int(fmt.get("size") or 0),
                 sar=_rate(str(stream.get("sample_aspect_ratio", "1:1")).replace(":", "/")) or 1.0)


def ffmpeg(args: list[str], what: str) -> None:
    """Runs ffmpeg quietly; a failure raises MediaError with `what` and ffmpeg's last lines."""
    run = subprocess.run([FFMPEG, "-hide_banner", "-nostdin", "-v", "error", "-y", *args],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise MediaError(f"{what}: ffmpeg failed ({_tail(run.stderr)})")


def frames(path: str, width: int, height: int, *, fps: float | None = None, start: float | None = None,
           duration: float | None = None, gray: bool = False, field: str = "source") -> Iterator[np.ndarray]:
    """The video's frames scaled to width x height, as uint8 arrays (height, width, 3), or
    (height, width) with gray, streamed. fps resamples (None: every frame); start and duration
    (seconds) select a span. A decoding error raises MediaError naming the field."""
    pix_fmt, channels = ("gray", 1) if gray else ("rgb24", 3)
    args = [FFMPEG, "-hide_banner", "-nostdin", "-v", "error"]
    if start is not None:
        args += ["-ss", f"{start:.6f}"]
    args += ["-i", path]
    if duration is not None:
        args += ["-t", f"{duration:.6f}"]
    filters = ([f"fps={fps}"] if fps else []) + [f"scale={width}:{height}:flags=area"]
    args += ["-vf", ",".join(filters), "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"]
    size = width * height * channels
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    finished = False
    try:
        while True:
            data = process.stdout.read(size)
            if len(data) < size:
                break
            frame = np.frombuffer(data, dtype=np.uint8)
            yield frame.reshape(height, width) if gray else frame.reshape(height, width, 3)
        finished = True
    finally:
        if not finished:  # the caller stopped early: no need to decode the rest
            process.kill()
        process.stdout.close()
        error = process.stderr.read().decode("utf-8", errors="replace")
        process.stderr.close()
        code = process.wait()
    if code != 0:
        raise MediaError(f"{field}: the video could not be decoded ({_tail(error)})")


def frame_at(path: str, seconds: float, width: int, height: int, field: str = "source") -> np.ndarray:
    """One RGB frame at a time in seconds (the nearest frame at or after it)."""
    for frame in frames(path, width, height, start=max(0.0, seconds), duration=None, field=field):
        return frame.copy()
    raise MediaError(f"{field}: no frame at {seconds:.3f} s")


class CheckedFrames:
    """frames(), keeping what ffmpeg reports while decoding: iterate it, then call check().

    ffmpeg exits 0 on a damaged file (a truncated MP4 whose index promises more frames than its
    data holds, bytes overwritten mid-stream): it conceals the damage and logs the errors. This
    keeps the count of frames decoded and ffmpeg's error lines, so a caller that reads the frames
    anyway (cut detection) learns in the same pass whether the file is whole. As in frames(), the
    frames are at the stream's constant rate: frame k is the picture shown at k / fps.
    """

    def __init__(self, path: str, width: int, height: int, *, gray: bool = False, field: str = "source",
                 keep: tuple[str, str] | None = None) -> None:
        """keep: (path, filters): the same decode also writes every frame, through that filter
        chain (ending in a pixel format), uncompressed into a NUT file at path, the same frames at
        the same constant rate as the ones iterated, so a later ffmpeg run reads them instead of
        decoding the video again."""
        self.path, self.width, self.height, self.gray, self.field, self.keep = path, width, height, gray, field, keep
        self.decoded = 0
        self.errors: list[str] = []

    def __iter__(self) -> Iterator[np.ndarray]:
        pix_fmt, channels = ("gray", 1) if self.gray else ("rgb24", 3)
        scale = f"scale={self.width}:{self.height}:flags=area"
        args = [FFMPEG, "-hide_banner", "-nostdin", "-v", "error", "-threads", "1", "-i", self.path]
        if self.keep is None:
            args += ["-vf", scale, "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"]
        else:
            kept, chain = self.keep
            args += ["-filter_complex_threads", "1", "-filter_complex", f"[0:v]split=2[a][b];[a]{scale}[frames];[b]{chain}[kept]",
                     "-map", "[frames]", "-fps_mode", "cfr", "-f", "rawvideo", "-pix_fmt", pix_fmt, "-",
                     "-map", "[kept]", "-fps_mode", "cfr", "-c:v", "rawvideo", "-f", "nut", "-y", kept]
        size = self.width * self.height * channels
        shape = (self.height, self.width) if self.gray else (self.height, self.width, 3)
        self.decoded, self.errors = 0, []
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        finished = False
        try:
            while True:
                data = process.stdout.read(size)
                if len(data) < size:
                    break
                self.decoded += 1
                yield np.frombuffer(data, dtype=np.uint8).reshape(shape)
            finished = True
        finally:
            if not finished:
                process.kill()
            process.stdout.close()
            text = process.stderr.read().decode("utf-8", errors="replace")
            process.stderr.close()
            code = process.wait()
        self.errors = [re.sub(r" @ 0x[0-9a-f]+", "", line.strip()) for line in text.splitlines() if line.strip()]
        if code != 0:
            raise MediaError(f"{self.field}: the video could not be decoded ({_tail(text)})")

    def check(self, expected_frames: int | None, min_share: float = 0.9) -> None:
        """Raises MediaError when ffmpeg reported decoding errors, or when fewer than min_share of
        the expected frames (the container's count, or duration x fps) came out."""
        if self.errors:
            raise MediaError(f"{self.field}: the video is damaged: {len(self.errors)} decoding error(s) "
                             f"after {self.decoded} frames (first: {self.errors[0]})")
        if expected_frames and self.decoded < min_share * expected_frames:
            raise MediaError(f"{self.field}: the video is truncated: {self.decoded} frames decoded of the "
                             f"{expected_frames} its header promises")


def expected_frames(info: Probe) -> int:
    """The frames a probed stream should decode to: the container's count, else duration x fps."""
    return info.frames if info.frames else int(round(info.duration * info.fps))


def check_decodes(path: str, info: Probe, field: str = "source") -> int:
    """Decodes the whole video stream (to a tiny grey picture, so the cost is the decoding) and
    raises MediaError if it is damaged or truncated; returns the frames decoded."""
    reader = CheckedFrames(path, 32, 18, gray=True, field=field)
    for _ in reader:
        pass
    reader.check(expected_frames(info))
    return reader.decoded
