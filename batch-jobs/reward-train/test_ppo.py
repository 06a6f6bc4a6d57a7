import unittest

import numpy as np
import torch

from policy import ActorCritic
from ppo import (
    PPOConfig,
    PPOConfigError,
    RewardScaler,
    RolloutBatch,
    evaluate_actions,
    gae,
    normalize_advantages,
    ppo_loss,
    ppo_update,
)

torch.set_num_threads(1)


def naive_gae(rewards, values, dones, last_value, gamma, lam):
    """The definition, written out: A_t = sum_k (gamma * lam)^k * delta_{t+k}, summed until the
    step that ends t's episode, with every delta computed on its own."""
    steps, envs = rewards.shape
    advantages = np.zeros((steps, envs))
    for n in range(envs):
        for t in range(steps):
            total, weight = 0.0, 1.0
            for k in range(t, steps):
                next_value = values[k + 1, n] if k + 1 < steps else last_value[n]
                bootstrap = 0.0 if dones[k, n] else gamma * next_value
                total += weight * (rewards[k, n] + bootstrap - values[k, n])
                if dones[k, n]:
                    break
                weight *= gamma * lam
            advantages[t, n] = total
    return advantages, advantages + values


class GAETest(unittest.TestCase):
    def test_hand_worked_three_steps_with_a_done_in_the_middle(self):
        # One environment, gamma 0.9, lambda 0.8; the episode ends at step 1, step 2 starts anew.
        #   rewards   1.0   2.0   3.0       values 0.5  1.0  1.5       last_value 2.0
        #   dones     0     1     0
        # t=2: delta = 3 + 0.9 * 2.0 - 1.5         = 3.3;  A2 = 3.3
        # t=1: done, so no bootstrap: delta = 2 - 1 = 1.0;  A1 = 1.0 (A2 is another episode's)
        # t=0: delta = 1 + 0.9 * 1.0 - 0.5         = 1.4;  A0 = 1.4 + 0.9 * 0.8 * 1.0 = 2.12
        # returns = A + V = 2.62, 2.0, 4.8
        advantages, returns = gae(np.array([[1.0], [2.0], [3.0]]), np.array([[0.5], [1.0], [1.5]]),
                                  np.array([[0], [1], [0]]), np.array([2.0]), gamma=0.9, lam=0.8)
        np.testing.assert_allclose(advantages[:, 0], [2.12, 1.0, 3.3], rtol=1e-12)
        np.testing.assert_allclose(returns[:, 0], [2.62, 2.0, 4.8], rtol=1e-12)

    def test_a_time_limit_end_bootstrapped_by_the_caller(self):
        # The trainer adds gamma * V(final state) to the reward of a truncated step and marks it
        # done: with V(final) = 10, gamma 0.5, reward -1 -> -1 + 5 = 4; A = 4 - V(t) = 4 - 1 = 3.
        advantages, returns = gae(np.array([[-1.0 + 0.5 * 10.0]]), np.array([[1.0]]), np.array([[1]]),
                                  np.array([123.0]), gamma=0.5, lam=0.9)
        self.assertEqual(advantages[0, 0], 3.0)
        self.assertEqual(returns[0, 0], 4.0)

    def test_matches_the_naive_definition_on_random_rollouts(self):
        rng = np.random.default_rng(0)
        for gamma, lam in ((0.99, 0.95), (1.0, 1.0), (0.5, 0.0), (0.9, 0.3)):
            with self.subTest(gamma=gamma, lam=lam):
                rewards = rng.normal(size=(17, 6))
                values = rng.normal(size=(17, 6))
                dones = rng.random((17, 6)) < 0.2
                last_value = rng.normal(size=6)
                got = gae(rewards, values, dones, last_value, gamma, lam)
                want = naive_gae(rewards, values, dones, last_value, gamma, lam)
                np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)

    def test_shape_errors_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "rewards"):
            gae(np.zeros((3, 2)), np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3), 0.9, 0.9)
        with self.assertRaisesRegex(ValueError, "last_value"):
            gae(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(3), 0.9, 0.9)


class RewardScalerTest(unittest.TestCase):
    def test_a_rollout_is_divided_by_the_std_of_its_discounted_returns(self):
        # One env, gamma 0.5, rewards 2, 2: returns G = 2, then 0.5 * 2 + 2 = 3.
        # Samples {2, 3}: mean 2.5, variance 0.25, so both rewards become 2 / 0.5 = 4.
        scaler = RewardScaler(1, gamma=0.5)
        out = scaler.scale(np.array([[2.0], [2.0]]), np.zeros((2, 1), dtype=bool))
        self.assertAlmostEqual(scaler.mean, 2.5)
        self.assertAlmostEqual(scaler.var, 0.25)
        np.testing.assert_allclose(out[:, 0], [4.0, 4.0], rtol=1e-6)

    def test_equal_first_rewards_are_not_blown_up(self):
        # Eight cars, the environment's -1: per step, the first update would see eight equal
        # returns (std 0). Over a 32-step rollout the returns run -1 .. -27.5: std ~ 7.6.
        scaler = RewardScaler(8, gamma=0.99)
        out = scaler.scale(-np.ones((32, 8)), np.zeros((32, 8), dtype=bool))
        self.assertTrue(np.all(np.abs(out) < 0.2))
        self.assertTrue(np.all(out < 0))

    def test_the_return_restarts_after_done_and_carries_across_rollouts(self):
        scaler = RewardScaler(2, gamma=0.9)
        scaler.scale(np.array([[-1.0, 1.0]]), np.array([[True, False]]))
        np.testing.assert_array_equal(scaler.returns, [0.0, 1.0])
        scaler.scale(np.array([[-1.0, 1.0]]), np.array([[False, False]]))
        np.testing.assert_allclose(scaler.returns, [-1.0, 1.9])

    def test_matches_numpy_over_many_rollouts(self):
        rng = np.random.default_rng(1)
        scaler = RewardScaler(4, gamma=0.99)
        history = []
        returns = np.zeros(4)
        for _ in range(10):
            rewards = rng.normal(3.0, 2.0, (30, 4))
            dones = rng.random((30, 4)) < 0.05
            scaler.scale(rewards, dones)
            for t in range(30):
                returns = returns * 0.99 + rewards[t]
                history.append(returns.copy())
                returns = np.where(dones[t], 0.0, returns)
        self.assertAlmostEqual(scaler.mean, float(np.mean(history)), places=8)
        self.assertAlmostEqual(scaler.var, float(np.var(history)), places=6)


class PPOLossTest(unittest.TestCase):
    CLIP = 0.2

    def policy_loss_and_grad(self, ratio, advantage):
        new_logp = torch.tensor([np.log(ratio)], dtype=torch.float64, requires_grad=True)
        zeros = torch.zeros(1, dtype=torch.float64)
        loss = ppo_loss(new_logp, zeros, torch.tensor([advantage], dtype=torch.float64), zeros, zeros, zeros,
                        self.CLIP, vf_coef=0.5, ent_coef=0.01)
        loss.total.backward()
        return float(loss.policy), float(new_logp.grad), float(loss.clip_fraction)

    def test_clipping_engages_exactly_when_the_ratio_leaves_the_range_the_advantage_favours(self):
        # eps = 0.2, range [0.8, 1.2]; loss = -min(r * A, clip(r) * A); d loss / d logp = -r * A
        # when the unclipped term is chosen, 0 when the clipped one is.
        cases = [
            # ratio, A,   loss,  clipped?  hand-worked
            (1.5, 2.0, -2.4, True),    # min(3.0, 1.2 * 2 = 2.4) = 2.4: clipped, no gradient
            (0.5, 2.0, -1.0, False),   # min(1.0, 0.8 * 2 = 1.6) = 1.0: unclipped, grad -1.0
            (0.5, -2.0, 1.6, True),    # min(-1.0, 0.8 * -2 = -1.6) = -1.6: clipped, no gradient
            (1.5, -2.0, 3.0, False),   # min(-3.0, 1.2 * -2 = -2.4) = -3.0: unclipped, grad 3.0
            (1.1, 2.0, -2.2, False),   # inside: min(2.2, 2.2), grad -2.2
        ]
        for ratio, advantage, want_loss, want_clipped in cases:
            with self.subTest(ratio=ratio, advantage=advantage):
                loss, grad, clip_fraction = self.policy_loss_and_grad(ratio, advantage)
                self.assertAlmostEqual(loss, want_loss, places=12)
                if want_clipped:
                    self.assertEqual(grad, 0.0)
                else:
                    self.assertAlmostEqual(grad, -ratio * advantage, places=12)
                self.assertEqual(clip_fraction, float(abs(ratio - 1) > self.CLIP))

    def test_value_and_entropy_terms_and_the_total(self):
        # value = 0.5 * mean((1 - 0)^2, (2 - 4)^2) = 1.25; entropy = 1.5; total = 0.5 * 1.25 - 0.1 * 1.5 = 0.475
        loss = ppo_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), torch.tensor([1.0, 2.0]),
                        torch.tensor([0.0, 4.0]), torch.tensor([1.0, 2.0]), clip=0.2, vf_coef=0.5, ent_coef=0.1)
        self.assertAlmostEqual(float(loss.value), 1.25)
        self.assertAlmostEqual(float(loss.entropy), 1.5)
        self.assertAlmostEqual(float(loss.total), 0.475, places=6)

    def test_normalize_advantages(self):
        out = normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 6.0]))
        self.assertAlmostEqual(float(out.mean()), 0.0, places=6)
        self.assertAlmostEqual(float(out.std()), 1.0, places=5)
        self.assertEqual(normalize_advantages(torch.tensor([5.0])).tolist(), [0.0])


class EvaluateActionsTest(unittest.TestCase):
    def test_log_probs_and_entropy_match_torch_distributions(self):
        torch.manual_seed(0)
        net = ActorCritic()
        obs = torch.randn(32, 2)
        actions = torch.randint(0, 3, (32,))
        logp, entropy, value = evaluate_actions(net, obs, actions)
        dist = torch.distributions.Categorical(logits=net.logits(obs))
        torch.testing.assert_close(logp, dist.log_prob(actions))
        torch.testing.assert_close(entropy, dist.entropy())
        self.assertEqual(value.shape, (32,))


class PPOConfigTest(unittest.TestCase):
    def test_out_of_range_fields_are_named_with_their_values(self):
        cases = [("clip", 0.0), ("clip", 1.0), ("gamma", 0.0), ("gamma", 1.01), ("gae_lambda", 1.5),
                 ("learning_rate", 0.0), ("learning_rate", float("nan")), ("ent_coef", -0.01),
                 ("max_grad_norm", 0.0), ("update_epochs", 0), ("minibatches", True), ("rollout_steps", 2.5),
                 ("normalize_advantages", "yes"), ("normalize_rewards", 1)]
        for field, value in cases:
            with self.subTest(field=field, value=value):
                with self.assertRaises(PPOConfigError) as caught:
                    PPOConfig(**{field: value})
                message = str(caught.exception)
                self.assertTrue(message.startswith(f"{field}: "), message)
                self.assertIn(repr(value), message)

    def test_json_round_trip_and_unknown_fields(self):
        config = PPOConfig(clip=0.1, rollout_steps=16)
        self.assertEqual(PPOConfig.from_dict(config.to_dict()), config)
        with self.assertRaisesRegex(PPOConfigError, r"unknown field.*'clip_range'"):
            PPOConfig.from_dict({"clip_range": 0.2})


class LearnsATrivialProblemTest(unittest.TestCase):
    def test_ppo_update_learns_which_action_pays(self):
        # A one-step bandit on the MountainCar net: action 2 pays 1, the others 0.
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(0)
        net = ActorCritic()
        config = PPOConfig()
        optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
        obs = torch.rand(256, 2) * 2 - 1
        for _ in range(15):
            with torch.no_grad():
                logits, values = net(obs)
                dist = torch.distributions.Categorical(logits=logits)
                actions = torch.multinomial(dist.probs, 1, generator=generator).squeeze(1)
                log_probs = dist.log_prob(actions)
            rewards = (actions == 2).float()
            advantages, returns = gae(rewards[None].numpy(), values[None].numpy(), np.ones((1, 256)),
                                      np.zeros(256), config.gamma, config.gae_lambda)
            ppo_update(net, optimizer, RolloutBatch(obs, actions, log_probs,
                                                    torch.from_numpy(advantages[0]).float(),
                                                    torch.from_numpy(returns[0]).float()), config, generator)
        with torch.no_grad():
            self.assertGreater(float(torch.softmax(net.logits(obs), -1)[:, 2].mean()), 0.9)


if __name__ == "__main__":
    unittest.main()
