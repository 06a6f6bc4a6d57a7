import copy
import json
import unittest

import numpy as np
import torch

import make_vectors
from policy import (
    LAYER_SHAPES,
    MAX_POLICY_BYTES,
    OBS_OFFSET,
    OBS_SCALE,
    POLICY_FORMAT,
    ActorCritic,
    PolicyFormatError,
    greedy_actions,
    load_actor,
    normalize_observations,
    parse_policy,
    policy_document,
)

torch.set_num_threads(1)

with open(make_vectors.VECTORS_PATH, encoding="utf-8") as f:
    VECTORS = json.load(f)
with open(make_vectors.POLICY_PATH, encoding="utf-8") as f:
    VELOCITY_POLICY_TEXT = f.read()
# How far another machine's (or language's) float64 logits may be from the fixture's, and how far
# from a tie the fixture keeps every greedy choice: the fixture states both (make_vectors.py).
LOGIT_TOLERANCE = VECTORS["tolerances"]["logit"]
DECISION_MARGIN = VECTORS["tolerances"]["decisionMargin"]


def logits64(layers, obs: np.ndarray) -> np.ndarray:
    """The documented forward pass in float64 (what greedy_actions takes the argmax of)."""
    h = normalize_observations(obs)
    for index, (weight, bias) in enumerate(layers):
        h = h @ weight.T + bias
        h = np.tanh(h) if index < len(layers) - 1 else h
    return h


def top_two_gap(logits: np.ndarray) -> np.ndarray:
    """Per row, how far the greatest logit leads the second."""
    top = np.sort(logits, axis=1)[:, -2:]
    return top[:, 1] - top[:, 0]


def trained_like_net(seed: int) -> ActorCritic:
    """A net whose weights are not the tiny initial ones, so every layer matters."""
    torch.manual_seed(seed)
    net = ActorCritic()
    with torch.no_grad():
        for layer in net.actor:
            layer.weight.normal_(0, 0.8)
            layer.bias.normal_(0, 0.3)
    return net


class NormalisationTest(unittest.TestCase):
    def test_the_observation_ranges_map_onto_minus_one_to_one(self):
        x = normalize_observations(np.array([[-1.2, -0.07], [0.6, 0.07], [-0.3, 0.0]]))
        # Against the exact values: (obs - offset) * scale is one IEEE subtraction and one
        # multiplication, the same on every CPU, but 1/0.9, 0.9 and 0.07 are rounded decimals, so
        # the result is within an ulp or two of +-1 (2.2e-16 each): atol 1e-15.
        np.testing.assert_allclose(x, [[-1, -1], [1, 1], [0, 0]], atol=1e-15)
        self.assertEqual(list(OBS_SCALE), [1 / 0.9, 1 / 0.07])
        self.assertEqual(list(OBS_OFFSET), [-0.3, 0.0])


class PolicyDocumentTest(unittest.TestCase):
    def test_round_trip_through_json_is_exact(self):
        net = trained_like_net(0)
        text = json.dumps(policy_document(net), separators=(",", ":"))
        self.assertLess(len(text), 70_000)
        copy_net = ActorCritic()
        load_actor(copy_net, text)
        for a, b in zip(net.actor, copy_net.actor):
            self.assertTrue(torch.equal(a.weight, b.weight))
            self.assertTrue(torch.equal(a.bias, b.bias))
        # The document again, from the copy: identical text.
        self.assertEqual(json.dumps(policy_document(copy_net), separators=(",", ":")), text)

    def test_greedy_actions_in_float64_agree_with_the_float32_net(self):
        net = trained_like_net(1)
        document = policy_document(net)
        rng = np.random.default_rng(2)
        obs = np.stack([rng.uniform(-1.2, 0.6, 4000), rng.uniform(-0.07, 0.07, 4000)], axis=1)
        with torch.no_grad():
            logits = net.logits(torch.from_numpy(normalize_observations(obs).astype(np.float32))).numpy()
        layers = parse_policy(document)
        ours = greedy_actions(layers, obs)
        # The float32 net against the same weights in float64: the input rounds to float32 and
        # each layer sums 64 float32 products; logits up to ~14 come out within ~1e-5 (measured
        # 6e-6 on every kernel path). atol 5e-5 states it; a wrong layer is off by 0.1 or more.
        np.testing.assert_allclose(logits, logits64(layers, obs), rtol=0, atol=5e-5)
        # So an argmax can only differ where the float32 top two are within 2 x 5e-5: compare
        # the actions where the lead is clear (nearly everywhere: measured all 4,000).
        clear = top_two_gap(logits) > 1e-4
        self.assertGreater(clear.mean(), 0.99)
        np.testing.assert_array_equal(ours[clear], logits.argmax(axis=1)[clear])
        self.assertGreater(len(set(ours.tolist())), 1)

    def test_the_layout_is_the_documented_one(self):
        document = policy_document(ActorCritic())
        self.assertEqual(sorted(document), ["activation", "format", "layers", "obs_offset", "obs_scale"])
        self.assertEqual(document["format"], POLICY_FORMAT)
        self.assertEqual([(len(l["weight"]), len(l["weight"][0]), len(l["bias"])) for l in document["layers"]],
                         [(64, 2, 64), (64, 64, 64), (3, 64, 3)])
        self.assertEqual(LAYER_SHAPES, ((64, 2), (64, 64), (3, 64)))

    def test_the_velocity_fixture_matches_its_vectors(self):
        case = VECTORS["policy"]
        layers = parse_policy(VELOCITY_POLICY_TEXT)
        obs = np.array(case["observations"])
        # The fixture's float64 logits were made on another machine (another BLAS, another tanh
        # kernel): three layers of 64-term sums of magnitude < 5 agree to ~1e-15 (measured
        # 6e-17), so within the fixture's stated 1e-12; a real bug moves them by 1e-6 or more.
        np.testing.assert_allclose(logits64(layers, obs), case["logits"], rtol=0, atol=LOGIT_TOLERANCE)
        # The greedy actions are a discrete outcome of those logits: they cannot differ from the
        # fixture's while every recorded choice leads its runner-up by far more than the logits
        # may move (the fixture keeps >= decisionMargin; these lead by >= 0.12).
        self.assertGreater(top_two_gap(np.array(case["logits"])).min(), max(DECISION_MARGIN, 2 * LOGIT_TOLERANCE))
        np.testing.assert_array_equal(greedy_actions(layers, obs), case["actions"])


class ParsePolicyTest(unittest.TestCase):
    def setUp(self):
        self.good = json.loads(VELOCITY_POLICY_TEXT)

    def refuses(self, document, field):
        with self.assertRaises(PolicyFormatError) as caught:
            parse_policy(document)
        self.assertIn(field, str(caught.exception))

    def mutated(self, change):
        document = copy.deepcopy(self.good)
        change(document)
        return document

    def test_the_fixture_parses(self):
        layers = parse_policy(self.good)
        self.assertEqual([w.shape for w, _ in layers], [(64, 2), (64, 64), (3, 64)])

    def test_every_deviation_is_refused_naming_the_field(self):
        cases = [
            (lambda d: d.update(format="mountaincar-mlp-v2"), "format"),
            (lambda d: d.update(activation="relu"), "activation"),
            (lambda d: d.update(extra=1), "unknown field"),
            (lambda d: d.pop("layers"), "layers: missing"),
            (lambda d: d.update(obs_scale=[1.0, 1.0]), "obs_scale"),
            (lambda d: d.update(obs_offset=[-0.3]), "obs_offset"),
            (lambda d: d["layers"].pop(), "layers"),
            (lambda d: d["layers"][1]["weight"].pop(), "layers[1].weight"),
            (lambda d: d["layers"][1]["weight"][5].append(0.0), "layers[1].weight[5]"),
            (lambda d: d["layers"][2]["bias"].pop(), "layers[2].bias"),
            (lambda d: d["layers"][0].update(scale=2), "layers[0]"),
            (lambda d: d["layers"][0]["weight"][3].__setitem__(1, float("nan")), "layers[0].weight[3][1]"),
            (lambda d: d["layers"][0]["weight"][3].__setitem__(1, float("inf")), "layers[0].weight[3][1]"),
            (lambda d: d["layers"][0]["weight"][3].__setitem__(1, 2e6), "layers[0].weight[3][1]"),
            (lambda d: d["layers"][2]["bias"].__setitem__(0, "1.0"), "layers[2].bias[0]"),
            (lambda d: d["layers"][2]["bias"].__setitem__(0, True), "layers[2].bias[0]"),
        ]
        for change, field in cases:
            with self.subTest(field=field):
                self.refuses(self.mutated(change), field)

    def test_text_that_is_too_long_or_not_json_is_refused(self):
        self.refuses(" " * (MAX_POLICY_BYTES + 1), "bytes")
        self.refuses("{not json", "not valid JSON")
        self.refuses("[1, 2]", "JSON object")


if __name__ == "__main__":
    unittest.main()
