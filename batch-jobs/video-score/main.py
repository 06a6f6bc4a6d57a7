"""video-score: the video pipeline's GPU-queue Batch job, one image for its two stages.

The spec's `stage` picks the work (each stage is its own cached step of the state machine):

- `score`: every clip of a video-cut `clips.json` (format video-clips-v1) measured from frames
  decoded out of the clip's MP4 (never its JPEGs, which are for people and the captioner):
  1. the MP4 is downloaded (its sha256 checked against clips.json when given) and probed;
  2. one decoding pass at 360 lines; the frames at 0.1, 0.5 and 0.9 of the clip give the
     aesthetic score (scorer `quality`: the documented quality-v1 formula of measures.py, whose
     components are kept whichever scorer runs; scorer `clip`: CLIP ViT-L/14 into the improved
     aesthetic predictor, aesthetic_clip.py) and one 64-bit perceptual hash each;
  3. the whole clip sampled at `motionFps` (5) gives motion (on luma 160 pixels wide) and the
     exposure statistics the curate step thresholds (meanLuma, lumaStd, darkShare, brightShare).
  A clip whose object is missing or that does not decode gets {"id", "error"} and the others go
  on. Writes scores.json (video-scores-v1).
- `caption`: for each clip of the request ([{id, keyFrameUris}] inline as `clips`, or a document
  at `requestUri` / `captionsRequestUri` holding {"clips": [...]}: the caption-plan step's request,
  or clips.json itself), its key frames
  through an open vision-language model (captioner.py). Writes captions.json
  (video-captions-v1): {id: caption} for the usable answers and {id: reason} for the misses.

Started by the video state machine through jobio's contract; the result is small (URIs, counts
and figures, nothing whose length grows with the input), as it lands in a Step Functions state.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from typing import Any, Callable

import numpy as np
from captioner import (CAPTION_PROMPT_VERSION, DEFAULT_VLM, CaptionClip, Captioner, build_messages, clean_caption,
                       load_vlm, parse_clips, parse_max_new_tokens)
from jobio import JobContext, MissingObject, get_bytes, run
from measures import (MOTION_DEFINITION, MOTION_VERSION, MOTION_WIDTH, PHASH_DEFINITION, PHASH_VERSION, QUALITY_FORMULA,
                      QUALITY_VERSION, ClipStats, clip_quality, key_indices, phash, sampled)
from media import FFPROBE, MediaError, frames, probe
from specs import SpecError, field, number, optional, s3_uri

CLIPS_FORMAT = "video-clips-v1"
SCORES_FORMAT = "video-scores-v1"
CAPTIONS_FORMAT = "video-captions-v1"
SCORERS = ("quality", "clip")
DEFAULT_MOTION_FPS = 5.0
# Lines of the frames the quality measures and hashes see: the clips' own 360p, so a Laplacian's
# variance means the same thing for every clip whatever its source's size.
QUALITY_HEIGHT = 360

AestheticFn = Callable[[list[np.ndarray]], float]


class ClipError(ValueError):
    """One clip that cannot be scored (missing object, wrong bytes, too short); the others go on."""


def download(client: Any, uri: str, field_name: str) -> bytes:
    return get_bytes(client, uri, field_name, missing=SpecError)


def even_size(width: int, height: int, to_height: int) -> tuple[int, int]:
    """(width, height) scaled to to_height lines, keeping the aspect, the width even."""
    if width <= 0 or height <= 0:
        raise ClipError(f"the video stream has no size ({width}x{height})")
    return max(2, 2 * round(to_height * width / height / 2)), to_height


def read_clips(client: Any, uri: str) -> tuple[dict, bytes]:
    """clips.json and its bytes; a malformed document or clip entry is a SpecError naming it."""
    data = download(client, uri, "clipsUri")
    try:
        doc = json.loads(data)
    except ValueError as error:
        raise SpecError(f"clipsUri: {uri}: not JSON ({error})") from error
    if not isinstance(doc, dict) or doc.get("format") != CLIPS_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise SpecError(f"clipsUri: {uri}: expected format {CLIPS_FORMAT} (got {found!r})")
    clips = doc.get("clips")
    if not isinstance(clips, list):
        raise SpecError(f"clipsUri: {uri}: clips must be a list (got {type(clips).__name__})")
    seen: set[str] = set()
    for index, clip in enumerate(clips):
        where = f"clipsUri clips[{index}]."
        if not isinstance(clip, dict):
            raise SpecError(f"clipsUri clips[{index}]: expected an object (got {type(clip).__name__})")
        clip_id = field(clip, "id", str, where)
        if clip_id in seen:
            raise SpecError(f"{where}id: {clip_id!r} appears twice")
        seen.add(clip_id)
        s3_uri(clip, "uri", where)
    return doc, data


def measure_clip(path: str, field_name: str, motion_fps: float, aesthetic: AestheticFn | None) -> dict:
    """One clip's scores from its MP4 on disk, in one decoding pass at 360 lines (module docstring,
    score steps 2 and 3): the key frames are kept as they stream past, every sampled frame goes
    into the motion and exposure statistics."""
    info = probe(path, field_name)
    width, height = even_size(info.width, info.height, QUALITY_HEIGHT)
    expected = info.frames or max(1, round(info.duration * info.fps))
    targets = key_indices(expected)
    kept: dict[int, np.ndarray] = {}
    stats = ClipStats(MOTION_WIDTH)
    last: np.ndarray | None = None
    count = 0
    for index, frame in enumerate(frames(path, width, height, field=field_name)):
        if index in targets:
            kept[index] = frame
        if sampled(index, info.fps, motion_fps):
            stats.add(frame)
        last, count = frame, index + 1
    if last is None:
        raise ClipError(f"{field_name}: no frame decoded")
    # A stream shorter than its header says: the key frames past its end are its last frame.
    key_frames = [kept.get(index, last) for index in targets]
    try:
        exposure = stats.to_json()
    except ValueError as error:
        raise ClipError(f"{field_name}: {error} ({count} frames at {info.fps:g} frames/s, motionFps {motion_fps:g})") from error
    quality_score, components = clip_quality(key_frames)
    score = quality_score if aesthetic is None else aesthetic(key_frames)
    return {"aesthetic": round(score, 4), "quality": {"score": round(quality_score, 4), **components}, **exposure,
            "phash": [phash(frame) for frame in key_frames], "duration": round(count / info.fps, 6)}


def score_clip(client: Any, clip: dict, index: int, workdir: str, motion_fps: float, aesthetic: AestheticFn | None) -> dict:
    """{"id", scores...}, or {"id", "error"} for a clip that cannot be scored."""
    field_name = f"clips[{index}].uri"
    path = os.path.join(workdir, f"clip-{index}.mp4")
    try:
        data = get_bytes(client, clip["uri"], field_name, missing=ClipError)
        expected = clip.get("sha256")
        if isinstance(expected, str) and hashlib.sha256(data).hexdigest() != expected.lower():
            raise ClipError(f"clips[{index}].sha256: {clip['uri']} has sha256 {hashlib.sha256(data).hexdigest()}, "
                            f"clips.json says {expected}")
        with open(path, "wb") as out:
            out.write(data)
        return {"id": clip["id"], **measure_clip(path, field_name, motion_fps, aesthetic)}
    except (ClipError, MediaError) as error:
        return {"id": clip["id"], "error": str(error)}
    finally:
        if os.path.exists(path):
            os.remove(path)


def clip_scorer(spec: dict, ctx: JobContext) -> tuple[AestheticFn, dict]:
    """The CLIP aesthetic scorer the spec's aestheticModel names, and its identity for scores.json."""
    import torch
    from aesthetic_clip import (CLIP_FORMULA, CLIP_SCORER_VERSION, DEFAULT_CLIP_MODEL, DEFAULT_HEAD_URL,
                                ClipAestheticScorer, fetch_head_bytes, head_from_bytes, load_clip_embedder)

    model = optional(spec, "aestheticModel", dict, {})
    where = "aestheticModel."
    clip_model = optional(model, "clipModel", str, DEFAULT_CLIP_MODEL, where)
    revision = optional(model, "clipRevision", str, "main", where)
    head_uri = optional(model, "headUri", str, DEFAULT_HEAD_URL, where)
    head_sha256 = optional(model, "headSha256", str, None, where)
    unknown = sorted(set(model) - {"clipModel", "clipRevision", "headUri", "headSha256"})
    if unknown:
        raise SpecError(f"aestheticModel: unknown fields {unknown} (known: clipModel, clipRevision, headUri, headSha256)")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    data, sha256 = fetch_head_bytes(head_uri, lambda uri: download(ctx.client, uri, "aestheticModel.headUri"), head_sha256)
    head = head_from_bytes(data)
    scorer = ClipAestheticScorer(load_clip_embedder(clip_model, revision), head)
    return scorer, {"aesthetic": CLIP_SCORER_VERSION, "formula": CLIP_FORMULA, "clipModel": clip_model,
                    "clipRevision": revision, "headUri": head_uri, "headSha256": sha256}


# ---------------------------------------------------------------- stages

def stage_score(spec: dict, ctx: JobContext) -> dict:
    clips_uri = s3_uri(spec, "clipsUri")
    scorer_name = field(spec, "scorer", str)
    if scorer_name not in SCORERS:
        raise SpecError(f"scorer: must be one of {list(SCORERS)} (got {scorer_name!r})")
    if scorer_name == "quality" and spec.get("aestheticModel") is not None:
        raise SpecError("aestheticModel: only the clip scorer reads it (scorer is quality); leave it out")
    motion_fps = number(spec, "motionFps", DEFAULT_MOTION_FPS, 0.0, 30.0)
    doc, data = read_clips(ctx.client, clips_uri)
    started = time.perf_counter()
    aesthetic: AestheticFn | None = None
    scorer = {"aesthetic": QUALITY_VERSION, "formula": QUALITY_FORMULA}
    if scorer_name == "clip":
        aesthetic, scorer = clip_scorer(spec, ctx)
    scorer.update(quality=QUALITY_VERSION, qualityFormula=QUALITY_FORMULA, motion=MOTION_VERSION,
                  motionDefinition=MOTION_DEFINITION, motionFps=motion_fps, phash=PHASH_VERSION, phashDefinition=PHASH_DEFINITION)
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as workdir:
        for index, clip in enumerate(doc["clips"]):
            results.append(score_clip(ctx.client, clip, index, workdir, motion_fps, aesthetic))
            ctx.progress(stage="score", clip=index + 1, clips=len(doc["clips"]), error="error" in results[-1])
    seconds = time.perf_counter() - started
    video_seconds = round(sum(r.get("duration", 0.0) for r in results), 6)
    errors = sum(1 for r in results if "error" in r)
    scores = {"format": SCORES_FORMAT, "clipsUri": clips_uri, "clipsSha256": hashlib.sha256(data).hexdigest(),
              "sourceId": doc.get("sourceId"), "videoSha256": doc.get("videoSha256"), "scorer": scorer, "clips": results,
              "seconds": round(seconds, 3), "videoSeconds": video_seconds}
    body = json.dumps(scores, indent=1).encode()
    written = ctx.put_bytes("scores.json", body, "application/json")
    return {"scoresUri": written["uri"], "scoresSha256": hashlib.sha256(body).hexdigest(), "clips": len(results),
            "scored": len(results) - errors, "errors": errors, "videoSeconds": video_seconds, "seconds": round(seconds, 3),
            "s3Outputs": [{"Bucket": written["Bucket"], "Key": written["Key"]}]}


# Where a caption request's clips can come from; the spec names exactly one. `requestUri` is the
# name the video state machine passes (the caption-plan step's request document).
CLIP_SOURCES = ("clips", "captionsRequestUri", "requestUri")


def caption_clips(spec: dict, ctx: JobContext) -> list[CaptionClip]:
    given = [name for name in CLIP_SOURCES if spec.get(name) is not None]
    if len(given) != 1:
        raise SpecError(f"{' / '.join(CLIP_SOURCES)}: give exactly one (got {given or 'none'})")
    if given[0] == "clips":
        return parse_clips(spec["clips"], "clips")
    name = given[0]
    uri = s3_uri(spec, name)
    try:
        doc = json.loads(download(ctx.client, uri, name))
    except ValueError as error:
        if isinstance(error, SpecError):
            raise
        raise SpecError(f"{name}: {uri}: not JSON ({error})") from error
    return parse_clips(doc.get("clips") if isinstance(doc, dict) else doc, f"{name} clips")


def image_size(path: str, where: str) -> tuple[int, int]:
    """(width, height) of a still image's first video stream. Not media.probe: an image has no
    duration, which probe rightly refuses for a video."""
    probed = subprocess.run([FFPROBE, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                             "-of", "json", path], capture_output=True, text=True, check=False)
    streams = (json.loads(probed.stdout or "{}").get("streams") or [{}]) if probed.returncode == 0 else [{}]
    width, height = int(streams[0].get("width") or 0), int(streams[0].get("height") or 0)
    if width <= 0 or height <= 0:
        # Without the decoder's memory address, which differs run to run.
        stderr = probed.stderr.strip()
        message = re.sub(r" @ 0x[0-9a-f]+", "", stderr.splitlines()[-1]) if stderr else "no picture size"
        raise MediaError(f"{where}: not an image ffprobe can read ({message})")
    return width, height


def key_frames(client: Any, clip: CaptionClip, workdir: str) -> list[np.ndarray]:
    """The clip's key-frame JPEGs as RGB arrays at their own size; MissingObject or MediaError
    names the clip and frame."""
    images: list[np.ndarray] = []
    for index, uri in enumerate(clip.key_frame_uris):
        where = f"{clip.id} keyFrameUris[{index}]"
        path = os.path.join(workdir, f"frame-{index}.jpg")
        with open(path, "wb") as out:
            out.write(get_bytes(client, uri, where))
        width, height = image_size(path, where)
        with contextlib.closing(frames(path, width, height, field=where)) as stream:
            image = next(stream, None)
        if image is None:
            raise MediaError(f"{where}: no picture decoded from {uri}")
        images.append(image)
        os.remove(path)
    return images


def stage_caption(spec: dict, ctx: JobContext, load: Callable[[str, str, int], Captioner] = load_vlm) -> dict:
    clips = caption_clips(spec, ctx)
    model_id = optional(spec, "model", str, DEFAULT_VLM)
    revision = optional(spec, "revision", str, "main")
    max_new_tokens = parse_max_new_tokens(spec.get("maxNewTokens"))
    started = time.perf_counter()
    captioner = load(model_id, revision, max_new_tokens)
    captions: dict[str, str] = {}
    missing: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for number_done, clip in enumerate(clips, 1):
            try:
                caption, reason = clean_caption(captioner(key_frames(ctx.client, clip, workdir)))
            except (MissingObject, MediaError) as error:  # a key frame missing or unreadable
                caption, reason = None, str(error)
            if caption is None:
                missing[clip.id] = reason or "no caption"
            else:
                captions[clip.id] = caption
            ctx.progress(stage="caption", clip=number_done, clips=len(clips), captioned=len(captions))
    seconds = time.perf_counter() - started
    doc = {"format": CAPTIONS_FORMAT, "model": model_id, "revision": revision, "prompt": CAPTION_PROMPT_VERSION,
           "promptText": build_messages(3)[0]["content"][-1]["text"], "maxNewTokens": max_new_tokens,
           "captions": captions, "missing": missing, "seconds": round(seconds, 3)}
    body = json.dumps(doc, indent=1).encode()
    written = ctx.put_bytes("captions.json", body, "application/json")
    return {"captionsUri": written["uri"], "captionsSha256": hashlib.sha256(body).hexdigest(), "clips": len(clips),
            "captioned": len(captions), "missing": len(missing), "seconds": round(seconds, 3),
            "s3Outputs": [{"Bucket": written["Bucket"], "Key": written["Key"]}]}


STAGES = {"score": stage_score, "caption": stage_caption}


def main(spec: dict, ctx: JobContext) -> dict:
    if not isinstance(spec, dict):
        raise SpecError(f"spec: expected an object (got {type(spec).__name__})")
    stage = spec.get("stage")
    if stage not in STAGES:
        raise SpecError(f"stage: must be one of {sorted(STAGES)} (got {stage!r})")
    return STAGES[stage](spec, ctx)


if __name__ == "__main__":
    run(main)
