"""cut_clips on a small test pattern: every frame of every clip is the source's frame, in chunks
and alone."""
from __future__ import annotations

import os
import tempfile
import unittest
from unittest import mock

import clips
import numpy as np
from clips import clip_scale, cut_clips, key_frames
from media import CheckedFrames, ffmpeg, frames, probe

SIZE = (64, 36)


class CutClipsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.TemporaryDirectory()
        cls.source = os.path.join(cls.workdir.name, "source.mp4")
        # testsrc2 changes every frame; one keyframe, so every clip but the first is seeked into a GOP.
        ffmpeg(["-f", "lavfi", "-i", "testsrc2=s=320x180:r=25:d=6", "-c:v", "libx264", "-preset", "ultrafast", "-g", "1000",
                "-pix_fmt", "yuv420p", cls.source], "test source")
        cls.reference = np.stack(list(frames(cls.source, *SIZE))).astype(float)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.workdir.cleanup()

    def nearest(self, frame: np.ndarray, around: int) -> int:
        near = range(max(0, around - 2), min(len(self.reference), around + 3))
        return min(near, key=lambda k: float(np.abs(frame - self.reference[k]).mean()))

    def check(self, wanted: list[tuple[str, int, int]], directory: str, source: str | None = None) -> None:
        made = cut_clips(source or self.source, wanted, 25.0, directory, height=180, preset="ultrafast", crf=23, field="test")
        self.assertEqual(len(made), len(wanted))
        for (clip_id, start, count), paths in zip(wanted, made):
            self.assertEqual(sorted(paths), ["clip", "k0", "k1", "k2", "sheet"])
            self.assertEqual(os.path.basename(paths["clip"]), f"{clip_id}.mp4")
            self.assertEqual(os.path.basename(paths["k2"]), f"{clip_id}-k2.jpg")
            info = probe(paths["clip"])
            self.assertEqual((info.width, info.height, info.codec), (320, 180, "h264"))
            decoded = list(frames(paths["clip"], *SIZE))
            self.assertEqual(len(decoded), count, clip_id)
            # Every frame, not only the first: frame k of the clip is frame start + k of the source.
            self.assertEqual([self.nearest(f.astype(float), start + k) for k, f in enumerate(decoded)],
                             list(range(start, start + count)), clip_id)
            key = next(iter(frames(paths["k1"], *SIZE))).astype(float)
            self.assertEqual(self.nearest(key, start + key_frames(count)[1]), start + key_frames(count)[1])
            for role in ("sheet", "k0", "k2"):
                with open(paths[role], "rb") as image:
                    self.assertEqual(image.read(3), b"\xff\xd8\xff")
        # Nothing but the clips' own files is left behind (no stray segments).
        expected = {os.path.basename(p) for paths in made for p in paths.values()}
        self.assertEqual(set(os.listdir(directory)), expected)

    def test_clips_in_chunks_are_frame_accurate(self) -> None:
        with tempfile.TemporaryDirectory() as directory, mock.patch.object(clips, "CHUNK_CLIPS", 2):
            self.check([("a", 5, 40), ("b", 45, 12), ("c", 70, 60)], directory)

    def test_clips_from_the_kept_frames_are_frame_accurate(self) -> None:
        # The cut stage's one decode: detection's pass keeps the frames at the clip size (raw, NUT)
        # and the clips are encoded from them; every clip frame is still the source's frame.
        with tempfile.TemporaryDirectory() as directory, tempfile.TemporaryDirectory() as scratch:
            kept = os.path.join(scratch, "frames.nut")
            reader = CheckedFrames(self.source, 32, 18, keep=(kept, clip_scale(180)), field="test")
            self.assertEqual(sum(1 for _ in reader), len(self.reference))
            reader.check(len(self.reference))
            self.assertEqual(probe(kept).frames or len(list(frames(kept, *SIZE))), len(self.reference))
            with mock.patch.object(clips, "CHUNK_CLIPS", 2):
                self.check([("a", 5, 40), ("b", 45, 12), ("c", 70, 60)], directory, source=kept)

    def test_a_lone_clip_is_one_file(self) -> None:
        # Longer than the segment muxer's default 2 s: still one file.
        with tempfile.TemporaryDirectory() as directory:
            self.check([("lone", 31, 90)], directory)

    def test_rejects_overlaps_and_short_clips(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            with self.assertRaisesRegex(ValueError, r"not overlap"):
                cut_clips(self.source, [("a", 0, 20), ("b", 10, 20)], 25.0, directory, height=180, preset="ultrafast",
                          crf=23, field="test")
            with self.assertRaisesRegex(ValueError, r"fewer than the contact sheet's tiles"):
                cut_clips(self.source, [("a", 0, 5)], 25.0, directory, height=180, preset="ultrafast", crf=23, field="test")


if __name__ == "__main__":
    unittest.main()
