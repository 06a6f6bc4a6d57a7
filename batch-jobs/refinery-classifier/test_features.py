import random
import unittest

import numpy as np

from features import (FeatureSettings, document_features, document_features_naive, fnv1a32, pad_batch, tokenize,
                      word_hashes)


class Fnv1aTest(unittest.TestCase):
    def test_spec_vectors(self):
        # The FNV reference test vectors (draft-eastlake-fnv, FNV-1a 32-bit).
        self.assertEqual(fnv1a32(b""), 0x811C9DC5)
        self.assertEqual(fnv1a32(b"a"), 0xE40C292C)
        self.assertEqual(fnv1a32(b"foobar"), 0xBF9CF968)

    def test_vectorised_equals_naive_for_short_and_long_words(self):
        # Tokens past VECTOR_STEPS (64) bytes finish in Python: cover both sides of the cut.
        tokens = ["a", "é", "x" * 63, "y" * 64, "z" * 65, "w" * 300, "日本", "b"]
        expected = [fnv1a32(t.encode("utf-8")) for t in tokens]
        self.assertEqual(word_hashes(tokens).tolist(), expected)


class TokenizeTest(unittest.TestCase):
    def test_runs_of_letters_marks_and_numbers_after_nfkc_and_lower_case(self):
        self.assertEqual(tokenize("Hello, WORLD! e-mail 3.14 don't"),
                         ["hello", "world", "e", "mail", "3", "14", "don", "t"])
        # NFKC: full-width letters, the ligature fi, a circled digit; marks stay in the word.
        self.assertEqual(tokenize("Ｆｕｌｌ ﬁne ① नमस्ते"), ["full", "fine", "1", "नमस्ते"])
        # Underscores, emoji and symbols separate; mathematical bold letters fold to ASCII.
        self.assertEqual(tokenize("snake_case 😀x 𝐀𝐁 a+b"), ["snake", "case", "x", "ab", "a", "b"])

    def test_first_max_tokens_only(self):
        text = " ".join(f"w{i}" for i in range(1000))
        self.assertEqual(tokenize(text, 3), ["w0", "w1", "w2"])
        self.assertEqual(len(tokenize(text, 999)), 999)
        self.assertEqual(len(tokenize(text, 5000)), 1000)

    def test_empty_and_separator_only(self):
        self.assertEqual(tokenize(""), [])
        self.assertEqual(tokenize(" ... — !! "), [])


class DocumentFeaturesTest(unittest.TestCase):
    def test_hand_worked_document(self):
        # "b a b": words b, a, b. FNV-1a("a") = 0xE40C292C is even, FNV-1a("b") = 0xE70C2DE5 is
        # odd: with 2 buckets they fall in 0 and 1, each present, so each weighs 1 (b's repeat
        # adds nothing). With 2^22 buckets each word keeps its own bucket, whatever its count.
        indices, weights = document_features("b a b", FeatureSettings(buckets=2, max_tokens=10))
        self.assertEqual((indices.tolist(), weights.tolist()), ([0, 1], [1.0, 1.0]))
        big = FeatureSettings(buckets=1 << 22, max_tokens=10)
        indices, weights = document_features("b a b a a", big)
        self.assertEqual(indices.tolist(), sorted([fnv1a32(b"b") % (1 << 22), fnv1a32(b"a") % (1 << 22)]))
        self.assertEqual(weights.tolist(), [1.0, 1.0])

    def test_equals_the_naive_version(self):
        rng = random.Random(7)
        alphabet = "abcé日 .,-'\n1２"
        settings = FeatureSettings(buckets=997, max_tokens=40)
        for _ in range(200):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
            indices, weights = document_features(text, settings)
            naive_indices, naive_weights = document_features_naive(text, settings)
            self.assertEqual(indices.tolist(), naive_indices, text)
            self.assertEqual(weights.tolist(), naive_weights, text)

    def test_empty_document_has_no_pairs(self):
        indices, weights = document_features("  ")
        self.assertEqual((len(indices), len(weights)), (0, 0))

    def test_pad_batch(self):
        batch = [document_features("a b c", FeatureSettings(buckets=101)), document_features("")]
        indices, weights = pad_batch(batch)
        self.assertEqual(indices.shape, (2, len(batch[0][0])))
        self.assertEqual((indices.dtype, weights.dtype), (np.int64, np.float32))
        self.assertTrue(np.all(indices[1] == 0) and np.all(weights[1] == 0))
        self.assertEqual(pad_batch([document_features("")])[0].shape, (1, 1))

    def test_settings_errors_name_the_field_and_value(self):
        with self.assertRaisesRegex(ValueError, r"buckets: .* \(got 1\)"):
            FeatureSettings(buckets=1)
        with self.assertRaisesRegex(ValueError, r"maxTokens: .* \(got 0\)"):
            FeatureSettings(max_tokens=0)
        with self.assertRaisesRegex(ValueError, r"buckets: .* \(got True\)"):
            FeatureSettings(buckets=True)


if __name__ == "__main__":
    unittest.main()
