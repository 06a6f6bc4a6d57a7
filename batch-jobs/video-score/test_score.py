"""The score stage end to end on clips made with ffmpeg (fixtures.py), over an in-memory S3: the
scores behave as designed, near-duplicates hash close, and bad input is named."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest

import torch
from aesthetic_clip import AestheticHead, HeadError, RealModelUnavailable
from fixtures import SOURCES, VARIANTS, clips_document, make_named
from jobio import JobContext
from measures import QUALITY_FORMULA, hamming
from memory_s3 import MemoryS3
from main import SpecError, main, measure_clip

BUCKET = "lab"


def run_stage(s3: MemoryS3, spec: dict, name: str) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):  # progress lines
        return main(spec, JobContext(output_uri=f"s3://{BUCKET}/runs/{name}/", client=s3))


def read_json(s3: MemoryS3, uri: str) -> dict:
    bucket, key = uri[len("s3://"):].split("/", 1)
    return json.loads(s3.objects[(bucket, key)])


class ScoreStageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.mkdtemp(prefix="video-score-")
        cls.paths = {name: make_named(cls.workdir, name) for name in [*SOURCES, *VARIANTS]}
        cls.s3 = MemoryS3()
        cls.s3.put_object(BUCKET, "videos/v1/clips/corrupt.mp4", os.urandom(4096))
        extra = [{"id": "gone", "uri": f"s3://{BUCKET}/videos/v1/clips/gone.mp4", "keyFrameUris": []},
                 {"id": "corrupt", "uri": f"s3://{BUCKET}/videos/v1/clips/corrupt.mp4", "keyFrameUris": []},
                 {"id": "tampered", "uri": f"s3://{BUCKET}/videos/v1/clips/testsrc2.mp4", "sha256": "ab" * 32,
                  "keyFrameUris": []}]
        cls.clips_uri = clips_document(cls.s3, BUCKET, "videos/v1/", cls.paths, extra)
        cls.result = run_stage(cls.s3, {"stage": "score", "clipsUri": cls.clips_uri, "scorer": "quality"}, "all")
        cls.scores = read_json(cls.s3, cls.result["scoresUri"])
        cls.by_id = {clip["id"]: clip for clip in cls.scores["clips"]}

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.workdir, ignore_errors=True)

    def test_document_and_small_result(self) -> None:
        scores, result = self.scores, self.result
        self.assertEqual(scores["format"], "video-scores-v1")
        self.assertEqual(scores["scorer"]["aesthetic"], "quality-v1")
        self.assertEqual(scores["scorer"]["formula"], QUALITY_FORMULA)
        clips_bytes = self.s3.objects[(BUCKET, "videos/v1/clips.json")]
        self.assertEqual(scores["clipsSha256"], hashlib.sha256(clips_bytes).hexdigest())
        body = self.s3.objects[(BUCKET, "runs/all/scores.json")]
        self.assertEqual(result["scoresSha256"], hashlib.sha256(body).hexdigest())
        count = len(self.paths) + 3
        self.assertEqual((result["clips"], result["scored"], result["errors"]), (count, count - 3, 3))
        self.assertAlmostEqual(result["videoSeconds"], 2.0 * (count - 3), delta=0.01)
        self.assertEqual(sorted(result), ["clips", "errors", "s3Outputs", "scored", "scoresSha256", "scoresUri", "seconds",
                                          "videoSeconds"])
        self.assertLess(len(json.dumps(result)), 400)  # a Step Functions state: its size does not grow with the clips
        clip = self.by_id["testsrc2"]
        self.assertEqual(sorted(clip), ["aesthetic", "brightShare", "darkShare", "duration", "id", "lumaStd", "meanLuma",
                                        "motion", "phash", "quality"])
        self.assertEqual(sorted(clip["quality"]), ["colour", "colourfulness", "contrast", "exposure", "keyLumaStd",
                                                   "keyMeanLuma", "laplacianVar", "score", "sharpness"])

    def test_black_and_white_are_extremes(self) -> None:
        black, white = self.by_id["black"], self.by_id["white"]
        self.assertLess(black["meanLuma"], 0.02)
        self.assertGreater(white["meanLuma"], 0.98)
        self.assertLess(max(black["lumaStd"], white["lumaStd"]), 0.01)
        self.assertGreater(black["darkShare"], 0.99)
        self.assertGreater(white["brightShare"], 0.99)
        self.assertLess(max(black["aesthetic"], white["aesthetic"]), 1.1)
        for name in ("testsrc2", "mandelbrot", "pan"):
            self.assertTrue(0.3 < self.by_id[name]["meanLuma"] < 0.7, name)

    def test_still_has_no_motion_and_moving_clips_do(self) -> None:
        motion = {name: self.by_id[name]["motion"] for name in SOURCES}
        self.assertLess(motion["still"], 0.3)
        self.assertLess(max(motion["black"], motion["white"]), 0.3)
        for name in ("mandelbrot", "life", "pan", "testsrc2"):
            self.assertGreater(motion[name], 3.0, name)
        self.assertGreater(motion["pan"], 10.0)
        self.assertGreater(motion["life"], 10.0)

    def test_sharp_colourful_scores_above_blurred_flat(self) -> None:
        sharp, blurred = self.by_id["testsrc2"], self.by_id["blurred"]
        self.assertGreater(sharp["aesthetic"], blurred["aesthetic"] + 2.0)
        for term in ("sharpness", "contrast", "colour"):
            self.assertGreater(sharp["quality"][term], blurred["quality"][term], term)
        self.assertGreater(sharp["aesthetic"], 6.5)
        self.assertGreater(blurred["aesthetic"], self.by_id["black"]["aesthetic"])
        # The quality scorer's aesthetic is its quality-v1 score.
        self.assertEqual(sharp["aesthetic"], sharp["quality"]["score"])

    def test_same_input_gives_the_same_numbers(self) -> None:
        for name in ("testsrc2", "life"):
            again = measure_clip(self.paths[name], "clips[0].uri", 5.0, None)
            first = {k: v for k, v in self.by_id[name].items() if k != "id"}
            self.assertEqual(again["phash"], first["phash"])
            for key in ("aesthetic", "motion", "meanLuma", "lumaStd", "darkShare", "brightShare"):
                self.assertAlmostEqual(again[key], first[key], places=6, msg=key)
            for key, value in first["quality"].items():
                self.assertAlmostEqual(again["quality"][key], value, places=6, msg=key)

    def test_near_duplicates_hash_close_and_other_content_far(self) -> None:
        def distances(name: str) -> list[int]:
            return [hamming(a, b) for a, b in zip(self.by_id["testsrc2"]["phash"], self.by_id[name]["phash"])]

        for name in ("reencoded", "brightened", "cropped"):
            self.assertLessEqual(max(distances(name)), 10, name)
        for name in ("mandelbrot", "life", "pan", "gradient"):
            self.assertGreaterEqual(min(distances(name)), 18, name)

    def test_bad_clips_are_recorded_and_the_others_scored(self) -> None:
        self.assertRegex(self.by_id["gone"]["error"], r"^clips\[\d+\]\.uri: s3://lab/videos/v1/clips/gone.mp4: no such object$")
        self.assertRegex(self.by_id["corrupt"]["error"], r"^clips\[\d+\]\.uri: not a video ffprobe can read")
        self.assertRegex(self.by_id["tampered"]["error"], r"^clips\[\d+\]\.sha256: .* has sha256 [0-9a-f]{64}, clips.json says abab")
        self.assertEqual(sorted(self.by_id["gone"]), ["error", "id"])
        self.assertEqual(sum("aesthetic" in clip for clip in self.scores["clips"]), len(self.paths))


class ScoreSpecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s3 = MemoryS3()
        cls.s3.put_object(BUCKET, "v/clips.json", json.dumps({"format": "video-clips-v1", "clips": []}).encode())

    def check(self, spec: dict, pattern: str, error: type[Exception] = SpecError) -> None:
        with self.assertRaisesRegex(error, pattern):
            run_stage(self.s3, spec, "bad")

    def test_bad_specs_name_the_field_and_value(self) -> None:
        good = {"stage": "score", "clipsUri": f"s3://{BUCKET}/v/clips.json", "scorer": "quality"}
        self.check({**good, "stage": "scores"}, r"stage: must be one of \['caption', 'score'\] \(got 'scores'\)")
        self.check({**good, "scorer": "fancy"}, r"scorer: must be one of \['quality', 'clip'\] \(got 'fancy'\)")
        self.check({**good, "clipsUri": None}, r"clipsUri: expected str \(got None\)")
        self.check({**good, "clipsUri": "/tmp/clips.json"}, r"clipsUri: expected an s3:// URI \(got '/tmp/clips.json'\)")
        self.check({**good, "clipsUri": f"s3://{BUCKET}/v/none.json"}, r"clipsUri: s3://lab/v/none.json: no such object")
        self.check({**good, "motionFps": 0}, r"motionFps: expected a number above 0.0 and at most 30.0 \(got 0\)")
        self.check({**good, "motionFps": "5"}, r"motionFps: expected .* \(got '5'\)")
        self.check({**good, "aestheticModel": {}}, r"aestheticModel: only the clip scorer reads it")
        self.check({**good, "scorer": "clip", "aestheticModel": "default"}, r"aestheticModel: expected dict \(got 'default'\)")
        self.check(["score"], r"spec: expected an object \(got list\)")  # type: ignore[arg-type]

    def test_malformed_clips_documents(self) -> None:
        def with_doc(doc: object) -> dict:
            self.s3.put_object(BUCKET, "v/odd.json", json.dumps(doc).encode())
            return {"stage": "score", "clipsUri": f"s3://{BUCKET}/v/odd.json", "scorer": "quality"}

        self.check(with_doc({"format": "video-clips-v0", "clips": []}), r"expected format video-clips-v1 \(got 'video-clips-v0'\)")
        self.check(with_doc({"format": "video-clips-v1", "clips": [{"id": "a"}]}), r"clipsUri clips\[0\]\.uri: expected str \(got None\)")
        self.check(with_doc({"format": "video-clips-v1", "clips": [{"id": "a", "uri": "https://x/a.mp4"}]}),
                   r"clipsUri clips\[0\]\.uri: expected an s3:// URI \(got 'https://x/a.mp4'\)")
        self.check(with_doc({"format": "video-clips-v1", "clips": [{"id": "a", "uri": "s3://b/a"}, {"id": "a", "uri": "s3://b/b"}]}),
                   r"clipsUri clips\[1\]\.id: 'a' appears twice")

    def test_no_clips_is_an_empty_document(self) -> None:
        result = run_stage(self.s3, {"stage": "score", "clipsUri": f"s3://{BUCKET}/v/clips.json", "scorer": "quality"}, "empty")
        self.assertEqual((result["clips"], result["errors"], result["videoSeconds"]), (0, 0, 0))


class ClipScorerSpecTest(unittest.TestCase):
    """The clip scorer's plumbing up to the CLIP model, which needs transformers."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.s3 = MemoryS3()
        cls.s3.put_object(BUCKET, "v/clips.json", json.dumps({"format": "video-clips-v1", "clips": []}).encode())
        buffer = io.BytesIO()
        torch.save(AestheticHead().state_dict(), buffer)
        cls.head_bytes = buffer.getvalue()
        cls.s3.put_object(BUCKET, "models/head.pth", cls.head_bytes)
        cls.spec = {"stage": "score", "clipsUri": f"s3://{BUCKET}/v/clips.json", "scorer": "clip",
                    "aestheticModel": {"headUri": f"s3://{BUCKET}/models/head.pth"}}

    def test_head_checks_come_before_the_model(self) -> None:
        with self.assertRaisesRegex(HeadError, r"aestheticModel.headSha256: s3://lab/models/head.pth has sha256 [0-9a-f]{64}, "
                                               r"the spec expects 00"):
            run_stage(self.s3, {**self.spec, "aestheticModel": {**self.spec["aestheticModel"], "headSha256": "00"}}, "c")
        with self.assertRaisesRegex(SpecError, r"aestheticModel.headUri: s3://lab/models/none.pth: no such object"):
            run_stage(self.s3, {**self.spec, "aestheticModel": {"headUri": f"s3://{BUCKET}/models/none.pth"}}, "c")
        with self.assertRaisesRegex(SpecError, r"aestheticModel: unknown fields \['clip'\]"):
            run_stage(self.s3, {**self.spec, "aestheticModel": {"clip": "x"}}, "c")
        with self.assertRaisesRegex(SpecError, r"aestheticModel.clipModel: expected str \(got 7\)"):
            run_stage(self.s3, {**self.spec, "aestheticModel": {"clipModel": 7}}, "c")

    @unittest.skipIf(importlib.util.find_spec("transformers") is not None, "transformers is installed here")
    def test_without_transformers_the_error_is_named(self) -> None:
        sha256 = hashlib.sha256(self.head_bytes).hexdigest()
        spec = {**self.spec, "aestheticModel": {**self.spec["aestheticModel"], "headSha256": sha256}}
        with self.assertRaisesRegex(RealModelUnavailable, r"scorer clip \(openai/clip-vit-large-patch14\) needs the transformers"):
            run_stage(self.s3, spec, "c")


if __name__ == "__main__":
    unittest.main()
