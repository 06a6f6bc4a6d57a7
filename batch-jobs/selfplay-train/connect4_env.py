"""Connect Four for N games at once, in numpy: the trainer's environment and its two bots.

The rules, the observation and the seat plan are the same as shared/selfplay/connect4.ts and
shared/selfplay/bots.ts; both are tested against test/fixtures/connect4/vectors.json.

Board layout (as in TypeScript): boards[g, row, col], 6 rows x 7 columns, row 0 = the BOTTOM row;
a cell holds 0 (empty), 1 (the player who moved first) or -1 (the player who moved second). The
player to move is 1 after an even number of plies, -1 after an odd number.

Observation (`encode_observation`), 126 float32 values per game, seen by the player to move:
obs[g, plane * 42 + row * 7 + col], plane 0 = the mover's own pieces, plane 1 = the opponent's,
plane 2 = empty cells; each value exactly 0 or 1. TypeScript's `encodeObservation` writes the
same values in the same order.

Every operation is vectorised over the games: a win is found with a few shifts and ANDs of
per-game 64-bit bitboards (built from the boards when needed), with no Python loop over games.
"""
from __future__ import annotations

import numpy as np

ROWS = 6
COLS = 7
CELLS = ROWS * COLS
OBSERVATION_SIZE = 3 * CELLS

# Tactical candidate kinds (as numbers so they vectorise); TypeScript names them 'any', 'block', 'win'.
TACTICAL_ANY = 0
TACTICAL_BLOCK = 1
TACTICAL_WIN = 2
TACTICAL_KIND_NAMES = ("any", "block", "win")


# Bitboards, for the win tests only (the state stays in `boards`): a player's pieces as one
# uint64, bit col * 7 + row. Row 6 of every column is a sentinel that is always 0, so shifting a
# line of pieces by one step in any direction never wraps from one column into the next.
_COLUMN_BITS = ROWS + 1
_BIT_OF_CELL = np.array([1 << ((cell % COLS) * _COLUMN_BITS + cell // COLS) for cell in range(CELLS)],
                        dtype=np.uint64)
# One step along each kind of line: up, right, up-right, down-right.
_STEPS = tuple(np.uint64(s) for s in (1, _COLUMN_BITS, _COLUMN_BITS + 1, _COLUMN_BITS - 1))


def _bitboards(flat_boards: np.ndarray, player: np.ndarray) -> np.ndarray:
    """(K, 42) boards and (K,) players -> (K,) uint64: the cells holding player[k]'s pieces."""
    mine = flat_boards == np.asarray(player).reshape(-1, 1)
    return np.where(mine, _BIT_OF_CELL, np.uint64(0)).sum(axis=1, dtype=np.uint64)


class IllegalMoveError(ValueError):
    """A move the rules forbid: off the board, into a full column, for a finished game, or a
    missing move (-1) for a game still going. Names the game and the column."""

    def __init__(self, game: int, column: object, reason: str):
        super().__init__(f"game {game}: column {column} is illegal: {reason}")
        self.game = game
        self.column = column
        self.reason = reason


def encode_observation(boards: np.ndarray, to_move: np.ndarray) -> np.ndarray:
    """(N, 6, 7) boards and (N,) players to move -> (N, 126) float32, layout in the module doc."""
    boards = np.asarray(boards)
    mover = np.asarray(to_move).reshape(-1, 1, 1)
    planes = np.stack((boards == mover, boards == -mover, boards == 0), axis=1)
    return planes.reshape(boards.shape[0], OBSERVATION_SIZE).astype(np.float32)


def _fours_through(pieces: np.ndarray, cell_bits: np.ndarray) -> np.ndarray:
    """With the piece on each cell_bits added to pieces (bitboards, broadcast together): is
    there a line of four through that cell? The cell counts as the piece whatever it holds, so
    this answers both "did the last move win" and "would a move there win".

    For each direction, bit i of `four` is set when cells i, i+s, i+2s, i+3s are all held; a
    line passes through the cell when it starts on the cell or 1-3 steps before it.
    """
    held = pieces | cell_bits
    found = np.zeros(held.shape, dtype=bool)
    for step in _STEPS:
        two, three = step + step, step + step + step
        pairs = held & (held >> step)
        four = pairs & (pairs >> two)
        starts = cell_bits | (cell_bits >> step) | (cell_bits >> two) | (cell_bits >> three)
        found |= (four & starts) != 0
    return found


def seat_plan(games: int, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Game i -> (its opponent group, whether the learner moves first); identical to seatPlan.

    Game i goes to group i % groups and is that group's k-th game, k = i // groups; the learner
    moves first when k + group is even. The seat alternates along each group's own games, so in
    every group the learner moves first in exactly half of them (within one when the group's
    count is odd) for any number of groups. (first = i % 2 == 0 would give every game of a group
    the same seat whenever the number of groups is even.)
    """
    if isinstance(games, bool) or not isinstance(games, (int, np.integer)) or games < 0:
        raise ValueError(f"games: must be a non-negative integer (got {games!r})")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"groups: must be a positive integer (got {groups!r})")
    index = np.arange(int(games), dtype=np.int64)
    group = index % groups
    learner_first = ((index // groups + group) % 2) == 0
    return group, learner_first


class Connect4Env:
    """N Connect Four games stepped together.

    State (read freely, change only through the methods): boards (N, 6, 7) int8, heights (N, 7)
    int8 pieces per column, plies (N,) int16, done (N,) bool, winner (N,) int8 (1, -1, or 0 for a
    draw; 0 while not done).
    """

    def __init__(self, num_games: int):
        if isinstance(num_games, bool) or not isinstance(num_games, (int, np.integer)) or num_games < 1:
            raise ValueError(f"num_games: must be a positive integer (got {num_games!r})")
        self.num_games = int(num_games)
        self.boards = np.zeros((self.num_games, ROWS, COLS), dtype=np.int8)
        self.heights = np.zeros((self.num_games, COLS), dtype=np.int8)
        self.plies = np.zeros(self.num_games, dtype=np.int16)
        self.done = np.zeros(self.num_games, dtype=bool)
        self.winner = np.zeros(self.num_games, dtype=np.int8)
        self._all = np.arange(self.num_games)
        self._flat = self.boards.reshape(self.num_games, CELLS)  # a view: same memory as boards

    @classmethod
    def from_moves(cls, move_lists: list[list[int]]) -> "Connect4Env":
        """One game per move list (columns from the empty board); raises IllegalMoveError."""
        env = cls(len(move_lists))
        for game, moves in enumerate(move_lists):
            for col in moves:
                env.play(game, col)
        return env

    def reset(self) -> np.ndarray:
        """Empties every board; returns the observations (N, 126) for the first player."""
        self.boards.fill(0)
        self.heights.fill(0)
        self.plies.fill(0)
        self.done.fill(False)
        self.winner.fill(0)
        return self.observation()

    @property
    def to_move(self) -> np.ndarray:
        """(N,) int8: 1 or -1, the player to move in each game (also once it is over)."""
        return np.where(self.plies % 2 == 0, 1, -1).astype(np.int8)

    def observation(self) -> np.ndarray:
        return encode_observation(self.boards, self.to_move)

    def legal_mask(self) -> np.ndarray:
        """(N, 7) bool; all False for a finished game."""
        return (self.heights < ROWS) & ~self.done[:, None]

    def winning_moves(self, player: np.ndarray) -> np.ndarray:
        """(N, 7) bool: columns where player[g] dropping a piece now would complete four."""
        player = np.asarray(player, dtype=np.int8).reshape(self.num_games)
        rows = np.minimum(self.heights, ROWS - 1).astype(np.uint64)  # a full column is masked below
        cell_bits = np.uint64(1) << (np.arange(COLS, dtype=np.uint64) * np.uint64(_COLUMN_BITS) + rows)
        wins = _fours_through(_bitboards(self._flat, player)[:, None], cell_bits)
        return wins & self.legal_mask()

    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plays actions[g] in every game still going; a finished game must get -1.

        Returns (observations (N, 126) for the player now to move, rewards (N,) float32 for the
        player who just moved: 1.0 if that move won, else 0.0, done flags (N,) bool, a copy).
        Raises IllegalMoveError (nothing changes) if any action is illegal.
        """
        actions = np.asarray(actions)
        if actions.shape != (self.num_games,) or not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(f"actions: expected {self.num_games} integers (got shape {actions.shape}, "
                             f"dtype {actions.dtype})")
        actions = actions.astype(np.int64)
        live = ~self.done
        bad_finished = self.done & (actions != -1)
        in_range = (actions >= 0) & (actions < COLS)
        full = np.zeros(self.num_games, dtype=bool)
        full[in_range] = self.heights[self._all[in_range], actions[in_range]] >= ROWS
        bad_live = live & (~in_range | full)
        if bad_finished.any() or bad_live.any():
            game = int(np.flatnonzero(bad_finished | bad_live)[0])
            col = int(actions[game])
            if self.done[game]:
                reason = "the game is over (pass -1 for a finished game)"
            elif not 0 <= col < COLS:
                reason = f"columns are integers 0..{COLS - 1}"
            else:
                reason = "the column is full"
            raise IllegalMoveError(game, col, reason)
        rewards = np.zeros(self.num_games, dtype=np.float32)
        games = np.flatnonzero(live)
        rewards[games] = self._apply(games, actions[games])
        return self.observation(), rewards, self.done.copy()

    def play(self, game: int, col: int) -> float:
        """Plays one move in one game; returns the reward for the mover (1.0 if it won)."""
        if not 0 <= game < self.num_games:
            raise ValueError(f"game: must be in [0, {self.num_games - 1}] (got {game!r})")
        if self.done[game]:
            raise IllegalMoveError(game, col, "the game is over")
        if isinstance(col, bool) or not isinstance(col, (int, np.integer)) or not 0 <= col < COLS:
            raise IllegalMoveError(game, col, f"columns are integers 0..{COLS - 1}")
        if self.heights[game, col] >= ROWS:
            raise IllegalMoveError(game, col, "the column is full")
        return float(self._apply(np.array([game]), np.array([int(col)]))[0])

    def _apply(self, games: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Drops the movers' pieces (moves already checked); returns 1.0 where the move won."""
        rows = self.heights[games, cols].astype(np.int64)
        pieces = np.where(self.plies[games] % 2 == 0, 1, -1).astype(np.int8)
        self.boards[games, rows, cols] = pieces
        self.heights[games, cols] += 1
        self.plies[games] += 1
        won = _fours_through(_bitboards(self._flat[games], pieces), _BIT_OF_CELL[rows * COLS + cols])
        full = self.plies[games] == CELLS
        self.winner[games] = np.where(won, pieces, 0)
        self.done[games] = won | full
        return won.astype(np.float32)


def _sample_columns(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniform column among the True ones of each row of (N, 7) mask; -1 where none is True.

    The argmax of independent uniform keys over the allowed columns is a uniform pick among them.
    """
    keys = rng.random(mask.shape)
    keys[~mask] = -1.0
    choice = keys.argmax(axis=1).astype(np.int64)
    choice[~mask.any(axis=1)] = -1
    return choice


def random_moves(env: Connect4Env, rng: np.random.Generator) -> np.ndarray:
    """The random bot for every game: (N,) columns, uniform over the legal ones; -1 when done."""
    return _sample_columns(env.legal_mask(), rng)


def tactical_candidates(env: Connect4Env) -> tuple[np.ndarray, np.ndarray]:
    """(N, 7) mask of the columns the tactical bot may choose and (N,) kinds (TACTICAL_*).

    Its own immediate wins if any; else the opponent's immediate wins (the columns to block);
    else every legal column. All False for a finished game.
    """
    mover = env.to_move
    wins = env.winning_moves(mover)
    blocks = env.winning_moves(-mover)
    has_win = wins.any(axis=1)
    has_block = blocks.any(axis=1)
    mask = np.where(has_win[:, None], wins, np.where(has_block[:, None], blocks, env.legal_mask()))
    kind = np.where(has_win, TACTICAL_WIN, np.where(has_block, TACTICAL_BLOCK, TACTICAL_ANY)).astype(np.int8)
    return mask, kind


def tactical_moves(env: Connect4Env, rng: np.random.Generator) -> np.ndarray:
    """The tactical bot for every game: (N,) columns sampled uniformly from its candidates."""
    mask, _ = tactical_candidates(env)
    return _sample_columns(mask, rng)
