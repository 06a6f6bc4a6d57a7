import unittest

from summing import summarize


class SummarizeTest(unittest.TestCase):
    def test_exact_float_total(self):
        # 0.1 + 0.2 is 0.30000000000000004 with +; fsum rounds once: 0.3 + 0.6 = 0.9 exactly.
        # Bit for bit on every CPU: fsum is built from IEEE + and - alone (no libm, no SIMD) and
        # returns the correctly rounded sum, which is unique.
        self.assertEqual(summarize([0.1, 0.2, 0.6])["total"], 0.9)

    def test_empty(self):
        self.assertEqual(summarize([]), {"total": 0.0, "count": 0, "mean": None})

    def test_mean(self):
        # Exact: the total 14.0 is exact and the mean is one IEEE division, correctly rounded
        # everywhere, the same one the right-hand side does.
        self.assertEqual(summarize([1, 4, 9])["mean"], 14 / 3)


if __name__ == "__main__":
    unittest.main()
