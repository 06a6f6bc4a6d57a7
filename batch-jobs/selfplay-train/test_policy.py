import os
import re
import tempfile
import unittest

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from connect4_env import COLS, OBSERVATION_SIZE, Connect4Env
import policy
from policy import (
    ILLEGAL_LOGIT,
    CheckpointError,
    PolicyConfig,
    PolicyNet,
    evaluate_actions,
    export_onnx,
    load_checkpoint,
    masked_logits,
    save_checkpoint,
)

torch.set_num_threads(1)


class NotAWeight:
    """A pickled object the weights-only loader must refuse (it could run code on load)."""


def run_onnx_with_numpy(model: onnx.ModelProto, obs: np.ndarray) -> np.ndarray:
    """A tiny evaluator for the ops an MLP exports to; any other op fails the test."""
    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    values[model.graph.input[0].name] = obs
    for node in model.graph.node:  # ONNX stores nodes in topological order
        inputs = [values[name] for name in node.input if name]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Gemm":
            a, b = inputs[0], inputs[1]
            a = a.T if attrs.get("transA", 0) else a
            b = b.T if attrs.get("transB", 0) else b
            out = attrs.get("alpha", 1.0) * (a @ b)
            if len(inputs) > 2:
                out = out + attrs.get("beta", 1.0) * inputs[2]
        elif node.op_type == "MatMul":
            out = inputs[0] @ inputs[1]
        elif node.op_type == "Add":
            out = inputs[0] + inputs[1]
        elif node.op_type == "Relu":
            out = np.maximum(inputs[0], 0)
        elif node.op_type == "Identity":
            out = inputs[0]
        else:
            raise AssertionError(f"unexpected op {node.op_type} in the exported policy")
        values[node.output[0]] = out
    return values[model.graph.output[0].name]


def dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


class PolicyConfigTest(unittest.TestCase):
    def test_defaults_are_the_reference_mlp(self):
        config = PolicyConfig()
        self.assertEqual((config.observation_size, config.hidden_sizes, config.num_actions),
                         (126, (256, 256), 7))

    def test_a_json_list_becomes_a_tuple_and_round_trips(self):
        config = PolicyConfig.from_dict({"hidden_sizes": [64, 32]})
        self.assertEqual(config.hidden_sizes, (64, 32))
        self.assertEqual(PolicyConfig.from_dict(config.to_dict()), config)

    def test_bad_fields_are_named_with_their_values(self):
        cases = [({"hidden_sizes": ()}, "hidden_sizes"), ({"hidden_sizes": [64, 0]}, "hidden_sizes[1]"),
                 ({"hidden_sizes": "256"}, "hidden_sizes"), ({"num_actions": True}, "num_actions"),
                 ({"observation_size": -1}, "observation_size")]
        for fields, name in cases:
            with self.subTest(fields=fields):
                with self.assertRaisesRegex(ValueError, f"^{re.escape(name)}: must"):
                    PolicyConfig.from_dict(fields)
        with self.assertRaisesRegex(ValueError, "unknown field.*hidden"):
            PolicyConfig.from_dict({"hidden": [8]})


class PolicyNetTest(unittest.TestCase):
    def test_shapes_and_parameter_count(self):
        net = PolicyNet()
        logits, value = net(torch.zeros(5, OBSERVATION_SIZE))
        self.assertEqual(tuple(logits.shape), (5, COLS))
        self.assertEqual(tuple(value.shape), (5,))
        expected = (126 * 256 + 256) + (256 * 256 + 256) + (256 * 7 + 7) + (256 + 1)
        self.assertEqual(sum(p.numel() for p in net.parameters()), expected)
        # Exact: one code path (features(), then linear() on the move head, same shapes, same
        # process) computes both sides.
        torch.testing.assert_close(net.logits(torch.ones(2, 126)), net(torch.ones(2, 126))[0], rtol=0, atol=0)


class FastLinearTest(unittest.TestCase):
    """PolicyNet's layers go through linear(), oneDNN on the CPU where it works: it must give
    F.linear's numbers, forward and backward, and leave CUDA and ONNX export to F.linear."""

    @staticmethod
    def reference(net, obs):
        h = obs
        for layer in net.trunk:
            h = torch.nn.functional.linear(h, layer.weight, layer.bias) if isinstance(layer, torch.nn.Linear) \
                else layer(h)
        return (torch.nn.functional.linear(h, net.policy_head.weight, net.policy_head.bias),
                torch.nn.functional.linear(h, net.value_head.weight, net.value_head.bias).squeeze(-1))

    def test_the_oneDNN_path_is_available_here(self):
        # The local trainer's torch links the reference BLAS; without this path it is ~15x slower.
        self.assertTrue(policy.MKLDNN_LINEAR)

    def test_forward_and_gradients_match_f_linear(self):
        torch.manual_seed(6)
        net = PolicyNet()
        obs = (torch.rand(300, 126) < 0.3).float()

        def run(forward):
            net.zero_grad()
            logits, value = forward(obs)
            (logits.pow(2).sum() + (value * torch.arange(300.0)).sum()).backward()
            return [logits.detach(), value.detach()] + [p.grad.clone() for p in net.parameters()]

        # oneDNN against F.linear (the reference BLAS here): both float32, summing up to 300
        # products in different orders, so results differ by ~n ulps of the largest partial sum.
        # The gradients reach 4.5e4 (value * arange(300)); measured, the worst element used 2 % of
        # this tolerance on every kernel path. A wrong layer or a transposed weight is off by 10 %.
        for got, want in zip(run(net), run(lambda x: self.reference(net, x))):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    def test_empty_batch_and_no_grad(self):
        net = PolicyNet()
        logits, value = net(torch.zeros(0, 126))
        self.assertEqual((tuple(logits.shape), tuple(value.shape)), ((0, 7), (0,)))
        with torch.no_grad():
            logits, value = net(torch.ones(3, 126))
        # oneDNN against F.linear, float32 logits of magnitude < 1 from 126- and 256-term sums:
        # a few ulps apart (measured 6e-8); 1e-5 is >100x that.
        torch.testing.assert_close(logits, self.reference(net, torch.ones(3, 126))[0], rtol=1e-5, atol=1e-5)

    def test_without_the_oneDNN_path_the_numbers_are_the_same(self):
        torch.manual_seed(7)
        net = PolicyNet()
        obs = torch.rand(17, 126)
        fast = net(obs)[0].detach()
        saved, policy.MKLDNN_LINEAR = policy.MKLDNN_LINEAR, False
        try:
            plain = net(obs)[0].detach()
        finally:
            policy.MKLDNN_LINEAR = saved
        # As above: two float32 sums in different orders, logits < 1, measured 5e-8 apart.
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)


class MaskingTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(1)
        # Illegal moves get the largest raw logits, so any leak would show.
        self.mask = torch.rand(64, COLS) < 0.6
        self.mask[torch.arange(64), torch.randint(0, COLS, (64,))] = True  # at least one legal each
        self.logits = torch.randn(64, COLS) + 50.0 * (~self.mask).float()

    def test_illegal_moves_get_exactly_zero_probability(self):
        probs = torch.softmax(masked_logits(self.logits, self.mask), dim=-1)
        # Exact on every path: exp(-1e9 - max) is far below the smallest float32, so every exp
        # kernel returns 0.
        self.assertTrue(torch.all(probs[~self.mask] == 0))
        # float32: at most 7 probabilities, each within a few ulps (~1e-7), sum to 1 within ~1e-6.
        torch.testing.assert_close(probs.sum(-1), torch.ones(64), rtol=0, atol=1e-5)

    def test_argmax_and_samples_are_always_legal(self):
        masked = masked_logits(self.logits, self.mask)
        # Discrete, but with no near-tie to flip: a legal logit (~N(0, 1)) beats -1e9 by 1e9.
        greedy = masked.argmax(-1)
        self.assertTrue(torch.all(self.mask[torch.arange(64), greedy]))
        samples = torch.distributions.Categorical(logits=masked).sample((200,))  # [200, 64]
        self.assertTrue(torch.all(self.mask.expand(200, -1, -1).gather(2, samples.unsqueeze(-1))))

    def test_no_nan_even_for_a_row_with_no_legal_move(self):
        mask = self.mask.clone()
        mask[0] = False  # a finished game
        dist = torch.distributions.Categorical(logits=masked_logits(self.logits, mask))
        self.assertFalse(torch.isnan(dist.probs).any())
        self.assertFalse(torch.isnan(dist.entropy()).any())
        # float32 1/7 from a softmax of equal logits: within an ulp or two (~3e-8).
        torch.testing.assert_close(dist.probs[0], torch.full((COLS,), 1 / COLS), rtol=1e-6, atol=1e-7)

    def test_entropy_and_log_prob_of_the_masked_policy(self):
        # Two legal moves with equal logits: entropy ln 2, each log-prob ln 0.5.
        net = PolicyNet(PolicyConfig(hidden_sizes=(8,)))
        with torch.no_grad():
            net.policy_head.weight.zero_()
            net.policy_head.bias.copy_(torch.tensor([0.0, 0.0, 9.0, 9.0, 9.0, 9.0, 9.0]))
        mask = torch.tensor([[True, True, False, False, False, False, False]])
        logp, entropy, value = evaluate_actions(net, torch.zeros(1, 126), mask, torch.tensor([1]))
        # float32 against float64 ln 2: an ulp of 0.69 is 6e-8 and the log-softmax adds a few
        # (measured 1.9e-9 off); places=6 (5e-7) leaves a margin of several ulps.
        self.assertAlmostEqual(float(entropy), np.log(2), places=6)
        self.assertAlmostEqual(float(logp), np.log(0.5), places=6)
        self.assertEqual(tuple(value.shape), (1,))

    def test_evaluate_actions_agrees_with_a_categorical_distribution(self):
        torch.manual_seed(8)
        net = PolicyNet(PolicyConfig(hidden_sizes=(16,)))
        obs = torch.rand(64, 126)
        actions = torch.tensor([int(torch.multinomial(row.float(), 1)) for row in self.mask])
        logp, entropy, value = evaluate_actions(net, obs, self.mask, actions)
        logits, expected_value = net(obs)
        dist = torch.distributions.Categorical(logits=masked_logits(logits, self.mask))
        # Two computations in float32: log_softmax against Categorical's logits - logsumexp, and
        # two entropy sums. Values below ~2.3, a few ulps apart (measured 3.6e-7): 1e-5 is ~30x.
        torch.testing.assert_close(logp, dist.log_prob(actions), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(entropy, dist.entropy(), rtol=1e-5, atol=1e-5)
        # Exact: the same net(obs) call, same shapes, same process.
        torch.testing.assert_close(value, expected_value, rtol=0, atol=0)

    def test_a_full_column_from_the_real_environment_is_never_chosen(self):
        env = Connect4Env.from_moves([[3, 3, 3, 3, 3, 3]])  # column 3 is full
        net = PolicyNet(PolicyConfig(hidden_sizes=(8,)))
        with torch.no_grad():
            net.policy_head.bias[3] = 1e6
        logits, _ = net(torch.from_numpy(env.observation()))
        # The argmaxes are decided by 1e6 and by 1e9, not by rounding; exp underflows to exactly 0.
        self.assertEqual(int(logits.argmax(-1)), 3)
        self.assertNotEqual(int(masked_logits(logits, env.legal_mask()).argmax(-1)), 3)
        self.assertEqual(float(torch.softmax(masked_logits(logits, env.legal_mask()), -1)[0, 3]), 0.0)

    def test_illegal_logit_is_finite(self):
        self.assertTrue(np.isfinite(ILLEGAL_LOGIT))

    def test_mask_shape_must_match(self):
        with self.assertRaisesRegex(ValueError, "legal_mask"):
            masked_logits(torch.zeros(2, 7), torch.ones(2, 6, dtype=torch.bool))


class OnnxExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(2)
        cls.net = PolicyNet()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "policy.onnx")
        export_onnx(cls.net, cls.path)
        cls.model = onnx.load(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_graph_is_valid_opset_13_with_the_contracted_names_and_shapes(self):
        onnx.checker.check_model(self.model)
        self.assertEqual([o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")], [13])
        self.assertEqual([i.name for i in self.model.graph.input], ["obs"])
        self.assertEqual([o.name for o in self.model.graph.output], ["logits"])
        obs, logits = self.model.graph.input[0], self.model.graph.output[0]
        self.assertEqual(obs.type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual(logits.type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual(dims(obs), ["batch", 126])
        self.assertEqual(dims(logits), ["batch", 7])
        self.assertFalse(os.path.exists(self.path + ".tmp"))

    def test_only_the_logits_head_is_exported(self):
        shapes = sorted(tuple(init.dims) for init in self.model.graph.initializer)
        # trunk 126->256->256 and the move head 256->7; no value head (256->1).
        self.assertEqual(len(shapes), 6)
        self.assertNotIn((1, 256), shapes)
        self.assertNotIn((256, 1), shapes)
        self.assertNotIn((1,), shapes)

    def test_numpy_evaluation_of_the_graph_matches_torch(self):
        rng = np.random.default_rng(3)
        for batch in (1, 5, 64):
            obs = rng.integers(0, 2, size=(batch, OBSERVATION_SIZE)).astype(np.float32)
            expected = self.net.logits(torch.from_numpy(obs)).detach().numpy()
            got = run_onnx_with_numpy(self.model, obs)
            self.assertEqual(got.shape, (batch, 7))
            # numpy's float32 matmul (its BLAS, its own summation order) against torch's oneDNN:
            # logits < 1 from 126- and 256-term sums, a few ulps apart (measured 8e-8); 1e-5 is
            # >100x that, while a wrong or missing layer in the graph is off by 1e-2 or more.
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)

    def test_export_leaves_a_training_net_as_it_was(self):
        net = PolicyNet(PolicyConfig(hidden_sizes=(16,)))
        net.train()
        before = {k: v.clone() for k, v in net.state_dict().items()}
        export_onnx(net, os.path.join(self.tmp.name, "small.onnx"))
        self.assertTrue(net.training)
        for key, value in net.state_dict().items():
            self.assertTrue(torch.equal(value, before[key]), key)


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.path = os.path.join(self.tmp.name, "checkpoint.pt")

    @staticmethod
    def train_step(net, optimizer, seed):
        generator = torch.Generator().manual_seed(seed)
        obs = torch.rand(8, 126, generator=generator)
        logits, value = net(obs)
        loss = logits.pow(2).mean() + value.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def test_round_trip_rebuilds_the_architecture_from_the_file_alone(self):
        torch.manual_seed(4)
        config = PolicyConfig(hidden_sizes=(32, 16))
        net = PolicyNet(config)
        save_checkpoint(self.path, net, progress={"iteration": 7, "score": [0.25, 0.5]})
        self.assertFalse(os.path.exists(self.path + ".tmp"))
        loaded = load_checkpoint(self.path)
        self.assertEqual(loaded.net.config, config)
        self.assertEqual(loaded.progress, {"iteration": 7, "score": [0.25, 0.5]})
        self.assertIsNone(loaded.optimizer_state)
        obs = torch.rand(3, 126)
        # Exact: bit-identical weights through the same code in the same process.
        for a, b in zip(net(obs), loaded.net(obs)):
            self.assertTrue(torch.equal(a, b))

    def test_resumed_training_continues_exactly(self):
        torch.manual_seed(5)
        net = PolicyNet(PolicyConfig(hidden_sizes=(32,)))
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.8, 0.95))
        for seed in range(3):
            self.train_step(net, optimizer, seed)
        save_checkpoint(self.path, net, optimizer, {"iteration": 3})

        loaded = load_checkpoint(self.path)
        resumed = loaded.net
        resumed_optimizer = torch.optim.Adam(resumed.parameters(), lr=0.5)
        resumed_optimizer.load_state_dict(loaded.optimizer_state)
        self.assertEqual(resumed_optimizer.param_groups[0]["lr"], 1e-3)  # a float survived
        self.train_step(net, optimizer, 99)
        self.train_step(resumed, resumed_optimizer, 99)
        # Exact: a resume must continue bit for bit; both steps run the same code on the same
        # bits in the same process.
        for (name, a), b in zip(net.state_dict().items(), resumed.state_dict().values()):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)

    def test_pickled_code_is_refused(self):
        torch.save({"format": 1, "payload": NotAWeight()}, self.path)
        with self.assertRaisesRegex(CheckpointError, "cannot be read safely"):
            load_checkpoint(self.path)

    def test_a_plain_state_dict_is_refused_with_a_clear_error(self):
        torch.save(PolicyNet().state_dict(), self.path)
        with self.assertRaisesRegex(CheckpointError, "format must be 1"):
            load_checkpoint(self.path)

    def test_truncated_file_is_refused(self):
        save_checkpoint(self.path, PolicyNet(PolicyConfig(hidden_sizes=(8,))))
        with open(self.path, "rb") as f:
            data = f.read()
        with open(self.path, "wb") as f:
            f.write(data[: len(data) // 2])
        with self.assertRaises(CheckpointError):
            load_checkpoint(self.path)

    def test_weights_that_do_not_fit_the_config_are_refused(self):
        save_checkpoint(self.path, PolicyNet(PolicyConfig(hidden_sizes=(8,))))
        payload = torch.load(self.path, weights_only=True)
        payload["policy_config_json"] = '{"hidden_sizes": [9]}'
        torch.save(payload, self.path)
        with self.assertRaisesRegex(CheckpointError, "wrong layout"):
            load_checkpoint(self.path)


if __name__ == "__main__":
    unittest.main()
