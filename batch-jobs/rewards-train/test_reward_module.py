import math
import os
import tempfile
import textwrap
import unittest

import numpy as np

from reward_module import (
    MAX_SOURCE_BYTES,
    RewardCallError,
    RewardLoadError,
    RewardValueError,
    load_reward_file,
    load_reward_source,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_REWARD = os.path.join(HERE, "rewards", "env_reward.py")
SHAPED_REWARD = os.path.join(HERE, "rewards", "shaped_reward.py")


def one_step(obs=(-0.5, 0.0), action=2, next_obs=(-0.49, 0.01), done=False, step=1, goal=False, limit=False):
    """Arguments for a RewardFunction call with one car."""
    return (np.array([obs]), np.array([action]), np.array([next_obs]), np.array([done]), np.array([step]),
            np.array([goal]), np.array([limit]))


def source(text):
    return textwrap.dedent(text).strip() + "\n"


class ReferenceRewardsTest(unittest.TestCase):
    def test_env_reward_is_minus_one_whatever_happens(self):
        reward = load_reward_file(ENV_REWARD)
        self.assertFalse(reward.vectorised)
        self.assertEqual(reward(*one_step()).tolist(), [-1.0])
        self.assertEqual(reward(*one_step(done=True, goal=True, next_obs=(0.5, 0.03))).tolist(), [-1.0])

    def test_shaped_reward_worked_by_hand(self):
        reward = load_reward_file(SHAPED_REWARD)
        g = 0.0025
        goal_energy = g / 3 * (math.sin(1.5) + 1)                  # ~ 0.0016648
        # From rest at the valley floor (energy 0) to x = -pi/6 + 0, v = 0.01: energy 0.5 * 1e-4.
        floor = -math.pi / 6
        # The module and these lines compute the same quantities in different orders (and
        # 0.5e-4 against 0.5 * 0.01 * 0.01): values of order 100 or less, rounded a few times in
        # float64, agree to ~1e-13; the places below leave >= 1,000x, while a wrong formula is off
        # by 1e-3 or more.
        got = reward(*one_step(obs=(floor, 0.0), next_obs=(floor, 0.01)))[0]
        self.assertAlmostEqual(got, -1 + 100 * (0.5e-4 / goal_energy), places=9)   # ~ 2.0034
        # Losing that energy again costs exactly as much: swinging cannot be farmed.
        back = reward(*one_step(obs=(floor, 0.01), next_obs=(floor, 0.0)))[0]
        self.assertAlmostEqual(got + back, -2.0, places=12)
        # Reaching the goal adds the bonus.
        at_goal = reward(*one_step(obs=(0.49, 0.02), next_obs=(0.51, 0.02), done=True, goal=True))[0]
        no_goal = reward(*one_step(obs=(0.49, 0.02), next_obs=(0.51, 0.02), done=False, goal=False))[0]
        self.assertAlmostEqual(at_goal - no_goal, 100.0, places=9)

    def test_the_shaped_reward_pays_for_pushing_along_the_velocity(self):
        reward = load_reward_file(SHAPED_REWARD)
        from mountaincar import step
        state = (-0.4, 0.02)
        along = reward(*one_step(obs=state, action=2, next_obs=step(*state, 2)))[0]
        against = reward(*one_step(obs=state, action=0, next_obs=step(*state, 0)))[0]
        # A comparison of floats, but decided by ~2.4 (the energy a push of 0.002 adds or takes
        # at velocity 0.02), not by the last bits of cos or sin.
        self.assertGreater(along, against)


class InterfaceTest(unittest.TestCase):
    def test_a_scalar_reward_gets_plain_python_values_per_car(self):
        reward = load_reward_source(source("""
            seen = []
            def reward(obs, action, next_obs, done, info):
                seen.append((obs, action, next_obs, done, dict(info)))
                return obs[0] + 10 * action + (100 if done else 0) + 1000 * info["step"]
        """))
        out = reward(np.array([[-0.5, 0.0], [-0.4, 0.01]]), np.array([2, 0]), np.array([[-0.49, 0.01], [0.5, 0.02]]),
                     np.array([False, True]), np.array([3, 200]), np.array([False, True]), np.array([False, False]))
        # The candidate and this line do the same IEEE additions in the same order: equal; the
        # default rtol (1e-7) is slack.
        np.testing.assert_allclose(out, [-0.5 + 20 + 3000, -0.4 + 0 + 100 + 200000])
        module_seen = reward._function.__globals__["seen"]
        obs, action, next_obs, done, info = module_seen[1]
        self.assertEqual((obs, action, next_obs, done), ((-0.4, 0.01), 0, (0.5, 0.02), True))
        self.assertIsInstance(obs[0], float)
        self.assertIs(type(action), int)
        self.assertIs(type(done), bool)
        self.assertEqual(info, {"step": 200, "goal_reached": True, "time_limit": False})

    def test_reward_batch_is_preferred_and_gets_copies(self):
        reward = load_reward_source(source("""
            import numpy as np
            def reward(obs, action, next_obs, done, info):
                raise AssertionError("reward_batch should be used")
            def reward_batch(obs, action, next_obs, done, info):
                out = next_obs[:, 0] - obs[:, 0] + info["step"]
                obs[:] = 99.0          # must not reach the trainer's arrays
                info["step"][:] = 0
                return out
        """))
        self.assertTrue(reward.vectorised)
        args = one_step(obs=(-0.5, 0.0), next_obs=(-0.25, 0.01), step=7)
        # Exact: -0.25 - -0.5 + 7 is binary fractions through + and - only.
        self.assertEqual(reward(*args).tolist(), [7.25])
        self.assertEqual(args[0].tolist(), [[-0.5, 0.0]])
        self.assertEqual(args[4].tolist(), [7])

    def test_a_file_loads_with_its_name_in_tracebacks(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "candidate_3.py")
            with open(path, "w") as f:
                f.write("def reward(obs, action, next_obs, done, info):\n    return 1 / 0\n")
            reward = load_reward_file(path)
            with self.assertRaisesRegex(RewardCallError, r"ZeroDivisionError.*candidate_3.py:2"):
                reward(*one_step())


class FailuresTest(unittest.TestCase):
    def test_load_failures_are_named(self):
        cases = [
            ("def reward(:\n", "SyntaxError"),
            ("raise RuntimeError('boom')\n", r"RuntimeError: boom at reward.py:1"),
            ("x = 1\n", "defines neither reward"),
            ("reward = 3\n", "reward must be a function"),
            ("import not_a_module_anywhere\n", "ModuleNotFoundError"),
            ("#" * (MAX_SOURCE_BYTES + 1), "more than the limit"),
        ]
        for text, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(RewardLoadError, message):
                load_reward_source(text)

    def test_bad_return_values_are_named(self):
        for value in ("float('nan')", "float('inf')", "'1.0'", "None", "True", "[1.0]", "2e6", "-1e300"):
            with self.subTest(value=value):
                reward = load_reward_source(f"def reward(obs, action, next_obs, done, info):\n    return {value}\n")
                with self.assertRaisesRegex(RewardValueError, "reward\\(\\) returned .* at episode step 1"):
                    reward(*one_step())

    def test_numpy_scalars_are_fine(self):
        reward = load_reward_source("import numpy as np\ndef reward(o, a, n, d, i):\n    return np.float32(0.5)\n")
        self.assertEqual(reward(*one_step()).tolist(), [0.5])

    def test_batch_return_shape_and_values_are_checked(self):
        cases = [("return np.zeros(3)", "shape"), ("return np.full(len(done), np.nan)", "not finite"),
                 ("return 'abc'", "not an array of numbers"), ("raise KeyError('x')", "KeyError"),
                 ("return np.full(len(done), -1e7)", "magnitude above")]
        for body, message in cases:
            with self.subTest(body=body):
                reward = load_reward_source(f"import numpy as np\ndef reward_batch(o, a, n, done, i):\n    {body}\n")
                with self.assertRaisesRegex((RewardValueError, RewardCallError), message):
                    reward(*one_step())


if __name__ == "__main__":
    unittest.main()
