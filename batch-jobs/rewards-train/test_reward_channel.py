"""The candidate in its own process: the same rewards as in-process, its failures named, and
nothing it answers or does reaching the trainer unchecked."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

import numpy as np

import trainer
from reward_channel import (MAX_FRAME_BYTES, RemoteReward, RewardWorkerError, decode_step, encode_step,
                            receive_frame, send_frame)
from reward_module import RewardCallError, RewardLoadError, RewardValueError, load_reward_source

HERE = os.path.dirname(os.path.abspath(__file__))
EVALUATE_POLICY = trainer.evaluate_policy
SHAPED = open(os.path.join(HERE, "rewards", "shaped_reward.py"), encoding="utf-8").read()


def source(text):
    return textwrap.dedent(text).strip() + "\n"


def cars(n=5, seed=0):
    rng = np.random.default_rng(seed)
    obs = np.stack([rng.uniform(-1.2, 0.6, n), rng.uniform(-0.07, 0.07, n)], axis=1)
    next_obs = obs + rng.normal(0, 0.01, (n, 2))
    return (obs, rng.integers(0, 3, n), next_obs, rng.random(n) < 0.2, rng.integers(1, 201, n),
            rng.random(n) < 0.1, rng.random(n) < 0.1)


class Worker:
    """reward_channel.py in a child process, as the sandbox runs it, joined by a socketpair."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "reward_channel.py"), "--socket", str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], env=env, cwd=tempfile.mkdtemp(prefix="reward-worker-"))
        theirs.close()
        self.remote = RemoteReward(ours)

    def close(self):
        self.remote.close()
        return self.process.wait(timeout=30)


class FakeWorker:
    """A hostile reward process: answers a load, then whatever `answer` sends."""

    def __init__(self, answer):
        ours, self.theirs = socket.socketpair()
        self.remote = RemoteReward(ours)

        def run():
            receive_frame(self.theirs)
            send_frame(self.theirs, b"K", b'{"vectorised": false}')
            if receive_frame(self.theirs) is not None:
                answer(self.theirs)
            self.theirs.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


class RewardChannelTest(unittest.TestCase):
    def test_step_encoding_round_trips(self):
        args = cars(7)
        decoded = decode_step(encode_step(*args))
        for sent, got in zip(args, decoded):
            np.testing.assert_array_equal(np.asarray(sent), got)
        self.assertEqual([a.dtype for a in decoded[1:2] + decoded[3:]], [np.int64, np.bool_, np.int64, np.bool_, np.bool_])

    def test_same_rewards_as_in_process(self):
        batch = source("""
            import numpy as np
            def reward_batch(obs, action, next_obs, done, info):
                return next_obs[:, 1] ** 2 * 100 + info["goal_reached"] * 10 - (action == 1)
        """)
        for text in (SHAPED, batch):
            worker = Worker()
            try:
                remote = worker.remote.load(text)
                local = load_reward_source(text)
                self.assertEqual(remote.vectorised, local.vectorised)
                # Exact: one code path on both sides (the same function, interpreter and numpy build
                # on the same CPU; the worker inherits this environment, so numpy picks the same
                # kernels), and the floats cross the socket as raw float64 bytes.
                for seed in range(3):
                    np.testing.assert_array_equal(remote(*cars(8, seed)), local(*cars(8, seed)))
            finally:
                self.assertEqual(worker.close(), 0)

    def test_failures_are_named_as_in_process(self):
        worker = Worker()
        with self.assertRaisesRegex(RewardLoadError, r"reward\.py: loading raised ZeroDivisionError"):
            worker.remote.load("x = 1 / 0\n")
        self.assertEqual(worker.close(), 1)
        worker = Worker()
        try:
            worker.remote.load(source("""
                def reward(obs, action, next_obs, done, info):
                    if info["step"] > 100:
                        raise KeyError("boom")
                    return float("nan") if done else 0.0
            """))
            obs, action, next_obs, done, step, goal, limit = cars(4)
            with self.assertRaisesRegex(RewardCallError, r"reward\(\) raised KeyError: 'boom'"):
                worker.remote(obs, action, next_obs, np.zeros(4, bool), np.full(4, 150), goal, limit)
            with self.assertRaisesRegex(RewardValueError, r"reward\(\) returned nan"):
                worker.remote(obs, action, next_obs, np.ones(4, bool), np.full(4, 5), goal, limit)
            # The candidate goes on answering after a failed call: the trainer decides to stop.
            np.testing.assert_array_equal(worker.remote(obs, action, next_obs, np.zeros(4, bool), np.full(4, 5), goal, limit), np.zeros(4))
        finally:
            worker.close()

    def test_monkeypatching_reaches_only_its_own_process(self):
        worker = Worker()
        try:
            worker.remote.load(source("""
                import sys, trainer, mountaincar
                trainer.evaluate_policy = lambda *a, **k: {"successRate": 1.0}
                mountaincar.GOAL_POSITION = -10.0
                sys.modules["__main__"].serve = None
                def reward(obs, action, next_obs, done, info):
                    return 1.0
            """))
            np.testing.assert_array_equal(worker.remote(*cars(3)), np.ones(3))
        finally:
            worker.close()
        import mountaincar
        self.assertEqual(mountaincar.GOAL_POSITION, 0.5)
        self.assertIs(trainer.evaluate_policy, EVALUATE_POLICY)

    def test_hostile_answers_are_refused(self):
        cases = [
            (lambda s: send_frame(s, b"R", np.zeros(3).tobytes()), RewardValueError, r"answered 24 bytes"),
            (lambda s: send_frame(s, b"R", np.full(5, np.nan).tobytes()), RewardValueError, r"not finite"),
            (lambda s: send_frame(s, b"R", np.full(5, 1e7).tobytes()), RewardValueError, r"magnitude above"),
            (lambda s: send_frame(s, b"K", b"{}"), RewardValueError, r"of kind b'K'"),
            (lambda s: s.sendall(b"R" + (MAX_FRAME_BYTES + 1).to_bytes(4, "big")), RewardWorkerError, r"over the limit"),
            (lambda s: s.sendall(b"R\x00\x00\x00\x28" + b"\x00" * 8), RewardWorkerError, r"middle of a frame"),
            (lambda s: None, RewardWorkerError, r"ended without answering"),
            (lambda s: send_frame(s, b"E", json.dumps({"type": "SystemExit", "message": "x" * 5000}).encode()), RewardCallError, r"^x{2000}$"),
        ]
        for answer, error, pattern in cases:
            with self.subTest(pattern=pattern):
                fake = FakeWorker(answer)
                remote = fake.remote.load("def reward(*a):\n    return 0.0\n")
                with self.assertRaisesRegex(error, pattern):
                    remote(*cars(5))
                fake.thread.join(5)
                remote.close()


if __name__ == "__main__":
    unittest.main()
