"""The real-model path: a Hugging Face causal LM on GSM8K or ARC-Easy, for the AWS image.

transformers and datasets are imported inside the functions that need them: the TinyLM path
and the tests run without them (Debian's python3 here has neither), and only a spec with
checkpoint.kind == "hf" or a data_uri of hf://... reaches this module.

Benchmarks (benchmark.data_uri -> the Hub dataset, config, split, and the registry's scorer):
- hf://gsm8k     -> openai/gsm8k, main, test          (scorer exact-number; answer after "####")
- hf://arc-easy  -> allenai/ai2_arc, ARC-Easy, test   (scorer multiple-choice; answer a letter)
An optional split may follow: hf://gsm8k/train.
"""
from __future__ import annotations

from typing import Callable, Iterable

HF_BENCHMARKS = {
    "gsm8k": ("openai/gsm8k", "main", "test"),
    "arc-easy": ("allenai/ai2_arc", "ARC-Easy", "test"),
}
LETTERS = "ABCDE"


class RealModelUnavailable(RuntimeError):
    """The real-model path needs transformers/datasets, which this image does not have."""


class UnknownBenchmarkError(ValueError):
    """An hf:// data_uri names a benchmark that is not in HF_BENCHMARKS."""


def gsm8k_row(record: dict, index: int) -> dict[str, str]:
    """GSM8K's answer is worked reasoning ending in '#### <number>'; the number is the answer."""
    final = record["answer"].split("####")[-1].strip().replace(",", "")
    prompt = f"Question: {record['question'].strip()}\nGive only the final number.\nAnswer:"
    return {"id": f"gsm8k-{index}", "prompt": prompt, "answer": final}


def arc_row(record: dict, index: int) -> dict[str, str]:
    """ARC labels its choices A-E, or 1-5 in some rows; both become letters."""
    labels = [str(label) for label in record["choices"]["label"]]
    letters = [LETTERS[int(l) - 1] if l.isdigit() else l for l in labels]
    lines = [f"{letter}. {text}" for letter, text in zip(letters, record["choices"]["text"])]
    key = str(record["answerKey"])
    answer = LETTERS[int(key) - 1] if key.isdigit() else key
    prompt = f"Question: {record['question'].strip()}\n" + "\n".join(lines) + "\nAnswer with the letter only.\nAnswer:"
    return {"id": str(record.get("id") or f"arc-easy-{index}"), "prompt": prompt, "answer": answer}


CONVERTERS: dict[str, Callable[[dict, int], dict[str, str]]] = {"gsm8k": gsm8k_row, "arc-easy": arc_row}


def _parse(data_uri: str) -> tuple[str, str]:
    name, _, split = data_uri[len("hf://"):].partition("/")
    if name not in HF_BENCHMARKS:
        raise UnknownBenchmarkError(f"benchmark.data_uri: hf:// benchmarks are {', '.join(HF_BENCHMARKS)} (got {data_uri!r})")
    return name, split or HF_BENCHMARKS[name][2]


def load_hf_benchmark(data_uri: str, load_dataset: Callable[..., Iterable[dict]] | None = None) -> list[dict[str, str]]:
    """Rows {id, prompt, answer} of an hf:// benchmark. load_dataset defaults to the datasets
    library's (network or HF_DATASETS_CACHE); tests pass their own."""
    name, split = _parse(data_uri)
    if load_dataset is None:
        try:
            from datasets import load_dataset  # noqa: PLC0415 - only this path needs it
        except ImportError as err:
            raise RealModelUnavailable(f"benchmark.data_uri {data_uri!r} needs the datasets package, "
                                       f"which is not installed in this image") from err
    path, config, _ = HF_BENCHMARKS[name]
    records = load_dataset(path, config, split=split)
    return [CONVERTERS[name](dict(record), i) for i, record in enumerate(records)]


class HFGenerator:
    """Greedy generation from a causal LM on the Hub (or a local directory)."""

    def __init__(self, model_id: str, revision: str | None = None, device: str = "cpu"):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415
        except ImportError as err:
            raise RealModelUnavailable(f"checkpoint.kind 'hf' ({model_id!r}) needs the transformers package, "
                                       f"which is not installed in this image") from err
        self.torch = torch
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(model_id, revision=revision)
        self.tokenizer.padding_side = "left"  # the new tokens follow every row's prompt directly
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.float16 if device == "cuda" else torch.float32
        # use_safetensors: never unpickle a Hub checkpoint either.
        self.model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, torch_dtype=dtype,
                                                          use_safetensors=True).to(device).eval()

    def generate(self, prompts: list[str], max_new_tokens: int, batch_size: int = 16) -> list[str]:
        out: list[str] = []
        for start in range(0, len(prompts), batch_size):
            batch = self.tokenizer(prompts[start:start + batch_size], return_tensors="pt", padding=True).to(self.device)
            with self.torch.no_grad():
                ids = self.model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id)
            for row in ids[:, batch["input_ids"].shape[1]:]:
                text = self.tokenizer.decode(row, skip_special_tokens=True)
                # A base model runs on into the next question; the answer is what comes before.
                out.append(text.split("\n\n")[0].split("\nQuestion:")[0].strip())
        return out
