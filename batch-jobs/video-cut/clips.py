"""Cutting clips out of a video: for each, a re-encoded MP4, a contact sheet and three key frames.

cut_clips (what the cut stage uses) makes every clip of a video in one ffmpeg run: the source is
decoded once, the frames of the clips are selected (a dropped segment is never encoded), one x264
encoder encodes them back to back with a forced keyframe at each clip's first frame, and the
segment muxer splits its output at exactly those frames into one MP4 per clip (timestamps reset,
so each file plays as an encode of the clip alone would). The contact sheets and key frames are
selected from the same scaled frames in the same run. Clips go in chunks of at most CHUNK_CLIPS
per run, which bounds the command line, the filter graph and the files waiting on disk.

Before, each clip was its own ffmpeg run seeked to the clip: a seek decodes from the keyframe
before it (up to a GOP of the source, 10 s at x264's default), so the source was decoded about
twice over, one process per clip. On 12 generated videos (seed 11, 304 s, 52 clips; measure.py,
one core, three runs each) encoding went from 11-12x to 16-17x real time per CPU second, and the
whole stage from 8.0-8.7x to 10.2-10.9x. That path also put the clip's first frame twice (the seek left it half a frame late,
and ffmpeg's constant-rate output duplicated it) and so lost the last one; the segment muxer
keeps every frame in place.

The cut stage passes not the source but the frames its detection pass kept (clip_scale's frames,
raw, in a NUT file, written by the same decode that scored them; in memory up to
main.KEEP_IN_MEMORY_BYTES, else on disk), so the source is
decoded once in all: on those 12 videos encoding went from 12.7x to 17.9x real time per CPU
second and the whole stage from 7.4x to 8.8x (detection 17.5x before, 17.2x after: writing the
frames costs about what the faster colour conversion saved). A video whose frames would not fit
(main.KEEP_FRAMES_BYTES) is decoded again here, as before.

Frame accuracy: each chunk's input is seeked to half a frame before its first clip's first frame
(ffmpeg's accurate seek decodes from the keyframe before and drops every frame stamped earlier),
so the select filter's frame n is source frame first + n, the source frame k being the picture
shown at k / fps (the numbering cut detection uses), and frame 0 of each clip is its startFrame.

The clip: `height` lines (360 by default), the width keeping the display aspect (even), square
pixels, H.264 yuv420p, no audio, one encoder thread, +faststart. The contact sheet: SHEET_COLUMNS
x SHEET_ROWS tiles of evenly spaced frames, each SHEET_TILE_HEIGHT high. Key frames: at 0.1, 0.5
and 0.9 of the clip, the frames Open-Sora scores for aesthetics.
"""
from __future__ import annotations

import os

from media import ffmpeg

SHEET_COLUMNS, SHEET_ROWS = 4, 2
SHEET_TILE_HEIGHT = 135
KEY_FRAME_POSITIONS = (0.1, 0.5, 0.9)


def clip_scale(height: int) -> str:
    """The filters that make a clip's frames from a source's: `height` lines, the width keeping the
    display aspect (even), square pixels, yuv420p. The cut stage's detection pass applies them
    when it keeps the frames (a NUT file of raw frames), and they leave those frames as they are."""
    return f"scale='trunc({height}*dar/2)*2':{height},setsar=1,format=yuv420p"


def clip_frame_bytes(width: int, height: int, sar: float, clip_height: int) -> int:
    """The bytes of one clip frame, raw yuv420p, for a source of width x height with that sample
    aspect ratio (clip_scale's size)."""
    clip_width = int(clip_height * width * sar / height / 2) * 2
    return clip_width * clip_height * 3 // 2


def sheet_frames(frames: int) -> list[int]:
    """The frames the contact sheet shows: the middles of SHEET_COLUMNS x SHEET_ROWS equal spans."""
    tiles = SHEET_COLUMNS * SHEET_ROWS
    return [min(frames - 1, int((i + 0.5) * frames / tiles)) for i in range(tiles)]


def key_frames(frames: int) -> list[int]:
    return [min(frames - 1, int(p * frames)) for p in KEY_FRAME_POSITIONS]


def select(frames: list[int]) -> str:
    return "select='" + "+".join(f"eq(n,{n})" for n in sorted(set(frames))) + "'"


CHUNK_CLIPS = 32


def cut_clips(source: str, clips: list[tuple[str, int, int]], fps: float, directory: str, *,
              height: int, preset: str, crf: int, field: str) -> list[dict[str, str]]:
    """Every clip of `clips` ((clip_id, start_frame, frames), in frame order, not overlapping)
    with the same outputs as cut_clip, in ffmpeg runs of up to CHUNK_CLIPS clips; returns each
    clip's paths by role (clip, sheet, k0, k1, k2), in the order given."""
    for clip_id, start, frames in clips:
        if frames < SHEET_COLUMNS * SHEET_ROWS:
            raise ValueError(f"{field}: clip {clip_id}: {frames} frames, fewer than the contact sheet's tiles")
    if any(a[1] + a[2] > b[1] for a, b in zip(clips, clips[1:])):
        raise ValueError(f"{field}: clips must be in frame order and must not overlap")
    paths: list[dict[str, str]] = []
    for first in range(0, len(clips), CHUNK_CLIPS):
        paths += _cut_chunk(source, clips[first:first + CHUNK_CLIPS], fps, directory, f"chunk{first // CHUNK_CLIPS}",
                            height=height, preset=preset, crf=crf, field=field)
    return paths


def _cut_chunk(source: str, clips: list[tuple[str, int, int]], fps: float, directory: str, prefix: str, *,
               height: int, preset: str, crf: int, field: str) -> list[dict[str, str]]:
    """One ffmpeg run for consecutive clips. The input is seeked to half a frame before the first
    clip's first frame (as in cut_clip), so the select filter's n is the source frame minus it;
    after selecting, frames are renumbered 0.. across the clips back to back (`starts`)."""
    origin = clips[0][1]
    starts, total = [], 0
    for _, _, frames in clips:
        starts.append(total)
        total += frames
    keep = "+".join(f"between(n,{start - origin},{start - origin + frames - 1})" for _, start, frames in clips)
    sheet = [at + f for at, (_, _, frames) in zip(starts, clips) for f in sheet_frames(frames)]
    keys = [at + f for at, (_, _, frames) in zip(starts, clips) for f in key_frames(frames)]
    graph = (f"[0:v]select='{keep}',{clip_scale(height)},split=3[all][s][k];"
             f"[all]setpts=N/FRAME_RATE/TB[clip];"
             f"[s]{select(sheet)},scale=-2:{SHEET_TILE_HEIGHT},tile={SHEET_COLUMNS}x{SHEET_ROWS}[sheet];"
             f"[k]{select(keys)}[keys]")
    pattern = {role: os.path.join(directory, f"{prefix}-{role}%d.{ext}") for role, ext in (("c", "mp4"), ("s", "jpg"), ("k", "jpg"))}
    span = clips[-1][1] + clips[-1][2] - origin
    ffmpeg(["-threads", "1", "-ss", f"{(origin - 0.5) / fps:.6f}", "-t", f"{span / fps:.6f}", "-i", source,
            "-filter_complex_threads", "1", "-filter_complex", graph,
            "-map", "[clip]", "-an", "-c:v", "libx264", "-preset", preset, "-crf", str(crf), "-pix_fmt", "yuv420p",
            "-threads", "1", "-frames:v", str(total), "-force_key_frames", "expr:" + "+".join(f"eq(n,{at})" for at in starts),
            # Split at the forced keyframes; the last entry (the frame count) is never reached, so a
            # lone clip is not split by the muxer's default 2 s segment time.
            "-f", "segment", "-segment_frames", ",".join(str(at) for at in [*starts[1:], total]), "-reset_timestamps", "1",
            "-avoid_negative_ts", "disabled", "-segment_format", "mp4", "-segment_format_options", "movflags=+faststart",
            pattern["c"],
            "-map", "[sheet]", "-fps_mode", "passthrough", "-q:v", "3", "-start_number", "0", pattern["s"],
            "-map", "[keys]", "-fps_mode", "passthrough", "-q:v", "2", "-start_number", "0", pattern["k"]],
           f"{field}: clips {clips[0][0]}..{clips[-1][0]}")
    results = []
    for index, (clip_id, _, _) in enumerate(clips):
        paths = {"clip": os.path.join(directory, f"{clip_id}.mp4"), "sheet": os.path.join(directory, f"{clip_id}-sheet.jpg")}
        paths.update({f"k{i}": os.path.join(directory, f"{clip_id}-k{i}.jpg") for i in range(len(KEY_FRAME_POSITIONS))})
        made = {"clip": pattern["c"] % index, "sheet": pattern["s"] % index}
        made.update({f"k{i}": pattern["k"] % (index * len(KEY_FRAME_POSITIONS) + i) for i in range(len(KEY_FRAME_POSITIONS))})
        for role, path in made.items():
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                raise RuntimeError(f"{field}: clip {clip_id}: ffmpeg wrote no {os.path.basename(paths[role])}")
            os.replace(path, paths[role])
        results.append(paths)
    return results


def cut_clip(source: str, start_frame: int, frames: int, fps: float, directory: str, clip_id: str, *,
             height: int, preset: str, crf: int, field: str) -> dict[str, str]:
    """One clip: writes <clip_id>.mp4, <clip_id>-sheet.jpg and <clip_id>-k0..k2.jpg into directory;
    returns their paths by role (clip, sheet, k0, k1, k2). A clip needs at least SHEET_COLUMNS x
    SHEET_ROWS frames (the key frames are then distinct too)."""
    return cut_clips(source, [(clip_id, start_frame, frames)], fps, directory, height=height, preset=preset, crf=crf,
                     field=field)[0]
