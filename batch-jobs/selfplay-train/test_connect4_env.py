import json
import os
import unittest

import numpy as np

from connect4_env import (
    COLS,
    OBSERVATION_SIZE,
    TACTICAL_KIND_NAMES,
    Connect4Env,
    IllegalMoveError,
    encode_observation,
    random_moves,
    seat_plan,
    tactical_candidates,
    tactical_moves,
)

VECTORS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "..", "..", "test", "fixtures", "connect4", "vectors.json")
with open(VECTORS_PATH, encoding="utf-8") as f:
    VECTORS = json.load(f)["vectors"]


def expected_observation(vector):
    planes = vector["observation"]
    return np.array([int(ch) for key in ("own", "opponent", "empty") for ch in planes[key]],
                    dtype=np.float32)


def render(board):
    return ["".join({1: "X", -1: "O", 0: "."}[int(v)] for v in board[r]) for r in range(5, -1, -1)]


def columns(mask_row):
    return [int(c) for c in np.flatnonzero(mask_row)]


def play_out(env, choose):
    """Steps every game to its end; choose(env) -> (N,) actions for the games still going."""
    env.reset()
    while not env.done.all():
        actions = np.where(env.done, -1, choose(env))
        env.step(actions)


class VectorsTest(unittest.TestCase):
    def test_there_are_enough_vectors(self):
        self.assertGreaterEqual(len(VECTORS), 40)

    def test_every_vector_one_game_at_a_time(self):
        for v in VECTORS:
            with self.subTest(v["name"]):
                env = Connect4Env(1)
                rewards = [env.play(0, col) for col in v["moves"]]
                self.assertEqual(int(env.plies[0]), v["plies"])
                self.assertEqual(int(env.to_move[0]), v["toMove"])
                self.assertEqual(bool(env.done[0]), v["over"])
                self.assertEqual(int(env.winner[0]) if env.done[0] else None, v["winner"])
                self.assertEqual(columns(env.legal_mask()[0]), v["legal"])
                self.assertEqual(render(env.boards[0]), v["board"])
                obs = env.observation()
                self.assertEqual(obs.dtype, np.float32)
                np.testing.assert_array_equal(obs[0], expected_observation(v))
                # The winning move, and only it, was rewarded.
                won = v["winner"] in (1, -1)
                self.assertEqual(rewards, [0.0] * (len(rewards) - 1) + [1.0] if won else [0.0] * len(rewards))

                mask, kind = tactical_candidates(env)
                if "tactical" in v:
                    self.assertEqual(TACTICAL_KIND_NAMES[kind[0]], v["tactical"]["kind"])
                    self.assertEqual(columns(mask[0]), v["tactical"]["moves"])
                else:
                    self.assertFalse(mask.any())

                for col in range(COLS):
                    if col not in v["legal"]:
                        probe = Connect4Env.from_moves([v["moves"]])
                        with self.assertRaises(IllegalMoveError):
                            probe.play(0, col)
                        with self.assertRaises(IllegalMoveError):
                            probe.step(np.array([col]))

    def test_all_vectors_in_one_batch(self):
        env = Connect4Env.from_moves([v["moves"] for v in VECTORS])
        obs = env.observation()
        legal = env.legal_mask()
        mask, kind = tactical_candidates(env)
        for g, v in enumerate(VECTORS):
            with self.subTest(v["name"]):
                np.testing.assert_array_equal(obs[g], expected_observation(v))
                self.assertEqual(columns(legal[g]), v["legal"])
                if "tactical" in v:
                    self.assertEqual(TACTICAL_KIND_NAMES[kind[g]], v["tactical"]["kind"])
                    self.assertEqual(columns(mask[g]), v["tactical"]["moves"])

    def test_vectors_in_lock_step(self):
        # Stepping all games together (finished or exhausted games sit out) reaches the same states.
        lists = [v["moves"] for v in VECTORS if v["moves"]]
        env = Connect4Env(len(lists))
        longest = max(len(m) for m in lists)
        for ply in range(longest):
            actions = np.array([m[ply] if ply < len(m) else -1 for m in lists])
            active = actions >= 0
            if active.all():
                env.step(actions)
            else:
                # Games whose list has ended are not finished, so they cannot pass: play the rest singly.
                for g in np.flatnonzero(active):
                    env.play(int(g), int(actions[g]))
        for g, v in enumerate(v for v in VECTORS if v["moves"]):
            np.testing.assert_array_equal(env.observation()[g], expected_observation(v))

    def test_tactical_bot_samples_every_candidate(self):
        cases = [v for v in VECTORS if "tactical" in v]
        env = Connect4Env.from_moves([v["moves"] for v in cases])
        rng = np.random.default_rng(3)
        seen = [set() for _ in cases]
        for _ in range(200):
            for g, col in enumerate(tactical_moves(env, rng)):
                seen[g].add(int(col))
        for g, v in enumerate(cases):
            self.assertEqual(sorted(seen[g]), v["tactical"]["moves"], v["name"])


class SeatPlanTest(unittest.TestCase):
    def test_every_group_moves_first_in_half_its_games(self):
        for groups in range(1, 9):
            for games in (0, 1, 2, 3, 7, 8, 9, 16, 25, 400, 401, 2048, 2049):
                group, first = seat_plan(games, groups)
                self.assertEqual(group.shape, (games,))
                total = np.bincount(group, minlength=groups)
                firsts = np.bincount(group[first], minlength=groups)
                self.assertLessEqual(total.max() - total.min(), 1)
                np.testing.assert_array_equal(np.abs(2 * firsts - total), total % 2)
                self.assertLessEqual(abs(2 * int(first.sum()) - games), 1)

    def test_same_plan_as_typescript(self):
        # seatPlan(7, 3) in shared/selfplay/connect4.ts: groups 0,1,2,0,1,2,0; first when i // 3 + group is even.
        group, first = seat_plan(7, 3)
        self.assertEqual(group.tolist(), [0, 1, 2, 0, 1, 2, 0])
        self.assertEqual(first.tolist(), [True, False, True, False, True, False, True])

    def test_rejects_bad_sizes(self):
        for games, groups in ((-1, 2), (10, 0), (10, 1.5), (True, 2)):
            with self.assertRaises(ValueError):
                seat_plan(games, groups)


class EnvTest(unittest.TestCase):
    def test_step_returns_obs_for_next_player_reward_for_mover(self):
        env = Connect4Env(2)
        obs = env.reset()
        self.assertEqual(obs.shape, (2, OBSERVATION_SIZE))
        for col in (0, 1, 0, 1, 0, 1):
            obs, reward, done = env.step(np.array([col, 6 - col]))
            self.assertFalse(done.any())
            self.assertFalse(reward.any())
        obs, reward, done = env.step(np.array([0, 0]))
        self.assertEqual(reward.tolist(), [1.0, 0.0])
        self.assertEqual(done.tolist(), [True, False])
        np.testing.assert_array_equal(obs, encode_observation(env.boards, env.to_move))
        # Game 0 is over: it must pass (-1); game 1 keeps going.
        obs, reward, done = env.step(np.array([-1, 5]))
        self.assertEqual(reward.tolist(), [0.0, 1.0])
        self.assertEqual(env.winner.tolist(), [1, -1])

    def test_illegal_step_names_game_and_column_and_changes_nothing(self):
        env = Connect4Env(3)
        for _ in range(6):
            env.play(2, 4)
        before = env.boards.copy()
        with self.assertRaises(IllegalMoveError) as caught:
            env.step(np.array([0, 1, 4]))
        self.assertEqual((caught.exception.game, caught.exception.column), (2, 4))
        self.assertIn("game 2", str(caught.exception))
        self.assertIn("column 4", str(caught.exception))
        np.testing.assert_array_equal(env.boards, before)
        with self.assertRaises(IllegalMoveError):
            env.step(np.array([-1, 0, 0]))  # a game still going cannot pass
        with self.assertRaises(IllegalMoveError):
            env.step(np.array([7, 0, 0]))
        with self.assertRaises(ValueError):
            env.step(np.array([0, 0]))

    def test_random_vs_random(self):
        # Statistics of seeded games, but no rounding decides them: the bots' keys are numpy's
        # uniform doubles (integer bits scaled by 2^-53) and only their order matters, so every
        # CPU plays the same games. Likewise below.
        env = Connect4Env(1000)
        rng = np.random.default_rng(1)
        play_out(env, lambda e: random_moves(e, rng))  # step() refuses any illegal move
        self.assertTrue(env.done.all())
        first = float((env.winner == 1).mean())
        self.assertTrue(0.50 < first < 0.63, first)
        self.assertTrue(((env.winner != 0) | (env.plies == 42)).all())

    def test_tactical_beats_random(self):
        env = Connect4Env(1000)
        rng = np.random.default_rng(2)
        _, tactical_first = seat_plan(1000, 1)
        tactical_player = np.where(tactical_first, 1, -1)

        def choose(e):
            return np.where(e.to_move == tactical_player, tactical_moves(e, rng), random_moves(e, rng))

        play_out(env, choose)
        score = float(((env.winner == tactical_player) + 0.5 * (env.winner == 0)).mean())
        self.assertGreater(score, 0.8)


def brute_force_winning_moves(board, player):
    """Columns where player dropping a piece makes four, by trying every cell's lines one by one."""
    wins = []
    for col in range(COLS):
        heights = [r for r in range(6) if board[r, col] == 0]
        if not heights:
            continue
        row = heights[0]
        trial = board.copy()
        trial[row, col] = player
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            run = 1
            for sign in (1, -1):
                r, c = row + sign * dr, col + sign * dc
                while 0 <= r < 6 and 0 <= c < COLS and trial[r, c] == player:
                    run += 1
                    r, c = r + sign * dr, c + sign * dc
            if run >= 4:
                wins.append(col)
                break
    return wins


class WinDetectionTest(unittest.TestCase):
    def test_bitboard_wins_match_a_brute_force_check_on_random_games(self):
        # Random play through every stage of 200 games: at each ply, both players' winning
        # columns and the end of the game agree with cell-by-cell line counting.
        env = Connect4Env(200)
        rng = np.random.default_rng(5)
        env.reset()
        checked = 0
        while not env.done.all():
            for player in (1, -1):
                got = env.winning_moves(np.full(env.num_games, player))
                for g in np.flatnonzero(~env.done)[:40]:
                    self.assertEqual(columns(got[g]), brute_force_winning_moves(env.boards[g], player))
                    checked += 1
            self.assertFalse(env.winning_moves(np.ones(env.num_games))[env.done].any())
            before = env.boards.copy()
            movers = env.to_move.copy()
            actions = random_moves(env, rng)
            live = ~env.done
            _, rewards, _ = env.step(actions)
            for g in np.flatnonzero(live):
                expected = actions[g] in brute_force_winning_moves(before[g], int(movers[g]))
                self.assertEqual(bool(rewards[g]), expected)
                self.assertEqual(int(env.winner[g]), int(movers[g]) if expected else 0)
        self.assertGreater(checked, 2000)

    def test_lines_at_the_edges_of_the_board(self):
        # Where a bitboard shift could wrap into the neighbouring column: the last column, the
        # top row, the corner cells.
        cases = {
            "vertical in the last column": [6, 0, 6, 0, 6, 0, 6],
            "vertical up to the top row": [0, 0, 0, 1, 0, 1, 0, 1, 0],
            "diagonal into the last column": [3, 4, 4, 5, 5, 6, 5, 6, 6, 0, 6],
            "horizontal ending in the last column": [3, 3, 4, 4, 5, 5, 6],
        }
        for name, moves in cases.items():
            with self.subTest(name):
                env = Connect4Env(1)
                for col in moves[:-1]:
                    env.play(0, col)
                player = int(env.to_move[0])
                self.assertIn(moves[-1], columns(env.winning_moves(np.array([player]))[0]))
                self.assertEqual(env.play(0, moves[-1]), 1.0)
                self.assertEqual(int(env.winner[0]), player)
        # The top three cells of column 0 and the bottom cell of column 1 are not a line.
        env = Connect4Env.from_moves([[1, 0, 6, 0, 5, 0, 0, 6, 0, 6, 0]])
        self.assertFalse(env.done[0])
        for player in (1, -1):
            self.assertEqual(columns(env.winning_moves(np.array([player]))[0]),
                             brute_force_winning_moves(env.boards[0], player))

if __name__ == "__main__":
    unittest.main()
