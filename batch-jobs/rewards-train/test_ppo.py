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
    ppo_update,
)

torch.set_num_threads(1)


class RewardScalerTest(unittest.TestCase):
    def test_a_rollout_is_divided_by_the_std_of_its_discounted_returns(self):
        # One env, gamma 0.5, rewards 2, 2: returns G = 2, then 0.5 * 2 + 2 = 3.
        # Samples {2, 3}: mean 2.5, variance 0.25, so both rewards become 2 / 0.5 = 4.
        scaler = RewardScaler(1, gamma=0.5)
        out = scaler.scale(np.array([[2.0], [2.0]]), np.zeros((2, 1), dtype=bool))
        # Short binary fractions through + - * / only: exact, but places=7 costs nothing.
        self.assertAlmostEqual(scaler.mean, 2.5, places=7)
        self.assertAlmostEqual(scaler.var, 0.25, places=7)
        # std = sqrt(0.25 + eps) with eps = 1e-8: 2 / std is 4 * (1 - 2e-8); rtol 1e-6 allows eps.
        np.testing.assert_allclose(out[:, 0], [4.0, 4.0], rtol=1e-6)

    def test_equal_first_rewards_are_not_blown_up(self):
        # Eight cars, the environment's -1: per step, the first update would see eight equal
        # returns (std 0). Over a 32-step rollout the returns run -1 .. -27.5: std ~ 7.6.
        scaler = RewardScaler(8, gamma=0.99)
        out = scaler.scale(-np.ones((32, 8)), np.zeros((32, 8), dtype=bool))
        # About -1 / 7.6 = -0.13: far from both bounds, whatever the rounding.
        self.assertTrue(np.all(np.abs(out) < 0.2))
        self.assertTrue(np.all(out < 0))

    def test_the_return_restarts_after_done_and_carries_across_rollouts(self):
        scaler = RewardScaler(2, gamma=0.9)
        scaler.scale(np.array([[-1.0, 1.0]]), np.array([[True, False]]))
        # Exact: 0 * 0.9 + r and a reset to 0.0 do not round.
        np.testing.assert_array_equal(scaler.returns, [0.0, 1.0])
        scaler.scale(np.array([[-1.0, 1.0]]), np.array([[False, False]]))
        # 1.0 * 0.9 + 1.0 rounds once (0.9 is not representable): within an ulp of 1.9.
        np.testing.assert_allclose(scaler.returns, [-1.0, 1.9], rtol=1e-15)

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
        # Chan's running update against numpy over the whole history (pairwise sums, possibly
        # SIMD): the same statistics summed in other orders, float64. The mean is ~46 and the
        # variance ~1,020 over 1,200 values, so they agree to ~1e-13 relative (measured 0 and
        # 3e-13 apart): places 8 and 6 (5e-9 and 5e-7 absolute) leave 1,000x margins.
        self.assertAlmostEqual(scaler.mean, float(np.mean(history)), places=8)
        self.assertAlmostEqual(scaler.var, float(np.var(history)), places=6)


class EvaluateActionsTest(unittest.TestCase):
    def test_log_probs_and_entropy_match_torch_distributions(self):
        torch.manual_seed(0)
        net = ActorCritic()
        obs = torch.randn(32, 2)
        actions = torch.randint(0, 3, (32,))
        logp, entropy, value = evaluate_actions(net, obs, actions)
        dist = torch.distributions.Categorical(logits=net.logits(obs))
        # Two float32 computations (log_softmax against logits - logsumexp; two entropy sums) of
        # values below ~1.1: a few ulps apart (measured 2.4e-7); 1e-5 is 40x that.
        torch.testing.assert_close(logp, dist.log_prob(actions), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(entropy, dist.entropy(), rtol=1e-5, atol=1e-5)
        self.assertEqual(value.shape, (32,))


class PPOConfigTest(unittest.TestCase):
    """This job's defaults and fields; the shared fields' checks are common/test_ppo_config.py's."""

    def test_this_jobs_defaults(self):
        config = PPOConfig()
        self.assertEqual((config.learning_rate, config.ent_coef, config.update_epochs, config.minibatches),
                         (2.5e-3, 0.0, 4, 4))
        self.assertEqual((config.rollout_steps, config.normalize_rewards), (32, True))
        self.assertEqual(list(config.to_dict())[-2:], ["rollout_steps", "normalize_rewards"])

    def test_its_own_fields_are_named_with_their_values(self):
        cases = [("rollout_steps", 0), ("rollout_steps", 2.5), ("rollout_steps", True),
                 ("normalize_rewards", 1), ("normalize_rewards", "yes"), ("clip", 1.0)]  # clip: the base still checks
        for field, value in cases:
            with self.subTest(field=field, value=value):
                with self.assertRaises(PPOConfigError) as caught:
                    PPOConfig(**{field: value})
                message = str(caught.exception)
                self.assertTrue(message.startswith(f"{field}: "), message)
                self.assertIn(repr(value), message)

    def test_json_round_trip_and_unknown_fields(self):
        config = PPOConfig(clip=0.1, rollout_steps=16, normalize_rewards=False)
        self.assertEqual(PPOConfig.from_dict(config.to_dict()), config)
        with self.assertRaisesRegex(PPOConfigError, r"^ppo: unknown field\(s\) \['clip_range'\]$"):
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
        # A threshold on a trained outcome: the sampling can flip where another CPU's probabilities
        # differ in the last bit, and then the run goes another way; over seeds 0-15 the mean
        # probability ended >= 0.9995, so any such run clears 0.9 by far.
        with torch.no_grad():
            self.assertGreater(float(torch.softmax(net.logits(obs), -1)[:, 2].mean()), 0.9)


if __name__ == "__main__":
    unittest.main()
