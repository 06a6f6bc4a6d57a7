"""media.py on small videos ffmpeg draws here: probing, frames, one frame, and the failures."""
from __future__ import annotations

import os
import tempfile
import unittest

import numpy as np
from media import CheckedFrames, MediaError, check_decodes, expected_frames, ffmpeg, frame_at, frames, probe


class MediaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.TemporaryDirectory()
        cls.video = os.path.join(cls.workdir.name, "video.mp4")
        # 2 s at 25 fps: red for 1 s, then blue.
        ffmpeg(["-f", "lavfi", "-i", "color=c=red:s=320x180:r=25:d=1", "-f", "lavfi", "-i", "color=c=blue:s=320x180:r=25:d=1",
                "-filter_complex", "[0:v][1:v]concat=n=2:v=1:a=0,format=yuv420p[v]", "-map", "[v]", "-c:v", "libx264",
                "-preset", "ultrafast", "-threads", "1", "-movflags", "+faststart", cls.video], "test video")
        cls.audio = os.path.join(cls.workdir.name, "audio.m4a")
        ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", cls.audio], "test audio")
        cls.text = os.path.join(cls.workdir.name, "text.mp4")
        with open(cls.text, "w") as out:
            out.write("not a video\n")
        # The first half of a busy video whose index (written first) promises 50 frames.
        busy = os.path.join(cls.workdir.name, "busy.mp4")
        ffmpeg(["-f", "lavfi", "-i", "testsrc2=s=320x180:r=25:d=2", "-c:v", "libx264", "-preset", "ultrafast",
                "-threads", "1", "-pix_fmt", "yuv420p", "-movflags", "+faststart", busy], "busy video")
        with open(busy, "rb") as source:
            data = source.read()
        cls.truncated = os.path.join(cls.workdir.name, "truncated.mp4")
        with open(cls.truncated, "wb") as out:
            out.write(data[: len(data) // 2])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.workdir.cleanup()

    def test_probe(self) -> None:
        info = probe(self.video)
        self.assertEqual((info.width, info.height, info.fps, info.codec, info.frames), (320, 180, 25.0, "h264", 50))
        self.assertAlmostEqual(info.duration, 2.0, places=2)
        self.assertEqual(info.to_json()["sizeBytes"], os.path.getsize(self.video))
        self.assertEqual(expected_frames(info), 50)

    def test_frames(self) -> None:
        decoded = list(frames(self.video, 32, 18))
        self.assertEqual(len(decoded), 50)
        self.assertEqual(decoded[0].shape, (18, 32, 3))
        self.assertGreater(decoded[0][..., 0].mean(), 200)  # red
        self.assertGreater(decoded[-1][..., 2].mean(), 200)  # blue
        self.assertEqual(next(iter(frames(self.video, 32, 18, gray=True))).shape, (18, 32))
        self.assertEqual(len(list(frames(self.video, 32, 18, start=1.0, duration=0.4))), 10)

    def test_frame_at(self) -> None:
        red, blue = frame_at(self.video, 0.5, 32, 18), frame_at(self.video, 1.5, 32, 18)
        self.assertGreater(red[..., 0].mean(), 200)
        self.assertGreater(blue[..., 2].mean(), 200)
        with self.assertRaisesRegex(MediaError, r"clip: no frame at 9.000 s"):
            frame_at(self.video, 9.0, 32, 18, field="clip")

    def test_checked_frames(self) -> None:
        reader = CheckedFrames(self.video, 32, 18, field="clip")
        self.assertEqual(sum(1 for _ in reader), 50)
        reader.check(50)
        self.assertEqual(check_decodes(self.video, probe(self.video)), 50)
        with self.assertRaisesRegex(MediaError, r"clip: the video is truncated: 50 frames decoded of the 100"):
            reader.check(100)

    def test_failures_name_the_field(self) -> None:
        with self.assertRaisesRegex(MediaError, r"sources\[a\].uri: not a video ffprobe can read"):
            probe(self.text, "sources[a].uri")
        with self.assertRaisesRegex(MediaError, r"src: no video stream \(streams: audio\)"):
            probe(self.audio, "src")
        with self.assertRaisesRegex(MediaError, r"src: the video could not be decoded"):
            list(frames(self.text, 32, 18, field="src"))
        with self.assertRaisesRegex(MediaError, r"src: the video is (damaged|truncated)"):
            check_decodes(self.truncated, probe(self.truncated), "src")
        with self.assertRaisesRegex(MediaError, r"generate x: ffmpeg failed"):
            ffmpeg(["-f", "lavfi", "-i", "nosuchsource", os.path.join(self.workdir.name, "x.mp4")], "generate x")


if __name__ == "__main__":
    unittest.main()
