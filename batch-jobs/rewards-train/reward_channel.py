"""The candidate's reward function in its own process, apart from the trainer.

The trainer (trusted code) and the candidate's reward module (untrusted) run in two processes
joined by one connected socket: the candidate's process can reach neither the trainer's memory
nor its output directory (locally a second sandbox with its own empty work dir; on AWS another
user), so it cannot monkeypatch the trainer, rewrite its bookkeeping or write the policy. All it
can do is answer reward requests, and every answer is checked here as if hostile.

Frames, both ways: one kind byte, a 4-byte big-endian payload length, the payload.

    trainer -> worker   L  JSON {"source": str, "filename": str}      load the module
                        S  n (4 bytes, big-endian), then 9n float64:  one step of n cars:
                           obs[n,2], next_obs[n,2], action, done, step, goal_reached, time_limit
    worker -> trainer   K  JSON {"vectorised": bool}                  loaded
                        R  n float64                                  the rewards
                        E  JSON {"type": str, "message": str}         the module failed

`python3 reward_channel.py --socket FD` is the worker; RemoteReward is the trainer's side, with
RewardFunction's call signature.
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import traceback

import numpy as np

from reward_module import (MAX_ABS_REWARD, RewardCallError, RewardFunction, RewardLoadError, RewardModuleError,
                           RewardValueError, load_reward_source)

HEADER = struct.Struct(">cI")
COUNT = struct.Struct(">I")
# A step of 64 cars is 4.6 KB; an error message is capped far below this.
MAX_FRAME_BYTES = 1 << 20
MAX_CARS = 4096
ERRORS: dict[str, type[RewardModuleError]] = {
    "RewardLoadError": RewardLoadError,
    "RewardCallError": RewardCallError,
    "RewardValueError": RewardValueError,
}


class RewardWorkerError(RewardModuleError):
    """The reward process broke the protocol or ended (its sandbox's verdict says why)."""


def inherited_socket(fd: int) -> socket.socket:
    """A socket from an inherited descriptor, blocking (the parent that made it may have set O_NONBLOCK)."""
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    return sock


def _receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send_frame(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(HEADER.pack(kind, len(payload)) + payload)


def receive_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """(kind, payload), or None at a clean end of stream; RewardWorkerError on a malformed frame."""
    header = _receive_exactly(sock, HEADER.size)
    if header is None:
        return None
    kind, size = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise RewardWorkerError(f"reward process sent a frame of {size} bytes, over the limit of {MAX_FRAME_BYTES}")
    payload = _receive_exactly(sock, size)
    if payload is None:
        raise RewardWorkerError("reward process ended in the middle of a frame")
    return kind, payload


def encode_step(obs, action, next_obs, done, step, goal_reached, time_limit) -> bytes:
    n = obs.shape[0]
    columns = [np.asarray(obs, np.float64).reshape(n, 2), np.asarray(next_obs, np.float64).reshape(n, 2)]
    columns += [np.asarray(c, np.float64).reshape(n, 1) for c in (action, done, step, goal_reached, time_limit)]
    return COUNT.pack(n) + np.ascontiguousarray(np.concatenate(columns, axis=1)).tobytes()


def decode_step(payload: bytes) -> tuple[np.ndarray, ...]:
    (n,) = COUNT.unpack_from(payload)
    if n > MAX_CARS or len(payload) != COUNT.size + 72 * n:
        raise RewardWorkerError(f"malformed step request ({len(payload)} bytes for {n} cars)")
    table = np.frombuffer(payload, np.float64, offset=COUNT.size).reshape(n, 9)
    return (table[:, 0:2].copy(), table[:, 4].astype(np.int64), table[:, 2:4].copy(), table[:, 5] != 0,
            table[:, 6].astype(np.int64), table[:, 7] != 0, table[:, 8] != 0)


class RemoteReward:
    """The trainer's handle on the candidate's process: RewardFunction's call signature, every answer checked."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self.vectorised = False
        self.name = "reward"

    @classmethod
    def from_fd(cls, fd: int) -> "RemoteReward":
        return cls(inherited_socket(fd))

    def _answer(self) -> tuple[bytes, bytes]:
        frame = receive_frame(self._sock)
        if frame is None:
            raise RewardWorkerError("the reward process ended without answering (stopped by its sandbox, or it exited)")
        kind, payload = frame
        if kind == b"E":
            try:
                error = json.loads(payload)
                cls = ERRORS.get(str(error.get("type")), RewardCallError)
                message = str(error.get("message"))[:2000]
            except (ValueError, AttributeError):
                raise RewardWorkerError("reward process sent an unreadable error") from None
            raise cls(message)
        return kind, payload

    def load(self, source: str, filename: str = "reward.py") -> "RemoteReward":
        send_frame(self._sock, b"L", json.dumps({"source": source, "filename": filename}).encode())
        kind, payload = self._answer()
        if kind != b"K":
            raise RewardWorkerError(f"reward process answered {kind!r} to a load")
        try:
            self.vectorised = json.loads(payload).get("vectorised") is True
        except (ValueError, AttributeError):
            raise RewardWorkerError("reward process sent an unreadable load answer") from None
        self.name = "reward_batch" if self.vectorised else "reward"
        return self

    def __call__(self, obs, action, next_obs, done, step, goal_reached, time_limit) -> np.ndarray:
        n = obs.shape[0]
        try:
            send_frame(self._sock, b"S", encode_step(obs, action, next_obs, done, step, goal_reached, time_limit))
        except OSError as error:
            raise RewardWorkerError(f"the reward process is gone ({error.strerror or error})") from None
        kind, payload = self._answer()
        if kind != b"R" or len(payload) != 8 * n:
            raise RewardValueError(f"{self.name}() answered {len(payload)} bytes of kind {kind!r}: must be {n} float64 rewards")
        rewards = np.frombuffer(payload, np.float64).copy()
        if not np.all(np.isfinite(rewards)) or np.any(np.abs(rewards) > MAX_ABS_REWARD):
            raise RewardValueError(f"{self.name}() returned a value that is not finite or of magnitude above {MAX_ABS_REWARD:g}")
        return rewards

    def close(self) -> None:
        self._sock.close()


def _send_error(sock: socket.socket, error: BaseException) -> None:
    kind = type(error).__name__ if isinstance(error, RewardModuleError) else "RewardCallError"
    send_frame(sock, b"E", json.dumps({"type": kind, "message": str(error)[:2000]}).encode())


def serve(sock: socket.socket) -> int:
    """The worker's loop: load once, then answer steps until the trainer closes the socket."""
    function: RewardFunction | None = None
    while True:
        frame = receive_frame(sock)
        if frame is None:
            return 0
        kind, payload = frame
        try:
            if kind == b"L" and function is None:
                request = json.loads(payload)
                function = load_reward_source(request["source"], request.get("filename", "reward.py"))
                send_frame(sock, b"K", json.dumps({"vectorised": function.vectorised}).encode())
            elif kind == b"S" and function is not None:
                rewards = function(*decode_step(payload))
                send_frame(sock, b"R", np.ascontiguousarray(rewards, np.float64).tobytes())
            else:
                raise RewardWorkerError(f"unexpected request {kind!r}")
        except RewardModuleError as error:
            # Also in this process's log: the sandbox reads limits (MemoryError...) from it.
            traceback.print_exc()
            _send_error(sock, error)
            if function is None:
                return 1
        except Exception as error:  # noqa: BLE001 - anything else the candidate caused is its error
            traceback.print_exc()
            _send_error(sock, RewardCallError(f"{type(error).__name__}: {error}"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", type=int, required=True, help="the inherited socket to the trainer")
    arguments = parser.parse_args()
    # The only way the candidate's answers leave this process: the socket, checked on the other side.
    sys.exit(serve(inherited_socket(arguments.socket)))
