import importlib.util
import os
import tempfile
import unittest

from hf_models import RealModelUnavailable, UnknownBenchmarkError, arc_row, gsm8k_row, load_hf_benchmark

GSM8K = [{"question": "Ann has 3 pens and buys 1,200 more. How many pens?",
          "answer": "She has 3 + 1200 = <<3+1200=1203>>1203 pens.\n#### 1,203"}]
ARC = [{"id": "Mercury_1", "question": "Which is a gas?", "answerKey": "2",
        "choices": {"text": ["rock", "steam", "ice"], "label": ["1", "2", "3"]}}]


def fake_load_dataset(path, config, split):
    return {("openai/gsm8k", "main"): GSM8K, ("allenai/ai2_arc", "ARC-Easy"): ARC}[(path, config)]


class ConvertersTest(unittest.TestCase):
    def test_gsm8k_rows_take_the_number_after_the_marks(self):
        row = gsm8k_row(GSM8K[0], 0)
        self.assertEqual(row["answer"], "1203")
        self.assertTrue(row["prompt"].startswith("Question: Ann has 3 pens"))
        self.assertTrue(row["prompt"].endswith("Answer:"))

    def test_arc_rows_letter_numeric_labels(self):
        row = arc_row(ARC[0], 0)
        self.assertEqual((row["id"], row["answer"]), ("Mercury_1", "B"))
        self.assertIn("\nA. rock\nB. steam\nC. ice\n", row["prompt"])

    def test_load_hf_benchmark_maps_uris_to_datasets(self):
        self.assertEqual(load_hf_benchmark("hf://gsm8k", fake_load_dataset)[0]["answer"], "1203")
        self.assertEqual(load_hf_benchmark("hf://arc-easy/test", fake_load_dataset)[0]["answer"], "B")
        with self.assertRaisesRegex(UnknownBenchmarkError, "hf:// benchmarks are gsm8k, arc-easy .got 'hf://mmlu'"):
            load_hf_benchmark("hf://mmlu", fake_load_dataset)

    @unittest.skipIf(importlib.util.find_spec("datasets") is not None, "datasets is installed here")
    def test_without_datasets_the_error_is_named(self):
        with self.assertRaisesRegex(RealModelUnavailable, "needs the datasets package"):
            load_hf_benchmark("hf://gsm8k")


@unittest.skipIf(importlib.util.find_spec("transformers") is None, "transformers is not installed here")
class TransformersLoadingTest(unittest.TestCase):
    """Builds a tiny GPT-2 and a word-level tokenizer on disk (no network) and loads them
    through the same code path a Hub model id takes."""

    def test_a_local_model_generates_for_every_prompt(self):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

        from hf_models import HFGenerator

        words = ["[PAD]", "[UNK]", "[EOS]", "Question:", "Answer:", "1", "2", "3", "pens", "how", "many"]
        backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                            eos_token="[EOS]")
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(words), n_positions=64, n_embd=16, n_layer=1, n_head=2,
                                           pad_token_id=0, eos_token_id=2))
        with tempfile.TemporaryDirectory() as directory:
            tokenizer.save_pretrained(directory)
            model.save_pretrained(directory, safe_serialization=True)
            self.assertTrue(os.path.exists(os.path.join(directory, "model.safetensors")))
            generator = HFGenerator(directory, None, "cpu")
            out = generator.generate(["Question: how many pens Answer:", "Question: 1 2 3 Answer:", "Answer:"], 4,
                                     batch_size=2)
        self.assertEqual(len(out), 3)
        self.assertTrue(all(isinstance(text, str) for text in out))


if __name__ == "__main__":
    unittest.main()
