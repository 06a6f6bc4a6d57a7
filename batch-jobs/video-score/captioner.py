"""The caption stage's parts: what a caption request is, the prompt over a clip's key frames, how
a model's answer becomes a caption (or a recorded miss), and the vision-language model itself.

Default model: `Qwen/Qwen2-VL-2B-Instruct`. It is Apache-2.0, 2.2 B parameters (about 4.5 GB in
bf16, so it fits a 16 GB T4/A10G-class GPU beside its activations), reads several images in one
chat turn, and loads through transformers' AutoProcessor / AutoModelForVision2Seq with the chat
template, the same code path as LLaVA-OneVision (`llava-hf/llava-onevision-qwen2-0.5b-ov-hf`, the
smaller alternative). Any model id of that class can be named in the spec. Decoding is greedy, so
a rerun of the same model revision on the same frames gives the same caption.

The prompt asks for one or two sentences on what is visible across the frames and nothing else;
`clean_caption` keeps at most two complete sentences and records a miss, with its reason, for an
answer that is empty, a refusal, repetitive, cut off before a sentence ends, or markup. A caption
is never invented or padded.

transformers (and PIL) are imported inside `load_vlm` only: everything else here runs and is
tested without them (Debian's python3 here has neither); the GPU image installs both.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from specs import SpecError

DEFAULT_VLM = "Qwen/Qwen2-VL-2B-Instruct"
DEFAULT_MAX_NEW_TOKENS = 96
MAX_NEW_TOKENS_RANGE = (16, 256)
MAX_KEY_FRAMES = 8
CAPTION_PROMPT_VERSION = "caption-v1"
CAPTION_INSTRUCTION = (
    "Describe the clip in one or two plain sentences: the main subjects, what they do, the setting, "
    "and any camera movement visible across the frames. Describe only what is visible in the frames; "
    "do not guess names, places, dates, sounds or anything outside the frames. Answer with the sentences only."
)
# Longest caption kept (characters); two ordinary sentences fit easily.
MAX_CAPTION_CHARS = 400


@dataclass(frozen=True)
class CaptionClip:
    id: str
    key_frame_uris: tuple[str, ...]


def parse_clips(value: Any, field: str) -> list[CaptionClip]:
    """The clips of a caption request ([{id, keyFrameUris}], extra fields ignored, so a
    video-clips-v1 clips list serves as is); ids unique, 1 to MAX_KEY_FRAMES s3:// key frames each."""
    if not isinstance(value, list) or not value:
        raise SpecError(f"{field}: expected a non-empty list of {{id, keyFrameUris}} (got {str(value)[:200]!r})")
    clips: list[CaptionClip] = []
    seen: set[str] = set()
    for index, clip in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(clip, dict):
            raise SpecError(f"{where}: expected an object (got {type(clip).__name__})")
        clip_id = clip.get("id")
        if not isinstance(clip_id, str) or not clip_id:
            raise SpecError(f"{where}.id: expected a non-empty string (got {clip_id!r})")
        if clip_id in seen:
            raise SpecError(f"{where}.id: {clip_id!r} appears twice")
        seen.add(clip_id)
        uris = clip.get("keyFrameUris")
        if (not isinstance(uris, list) or not 1 <= len(uris) <= MAX_KEY_FRAMES
                or not all(isinstance(u, str) and u.startswith("s3://") for u in uris)):
            raise SpecError(f"{where}.keyFrameUris: expected 1 to {MAX_KEY_FRAMES} s3:// URIs (got {str(uris)[:200]!r})")
        clips.append(CaptionClip(clip_id, tuple(uris)))
    return clips


def parse_max_new_tokens(value: Any) -> int:
    if value is None:
        return DEFAULT_MAX_NEW_TOKENS
    low, high = MAX_NEW_TOKENS_RANGE
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SpecError(f"maxNewTokens: expected an integer from {low} to {high} (got {value!r})")
    return value


def caption_prompt(count: int) -> str:
    """The instruction for `count` key frames; three are named by their place in the clip."""
    if count < 1:
        raise ValueError("caption_prompt: at least one frame")
    if count == 1:
        frames = "The image is a frame from a short video clip."
    elif count == 3:
        frames = "The 3 images are frames from one short video clip, in time order (at 10%, 50% and 90% of its length)."
    else:
        frames = f"The {count} images are frames from one short video clip, in time order."
    return f"{frames} {CAPTION_INSTRUCTION}"


def build_messages(count: int) -> list[dict]:
    """One user turn in the chat-template form AutoProcessor.apply_chat_template reads: the frames
    as image entries, in order, then the instruction."""
    content: list[dict] = [{"type": "image"} for _ in range(count)]
    content.append({"type": "text", "text": caption_prompt(count)})
    return [{"role": "user", "content": content}]


_SPECIAL_TOKEN = re.compile(r"<\|[^|>]{1,40}\|>|</?s>|<image>|<video>")
_PREAMBLE = re.compile(r"^(?:sure[,!.]?\s*)?(?:here(?: is|'s) (?:a |the )?(?:short |brief )?(?:caption|description)[^:]{0,40}:|"
                       r"caption\s*:|description\s*:|answer\s*:)\s*", re.IGNORECASE)
_REFUSAL = re.compile(r"^(?:i'?m sorry|i am sorry|sorry,|i cannot|i can't|i can not|i am unable|i'm unable|as an ai)", re.IGNORECASE)
# A sentence ends at . ! or ? (then any closing quote or bracket) before a space or the end, so
# "3.5 m" stays inside its sentence.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


def clean_caption(raw: Any) -> tuple[str | None, str | None]:
    """(caption, None) for a usable answer, else (None, reason). Keeps the first two complete
    sentences (what follows them, often a decoding loop, is dropped), without markup, preambles or
    the model's special tokens; nothing is added."""
    if not isinstance(raw, str):
        return None, f"the model returned {type(raw).__name__}, not text"
    text = _SPECIAL_TOKEN.sub(" ", raw)
    text = re.sub(r"```[a-z]*", " ", text)
    text = re.sub(r"(?m)^\s*(?:[-*\u2022]|\d+[.)])\s+", " ", text)  # list bullets
    text = text.replace("**", "").replace("__", "").replace("#", " ")
    text = re.sub(r"\s+", " ", text).strip()
    text = _PREAMBLE.sub("", text).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':  # the whole answer quoted
        text = text[1:-1].strip()
    if not text:
        return None, "empty answer"
    if _REFUSAL.match(text):
        return None, f"the model declined: {text[:120]!r}"
    if re.search(r"[<>{}\[\]\\]|\ufffd", text):
        return None, f"malformed answer (markup or undecodable text): {text[:120]!r}"
    pieces = [piece for piece in _SENTENCE_BREAK.split(text) if re.search(r"\w", piece)]
    sentences = pieces if pieces and _SENTENCE_END.search(pieces[-1]) else pieces[:-1]
    if not sentences:
        return None, f"no complete sentence (cut off at maxNewTokens?): {text[:120]!r}"
    caption = " ".join(sentences[:2])
    if len(caption) > MAX_CAPTION_CHARS:
        caption = sentences[0]
    if len(caption) > MAX_CAPTION_CHARS:
        return None, f"answer too long ({len(caption)} characters in its first sentence)"
    words = re.findall(r"[\w'-]+", caption.lower())
    if len(words) < 3:
        return None, f"answer too short: {caption!r}"
    if len(words) >= 12 and len(set(words)) / len(words) < 0.4:  # a decoding loop
        return None, f"repetitive answer ({len(set(words))} distinct words of {len(words)})"
    return caption, None


# ---------------------------------------------------------------- the model (GPU image)

Captioner = Callable[[list[np.ndarray]], str]


class RealModelUnavailable(RuntimeError):
    """The caption stage needs transformers, which this environment does not have."""


class VlmCaptioner:
    """A transformers vision-language model answering the caption prompt over a clip's frames."""

    def __init__(self, model: Any, processor: Any, device: str, max_new_tokens: int):
        self.model = model
        self.processor = processor
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.dtype = next(model.parameters()).dtype

    def __call__(self, frames: list[np.ndarray]) -> str:
        import torch
        from PIL import Image

        images = [Image.fromarray(np.ascontiguousarray(frame)) for frame in frames]
        text = self.processor.apply_chat_template(build_messages(len(images)), add_generation_prompt=True)
        # Floating inputs (pixel values) in the model's dtype; token ids stay integers.
        inputs = self.processor(text=[text], images=images, return_tensors="pt").to(self.device, self.dtype)
        with torch.no_grad():
            output = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        answer = output[:, inputs["input_ids"].shape[1]:]
        return self.processor.batch_decode(answer, skip_special_tokens=True)[0]


def load_vlm(model_id: str, revision: str, max_new_tokens: int) -> VlmCaptioner:
    try:
        import torch
        from transformers import AutoModelForVision2Seq, AutoProcessor
    except ImportError as error:
        raise RealModelUnavailable(f"caption ({model_id}) needs the transformers package (the GPU image has it)") from error
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    else:
        dtype = torch.float32
    model = AutoModelForVision2Seq.from_pretrained(model_id, revision=revision, torch_dtype=dtype).to(device).eval()
    processor = AutoProcessor.from_pretrained(model_id, revision=revision)
    return VlmCaptioner(model, processor, device, max_new_tokens)
