"""The AWS aesthetic scorer (scorer `clip`): CLIP ViT-L/14 image embeddings into the improved
aesthetic predictor's head (christophschuhmann/improved-aesthetic-predictor, the weights
`sac+logos+ava1-l14-linearMSE.pth`, the head Open-Sora's aesthetic scoring uses).

- The embedding is CLIP ViT-L/14's projected image embedding (768-d), L2-normalised, as the
  predictor was trained on. transformers' `CLIPModel.get_image_features` on
  `openai/clip-vit-large-patch14` is the same network and projection as OpenAI's `clip.load("ViT-L/14")`
  `encode_image`, and `CLIPProcessor` the same preprocessing (shortest side to 224, centre crop
  224, CLIP's mean and std).
- The head is the repository's `MLP`: Linear 768->1024, Dropout 0.2, Linear 1024->128, Dropout
  0.2, Linear 128->64, Dropout 0.1, Linear 64->16, Linear 16->1. Its ReLUs are commented out, so in
  eval mode it is one affine map. The module keeps the `layers.<i>` names so the published state
  dict loads strictly.
- A clip's score is the mean of its three key frames' scores (0.1, 0.5, 0.9 of the clip).

transformers is imported inside `load_clip_embedder` only: the head and the tests run without it
(Debian's python3 here has none); the GPU image installs it.
"""
from __future__ import annotations

import hashlib
import io
import urllib.request
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_CLIP_MODEL = "openai/clip-vit-large-patch14"
# The URL Open-Sora's scoring README downloads the head from (tools/scoring/README.md).
DEFAULT_HEAD_URL = ("https://github.com/christophschuhmann/improved-aesthetic-predictor/raw/main/"
                    "sac+logos+ava1-l14-linearMSE.pth")
CLIP_SCORER_VERSION = "clip-l14-aesthetic-v1"
CLIP_FORMULA = ("aesthetic = mean over the frames at 0.1/0.5/0.9 of the clip of head(normalize(CLIP ViT-L/14 image embedding)); "
                "head = improved-aesthetic-predictor MLP 768-1024-128-64-16-1 (no activations), sac+logos+ava1-l14-linearMSE")
EMBEDDING_WIDTH = 768
# (index in the Sequential, in features, out features) of the head's Linear layers.
HEAD_LINEARS = ((0, EMBEDDING_WIDTH, 1024), (2, 1024, 128), (4, 128, 64), (6, 64, 16), (7, 16, 1))


class RealModelUnavailable(RuntimeError):
    """The CLIP path needs transformers, which this environment does not have."""


class HeadError(ValueError):
    """Head weights that do not fit the improved aesthetic predictor's MLP."""


class AestheticHead(nn.Module):
    """improved-aesthetic-predictor's MLP, with its layer indices (state-dict names `layers.<i>.*`)."""

    def __init__(self, width: int = EMBEDDING_WIDTH):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(width, 1024), nn.Dropout(0.2),
            nn.Linear(1024, 128), nn.Dropout(0.2),
            nn.Linear(128, 64), nn.Dropout(0.1),
            nn.Linear(64, 16),
            nn.Linear(16, 1),
        )

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(n, 768) L2-normalised embeddings -> (n,) scores."""
        return self.layers(embeddings).squeeze(-1)


def head_state(loaded: Any) -> dict[str, torch.Tensor]:
    """The head's tensors from what torch.load returned: the bare state dict the repository
    publishes, or one wrapped as {"state_dict": ...} with a `model.` or `mlp.` prefix (Lightning
    checkpoints, Open-Sora's scorer)."""
    if isinstance(loaded, Mapping) and "state_dict" in loaded and isinstance(loaded["state_dict"], Mapping):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, Mapping):
        raise HeadError(f"aestheticModel.headUri: expected a state dict (got {type(loaded).__name__})")
    state: dict[str, torch.Tensor] = {}
    for name, tensor in loaded.items():
        for prefix in ("model.", "mlp."):
            if name.startswith(prefix + "layers."):
                name = name[len(prefix):]
        state[name] = tensor
    return state


def load_head(state: Mapping[str, torch.Tensor]) -> AestheticHead:
    """A head in eval mode from a state dict with exactly the MLP's keys and shapes."""
    expected = {f"layers.{i}.{part}": (out_f, in_f) if part == "weight" else (out_f,)
                for i, in_f, out_f in HEAD_LINEARS for part in ("weight", "bias")}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise HeadError(f"aestheticModel.headUri: not the 768-1024-128-64-16-1 head (missing {missing}, unexpected {unexpected})")
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise HeadError(f"aestheticModel.headUri: {name} has shape {tuple(state[name].shape)}, expected {shape}")
    head = AestheticHead()
    head.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return head.eval()


def head_from_bytes(data: bytes) -> AestheticHead:
    """The head from a .pth file's bytes (torch.save of the state dict)."""
    try:
        loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is named
        raise HeadError(f"aestheticModel.headUri: not a torch state dict ({type(error).__name__}: {error})") from error
    return load_head(head_state(loaded))


def fetch_head_bytes(uri: str, get_s3: Any, expected_sha256: str | None) -> tuple[bytes, str]:
    """(bytes, sha256) of the head weights at an s3:// URI (through get_s3(uri)) or an https URL;
    a sha256 given in the spec must match."""
    if uri.startswith("s3://"):
        data = get_s3(uri)
    elif uri.startswith("https://"):
        with urllib.request.urlopen(uri, timeout=300) as response:  # noqa: S310 - https only
            data = response.read()
    else:
        raise HeadError(f"aestheticModel.headUri: must be s3:// or https:// (got {uri!r})")
    sha256 = hashlib.sha256(data).hexdigest()
    if expected_sha256 and sha256 != expected_sha256.lower():
        raise HeadError(f"aestheticModel.headSha256: {uri} has sha256 {sha256}, the spec expects {expected_sha256}")
    return data, sha256


@torch.no_grad()
def score_embeddings(head: AestheticHead, embeddings: torch.Tensor) -> torch.Tensor:
    """Scores of raw CLIP image embeddings (n, 768): L2-normalised, then the head."""
    device = next(head.parameters()).device
    return head(F.normalize(embeddings.float().to(device), p=2, dim=-1)).cpu()


class ClipEmbedder:
    """CLIP ViT-L/14 image embeddings of RGB uint8 frames, through transformers."""

    def __init__(self, model: Any, processor: Any, device: str):
        self.model = model
        self.processor = processor
        self.device = device
        self.dtype = next(model.parameters()).dtype

    @torch.no_grad()
    def embed(self, frames: list[np.ndarray]) -> torch.Tensor:
        inputs = self.processor(images=[np.array(f) for f in frames], return_tensors="pt")  # writable copies
        pixels = inputs["pixel_values"].to(self.device, self.dtype)
        return self.model.get_image_features(pixel_values=pixels).float().cpu()


def load_clip_embedder(model_id: str, revision: str) -> ClipEmbedder:
    try:
        from transformers import CLIPModel, CLIPProcessor
    except ImportError as error:
        raise RealModelUnavailable(f"scorer clip ({model_id}) needs the transformers package (the GPU image has it)") from error
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = CLIPModel.from_pretrained(model_id, revision=revision, torch_dtype=dtype).to(device).eval()
    processor = CLIPProcessor.from_pretrained(model_id, revision=revision)
    return ClipEmbedder(model, processor, device)


class ClipAestheticScorer:
    """A clip's aesthetic: the mean of its key frames' predicted scores."""

    def __init__(self, embedder: ClipEmbedder, head: AestheticHead):
        self.embedder = embedder
        self.head = head.to(embedder.device)

    def __call__(self, frames: list[np.ndarray]) -> float:
        return float(score_embeddings(self.head, self.embedder.embed(frames)).mean())
