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
# How far two correct computations of these floats may be apart (reasons in make_vectors.py).
STEP_ATOL = VECTORS["tolerances"]["step"]
TRAJECTORY_ATOL = VECTORS["tolerances"]["trajectory"]


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
            # numpy's SIMD cos and libm's differ by an ulp or so: one step apart by STEP_ATOL at most.
            self.assertAlmostEqual(new_position[i], want[0], delta=STEP_ATOL)
            self.assertAlmostEqual(new_velocity[i], want[1], delta=STEP_ATOL)


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
                # Bit for bit: integer arithmetic and one multiply-add, rounded alike everywhere.
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
    def test_the_fixtures_are_what_make_vectors_writes_within_their_tolerances(self):
        # render() also replays every case with cos nudged both ways and refuses fragile vectors.
        stale = make_vectors.stale_files(make_vectors.render())
        self.assertEqual(stale, [], "stale: run make_vectors.py (see its docstring)")

    def test_a_change_beyond_a_tolerance_is_stale_and_one_within_it_is_not(self):
        fresh = json.loads(make_vectors.render()[make_vectors.VECTORS_PATH])
        self.assertEqual(make_vectors.differences(fresh, json.loads(json.dumps(fresh))), [])
        within = json.loads(json.dumps(fresh))
        within["trajectories"][0]["states"][3][0] += TRAJECTORY_ATOL / 4
        within["policy"]["logits"][2][1] = float(np.nextafter(within["policy"]["logits"][2][1], 10))
        self.assertEqual(make_vectors.differences(fresh, within), [])
        beyond = json.loads(json.dumps(within))
        beyond["trajectories"][0]["states"][3][0] += 1e-9
        beyond["steps"][1]["next"][1] += 4 * STEP_ATOL
        beyond["starts"][0]["positions"][0] = float(np.nextafter(beyond["starts"][0]["positions"][0], 1))
        beyond["policy"]["grade"]["perSeed"][0]["successes"] -= 1
        beyond["trajectories"][1]["done"][0] = True
        found = make_vectors.differences(fresh, beyond)
        self.assertEqual([line.split(":")[0] for line in found],
                         ["starts[0].positions[0]", "steps[1].next[1]", "trajectories[0].states[3][0]",
                          "trajectories[1].done[0]", "policy.grade.perSeed[0].successes"])

    def test_a_fragile_trajectory_is_refused(self):
        # A car that ends a hair below the goal line: a cos a few ulps off could carry it over.
        case = {"name": "fragile", "start": [0.4999999999999, 0.0], "actions": [1],
                "states": [[0.4999999999999, 0.0]], "done": [False], "goalReached": [False]}
        with self.assertRaisesRegex(SystemExit, "within 1e-09 of the goal line"):
            make_vectors._check_trajectory_is_robust(case)

    def test_single_steps(self):
        for case in VECTORS["steps"]:
            with self.subTest(case=case):
                position, velocity = step(*case["state"], case["action"])
                # libm's cos here against the one that wrote the vectors: one step, STEP_ATOL.
                self.assertAlmostEqual(position, case["next"][0], delta=STEP_ATOL)
                self.assertAlmostEqual(velocity, case["next"][1], delta=STEP_ATOL)
                # Safe to compare exactly: every vector lies at least decisionMargin from the line.
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
                    # numpy's cos against the scalar one that wrote the vectors, compounded over
                    # the episode: TRAJECTORY_ATOL. The flags are exact: the vectors keep every
                    # state decisionMargin (1e-9, far above that) from the goal line.
                    np.testing.assert_allclose(result.next_obs[0], case["states"][t], rtol=0, atol=TRAJECTORY_ATOL)
                    self.assertEqual(bool(result.done[0]), case["done"][t])
                    self.assertEqual(bool(result.terminated[0]), case["goalReached"][t])
                self.assertTrue(case["done"][-1])
                self.assertFalse(any(case["done"][:-1]))
                if not case["goalReached"][-1]:
                    self.assertEqual(len(case["actions"]), TIME_LIMIT)


class BatchTest(unittest.TestCase):
    def test_a_batch_plays_what_the_scalar_step_plays_and_resets_in_index_order(self):
        # Each car's step is checked against step() from the batch's own previous state, so the
        # two paths' ulps (numpy's SIMD cos against libm's) never compound: STEP_ATOL per step.
        # Resets are bit for bit: the start stream is one code path.
        rng = np.random.default_rng(3)
        n = 6
        batch = MountainCarBatch(n, seed=11)
        stream = StartStream(11)
        self.assertEqual(batch.observation()[:, 0].tolist(), [stream.start_position() for _ in range(n)])
        steps = [0] * n
        ended = 0
        for _ in range(700):
            before = batch.observation()
            # Mostly "push along the velocity", so episodes end both ways (goal and time limit).
            actions = np.where(before[:, 1] >= 0, 2, 0)
            noise = rng.random(n) < 0.3
            actions[noise] = rng.integers(0, 3, int(noise.sum()))
            result = batch.step(actions)
            after = batch.observation()
            for i in range(n):
                position, velocity = step(float(before[i, 0]), float(before[i, 1]), int(actions[i]))
                np.testing.assert_allclose(result.next_obs[i], [position, velocity], rtol=0, atol=STEP_ATOL)
                steps[i] += 1
                goal = bool(result.terminated[i])
                if abs(position - GOAL_POSITION) > STEP_ATOL:  # within an ulp of the line either is right
                    self.assertEqual(goal, position >= GOAL_POSITION)
                self.assertEqual(bool(result.truncated[i]), not goal and steps[i] == TIME_LIMIT)
                self.assertEqual(int(result.episode_steps[i]), steps[i])
                if goal or steps[i] == TIME_LIMIT:
                    self.assertEqual(after[i].tolist(), [stream.start_position(), 0.0])
                    steps[i] = 0
                    ended += 1
                else:
                    self.assertEqual(after[i].tolist(), result.next_obs[i].tolist())
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
