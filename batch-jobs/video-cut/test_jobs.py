"""The job's three stages end to end on a small generated set, over an in-memory S3.

Two videos (one holds a shot over 15 s) are generated once; each is fetched and cut, and the cuts,
clips and dropped shots are checked against truth.json. Then every kind of unusable source.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import io
import json
import os
import socket
import tempfile
import threading
import unittest
import urllib.error
from unittest import mock

import numpy as np
from cuts import match_cuts
from generate import DEFAULT_SPEC_MAX_SECONDS, FPS, GenerateSpec, make_bad_inputs, plan_set, probe_frames
from jobio import JobContext
import main as cut_job
from main import SpecError, main
from media import frames, probe
from memory_s3 import MemoryS3

TOLERANCE = 2


class PlanBoundTest(unittest.TestCase):
    def test_the_default_spec_never_plans_a_video_over_its_bound(self):
        # The pipeline's plan bounds Claude's captions by it: every generated video of the spec the
        # pipeline submits (videos and seed only) lasts at most DEFAULT_SPEC_MAX_SECONDS.
        for seed in range(10):
            longest = max(plan.frames for plan in plan_set(GenerateSpec(videos=200, seed=seed))) / FPS
            self.assertLessEqual(longest, DEFAULT_SPEC_MAX_SECONDS, f"seed {seed}")


def run_stage(s3: MemoryS3, name: str, spec: dict) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        return main(spec, JobContext(output_uri=f"s3://lab/runs/{name}/", client=s3))


def read(s3: MemoryS3, uri: str) -> bytes:
    bucket, key = uri[len("s3://"):].split("/", 1)
    return s3.objects[(bucket, key)]


class StagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s3 = MemoryS3()
        cls.workdir = tempfile.TemporaryDirectory()
        cls.generated = run_stage(cls.s3, "generate", {"stage": "generate", "videos": 2, "seed": 5, "videoSeconds": [12, 16]})
        cls.truth = json.loads(read(cls.s3, cls.generated["truthUri"]))
        cls.fetched, cls.cut, cls.documents = {}, {}, {}
        for video in cls.truth["videos"]:
            name = video["name"]
            cls.fetched[name] = run_stage(cls.s3, f"fetch-{name}", {"stage": "fetch", "source": {"id": name, "uri": video["uri"]},
                                                                   "maxBytes": 50_000_000, "maxSeconds": 120})
            cls.cut[name] = run_stage(cls.s3, f"cut-{name}", {"stage": "cut", "videoUri": cls.fetched[name]["videoUri"],
                                                             "sha256": cls.fetched[name]["sha256"], "sourceId": name,
                                                             "settings": {"preset": "ultrafast"}})
            cls.documents[name] = json.loads(read(cls.s3, cls.cut[name]["clipsUri"]))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.workdir.cleanup()

    def local(self, uri: str, name: str) -> str:
        path = os.path.join(self.workdir.name, name)
        with open(path, "wb") as out:
            out.write(read(self.s3, uri))
        return path

    def test_generated_set(self) -> None:
        self.assertEqual(self.truth["format"], "video-truth-v1")
        kinds = {shot["kind"] for video in self.truth["videos"] for shot in video["shots"]}
        self.assertEqual(kinds, {"good", "short", "dark", "static", "duplicate", "washed-out"})
        for video in self.truth["videos"]:
            self.assertEqual(hashlib.sha256(read(self.s3, video["uri"])).hexdigest(), video["sha256"])
            self.assertEqual(video["cuts"], [shot["startFrame"] for shot in video["shots"][1:]])
            info = probe(self.local(video["uri"], "source.mp4"))
            self.assertEqual((info.width, info.height, info.fps, info.codec, info.frames), (640, 360, 25.0, "h264", video["frames"]))
        duplicate = next(s for v in self.truth["videos"] for s in v["shots"] if s["kind"] == "duplicate")
        self.assertEqual(duplicate["duplicateOf"]["video"], self.truth["videos"][0]["name"])
        sources = json.loads(read(self.s3, self.generated["sourcesUri"]))
        self.assertEqual([s["id"] for s in sources], [v["name"] for v in self.truth["videos"]])
        self.assertTrue(all(s["licence"] == "CC-BY-4.0" and s["sourceUrl"] == s["uri"] for s in sources))

    def test_fetch_is_content_addressed(self) -> None:
        for video in self.truth["videos"]:
            fetched = self.fetched[video["name"]]
            self.assertTrue(fetched["ok"])
            self.assertEqual(fetched["sha256"], video["sha256"])
            self.assertTrue(fetched["videoUri"].endswith(f"videos/{video['sha256']}"))
            self.assertEqual(fetched["probe"]["decodedFrames"], video["frames"])

    def test_cuts_match_the_truth(self) -> None:
        hits = false = missed = 0
        for video in self.truth["videos"]:
            found = [c["frame"] for c in self.documents[video["name"]]["cuts"]]
            h, f, m = match_cuts(found, video["cuts"], TOLERANCE)
            hits, false, missed = hits + h, false + f, missed + m
        self.assertGreaterEqual(hits / (hits + false), 0.95)
        self.assertGreaterEqual(hits / (hits + missed), 0.95)

    def test_short_shots_are_dropped(self) -> None:
        for video in self.truth["videos"]:
            dropped = self.documents[video["name"]]["dropped"]
            for shot in (s for s in video["shots"] if s["kind"] == "short"):
                match = [d for d in dropped if abs(d["startFrame"] - shot["startFrame"]) <= TOLERANCE
                         and abs(d["endFrame"] - shot["endFrame"]) <= TOLERANCE]
                self.assertEqual(len(match), 1, f"{video['name']}: short shot {shot} not in {dropped}")
                self.assertEqual((match[0]["rule"], match[0]["threshold"]), ("too-short", 2.0))
                self.assertLess(match[0]["value"], 2.0)

    def test_clips(self) -> None:
        split = False
        for video in self.truth["videos"]:
            document, result = self.documents[video["name"]], self.cut[video["name"]]
            self.assertEqual(set(result), {"ok", "clipsUri", "clipsSha256", "clips", "dropped", "cuts", "videoSeconds", "seconds"})
            self.assertEqual((result["clips"], result["dropped"]), (len(document["clips"]), len(document["dropped"])))
            starts = [0, *video["cuts"]]
            for clip in document["clips"]:
                self.assertEqual(clip["id"], f"{video['sha256'][:12]}-{clip['startFrame']:06d}")
                self.assertLessEqual(clip["endFrame"] - clip["startFrame"], 15 * 25)
                if clip["piece"] == 0:
                    self.assertLessEqual(min(abs(clip["startFrame"] - s) for s in starts), TOLERANCE)
                split = split or clip["pieces"] > 1
            for clip in document["clips"][:3]:
                path = self.local(clip["uri"], "clip.mp4")
                self.assertEqual(hashlib.sha256(read(self.s3, clip["uri"])).hexdigest(), clip["sha256"])
                info = probe(path)
                self.assertEqual((info.height, info.width, info.codec), (360, 640, "h264"))
                self.assertEqual(probe_frames(path), clip["endFrame"] - clip["startFrame"])
                for uri in [clip["contactSheetUri"], *clip["keyFrameUris"]]:
                    self.assertEqual(read(self.s3, uri)[:3], b"\xff\xd8\xff")
            long_shots = [s for s in video["shots"] if s["endFrame"] - s["startFrame"] > 15 * 25]
            for shot in long_shots:
                inside = [c for c in document["clips"] if shot["startFrame"] - TOLERANCE <= c["startFrame"] < shot["endFrame"] - TOLERANCE]
                self.assertGreaterEqual(len(inside), 2)
        self.assertTrue(split, "no segment over 15 s was split")

    def test_clip_boundaries_are_frame_accurate(self) -> None:
        video = self.truth["videos"][1]
        source = self.local(video["uri"], "accurate-source.mp4")
        reference = list(frames(source, 64, 36))
        for clip in self.documents[video["name"]]["clips"][:2]:
            first = next(iter(frames(self.local(clip["uri"], "accurate.mp4"), 64, 36))).astype(float)
            distances = {k: float(np.abs(first - reference[k]).mean())
                         for k in range(max(0, clip["startFrame"] - 2), clip["startFrame"] + 3)}
            self.assertEqual(min(distances, key=distances.get), clip["startFrame"])

    def test_a_video_too_long_to_keep_is_decoded_twice_with_the_same_clips(self) -> None:
        # Over KEEP_FRAMES_BYTES, encoding decodes the source again instead of reading the frames
        # detection kept: the same cuts and clips, every clip's frames within a small difference.
        video = self.truth["videos"][0]
        name, fetched = video["name"], self.fetched[video["name"]]
        with mock.patch.object(cut_job, "KEEP_FRAMES_BYTES", 0), mock.patch.object(cut_job, "KEEP_IN_MEMORY_BYTES", 0):
            twice = run_stage(self.s3, f"cut-twice-{name}", {"stage": "cut", "videoUri": fetched["videoUri"], "sha256": fetched["sha256"],
                                                             "sourceId": name, "settings": {"preset": "ultrafast"}})
        once, again = self.documents[name], json.loads(read(self.s3, twice["clipsUri"]))
        self.assertEqual((once["timings"]["decodes"], again["timings"]["decodes"]), (1, 2))
        self.assertEqual((once["keptFramesIn"], again["keptFramesIn"]), ("memory", None))
        self.assertEqual(once["cuts"], again["cuts"])
        self.assertEqual([(c["startFrame"], c["endFrame"]) for c in once["clips"]], [(c["startFrame"], c["endFrame"]) for c in again["clips"]])
        for a, b in zip(once["clips"][:2], again["clips"][:2]):
            first = np.stack(list(frames(self.local(a["uri"], "once.mp4"), 64, 36))).astype(float)
            second = np.stack(list(frames(self.local(b["uri"], "twice.mp4"), 64, 36))).astype(float)
            self.assertEqual(first.shape, second.shape)
            self.assertLess(float(np.abs(first - second).mean()), 1.0)


    def test_frames_too_many_for_memory_are_kept_on_disk_with_the_same_clips(self) -> None:
        # Between KEEP_IN_MEMORY_BYTES and KEEP_FRAMES_BYTES the kept frames go to a file in the work
        # dir: one decode still, and byte for byte the clips the memory path made (same frames in,
        # same deterministic single-threaded encoder).
        video = self.truth["videos"][0]
        name, fetched = video["name"], self.fetched[video["name"]]
        with mock.patch.object(cut_job, "KEEP_IN_MEMORY_BYTES", 0):
            on_disk = run_stage(self.s3, f"cut-disk-{name}", {"stage": "cut", "videoUri": fetched["videoUri"], "sha256": fetched["sha256"],
                                                              "sourceId": name, "settings": {"preset": "ultrafast"}})
        memory, disk = self.documents[name], json.loads(read(self.s3, on_disk["clipsUri"]))
        self.assertEqual((disk["timings"]["decodes"], disk["keptFramesIn"]), (1, "disk"))
        self.assertEqual(memory["cuts"], disk["cuts"])
        self.assertEqual([c["sha256"] for c in memory["clips"]], [c["sha256"] for c in disk["clips"]])

class UnusableSourcesTest(unittest.TestCase):
    """Every deterministic failure is a result naming the source's field, never an exception."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.s3 = MemoryS3()
        cls.workdir = tempfile.TemporaryDirectory()
        cls.paths = make_bad_inputs(cls.workdir.name)
        for name, path in cls.paths.items():
            with open(path, "rb") as source:
                cls.s3.put_object("lab", f"bad/{name}.mp4", source.read())

    @classmethod
    def tearDownClass(cls) -> None:
        cls.workdir.cleanup()

    REASONS = {"not-a-video": r"not a video ffprobe can read", "truncated": r"damaged|truncated",
               "corrupt": r"damaged: \d+ decoding error", "audio-only": r"no video stream \(streams: audio\)",
               "empty": r"empty \(0 bytes\)"}

    def fetch(self, name: str, uri: str, **limits: int) -> dict:
        return run_stage(self.s3, f"fetch-{name}", {"stage": "fetch", "source": {"id": name, "uri": uri},
                                                    "maxBytes": limits.get("maxBytes", 10_000_000),
                                                    "maxSeconds": limits.get("maxSeconds", 60)})

    def test_fetch_reports_each_bad_input(self) -> None:
        for name, reason in self.REASONS.items():
            result = self.fetch(name, f"s3://lab/bad/{name}.mp4")
            self.assertEqual((result["ok"], result["field"]), (False, f"sources[{name}].uri"), result)
            self.assertRegex(result["reason"], reason)

    def test_cut_reports_each_bad_input(self) -> None:
        reasons = {**self.REASONS, "empty": r"not a video ffprobe can read"}
        for name, reason in reasons.items():
            sha256 = hashlib.sha256(self.s3.objects[("lab", f"bad/{name}.mp4")]).hexdigest()
            result = run_stage(self.s3, f"cut-{name}", {"stage": "cut", "videoUri": f"s3://lab/bad/{name}.mp4",
                                                        "sha256": sha256, "sourceId": name})
            self.assertEqual((result["ok"], result["field"]), (False, f"sources[{name}].uri"), result)
            self.assertRegex(result["reason"], reason)

    def test_limits_and_missing_objects(self) -> None:
        video = make_small_video(self.workdir.name)
        with open(video, "rb") as source:
            self.s3.put_object("lab", "good.mp4", source.read())
        self.assertRegex(self.fetch("big", "s3://lab/good.mp4", maxBytes=1000)["reason"], r"larger than maxBytes \((\d+ > )?1000 bytes\)")
        self.assertRegex(self.fetch("long", "s3://lab/good.mp4", maxSeconds=1)["reason"], r"longer than maxSeconds \(2.00 s > 1 s\)")
        self.assertRegex(self.fetch("missing", "s3://lab/nothing.mp4")["reason"], r"s3://lab/nothing.mp4: no such object")
        self.assertTrue(self.fetch("good", "s3://lab/good.mp4")["ok"])

    def test_http_sources(self) -> None:
        video = make_small_video(self.workdir.name)
        handler = functools.partial(QuietHandler, directory=self.workdir.name)
        server = QuietServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            base = f"http://127.0.0.1:{server.server_address[1]}"
            fetched = self.fetch("http", f"{base}/{os.path.basename(video)}")
            self.assertTrue(fetched["ok"], fetched)
            self.assertEqual(fetched["probe"]["decodedFrames"], 50)
            self.assertRegex(self.fetch("http-missing", f"{base}/nothing.mp4")["reason"], r"HTTP 404")
            self.assertRegex(self.fetch("http-big", f"{base}/{os.path.basename(video)}", maxBytes=1000)["reason"], r"larger than maxBytes")
        finally:
            server.shutdown()
            server.server_close()
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        with self.assertRaises(urllib.error.URLError):  # transient: the state machine retries it
            self.fetch("refused", f"http://127.0.0.1:{port}/video.mp4")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the fetch over maxBytes hangs up mid-body: a broken pipe here is expected


def make_small_video(directory: str) -> str:
    from media import ffmpeg

    path = os.path.join(directory, "small.mp4")
    if not os.path.exists(path):
        ffmpeg(["-f", "lavfi", "-i", "testsrc2=s=320x180:r=25:d=2", "-c:v", "libx264", "-preset", "ultrafast",
                "-pix_fmt", "yuv420p", "-threads", "1", path], "small video")
    return path


class BadSpecTest(unittest.TestCase):
    def check(self, spec: dict, message: str) -> None:
        with self.assertRaisesRegex(SpecError, message):
            run_stage(MemoryS3(), "bad", spec)

    def test_bad_specs_name_the_field(self) -> None:
        self.check({"stage": "train"}, r"stage: must be one of \['cut', 'fetch', 'generate'\]")
        self.check({"stage": "generate", "videos": 0, "seed": 1}, r"videos: must be between 1 and 1000")
        self.check({"stage": "generate", "videos": 2}, r"seed: expected int")
        self.check({"stage": "generate", "videos": 2, "seed": 1, "shotSeconds": [1, 2]}, r"shotSeconds: expected 2.5 <= min")
        self.check({"stage": "generate", "videos": 2, "seed": 1, "shotSecs": [3, 4]}, r"shotSecs: unknown field")
        self.check({"stage": "fetch", "source": {"uri": "s3://lab/x"}, "maxBytes": 1, "maxSeconds": 1}, r"source.id: expected str")
        self.check({"stage": "fetch", "source": {"id": "a", "uri": "ftp://x/y"}, "maxBytes": 1, "maxSeconds": 1},
                   r"source.uri: must be s3://, https:// or http://")
        self.check({"stage": "fetch", "source": {"id": "a", "uri": "s3://lab/x"}, "maxBytes": True, "maxSeconds": 1},
                   r"maxBytes: expected int")
        cut = {"stage": "cut", "videoUri": "s3://lab/x", "sha256": "0" * 64, "sourceId": "a"}
        self.check({**cut, "settings": {"detector": "histogram"}}, r"settings.detector: must be one of adaptive, content")
        self.check({**cut, "settings": {"minClipSeconds": 2, "maxClipSeconds": 3}}, r"settings.maxClipSeconds: must be at least twice")
        self.check({**cut, "settings": {"height": 361}}, r"settings.height: must be even")
        self.check({**cut, "settings": {"treshold": 3}}, r"settings.treshold: unknown field")
        self.check(cut, r"videoUri: s3://lab/x: no such object")
        s3 = MemoryS3()
        s3.put_object("lab", "x", b"bytes")
        with self.assertRaisesRegex(SpecError, r"sha256: s3://lab/x does not hash to 0000"):
            run_stage(s3, "bad", cut)


if __name__ == "__main__":
    unittest.main()
