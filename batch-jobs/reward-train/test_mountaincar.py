import json
import math
import os
import unittest

import numpy as np

import make_vectors
from mountaincar import (
    GOAL_POSITION,
    MAX_SPEED,
    MIN_POSITION,
    TIME_LIMIT,
    MountainCarBatch,
    SeedError,
    StartStream,
    run_episode,
    start_positions,
    step,
    step_arrays,
)

with open(make_vectors.VECTORS_PATH, encoding="utf-8") as f:
    VECTORS = json.load(f)


class StepTest(unittest.TestCase):
    def test_a_push_right_from_rest_worked_by_hand(self):
        # cos(3 * -0.5) = cos(-1.5) = 0.0707372016677029...
        # v = 0 + (1 * 0.001 + 0.0707372016677029 * -0.0025) = 0.001 - 0.000176843004169 = 0.000823156995831
        # x = -0.5 + 0.000823156995831 = -0.499176843004169
        position, velocity = step(-0.5, 0.0, 2)
        self.assertAlmostEqual(velocity, 0.000823156995831, places=14)
        self.assertAlmostEqual(position, -0.499176843004169, places=14)

    def test_no_push_and_push_left_differ_by_the_force(self):
        # From rest at -0.5 gravity alone gives v = -0.000176843...; pushing left adds -0.001.
        _, coast = step(-0.5, 0.0, 1)
        _, left = step(-0.5, 0.0, 0)
        self.assertAlmostEqual(coast, -0.000176843004169, places=14)
        self.assertAlmostEqual(left - coast, -0.001, places=15)

    def test_the_valley_floor_at_rest_stays_put(self):
        # cos(3 * -pi/6) = cos(-pi/2) ~ 6e-17: no acceleration to speak of.
        position, velocity = step(-math.pi / 6, 0.0, 1)
        self.assertAlmostEqual(position, -math.pi / 6, places=15)
        self.assertAlmostEqual(velocity, 0.0, places=15)

    def test_the_speed_limit_clips_both_ways(self):
        # -0.5 + 0.0695 + 0.001 + 0.000176... > 0.07 is clipped to 0.07, then x = -0.5 + 0.07.
        self.assertEqual(step(-0.5, 0.0695, 2), (-0.5 + MAX_SPEED, MAX_SPEED))
        self.assertEqual(step(-0.5, -0.0695, 0), (-0.5 - MAX_SPEED, -MAX_SPEED))

    def test_the_left_wall_stops_the_car(self):
        # v = -0.03 + (-0.001 + cos(-3.57) * -0.0025) = -0.03 - 0.001 + 0.0022763... = -0.02872...
        # x = -1.19 - 0.0287 < -1.2: clipped to -1.2, and the leftward velocity becomes 0.
        self.assertEqual(step(-1.19, -0.03, 0), (MIN_POSITION, 0.0))
        # At the wall at rest the slope pushes right even against a left push (cos(-3.6) < 0).
        position, velocity = step(MIN_POSITION, 0.0, 0)
        self.assertGreater(velocity, 0.0)
        self.assertAlmostEqual(velocity, -0.001 + math.cos(-3.6) * -0.0025, places=16)

    def test_the_right_end_clips_the_position_only(self):
        position, velocity = step(0.58, 0.05, 2)
        self.assertEqual(position, 0.6)
        self.assertGreater(velocity, 0.05)

    def test_actions_other_than_0_1_2_are_refused(self):
        for action in (-1, 3, 1.5, None):
            with self.subTest(action=action), self.assertRaisesRegex(ValueError, "action"):
                step(-0.5, 0.0, action)

    def test_vectorised_equals_scalar(self):
        rng = np.random.default_rng(0)
        position = rng.uniform(-1.2, 0.6, 5000)
        velocity = rng.uniform(-0.07, 0.07, 5000)
        # Include the edges: at the wall, at the speed limit, at rest.
        position[:4] = [-1.2, -1.2, 0.6, -0.5]
        velocity[:4] = [0.0, -0.07, 0.07, 0.0]
        action = rng.integers(0, 3, 5000)
        new_position, new_velocity = step_arrays(position, velocity, action)
        for i in range(position.size):
            want = step(float(position[i]), float(velocity[i]), int(action[i]))
            # numpy's cos may differ from libm's by an ulp: nothing more.
            self.assertAlmostEqual(new_position[i], want[0], delta=1e-15)
            self.assertAlmostEqual(new_velocity[i], want[1], delta=1e-15)


class StartStreamTest(unittest.TestCase):
    def test_the_stream_is_shared_random_ts(self):
        # seededRandom(0)'s first three draws, printed by shared/random.ts under Node.
        stream = StartStream(0)
        self.assertEqual([stream.random() for _ in range(3)],
                         [0.9791452463250607, 0.8250711336731911, 0.2846157543826848])
        stream = StartStream(-(2 ** 53 - 1))
        self.assertEqual(stream.random(), 0.927360491361469)

    def test_starts_match_the_vectors_and_repeat(self):
        for case in VECTORS["starts"]:
            with self.subTest(seed=case["seed"]):
                got = start_positions(case["seed"], len(case["positions"]))
                self.assertEqual(got, case["positions"])
                self.assertEqual(start_positions(case["seed"], len(got)), got)
                self.assertTrue(all(-0.6 <= p < -0.4 for p in got))

    def test_nearby_seeds_give_unrelated_starts(self):
        firsts = [start_positions(seed, 1)[0] for seed in range(200)]
        self.assertGreater(len(set(firsts)), 195)
        self.assertLess(abs(np.mean(firsts) - -0.5), 0.02)

    def test_seeds_javascript_refuses_are_refused(self):
        for seed in (2 ** 53, -(2 ** 53), 1.5, True, "3", None):
            with self.subTest(seed=seed), self.assertRaisesRegex(SeedError, "seed"):
                StartStream(seed)


class VectorsTest(unittest.TestCase):
    def test_the_fixtures_are_what_make_vectors_writes(self):
        for path, text in make_vectors.render().items():
            with self.subTest(path=os.path.basename(path)):
                with open(path, encoding="utf-8") as f:
                    self.assertEqual(f.read(), text, "stale: run python3 batch-jobs/reward-train/make_vectors.py")

    def test_single_steps(self):
        for case in VECTORS["steps"]:
            with self.subTest(case=case):
                position, velocity = step(*case["state"], case["action"])
                self.assertAlmostEqual(position, case["next"][0], delta=1e-15)
                self.assertAlmostEqual(velocity, case["next"][1], delta=1e-15)
                self.assertEqual(position >= GOAL_POSITION, case["goalReached"])

    def test_trajectories_replay_in_a_batch(self):
        # Every trajectory's car in one batch, stepped in lock-step with its recorded actions.
        cases = VECTORS["trajectories"]
        self.assertGreaterEqual(len(cases), 5)
        for case in cases:
            self.assertEqual(case["start"], [start_positions(case["seed"], 1)[0], 0.0])
        for case in cases:
            with self.subTest(name=case["name"]):
                batch = MountainCarBatch(1, case["seed"])
                for t, action in enumerate(case["actions"]):
                    result = batch.step(np.array([action]))
                    np.testing.assert_allclose(result.next_obs[0], case["states"][t], rtol=0, atol=1e-12)
                    self.assertEqual(bool(result.done[0]), case["done"][t])
                    self.assertEqual(bool(result.terminated[0]), case["goalReached"][t])
                self.assertTrue(case["done"][-1])
                self.assertFalse(any(case["done"][:-1]))
                if not case["goalReached"][-1]:
                    self.assertEqual(len(case["actions"]), TIME_LIMIT)


class BatchTest(unittest.TestCase):
    def test_a_batch_plays_what_the_scalar_step_plays_and_resets_in_index_order(self):
        rng = np.random.default_rng(3)
        n = 6
        batch = MountainCarBatch(n, seed=11)
        stream = StartStream(11)
        position = [stream.start_position() for _ in range(n)]
        velocity = [0.0] * n
        steps = [0] * n
        self.assertEqual(batch.observation()[:, 0].tolist(), position)
        ended = 0
        for _ in range(700):
            # Mostly "push along the velocity", so episodes end both ways (goal and time limit).
            actions = np.array([2 if v >= 0 else 0 for v in velocity])
            noise = rng.random(n) < 0.3
            actions[noise] = rng.integers(0, 3, int(noise.sum()))
            result = batch.step(actions)
            for i in range(n):
                position[i], velocity[i] = step(position[i], velocity[i], int(actions[i]))
                steps[i] += 1
                self.assertAlmostEqual(result.next_obs[i, 0], position[i], delta=1e-12)
                goal = position[i] >= GOAL_POSITION
                self.assertEqual(bool(result.terminated[i]), goal)
                self.assertEqual(bool(result.truncated[i]), not goal and steps[i] == TIME_LIMIT)
                self.assertEqual(int(result.episode_steps[i]), steps[i])
                if goal or steps[i] == TIME_LIMIT:
                    position[i], velocity[i], steps[i] = stream.start_position(), 0.0, 0
                    ended += 1
            self.assertEqual(batch.observation()[:, 0].tolist(), position)
        self.assertGreater(ended, 10)

    def test_bad_actions_are_refused(self):
        batch = MountainCarBatch(2, 0)
        for actions in (np.array([0, 3]), np.array([0]), np.array([0.0, 1.0])):
            with self.subTest(actions=actions), self.assertRaisesRegex(ValueError, "actions"):
                batch.step(actions)


class EpisodeTest(unittest.TestCase):
    def test_pushing_along_the_velocity_solves_it_and_pushing_right_alone_does_not(self):
        starts = start_positions(5, 20)
        pump = [run_episode(lambda p, v: 2 if v >= 0 else 0, s) for s in starts]
        right = [run_episode(lambda p, v: 2, s) for s in starts]
        self.assertTrue(all(r["success"] and r["steps"] < TIME_LIMIT for r in pump))
        self.assertTrue(all(not r["success"] and r["steps"] == TIME_LIMIT for r in right))


if __name__ == "__main__":
    unittest.main()
