"""video-cut: the video pipeline's CPU Batch job, one image for its three stages.

The spec's `stage` picks the work (each stage is its own cached step of the state machine):

- `generate`: the local default source set (generate.py): synthetic videos with hard cuts at
  known frames and shots made to be dropped. Writes videos/<name>.mp4, truth.json (every cut and
  shot, format video-truth-v1) and sources.json (a CC BY 4.0 source record per video).
- `fetch`: one source ({id, uri}: s3:// or http(s)://) copied to videos/<sha256> (content
  addressed), size-capped, probed and decoded once end to end.
- `cut`: one fetched video cut at its shot boundaries (cuts.py), each segment kept as clips
  (clips.py: a 360p MP4, a contact sheet, three key frames) or dropped as too short; writes
  clips.json (format video-clips-v1).

A source that is not a usable video (not media, no video stream, empty, too long, too large,
truncated or damaged) is deterministic: fetch and cut return {ok: false, field, reason} instead
of failing, so the pipeline caches and reports it and the other sources go on. Transient errors
(S3, the network) raise and the state machine retries. Results are small and of bounded size
(they go into the state machine's state); the lists live in the JSON documents they point to.

Started by the video state machine through jobio's contract.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import tempfile
import time
from typing import Any

from clips import clip_frame_bytes, clip_scale, cut_clips
from cuts import DETECTORS, DetectorSettings, analysis_size, content_scores, detect_cuts, plan_clips
from fetch import Unusable, download
from generate import FPS, GenerateSpec, generate_set
from jobio import JobContext, get_bytes, run
from media import CheckedFrames, MediaError, check_decodes, expected_frames, probe
from spec import SpecError, choice, field, integer, number, only

LICENCE = "CC-BY-4.0"
DEED_URL = "https://creativecommons.org/licenses/by/4.0/"
GENERATOR_AUTHOR = "frontier-pipelines test generator"
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium")
CLIP_ID_SHA_CHARS = 12
# The cut stage's detection pass keeps the clips' frames (raw, at the clip size) when they fit in
# this many bytes, so encoding reads them instead of decoding the source a second time. 8 GiB holds
# 16 minutes of 640x360 at 25 frames/s (every Blender open film but the longest); Fargate gives a
# job 20 GiB of disk by default, and the source is on it too. A longer video is decoded twice.
KEEP_FRAMES_BYTES = 8 * 2**30
# Up to this many bytes the kept frames are held in memory (an anonymous memory file, which ffmpeg
# writes and reads by its /proc path) instead of on disk: 3 GiB is 6 minutes of 640x360 at 25
# frames/s, and the cut job has 8 GiB. Writing raw frames through the disk's page cache cost more
# CPU than decoding them: on this project's 2-core machine, dd of 207 MB (600 frames of 640x360)
# took 0.62-1.08 s of system time to the disk and 0.06 s to memory, and on the smoke set's 12
# videos (281 s) detection went from 22-24x to 27-28x real time per CPU second (median per video).
KEEP_IN_MEMORY_BYTES = 3 * 2**30


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (ffmpeg), user and system."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def put_file(ctx: JobContext, name: str, path: str, content_type: str) -> dict:
    with open(path, "rb") as source:
        data = source.read()
    written = ctx.put_bytes(name, data, content_type)
    return {**written, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def unusable(source_field: str, error: Exception) -> dict:
    """The result for a source that is not a usable video: the field and the reason."""
    reason = str(error)
    if reason.startswith(source_field + ": "):
        reason = reason[len(source_field) + 2:]
    return {"ok": False, "field": source_field, "reason": reason}


# ---------------------------------------------------------------- generate

def stage_generate(spec: dict, ctx: JobContext) -> dict:
    parsed = GenerateSpec.parse(spec)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        records = generate_set(parsed, workdir, progress=ctx.progress)
        videos, sources = [], []
        for record in records:
            written = put_file(ctx, f"videos/{record['name']}.mp4", record.pop("path"), "video/mp4")
            record.pop("renderSeconds")
            videos.append({"name": record["name"], "uri": written["uri"], **record})
            # The sha256 lets the state machine skip the fetch: the video is in the bucket already.
            sources.append({"id": record["name"], "uri": written["uri"], "sha256": record["sha256"],
                            "title": f"Generated video {len(sources)} ({', '.join(record['sources'])})",
                            "author": GENERATOR_AUTHOR, "licence": LICENCE, "deedUrl": DEED_URL, "sourceUrl": written["uri"]})
    seconds = time.perf_counter() - started
    truth = {"format": "video-truth-v1", "fps": FPS, "seed": parsed.seed, "videos": videos}
    data = json.dumps(truth, indent=2).encode()
    truth_file = ctx.put_bytes("truth.json", data, "application/json")
    sources_file = ctx.put_json("sources.json", sources)
    return {"truthUri": truth_file["uri"], "truthSha256": hashlib.sha256(data).hexdigest(), "sourcesUri": sources_file["uri"],
            "videos": len(videos), "shots": sum(len(v["shots"]) for v in videos), "cuts": sum(len(v["cuts"]) for v in videos),
            "videoSeconds": round(sum(v["seconds"] for v in videos), 3), "seconds": round(seconds, 3)}


# ---------------------------------------------------------------- fetch

FETCH_FIELDS = {"stage", "source", "maxBytes", "maxSeconds"}


def stage_fetch(spec: dict, ctx: JobContext) -> dict:
    only(spec, FETCH_FIELDS)
    source = field(spec, "source", dict)
    source_id = field(source, "id", str, "source.")
    uri = field(source, "uri", str, "source.")
    if not uri.startswith(("s3://", "https://", "http://")):
        raise SpecError(f"source.uri: must be s3://, https:// or http:// (got {uri!r})")
    max_bytes = integer(spec, "maxBytes", None, 1, 2**50)
    max_seconds = number(spec, "maxSeconds", None, 0.1, 1e7)
    source_field = f"sources[{source_id}].uri"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "source")
        try:
            with open(path, "wb") as out:
                size, sha256 = download(ctx.client, uri, out, max_bytes)
            info = probe(path, source_field)
            if info.duration > max_seconds:
                raise Unusable(f"longer than maxSeconds ({info.duration:.2f} s > {max_seconds:g} s)")
            decoded = check_decodes(path, info, source_field)
        except (Unusable, MediaError) as error:
            return unusable(source_field, error)
        written = put_file(ctx, f"videos/{sha256}", path, "application/octet-stream")
    return {"ok": True, "sourceId": source_id, "videoUri": written["uri"], "sha256": sha256, "bytes": size,
            "probe": {**info.to_json(), "decodedFrames": decoded}, "seconds": round(time.perf_counter() - started, 3)}


# ---------------------------------------------------------------- cut

CUT_FIELDS = {"stage", "videoUri", "sha256", "sourceId", "settings"}
SETTINGS_FIELDS = {"detector", "threshold", "minContentValue", "windowFrames", "minSceneFrames", "minClipSeconds",
                   "maxClipSeconds", "height", "preset", "crf"}
DEFAULT_THRESHOLDS = {"adaptive": 2.0, "content": 27.0}


def cut_settings(spec: dict) -> dict:
    """The cut stage's settings with every default filled in (recorded in clips.json)."""
    raw = field(spec, "settings", dict) if "settings" in spec else {}
    only(raw, SETTINGS_FIELDS, "settings.")
    where = "settings."
    detector = choice(raw, "detector", "adaptive", DETECTORS, where)
    settings = {
        "detector": detector,
        # null (the pipeline's config default) is the detector's own default.
        "threshold": (DEFAULT_THRESHOLDS[detector] if raw.get("threshold") is None
                      else number(raw, "threshold", DEFAULT_THRESHOLDS[detector], 0.01, 255.0, where)),
        "minContentValue": number(raw, "minContentValue", DetectorSettings.min_content_value, 0.0, 255.0, where),
        "windowFrames": integer(raw, "windowFrames", DetectorSettings.window_frames, 1, 50, where),
        "minSceneFrames": integer(raw, "minSceneFrames", DetectorSettings.min_scene_frames, 1, 10_000, where),
        "minClipSeconds": number(raw, "minClipSeconds", 2.0, 0.5, 3600.0, where),
        "maxClipSeconds": number(raw, "maxClipSeconds", 15.0, 1.0, 3600.0, where),
        "height": integer(raw, "height", 360, 64, 2160, where),
        "preset": choice(raw, "preset", "superfast", PRESETS, where),
        "crf": integer(raw, "crf", 23, 0, 51, where),
    }
    if settings["height"] % 2:
        raise SpecError(f"settings.height: must be even for yuv420p (got {settings['height']})")
    if settings["maxClipSeconds"] < 2 * settings["minClipSeconds"]:
        raise SpecError(f"settings.maxClipSeconds: must be at least twice minClipSeconds, so the pieces of a split "
                        f"segment are never too short (got {settings['maxClipSeconds']:g} and {settings['minClipSeconds']:g})")
    return settings


def stage_cut(spec: dict, ctx: JobContext) -> dict:
    only(spec, CUT_FIELDS)
    video_uri = field(spec, "videoUri", str)
    sha256 = field(spec, "sha256", str)
    source_id = field(spec, "sourceId", str)
    settings = cut_settings(spec)
    detector = DetectorSettings(detector=settings["detector"], threshold=settings["threshold"],
                                min_content_value=settings["minContentValue"], window_frames=settings["windowFrames"],
                                min_scene_frames=settings["minSceneFrames"])
    source_field = f"sources[{source_id}].uri"
    started, cpu_started = time.perf_counter(), cpu_seconds()
    data = get_bytes(ctx.client, video_uri, "videoUri", missing=SpecError)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SpecError(f"sha256: {video_uri} does not hash to {sha256} (got {hashlib.sha256(data).hexdigest()})")
    with tempfile.TemporaryDirectory() as workdir, contextlib.ExitStack() as cleanup:
        path = os.path.join(workdir, "source")
        with open(path, "wb") as out:
            out.write(data)
        del data
        kept, kept_in = "", None
        try:
            info = probe(path, source_field)
            keep_bytes = expected_frames(info) * clip_frame_bytes(info.width, info.height, info.sar, settings["height"])
            if keep_bytes <= KEEP_IN_MEMORY_BYTES and hasattr(os, "memfd_create"):
                # Closed with the work dir (below): the memory goes with the last descriptor.
                memory = os.memfd_create("frames.nut")
                cleanup.callback(os.close, memory)
                kept, kept_in = f"/proc/{os.getpid()}/fd/{memory}", "memory"
            elif keep_bytes <= KEEP_FRAMES_BYTES:
                kept, kept_in = os.path.join(workdir, "frames.nut"), "disk"
            keep = (kept, clip_scale(settings["height"])) if kept_in else None
            reader = CheckedFrames(path, *analysis_size(info.width, info.height), field=source_field, keep=keep)
            scores = content_scores(reader)
            reader.check(expected_frames(info))
        except MediaError as error:
            return unusable(source_field, error)
        if keep is not None:
            os.remove(path)  # encoding reads the kept frames; the source's disk is free again
        fps = info.fps
        cuts = detect_cuts(scores, detector)
        plan, dropped = plan_clips([c["frame"] for c in cuts], len(scores), fps, settings["minClipSeconds"],
                                   settings["maxClipSeconds"])
        detect_seconds, detect_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        ctx.progress(stage="cut", detected=len(cuts), clips=len(plan), dropped=len(dropped))
        encode_started, encode_cpu_started = time.perf_counter(), cpu_seconds()
        ids = [f"{sha256[:CLIP_ID_SHA_CHARS]}-{clip['startFrame']:06d}" for clip in plan]
        # One ffmpeg run makes every clip (one decode of the source; see clips.py).
        made = cut_clips(kept if keep else path, [(clip_id, clip["startFrame"], clip["endFrame"] - clip["startFrame"]) for clip_id, clip in zip(ids, plan)],
                         fps, workdir, height=settings["height"], preset=settings["preset"], crf=settings["crf"], field=source_field)
        clips = []
        for index, (clip_id, clip, paths) in enumerate(zip(ids, plan, made)):
            video = put_file(ctx, f"clips/{clip_id}.mp4", paths["clip"], "video/mp4")
            sheet = put_file(ctx, f"clips/{clip_id}-sheet.jpg", paths["sheet"], "image/jpeg")
            keys = [put_file(ctx, f"clips/{clip_id}-k{i}.jpg", paths[f"k{i}"], "image/jpeg") for i in range(3)]
            for written in paths.values():
                os.remove(written)
            clips.append({"id": clip_id, **clip, "uri": video["uri"], "sha256": video["sha256"], "bytes": video["bytes"],
                          "contactSheetUri": sheet["uri"], "keyFrameUris": [k["uri"] for k in keys]})
            ctx.progress(stage="cut", clip=index + 1, of=len(plan))
        encode_seconds, encode_cpu = time.perf_counter() - encode_started, cpu_seconds() - encode_cpu_started
    video_seconds = len(scores) / fps
    document = {
        "format": "video-clips-v1", "sourceId": source_id, "videoUri": video_uri, "videoSha256": sha256,
        "probe": {**info.to_json(), "decodedFrames": len(scores)}, "settings": settings,
        "cuts": [{"frame": c["frame"], "time": round(c["frame"] / fps, 4), "score": c["score"], "ratio": c["ratio"]} for c in cuts],
        "clips": clips, "dropped": dropped,
        "timings": {"detectSeconds": round(detect_seconds, 3), "encodeSeconds": round(encode_seconds, 3),
                    "detectCpuSeconds": round(detect_cpu, 3), "encodeCpuSeconds": round(encode_cpu, 3),
                    "videoSeconds": round(video_seconds, 3), "decodes": 1 if keep else 2},
        "keptFramesIn": kept_in,
    }
    body = json.dumps(document, indent=2).encode()
    written = ctx.put_bytes("clips.json", body, "application/json")
    return {"ok": True, "clipsUri": written["uri"], "clipsSha256": hashlib.sha256(body).hexdigest(), "clips": len(clips),
            "dropped": len(dropped), "cuts": len(cuts), "videoSeconds": round(video_seconds, 3),
            "seconds": round(time.perf_counter() - started, 3)}


STAGES = {"generate": stage_generate, "fetch": stage_fetch, "cut": stage_cut}


def main(spec: dict, ctx: JobContext) -> dict:
    if not isinstance(spec, dict):
        raise SpecError(f"spec: expected an object (got {type(spec).__name__})")
    stage = spec.get("stage")
    if stage not in STAGES:
        raise SpecError(f"stage: must be one of {sorted(STAGES)} (got {stage!r})")
    return STAGES[stage](spec, ctx)


if __name__ == "__main__":
    run(main)
