import json
import os
import random
import tempfile
import unittest

import numpy as np

from model import (HELD_OUT_SALT, Label, LabelError, TrainConfig, check_trainable, evaluate, export_onnx,
                   build_model, featurize, fit_lasso, isotonic_knots, parse_labels, predict, split_labels,
                   train_and_evaluate)

EDUCATIONAL = ["photosynthesis", "theorem", "equation", "history", "molecule", "lesson", "algebra",
               "experiment", "chapter", "evidence"]


def synthetic_labels(n: int, seed: int) -> list[Label]:
    """The rule: a 40-word document of filler words holds `score` distinct educational words."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(200)]
    labels = []
    for i in range(n):
        score = rng.randint(0, 5)
        words = [rng.choice(filler) for _ in range(40 - score)]
        for word in rng.sample(EDUCATIONAL, score):
            words.insert(rng.randrange(len(words) + 1), word)
        labels.append(Label(f"doc-{i}", " ".join(words), score))
    return labels


def distinct_count_labels(n: int, seed: int) -> list[Label]:
    """A rule a mean of word frequencies cannot follow: documents of 30 to 300 filler words hold k
    distinct educational words (0-10, each repeated 1-3 times), and the score rises with k by the
    cut points 1, 2, 4, 6, 9 (so 3 distinct words score 2, 4 score 3), whatever the length."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(300)]
    labels = []
    for i in range(n):
        k = rng.randint(0, len(EDUCATIONAL))
        words = [rng.choice(filler) for _ in range(rng.randint(30, 300))]
        for word in rng.sample(EDUCATIONAL, k):
            for _ in range(rng.randint(1, 3)):
                words.insert(rng.randrange(len(words) + 1), word)
        labels.append(Label(f"doc-{i}", " ".join(words), sum(k >= cut for cut in (1, 2, 4, 6, 9))))
    return labels


SMALL = TrainConfig(buckets=1 << 14, dim=16, hidden=32, epochs=30, seed=0, model="mlp")
# The linear lasso: its head is one weight, which the parameter checks below read.
LASSO = TrainConfig(buckets=1 << 14, seed=0, calibration="none")
PLANTED = ["photosynthesis", "theorem", "molecule", "algebra", "evidence"]


def planted_labels(n: int, seed: int) -> list[Label]:
    """A sparse rule: 30-60 words drawn from 500 filler words and the 5 planted ones, each
    planted word present with probability 1/2; the score is how many of them are present."""
    rng = random.Random(seed)
    filler = [f"f{i}" for i in range(500)]
    labels = []
    for i in range(n):
        present = [word for word in PLANTED if rng.random() < 0.5]
        words = [rng.choice(filler) for _ in range(rng.randint(30, 60))]
        for word in present:
            words.insert(rng.randrange(len(words) + 1), word)
        labels.append(Label(f"doc-{i}", " ".join(words), len(present)))
    return labels


class LearnsTheRuleTest(unittest.TestCase):
    def test_learns_a_synthetic_rule_and_exports_a_valid_model(self):
        import onnx

        labels = synthetic_labels(400, seed=0)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            run = train_and_evaluate(labels, SMALL, path)
            model = onnx.load(path)
            onnx.checker.check_model(model)
        held = run.metrics["heldOut"]
        # Measured on this set: keep/drop agreement 0.95, MAE 0.16 against the mean's 1.50
        # (label seed 1: 0.95 / 0.19; the v1 features, frequency-weighted uni+bigrams, gave
        # 0.85 / 0.75). The bars leave room for other CPUs' float kernels.
        self.assertGreaterEqual(held["binary"]["agreement"], 0.9, held)
        self.assertLess(held["mae"], 0.25 * held["baselineMae"], held)
        self.assertEqual(run.metrics["nTrain"] + run.metrics["nVal"], 400)
        self.assertEqual([i.name for i in model.graph.input], ["indices", "weights"])
        self.assertEqual([o.name for o in model.graph.output], ["score"])
        self.assertLessEqual(model.opset_import[0].version, 17)
        ops = {node.op_type for node in model.graph.node}
        self.assertIn("Gather", ops)
        self.assertTrue(json.dumps(run.metrics))  # serialisable as written

    def test_learns_a_distinct_word_count_rule_whatever_the_length(self):
        labels = distinct_count_labels(400, seed=0)
        with tempfile.TemporaryDirectory() as tmp:
            run = train_and_evaluate(labels, SMALL, os.path.join(tmp, "model.onnx"))
        held = run.metrics["heldOut"]
        # Measured: agreement at 3 0.95, MAE 0.41 against the mean's 1.19 (label seed 1: 0.88 /
        # 0.42). Presence weights make the bag a count of the distinct words present; a mean of
        # frequencies would shrink the same words' evidence in a long document.
        self.assertGreaterEqual(held["binary"]["agreement"], 0.85, held)
        self.assertLess(held["mae"], 0.5 * held["baselineMae"], held)

    def test_export_of_an_untrained_model_keeps_the_dynamic_axes(self):
        import onnx

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            export_onnx(build_model(TrainConfig(buckets=64, dim=4, hidden=0), 2.0), path)
            model = onnx.load(path)
        dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
        self.assertEqual(dims, [["batch", "pairs"], ["batch", "pairs"]])
        self.assertEqual(model.graph.input[0].type.tensor_type.elem_type, onnx.TensorProto.INT64)
        self.assertEqual(model.graph.input[1].type.tensor_type.elem_type, onnx.TensorProto.FLOAT)


class LassoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.labels = planted_labels(400, seed=0)
        cls.train, cls.held = split_labels(cls.labels, 0.2, HELD_OUT_SALT)
        cls.fit = fit_lasso(cls.train, LASSO)

    def test_recovers_a_planted_sparse_rule(self):
        held_scores = np.array([label.score for label in self.held])
        predicted = predict(self.fit.model, featurize([label.text for label in self.held], LASSO.features))
        # Agreement at 2.5, the cut between rounded scores 2 and 3: the fit is near exact (measured:
        # 5 non-zero weights, MAE 1e-7, agreement 1.0 for label seeds 0-2), so a document labelled 3
        # scores 3 give or take a float32 rounding, and at threshold 3 its side would be a coin toss.
        agreement = float(np.mean((predicted >= 2.5) == (held_scores >= 2.5)))
        self.assertGreaterEqual(agreement, 0.95, (agreement, self.fit.l1, self.fit.relax))
        self.assertLess(float(np.mean(np.abs(predicted - held_scores))), 0.2)
        # The planted words carry weights near 1, and few filler words survive the L1 penalty.
        table = self.fit.model.table.weight.detach().numpy()[:, 0]
        planted = [int(featurize([word], LASSO.features)[0][0][0]) for word in PLANTED]
        self.assertTrue(np.all(np.abs(table[planted] - 1.0) < 0.2), table[planted])
        self.assertLess(self.fit.non_zero, 100, self.fit.non_zero)
        self.assertEqual(len(self.fit.cross_validation), len(LASSO.l1_grid) * len(LASSO.relax_grid))
        self.assertIn(self.fit.l1, LASSO.l1_grid)
        self.assertIn(self.fit.relax, LASSO.relax_grid)

    def test_is_deterministic(self):
        again = fit_lasso(list(self.train), LASSO)
        self.assertTrue(np.array_equal(again.model.table.weight.detach().numpy(),
                                       self.fit.model.table.weight.detach().numpy()))
        self.assertEqual(float(again.model.head[0].bias), float(self.fit.model.head[0].bias))
        self.assertEqual(again.cross_validation, self.fit.cross_validation)

    def test_exports_the_fitted_weights_in_the_same_onnx_contract(self):
        import onnx
        from onnx import numpy_helper

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            export_onnx(self.fit.model, path)
            graph = onnx.load(path).graph
            size = os.path.getsize(path)
        self.assertEqual([i.name for i in graph.input], ["indices", "weights"])
        self.assertEqual([o.name for o in graph.output], ["score"])
        self.assertLess(size, 2 * 4 * LASSO.buckets)  # a [buckets, 1] float32 table, not [buckets, 16]
        # onnxruntime is not in the Python image (test/unit/refinery-classifier.test.ts runs the file
        # with onnxruntime-node); here: the exported parameters, applied as the graph does (gather,
        # weighted sum, 1x1 head, clip), give torch's predictions.
        init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        table = next(v for v in init.values() if v.shape == (LASSO.buckets, 1))
        head_w = [v for v in init.values() if v.size == 1 and v.ndim == 2]
        head_b = [v for v in init.values() if v.shape == (1,)]
        self.assertEqual((len(head_w), len(head_b)), (1, 1), {k: v.shape for k, v in init.items()})
        features = featurize([label.text for label in self.held], LASSO.features)
        torch_scores = predict(self.fit.model, features)
        onnx_scores = np.array([np.clip(float(table[ix, 0].astype(np.float32) @ w) * float(head_w[0].item())
                                        + float(head_b[0][0]), 0, 5) for ix, w in features], dtype=np.float32)
        self.assertLess(float(np.max(np.abs(onnx_scores - torch_scores))), 1e-5)

    def test_train_and_evaluate_reports_the_choice(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = train_and_evaluate(self.labels, LASSO, os.path.join(tmp, "model.onnx"))
        metrics = run.metrics
        self.assertEqual(metrics["model"]["kind"], "lasso")
        self.assertEqual((metrics["model"]["dim"], metrics["model"]["hidden"]), (1, 0))
        self.assertEqual(metrics["model"]["lambda"], self.fit.l1)
        self.assertEqual(metrics["model"]["nonZeroWeights"], self.fit.non_zero)
        self.assertEqual(len(metrics["training"]["crossValidation"]["grid"]), 15)
        self.assertEqual(len(metrics["heldOutPredictions"]), len(self.held))
        self.assertLess(metrics["heldOut"]["mae"], 0.2 * metrics["heldOut"]["baselineMae"])
        self.assertEqual(metrics["config"]["l1Grid"], list(LASSO.l1_grid))
        self.assertTrue(json.dumps(metrics))


class IsotonicTest(unittest.TestCase):
    """The default lasso maps its linear score onto the label scale by isotonic regression."""

    def test_knots_rise_and_stay_apart(self):
        rng = np.random.default_rng(0)
        scores = rng.normal(2.0, 1.5, 500)
        labels = np.clip(np.round(scores + rng.normal(0, 0.7, 500)), 0, 5)
        x, y = isotonic_knots(scores, labels)
        self.assertTrue(np.all(np.diff(x) >= 0.01), np.diff(x).min())
        self.assertTrue(np.all(np.diff(y) >= 0), y)
        self.assertTrue(np.all((y >= 0) & (y <= 5)))

        self.assertGreater(len(x), 5)

    def test_calibration_moves_the_cut_of_a_saturating_rule(self):
        # distinct_count_labels: the score rises by cut points, not linearly, with the words
        # present; a linear score's threshold at 3 cuts in the wrong place, the mapped one does not.
        labels = distinct_count_labels(500, seed=3)
        train, held = split_labels(labels, 0.2, HELD_OUT_SALT)
        held_scores = np.array([label.score for label in held])
        features = featurize([label.text for label in held], LASSO.features)
        linear = fit_lasso(train, LASSO)
        mapped = fit_lasso(train, TrainConfig(buckets=1 << 14, seed=0))
        self.assertEqual(mapped.model.hidden, 2 * (len(mapped.knots[0]) - 1))
        agree = {name: float(np.mean((predict(fit.model, features) >= 3) == (held_scores >= 3)))
                 for name, fit in (("linear", linear), ("mapped", mapped))}
        self.assertGreaterEqual(agree["mapped"], 0.85, agree)  # measured: 0.88 against 0.84
        self.assertGreater(agree["mapped"], agree["linear"], agree)
        # The exported head is the piecewise-linear map through the knots (float32: within 1e-4).
        table = mapped.model.table.weight.detach().numpy()[:, 0].astype(np.float64)
        bias = mapped.model.head[0].bias.detach().numpy().astype(np.float64)
        slope = mapped.model.head[0].weight.detach().numpy()[0, 0].astype(np.float64)
        linear_scores = np.array([table[ix] @ w for ix, w in features]) + bias[0] / slope + mapped.knots[0][0]
        expected = np.clip(np.interp(linear_scores, *mapped.knots), 0, 5)
        self.assertLess(float(np.max(np.abs(predict(mapped.model, features) - expected))), 1e-4)
        with tempfile.TemporaryDirectory() as tmp:
            run = train_and_evaluate(labels, TrainConfig(buckets=1 << 14, seed=0), os.path.join(tmp, "model.onnx"))
        knots = run.metrics["model"]["calibrationKnots"]
        self.assertEqual(len(knots), len(mapped.knots[0]))
        self.assertEqual(run.metrics["model"]["calibration"], "isotonic")


class SplitTest(unittest.TestCase):
    def test_split_depends_on_the_id_only(self):
        labels = synthetic_labels(300, seed=1)
        kept, held = split_labels(labels, 0.2, "held-out:")
        kept2, held2 = split_labels(list(reversed(labels[:150])), 0.2, "held-out:")
        self.assertEqual({x.id for x in held2}, {x.id for x in held if x in labels[:150]})
        self.assertEqual(len(kept) + len(held), 300)
        self.assertTrue(30 <= len(held) <= 90, len(held))


class EvaluateTest(unittest.TestCase):
    def test_hand_worked_figures(self):
        # Labels 0 1 3 4 5, predictions 0.4 1.6 2.9 4.0 3.2, threshold 3.
        # Rounded 0 2 3 4 3: exact 3/5. |errors| 0.4 0.6 0.1 0 1.8: MAE 2.9/5 = 0.58.
        # Keep: predicted F F F T T, labels F F T T T -> TP 2, FN 1, TN 2, FP 0: agreement 4/5,
        # precision 1, recall 2/3, F1 0.8.
        figures = evaluate(np.array([0.4, 1.6, 2.9, 4.0, 3.2]), np.array([0, 1, 3, 4, 5]), 3.0, baseline_score=2.6)
        self.assertAlmostEqual(figures["accuracy"], 0.6)
        self.assertAlmostEqual(figures["mae"], 0.58)
        binary = figures["binary"]
        self.assertEqual(binary["confusion"], {"truePositive": 2, "falsePositive": 0, "falseNegative": 1,
                                               "trueNegative": 2})
        self.assertAlmostEqual(binary["agreement"], 0.8)
        self.assertAlmostEqual(binary["f1"], 0.8)
        # Bin 3 holds 2.9 and 3.2 (labels 3 and 5): mean predicted 3.05, mean label 4.
        bin3 = next(b for b in figures["calibration"]["bins"] if b["predicted"] == 3)
        self.assertEqual(bin3["count"], 2)
        self.assertAlmostEqual(bin3["meanPredicted"], 3.05)
        self.assertAlmostEqual(bin3["meanLabel"], 4.0)
        # Gaps: bin 0 |0.4-0|, bin 2 |1.6-1|, bin 3 2 x |3.05-4|, bin 4 0 -> (0.4+0.6+1.9)/5 = 0.58.
        self.assertAlmostEqual(figures["calibration"]["meanAbsGap"], 0.58)
        self.assertEqual(figures["scoreConfusion"]["matrix"][5][3], 1)
        # |2.6 - label|: 2.6 1.6 0.4 1.4 2.4 -> 8.4 / 5.
        self.assertAlmostEqual(figures["baselineMae"], 1.68)


class LabelErrorsTest(unittest.TestCase):
    def test_bad_rows_name_the_line_and_the_field(self):
        with self.assertRaisesRegex(LabelError, r"labels line 2: score must be an integer from 0 to 5 \(got 6\)"):
            parse_labels(b'{"id": "a", "text": "x", "score": 1}\n{"id": "b", "text": "y", "score": 6}\n')
        with self.assertRaisesRegex(LabelError, r"line 2: id 'a' already appears on line 1"):
            parse_labels('{"id": "a", "text": "x", "score": 1}\n{"id": "a", "text": "y", "score": 2}')
        with self.assertRaisesRegex(LabelError, r"line 1: score .* \(got 2.5\)"):
            parse_labels('{"id": "a", "text": "x", "score": 2.5}')
        self.assertEqual(len(parse_labels('\n{"id": "a", "text": "x", "score": 0}\n\n')), 1)

    def test_too_few_or_single_class(self):
        labels = synthetic_labels(40, seed=3)
        with self.assertRaisesRegex(LabelError, r"labels: 19 labels; at least 20 are needed"):
            check_trainable(labels[:19], 3.0)
        same = [Label(x.id, x.text, 2) for x in labels]
        with self.assertRaisesRegex(LabelError, r"every label has the same score \(2\)"):
            check_trainable(same, 3.0)
        low = [Label(x.id, x.text, x.score % 3) for x in labels]
        with self.assertRaisesRegex(LabelError, r"every label is below threshold 3.0"):
            check_trainable(low, 3.0)

    def test_config_errors_name_the_field_and_value(self):
        with self.assertRaisesRegex(ValueError, r"heldOutFraction: .* \(got 0\)"):
            TrainConfig.from_json({"heldOutFraction": 0})
        with self.assertRaisesRegex(ValueError, r"threshold: .* \(got 7\)"):
            TrainConfig.from_json({"threshold": 7})
        with self.assertRaisesRegex(ValueError, r"unknown field\(s\) \['bukets'\]"):
            TrainConfig.from_json({"bukets": 8})
        with self.assertRaisesRegex(ValueError, r"buckets x dim"):
            TrainConfig.from_json({"buckets": 1 << 22, "dim": 64})
        with self.assertRaisesRegex(ValueError, r"model: must be one of \['lasso', 'mlp'\] \(got 'svm'\)"):
            TrainConfig.from_json({"model": "svm"})
        with self.assertRaisesRegex(ValueError, r"l1Grid: must be a list of 1 to 50 numbers \(got \[\]\)"):
            TrainConfig.from_json({"l1Grid": []})
        with self.assertRaisesRegex(ValueError, r"l1Grid\[1\]: must be a number in \(0.0, 100.0\] \(got -1\)"):
            TrainConfig.from_json({"l1Grid": [0.01, -1]})
        with self.assertRaisesRegex(ValueError, r"relaxGrid\[0\]: .* \(got 1.5\)"):
            TrainConfig.from_json({"relaxGrid": [1.5]})
        with self.assertRaisesRegex(ValueError, r"relaxGrid: .* \(got 'a'\)"):
            TrainConfig.from_json({"relaxGrid": "a"})
        with self.assertRaisesRegex(ValueError, r"cvFolds: must be an integer from 2 to 20 \(got 1\)"):
            TrainConfig.from_json({"cvFolds": 1})
        with self.assertRaisesRegex(ValueError, r"lassoIterations: .* \(got 2.5\)"):
            TrainConfig.from_json({"lassoIterations": 2.5})
        with self.assertRaisesRegex(ValueError, r"calibration: must be one of \['isotonic', 'none'\] \(got 'platt'\)"):
            TrainConfig.from_json({"calibration": "platt"})
        config = TrainConfig.from_json({"model": "mlp", "l1Grid": [0.001, 0.01], "relaxGrid": [0]})
        self.assertEqual((config.model, config.l1_grid, config.relax_grid), ("mlp", (0.001, 0.01), (0.0,)))
        self.assertEqual(TrainConfig.from_json(config.to_json()), config)


if __name__ == "__main__":
    unittest.main()
