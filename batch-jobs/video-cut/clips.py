"""Cutting one clip out of a video: a re-encoded MP4, a contact sheet and three key frames, all
from one ffmpeg run (one decode of the span, one process per clip).

Frame accuracy: the input is seeked to half a frame before the clip's first frame (ffmpeg's
accurate seek decodes from the keyframe before and drops every frame stamped earlier) and read
for exactly the clip's frames, so frame k of the source -- the picture shown at k / fps, the
same numbering cut detection uses -- is the clip's first frame.

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


def sheet_frames(frames: int) -> list[int]:
    """The frames the contact sheet shows: the middles of SHEET_COLUMNS x SHEET_ROWS equal spans."""
    tiles = SHEET_COLUMNS * SHEET_ROWS
    return [min(frames - 1, int((i + 0.5) * frames / tiles)) for i in range(tiles)]


def key_frames(frames: int) -> list[int]:
    return [min(frames - 1, int(p * frames)) for p in KEY_FRAME_POSITIONS]


def select(frames: list[int]) -> str:
    return "select='" + "+".join(f"eq(n,{n})" for n in sorted(set(frames))) + "'"


def cut_clip(source: str, start_frame: int, frames: int, fps: float, directory: str, clip_id: str, *,
             height: int, preset: str, crf: int, field: str) -> dict[str, str]:
    """Writes <clip_id>.mp4, <clip_id>-sheet.jpg and <clip_id>-k0..k2.jpg into directory; returns
    their paths by role (clip, sheet, k0, k1, k2). A clip needs at least SHEET_COLUMNS x SHEET_ROWS
    frames (the key frames are then distinct too)."""
    paths = {"clip": os.path.join(directory, f"{clip_id}.mp4"), "sheet": os.path.join(directory, f"{clip_id}-sheet.jpg")}
    paths.update({f"k{i}": os.path.join(directory, f"{clip_id}-k{i}.jpg") for i in range(len(KEY_FRAME_POSITIONS))})
    if frames < SHEET_COLUMNS * SHEET_ROWS:
        raise ValueError(f"{field}: clip {clip_id}: {frames} frames, fewer than the contact sheet's tiles")
    graph = (f"[0:v]scale='trunc({height}*dar/2)*2':{height},setsar=1,format=yuv420p,split=3[clip][s][k];"
             f"[s]{select(sheet_frames(frames))},scale=-2:{SHEET_TILE_HEIGHT},tile={SHEET_COLUMNS}x{SHEET_ROWS}[sheet];"
             f"[k]{select(key_frames(frames))}[keys]")
    ffmpeg(["-threads", "1", "-ss", f"{(start_frame - 0.5) / fps:.6f}", "-t", f"{frames / fps:.6f}", "-i", source,
            "-filter_complex_threads", "1", "-filter_complex", graph,
            "-map", "[clip]", "-an", "-c:v", "libx264", "-preset", preset, "-crf", str(crf), "-pix_fmt", "yuv420p",
            "-threads", "1", "-frames:v", str(frames), "-movflags", "+faststart", paths["clip"],
            "-map", "[sheet]", "-frames:v", "1", "-q:v", "3", paths["sheet"],
            "-map", "[keys]", "-fps_mode", "passthrough", "-frames:v", str(len(KEY_FRAME_POSITIONS)), "-q:v", "2",
            "-start_number", "0", os.path.join(directory, f"{clip_id}-k%d.jpg")], f"{field}: clip {clip_id}")
    for path in paths.values():
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            raise RuntimeError(f"{field}: clip {clip_id}: ffmpeg wrote no {os.path.basename(path)}")
    return paths

