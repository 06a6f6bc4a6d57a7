"""Small clips for the tests, made with ffmpeg's lavfi sources: 640x360, 25 frames/s, H.264, no
audio, as video-cut writes them. Each source is named by what it shows, so a test reads as
"the still clip has no motion"."""
from __future__ import annotations

import hashlib
import json
import os

from media import ffmpeg

SIZE = "640x360"
RATE = 25

# name -> (lavfi source, filter chain or None)
SOURCES: dict[str, tuple[str, str | None]] = {
    # Sharp, saturated test card with moving parts.
    "testsrc2": (f"testsrc2=size={SIZE}:rate={RATE}", None),
    # The same card blurred and flattened towards grey.
    "blurred": (f"testsrc2=size={SIZE}:rate={RATE}", "boxblur=6:2,eq=contrast=0.35:saturation=0.3"),
    "black": (f"color=black:size={SIZE}:rate={RATE}", None),
    "white": (f"color=white:size={SIZE}:rate={RATE}", None),
    # The card's first frame held: a still picture.
    "still": (f"testsrc2=size={SIZE}:rate={RATE}", "trim=end_frame=1,tpad=stop_mode=clone:stop=-1"),
    # A zoom into the Mandelbrot set: every pixel changes a little each frame.
    "mandelbrot": (f"mandelbrot=size={SIZE}:rate={RATE}", None),
    # Conway's life: many small cells switching every frame.
    "life": (f"life=size={SIZE}:rate={RATE}:ratio=0.3:mold=10:life_color=#e0e040:death_color=#102040", None),
    # A pan: a 640x360 window moving right across a still 1280x360 picture at 160 pixels/s.
    "pan": (f"testsrc2=size=1280x360:rate={RATE}", "trim=end_frame=1,tpad=stop_mode=clone:stop=-1,crop=640:360:'t*160':0"),
    # A horizontal gradient, smooth, little detail.
    "gradient": (f"gradients=size={SIZE}:rate={RATE}:speed=0.01:c0=#204060:c1=#c0a080:x0=0:y0=180:x1=640:y1=180", None),
}

# Variants of the testsrc2 clip for the perceptual-hash tests: same content, changed pixels.
VARIANTS: dict[str, tuple[str, str | None, int]] = {
    "reencoded": (f"testsrc2=size={SIZE}:rate={RATE}", None, 38),          # heavy compression
    "brightened": (f"testsrc2=size={SIZE}:rate={RATE}", "eq=brightness=0.06", 23),
    "cropped": (f"testsrc2=size={SIZE}:rate={RATE}", "crop=608:342:16:9,scale=640:360", 23),  # 5% off, scaled back
}


def make_clip(path: str, source: str, filters: str | None = None, seconds: float = 2.0, crf: int = 23) -> str:
    """Encodes `seconds` of a lavfi source through optional filters to an H.264 MP4 at path."""
    args = ["-f", "lavfi", "-i", source, "-t", f"{seconds}"]
    if filters:
        args += ["-vf", filters]
    args += ["-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", str(crf), "-pix_fmt", "yuv420p", "-r", str(RATE), path]
    ffmpeg(args, f"fixture {os.path.basename(path)}")
    return path


def make_named(directory: str, name: str, seconds: float = 2.0) -> str:
    if name in SOURCES:
        source, filters = SOURCES[name]
        return make_clip(os.path.join(directory, f"{name}.mp4"), source, filters, seconds)
    source, filters, crf = VARIANTS[name]
    return make_clip(os.path.join(directory, f"{name}.mp4"), source, filters, seconds, crf)


def clips_document(s3: object, bucket: str, prefix: str, named_paths: dict[str, str], extra: list[dict] | None = None) -> str:
    """Puts each clip in the in-memory S3 and a video-clips-v1 clips.json listing them (plus
    `extra` entries as given); returns the clips.json URI."""
    clips = []
    for index, (name, path) in enumerate(named_paths.items()):
        with open(path, "rb") as source:
            data = source.read()
        key = f"{prefix}clips/{name}.mp4"
        s3.put_object(Bucket=bucket, Key=key, Body=data)  # type: ignore[attr-defined]
        start = index * 2.0
        clips.append({"id": name, "startFrame": index * 50, "endFrame": index * 50 + 50, "start": start, "end": start + 2.0,
                      "uri": f"s3://{bucket}/{key}", "sha256": hashlib.sha256(data).hexdigest(),
                      "contactSheetUri": f"s3://{bucket}/{prefix}sheets/{name}.jpg",
                      "keyFrameUris": [f"s3://{bucket}/{prefix}frames/{name}-{i}.jpg" for i in range(3)]})
    clips.extend(extra or [])
    doc = {"format": "video-clips-v1", "sourceId": "fixture", "videoSha256": "0" * 64, "clips": clips, "dropped": []}
    s3.put_object(Bucket=bucket, Key=f"{prefix}clips.json", Body=json.dumps(doc).encode())  # type: ignore[attr-defined]
    return f"s3://{bucket}/{prefix}clips.json"
