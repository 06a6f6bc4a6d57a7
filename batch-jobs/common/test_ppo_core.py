"""The shared PPO maths (ppo_core.py) against hand-worked numbers and the written-out definition."""
import unittest

import numpy as np
import torch

from ppo_core import gae, normalize_advantages, ppo_loss

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
        # The float64 result against the decimal hand-worked one: 0.9, 0.72 and 2.12 are not
        # representable, and a few rounded + and * take gae within ~1e-15 of the decimals; rtol
        # 1e-12 leaves a 1000x margin, while a wrong formula is off by 0.1 or more.
        np.testing.assert_allclose(advantages[:, 0], [2.12, 1.0, 3.3], rtol=1e-12)
        np.testing.assert_allclose(returns[:, 0], [2.62, 2.0, 4.8], rtol=1e-12)

    def test_a_done_last_step_ignores_last_value(self):
        # t=1 ends the episode: A1 = 1 - 0.25 = 0.75; A0 = (0 + 1 * 0.25 - 0) + 1 * 0.5 * 0.75 = 0.625
        advantages, _ = gae(np.array([[0.0], [1.0]]), np.array([[0.0], [0.25]]), np.array([[0], [1]]),
                            np.array([1000.0]), gamma=1.0, lam=0.5)
        # Exact: every input and every intermediate is a short binary fraction, and gae uses only
        # + - * (correctly rounded on every CPU), so no step rounds at all.
        np.testing.assert_array_equal(advantages[:, 0], [0.625, 0.75])

    def test_a_time_limit_end_bootstrapped_by_the_caller(self):
        # The trainer adds gamma * V(final state) to the reward of a truncated step and marks it
        # done: with V(final) = 10, gamma 0.5, reward -1 -> -1 + 5 = 4; A = 4 - V(t) = 4 - 1 = 3.
        advantages, returns = gae(np.array([[-1.0 + 0.5 * 10.0]]), np.array([[1.0]]), np.array([[1]]),
                                  np.array([123.0]), gamma=0.5, lam=0.9)
        # Exact, as above: small integers and halves through + - * only.
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
                # Two computations, both float64: gae's backward recursion and the definition's
                # forward sums round the same terms in different orders. At most 17 terms of
                # magnitude < 10 each: a few ulps of 10 apart (measured 1.8e-15). atol 1e-12 covers
                # results that cancel to near 0, rtol 1e-10 the rest; a real bug moves them by 1e-2.
                np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)

    def test_tensors_in_tensors_out(self):
        rng = np.random.default_rng(1)
        rewards, values = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
        dones, last_value = rng.random((5, 3)) < 0.3, rng.normal(size=3)
        advantages, returns = gae(torch.tensor(rewards, dtype=torch.float32),
                                  torch.tensor(values, dtype=torch.float32),
                                  torch.tensor(dones), torch.tensor(last_value, dtype=torch.float32), 0.99, 0.95)
        self.assertTrue(torch.is_tensor(advantages) and advantages.dtype == torch.float32)
        want = naive_gae(rewards, values, dones, last_value, 0.99, 0.95)
        # float32 against the float64 definition: the inputs round to float32 (6e-8 relative) and
        # 5 steps of float32 arithmetic on values below 3 add a few ulps of 3 (measured 2.2e-7):
        # 1e-5 is ~50x that.
        np.testing.assert_allclose(advantages.numpy(), want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(returns.numpy(), want[1], rtol=1e-5, atol=1e-5)

    def test_shape_errors_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "rewards"):
            gae(np.zeros((3, 2)), np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3), 0.9, 0.9)
        with self.assertRaisesRegex(ValueError, "last_value"):
            gae(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(3), 0.9, 0.9)
        with self.assertRaisesRegex(ValueError, "values"):
            gae(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(1), 0.9, 0.9)


class PPOLossTest(unittest.TestCase):
    CLIP = 0.2

    def policy_loss_and_grad(self, ratio, advantage):
        new_logp = torch.tensor([np.log(ratio)], dtype=torch.float64, requires_grad=True)
        loss = ppo_loss(new_logp, torch.zeros(1, dtype=torch.float64), torch.tensor([advantage], dtype=torch.float64),
                        torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                        torch.zeros(1, dtype=torch.float64), self.CLIP, vf_coef=0.5, ent_coef=0.01)
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
            (0.9, -2.0, 1.8, False),   # inside: min(-1.8, -1.8), grad 1.8
            (1.25, 1.0, -1.2, True),   # just above 1.2 with A > 0
            (1.15, 1.0, -1.15, False), # just below 1.2: still unclipped
        ]
        # In float64, the ratio comes back as exp(np.log(ratio)): numpy's log and torch's exp
        # (each vectorised, kernel chosen by the CPU) are within a few ulps, so the loss and the
        # gradient (ratio * A, |.| <= 3) are within ~1e-15 of the hand-worked values: places=12
        # (5e-13) is a 500x margin. Which side of 1 +- eps each ratio lies on (the clipping, the
        # clip fraction) is a discrete outcome; every ratio here is at least 0.05 from 0.8 and 1.2,
        # far beyond those ulps, so none can flip.
        for ratio, advantage, want_loss, want_clipped in cases:
            with self.subTest(ratio=ratio, advantage=advantage):
                loss, grad, clip_fraction = self.policy_loss_and_grad(ratio, advantage)
                self.assertAlmostEqual(loss, want_loss, places=12)
                if want_clipped:
                    # Exactly 0 on every path: clamp passes no gradient outside its range.
                    self.assertEqual(grad, 0.0)
                else:
                    self.assertAlmostEqual(grad, -ratio * advantage, places=12)
                # The diagnostic counts leaving the range in either direction.
                self.assertEqual(clip_fraction, float(abs(ratio - 1) > self.CLIP))

    def test_value_and_entropy_terms_and_the_total(self):
        # ratios 1 and advantages 0: policy loss 0.
        # value = 0.5 * mean((1 - 0)^2, (2 - 4)^2) = 0.5 * (1 + 4) / 2 = 1.25
        # entropy = mean(1.0, 2.0) = 1.5
        # total = 0 + 0.5 * 1.25 - 0.1 * 1.5 = 0.475
        new_values = torch.tensor([1.0, 2.0], requires_grad=True)
        entropy = torch.tensor([1.0, 2.0], requires_grad=True)
        loss = ppo_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), new_values, torch.tensor([0.0, 4.0]),
                        entropy, clip=0.2, vf_coef=0.5, ent_coef=0.1)
        # float32 against hand-worked decimals. The parts are short binary fractions computed with
        # + - * / only (and exp(0) = 1), exact on every path; places=7 (5e-8) is slack. The total
        # and the entropy gradient involve 0.1, which float32 holds to 1.5e-9 and its arithmetic
        # rounds to ~6e-8 relative: places=6 and rtol 1e-6 are 10x that.
        self.assertAlmostEqual(float(loss.policy), 0.0, places=7)
        self.assertAlmostEqual(float(loss.value), 1.25, places=7)
        self.assertAlmostEqual(float(loss.entropy), 1.5, places=7)
        self.assertAlmostEqual(float(loss.total), 0.475, places=6)
        self.assertAlmostEqual(float(loss.approx_kl), 0.0, places=7)
        loss.total.backward()
        # d total / d V_i = vf_coef * (V_i - R_i) / B = 0.5 * (1, -2) / 2
        torch.testing.assert_close(new_values.grad, torch.tensor([0.25, -0.5]), rtol=1e-6, atol=1e-7)
        # the entropy bonus pushes entropy up: d total / d H_i = -ent_coef / B
        torch.testing.assert_close(entropy.grad, torch.tensor([-0.05, -0.05]), rtol=1e-6, atol=1e-7)

    def test_approx_kl_is_positive_when_the_policy_moved(self):
        # ratio r = e^0.1: (r - 1) - 0.1 = 0.0051709...
        loss = ppo_loss(torch.tensor([0.1]), torch.zeros(1), torch.ones(1), torch.zeros(1), torch.zeros(1),
                        torch.zeros(1), 0.2, 0.5, 0.0)
        # float32 against float64: torch's float32 exp (vectorised or scalar, by the CPU) is
        # within an ulp or two of e^0.1 (an ulp is 1.2e-7 there), and the subtractions that follow
        # are exact: delta 5e-7 covers 4 ulps. A wrong formula is off by 0.005 or more.
        self.assertAlmostEqual(float(loss.approx_kl), np.expm1(0.1) - 0.1, delta=5e-7)

    def test_no_gradient_reaches_the_rollout_constants(self):
        old_logp = torch.zeros(3, requires_grad=True)
        advantages = torch.ones(3, requires_grad=True)
        returns = torch.ones(3, requires_grad=True)
        new_logp = torch.zeros(3, requires_grad=True)
        ppo_loss(new_logp, old_logp, advantages, torch.zeros(3, requires_grad=True), returns,
                 torch.zeros(3), 0.2, 0.5, 0.01).total.backward()
        self.assertIsNone(old_logp.grad)
        self.assertIsNone(advantages.grad)
        self.assertIsNone(returns.grad)
        self.assertIsNotNone(new_logp.grad)

    def test_normalize_advantages(self):
        out = normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 6.0]))
        # float32 mean and std of 4 values of order 1 round to ~1e-7 (the std's sqrt and division
        # add an ulp or two, and then the check's own mean and std): places 6 and 5 leave >10x.
        self.assertAlmostEqual(float(out.mean()), 0.0, places=6)
        self.assertAlmostEqual(float(out.std()), 1.0, places=5)
        # Exact: a one-element mean is the element itself, and x - x is 0 in IEEE arithmetic.
        self.assertEqual(normalize_advantages(torch.tensor([5.0])).tolist(), [0.0])
        self.assertFalse(torch.isnan(normalize_advantages(torch.ones(4))).any())


if __name__ == "__main__":
    unittest.main()
