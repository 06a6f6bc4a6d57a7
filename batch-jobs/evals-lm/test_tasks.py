import os
import random
import subprocess
import sys
import tempfile
import json
import unittest

from scorers import UnknownScorerError, first_number, score
from tasks import (
    ArithmeticOptions,
    TaskError,
    all_arithmetic_problems,
    arithmetic_identity_string,
    commonest_answer_accuracy,
    heldout_rows,
    is_heldout,
    train_sampler,
)
from trainer import MixedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


class SplitTest(unittest.TestCase):
    def test_training_never_draws_a_heldout_problem(self):
        for task in ("arithmetic", "reversal"):
            with self.subTest(task=task):
                heldout = {row["id"] for row in heldout_rows(task, 400)}
                draw = train_sampler(task, random.Random(3))
                seen = {draw().id for _ in range(20_000)}
                self.assertEqual(seen & heldout, set())
                self.assertGreater(len(seen), 1000)

    def test_the_split_holds_out_about_a_tenth_of_identities(self):
        identities = all_arithmetic_problems(ArithmeticOptions())
        share = sum(is_heldout(arithmetic_identity_string(i)) for i in identities) / len(identities)
        self.assertAlmostEqual(share, 0.10, delta=0.01)

    def test_heldout_rows_are_seeded_distinct_and_answer_correctly(self):
        rows = heldout_rows("arithmetic", 300, seed=4)
        self.assertEqual(rows, heldout_rows("arithmetic", 300, seed=4))
        self.assertNotEqual(rows, heldout_rows("arithmetic", 300, seed=5))
        self.assertEqual(len({r["id"] for r in rows}), 300)
        for row in rows:
            # Each addition story states its two operands and nothing else numeric.
            a, b = [int(t) for t in row["prompt"].replace(".", " ").replace("?", " ").split() if t.isdigit()]
            self.assertEqual(row["answer"], str(a + b))
        reversal = heldout_rows("reversal", 50)
        self.assertEqual(reversal[0]["prompt"][:8], "Reverse ")
        word = reversal[0]["prompt"][8:-2]
        self.assertEqual(reversal[0]["answer"], word[::-1])

    def test_the_commonest_answer_baseline_is_low(self):
        answers = [r["answer"] for r in heldout_rows("arithmetic", 500)]
        self.assertLess(commonest_answer_accuracy(answers), 0.15)  # 10 = 9 of 81 sums: 11 %
        self.assertEqual(commonest_answer_accuracy(["1", "1", "2", "3"]), 0.5)

    def test_subtraction_answers_are_positive(self):
        draw = train_sampler("arithmetic", random.Random(0), ArithmeticOptions(operations=("sub",)))
        for _ in range(200):
            self.assertGreater(int(draw().completion), 0)

    def test_bad_task_options_are_named(self):
        with self.assertRaisesRegex(TaskError, "task: must be one of text, reversal, arithmetic .got 'poetry'"):
            train_sampler("poetry", random.Random(0))
        with self.assertRaisesRegex(TaskError, "max_operand: must be an integer in 2..99"):
            ArithmeticOptions(max_operand=1)
        with self.assertRaisesRegex(TaskError, "mix: must map task names"):
            MixedSampler({"text": -1}, random.Random(0))

    def test_a_mixed_batch_takes_each_share(self):
        sampler = MixedSampler({"text": 1, "reversal": 3}, random.Random(0))
        self.assertEqual(sampler.counts(8), {"text": 2, "reversal": 6})
        self.assertEqual(sum(sampler.counts(10).values()), 10)
        batch = sampler.batch(8)
        self.assertEqual(sum(e.prompt.startswith("Reverse") for e in batch), 6)

    def test_make_benchmarks_writes_the_registry_files(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([sys.executable, os.path.join(HERE, "make_benchmarks.py"), out, "--rows", "40"],
                           check=True, capture_output=True)
            for name in ("arithmetic", "reversal"):
                with open(os.path.join(out, f"{name}.jsonl")) as source:
                    rows = [json.loads(line) for line in source]
                self.assertEqual(len(rows), 40)
                self.assertEqual(set(rows[0]), {"id", "prompt", "answer"})


class ScorerTest(unittest.TestCase):
    def test_exact_number_takes_the_first_number(self):
        self.assertEqual(score("exact-number", ["12", " 12 apples", "1,200.", "-3", "7 or 12", "none", "12.0"],
                               ["12", "12", "1200", "-3", "12", "12", "12"]),
                         [True, True, True, True, False, False, True])
        self.assertIsNone(first_number("no digits"))

    def test_exact_string_strips(self):
        self.assertEqual(score("exact-string", [" cba ", "cb", "CBA"], ["cba", "cba", "cba"]), [True, False, False])

    def test_multiple_choice_takes_the_first_letter(self):
        self.assertEqual(score("multiple-choice", ["B", "The answer is C.", "A or B", "none"], ["B", "C", "B", "A"]),
                         [True, True, False, False])

    def test_an_unknown_scorer_is_named(self):
        with self.assertRaisesRegex(UnknownScorerError, "benchmark.scorer: must be one of exact-number, exact-string, "
                                                        "multiple-choice .got 'bleu'"):
            score("bleu", ["a"], ["a"])


if __name__ == "__main__":
    unittest.main()
