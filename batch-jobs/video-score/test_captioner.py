"""The caption stage's own parts (request, prompt, cleaning) and the stage end to end with a stand-in
model at the model's edge; the real vision-language model needs transformers, not installable here."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest

import numpy as np
from captioner import (DEFAULT_VLM, MAX_CAPTION_CHARS, RealModelUnavailable, build_messages, caption_prompt, clean_caption,
                       load_vlm, parse_clips, parse_max_new_tokens)
from jobio import JobContext
from media import ffmpeg
from memory_s3 import MemoryS3
from main import SpecError, main, stage_caption

BUCKET = "lab"


class PromptTest(unittest.TestCase):
    def test_messages_hold_the_frames_in_order_then_the_instruction(self) -> None:
        messages = build_messages(3)
        self.assertEqual(len(messages), 1)
        self.assertEqual(messages[0]["role"], "user")
        content = messages[0]["content"]
        self.assertEqual([part["type"] for part in content], ["image", "image", "image", "text"])
        text = content[-1]["text"]
        self.assertIn("in time order (at 10%, 50% and 90% of its length)", text)
        self.assertIn("one or two plain sentences", text)
        self.assertIn("Describe only what is visible", text)

    def test_other_frame_counts(self) -> None:
        self.assertTrue(caption_prompt(1).startswith("The image is a frame from a short video clip."))
        self.assertTrue(caption_prompt(5).startswith("The 5 images are frames from one short video clip, in time order."))
        with self.assertRaises(ValueError):
            caption_prompt(0)


class CleanCaptionTest(unittest.TestCase):
    def test_usable_answers_are_trimmed_not_changed(self) -> None:
        self.assertEqual(clean_caption("  A red car drives along a wet road at night.\n"),
                         ("A red car drives along a wet road at night.", None))
        self.assertEqual(clean_caption("Sure! Here is a short caption: **A dog runs across a lawn.** The camera follows it. "
                                       "It looks happy. Birds sing."),
                         ("A dog runs across a lawn. The camera follows it.", None))
        self.assertEqual(clean_caption("Caption: Two people talk in a kitchen.<|im_end|>"),
                         ("Two people talk in a kitchen.", None))
        self.assertEqual(clean_caption("- A boat crosses a harbour.\n- Gulls circle above it."),
                         ("A boat crosses a harbour. Gulls circle above it.", None))

    def test_a_cut_off_last_sentence_is_dropped(self) -> None:
        self.assertEqual(clean_caption("A cyclist rides up a hill. The sun sets behind the"), ("A cyclist rides up a hill.", None))
        looped = "A dog runs on a beach. Waves break behind it. " + "The dog runs. " * 20 + "The dog"
        self.assertEqual(clean_caption(looped), ("A dog runs on a beach. Waves break behind it.", None))

    def test_sentences_end_only_at_a_stop_before_a_space(self) -> None:
        self.assertEqual(clean_caption('A 3.5 m boat sails past a pier. A sign reads "open." Gulls fly.'),
                         ('A 3.5 m boat sails past a pier. A sign reads "open."', None))

    def test_misses_carry_their_reason(self) -> None:
        cases = {
            "": "empty answer",
            "   \n ": "empty answer",
            "I'm sorry, I cannot describe these images.": "the model declined",
            "A man walks down the street and the man walks down the street and the man walks down the street and the man "
            "walks.": "repetitive answer",
            "A red car drives along a wet road at night and": "no complete sentence",
            "<div>A scene.</div> A street at dusk with lamps.": "malformed answer",
            "Cat.": "answer too short",
            "A " + " ".join(f"w{i}" for i in range(150)) + " sentence.": "answer too long",
        }
        for raw, reason in cases.items():
            caption, why = clean_caption(raw)
            self.assertIsNone(caption, raw)
            self.assertIn(reason, why or "", raw)
        self.assertEqual(clean_caption(None), (None, "the model returned NoneType, not text"))

    def test_long_pairs_fall_back_to_the_first_sentence(self) -> None:
        first = "A crowd gathers in a square " + " ".join(f"f{i}" for i in range(30)) + "."
        second = "Music plays " + " ".join(f"s{i}" for i in range(120)) + "."
        caption, _ = clean_caption(f"{first} {second}")
        self.assertEqual(caption, first)
        self.assertLessEqual(len(caption or ""), MAX_CAPTION_CHARS)


class RequestTest(unittest.TestCase):
    def test_clips_and_tokens(self) -> None:
        clips = parse_clips([{"id": "a", "keyFrameUris": ["s3://b/a0.jpg", "s3://b/a1.jpg"], "uri": "ignored"}], "clips")
        self.assertEqual((clips[0].id, clips[0].key_frame_uris), ("a", ("s3://b/a0.jpg", "s3://b/a1.jpg")))
        self.assertEqual(parse_max_new_tokens(None), 96)
        self.assertEqual(parse_max_new_tokens(40), 40)
        for bad in (8, 1000, 40.0, True, "40"):
            with self.assertRaisesRegex(SpecError, rf"maxNewTokens: expected an integer from 16 to 256 \(got {bad!r}\)"):
                parse_max_new_tokens(bad)

    def test_bad_clips_are_named(self) -> None:
        cases = [
            ([], r"clips: expected a non-empty list"),
            ([{"keyFrameUris": ["s3://b/x.jpg"]}], r"clips\[0\]\.id: expected a non-empty string \(got None\)"),
            ([{"id": "a", "keyFrameUris": []}], r"clips\[0\]\.keyFrameUris: expected 1 to 8 s3:// URIs \(got '\[\]'\)"),
            ([{"id": "a", "keyFrameUris": ["/tmp/x.jpg"]}], r"clips\[0\]\.keyFrameUris: expected 1 to 8 s3:// URIs"),
            ([{"id": "a", "keyFrameUris": ["s3://b/x.jpg"]}, {"id": "a", "keyFrameUris": ["s3://b/y.jpg"]}],
             r"clips\[1\]\.id: 'a' appears twice"),
        ]
        for value, pattern in cases:
            with self.assertRaisesRegex(SpecError, pattern):
                parse_clips(value, "clips")


class CaptionStageTest(unittest.TestCase):
    """The stage with a stand-in for the model (its answers chosen per clip); the key frames are
    real JPEGs made by ffmpeg and decoded by the stage."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.mkdtemp(prefix="video-caption-")
        cls.s3 = MemoryS3()
        for name, source in (("card", "testsrc2=size=640x360"), ("red", "color=red:size=640x360")):
            path = os.path.join(cls.workdir, f"{name}.jpg")
            ffmpeg(["-f", "lavfi", "-i", source, "-frames:v", "1", path], f"fixture {name}.jpg")
            with open(path, "rb") as source_file:
                cls.s3.put_object(BUCKET, f"frames/{name}.jpg", source_file.read())
        cls.s3.put_object(BUCKET, "frames/broken.jpg", b"\xff\xd8 not really a jpeg")

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.workdir, ignore_errors=True)

    def run_caption(self, spec: dict) -> tuple[dict, dict, list]:
        """Runs the stage with a stand-in model: an empty answer for a flat frame (the red one), a
        sentence for the test card. `seen` records what the stage handed the model."""
        seen: list = []

        def load(model_id: str, revision: str, max_new_tokens: int):
            seen.append((model_id, revision, max_new_tokens))

            def answer(frames: list[np.ndarray]) -> str:
                seen.append([f.shape for f in frames])
                return "   " if frames[0].reshape(-1, 3).std(axis=0).max() < 2 else "A colourful test card with moving shapes."
            return answer

        ctx = JobContext(output_uri=f"s3://{BUCKET}/runs/caption/", client=self.s3)
        with contextlib.redirect_stdout(io.StringIO()):
            result = stage_caption(spec, ctx, load=load)
        doc = json.loads(self.s3.objects[(BUCKET, "runs/caption/captions.json")])
        return result, doc, seen

    def test_captions_and_recorded_misses(self) -> None:
        card, red, broken = (f"s3://{BUCKET}/frames/{n}.jpg" for n in ("card", "red", "broken"))
        clips = [{"id": "c1", "keyFrameUris": [card, card, card]}, {"id": "c2", "keyFrameUris": [red, red, red]},
                 {"id": "c3", "keyFrameUris": [card, f"s3://{BUCKET}/frames/none.jpg", card]},
                 {"id": "c4", "keyFrameUris": [broken]}]
        result, doc, seen = self.run_caption({"stage": "caption", "clips": clips, "maxNewTokens": 64})
        self.assertEqual(seen[0], (DEFAULT_VLM, "main", 64))
        self.assertEqual(seen[1], [(360, 640, 3)] * 3)
        self.assertEqual(doc["format"], "video-captions-v1")
        self.assertEqual(doc["captions"], {"c1": "A colourful test card with moving shapes."})
        self.assertEqual(doc["missing"]["c2"], "empty answer")
        self.assertEqual(doc["missing"]["c3"], "c3 keyFrameUris[1]: s3://lab/frames/none.jpg: no such object")
        self.assertRegex(doc["missing"]["c4"], r"^c4 keyFrameUris\[0\]: ")
        self.assertEqual((result["clips"], result["captioned"], result["missing"]), (4, 1, 3))
        self.assertEqual(sorted(result), ["captioned", "captionsSha256", "captionsUri", "clips", "missing", "s3Outputs", "seconds"])

    def test_request_document_and_spec_errors(self) -> None:
        card = f"s3://{BUCKET}/frames/card.jpg"
        self.s3.put_object(BUCKET, "requests/r.json", json.dumps({"format": "video-clips-v1", "clips": [
            {"id": "only", "uri": "s3://lab/x.mp4", "keyFrameUris": [card]}]}).encode())
        result, doc, seen = self.run_caption({"stage": "caption", "captionsRequestUri": f"s3://{BUCKET}/requests/r.json",
                                              "model": "llava-hf/llava-onevision-qwen2-0.5b-ov-hf", "revision": "abc"})
        self.assertEqual(seen[0], ("llava-hf/llava-onevision-qwen2-0.5b-ov-hf", "abc", 96))
        self.assertEqual(doc["captions"], {"only": "A colourful test card with moving shapes."})
        self.assertEqual(result["missing"], 0)
        # The caption-plan step's request document, under the name the state machine passes.
        self.s3.put_object(BUCKET, "requests/plan.json", json.dumps({"captioner": "vlm", "model": DEFAULT_VLM, "clips": [
            {"id": "p1", "sha256": "0" * 64, "contactSheetUri": "s3://lab/sheet.jpg", "keyFrameUris": [card], "key": "k"}]}).encode())
        _, doc, _ = self.run_caption({"stage": "caption", "requestUri": f"s3://{BUCKET}/requests/plan.json", "model": DEFAULT_VLM})
        self.assertEqual(doc["captions"], {"p1": "A colourful test card with moving shapes."})
        ctx = JobContext(output_uri=f"s3://{BUCKET}/runs/x/", client=self.s3)
        for spec, pattern in (
            ({"stage": "caption"}, r"clips / captionsRequestUri / requestUri: give exactly one \(got none\)"),
            ({"stage": "caption", "clips": [], "requestUri": "s3://b/r.json"},
             r"give exactly one \(got \['clips', 'requestUri'\]\)"),
            ({"stage": "caption", "captionsRequestUri": f"s3://{BUCKET}/requests/none.json"},
             r"captionsRequestUri: s3://lab/requests/none.json: no such object"),
            ({"stage": "caption", "clips": [{"id": "a", "keyFrameUris": [card]}], "model": 3}, r"model: expected str \(got 3\)"),
            ({"stage": "caption", "clips": [{"id": "a", "keyFrameUris": [card]}], "maxNewTokens": 0}, r"maxNewTokens: expected"),
        ):
            with self.assertRaisesRegex(SpecError, pattern):
                main(spec, ctx)

    @unittest.skipIf(importlib.util.find_spec("transformers") is not None, "transformers is installed here")
    def test_without_transformers_the_error_is_named(self) -> None:
        with self.assertRaisesRegex(RealModelUnavailable, r"caption \(Qwen/Qwen2-VL-2B-Instruct\) needs the transformers package"):
            load_vlm(DEFAULT_VLM, "main", 64)

    @unittest.skipUnless(importlib.util.find_spec("transformers") is not None and os.environ.get("VIDEO_SCORE_REAL_MODELS") == "1",
                         "the real vision-language model needs transformers (not installable here: Debian's python3 has no "
                         "package and no PyPI) and Hub access; the GPU image runs it with VIDEO_SCORE_REAL_MODELS=1")
    def test_real_model_captions_a_frame(self) -> None:
        captioner = load_vlm(DEFAULT_VLM, "main", 64)
        frame = np.zeros((360, 640, 3), dtype=np.uint8)
        frame[:, :, 0] = 220
        caption, reason = clean_caption(captioner([frame, frame, frame]))
        self.assertIsNotNone(caption, reason)


if __name__ == "__main__":
    unittest.main()
