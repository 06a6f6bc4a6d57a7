"""The self-play PPO training loop: batched Connect Four games against groups of opponents.

No AWS here: the loop reports through callbacks (progress after each iteration, a checkpoint
every `checkpoint_every` iterations) and main.py decides what goes to S3.

One iteration:
1. Assign the games: `assign_games` splits them across the opponent groups with seat_plan, so
   against every group (and every member of a group) the learner moves first in exactly half.
2. Play them all in lock-step (`play_games`): one batched learner forward pass per ply, one per
   snapshot opponent, the bots vectorised over their games.
3. Keep the learner's transitions only; its reward is +1 win / -1 loss / 0 draw at its own last
   move. GAE over each game's learner moves, then `ppo_update`.
4. Record the curves: the score against each group (wins + draws / 2 over games), the losses,
   environment steps per second.

Everything random comes from one numpy Generator (the bots) and one CPU torch Generator
(sampling and minibatch shuffles), whose states travel in the checkpoint, so a resumed run
continues exactly where an uninterrupted one would have been on the same kind of CPU. A spot job
resumed on another CPU family runs other SIMD kernels, whose last bits can send a sampled move
another way: the run is then as valid, not the same.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from connect4_env import Connect4Env, random_moves, seat_plan, tactical_moves
from policy import PolicyConfig, PolicyNet, load_checkpoint, masked_logits, save_checkpoint
from ppo import PPOConfig, RolloutBatch, gae, ppo_update
from checks import positive_int

BOT_KINDS = ("random", "tactical")
SELF = "self"


class TrainConfigError(ValueError):
    """A training config field outside its range or contradicting another; names the field."""


class ResumeMismatchError(ValueError):
    """A checkpoint written by a run with a different config: resuming it would mix two runs."""


def _positive_int(name: str, value: Any) -> int:
    return positive_int(name, value, TrainConfigError)


@dataclass(frozen=True)
class Opponent:
    """One opponent: a bot ('random', 'tactical'), the learner itself ('self'), or a snapshot."""

    kind: str
    """'random', 'tactical', 'self' or 'snapshot'."""
    name: str
    """Shown in curves and progress lines."""
    state_dict: str | None = None
    """For a snapshot: a local checkpoint file (policy.save_checkpoint's format)."""

    @classmethod
    def parse(cls, value: Any, where: str) -> "Opponent":
        """'random' | 'tactical' | 'self' | {"name": ..., "state_dict": path}."""
        if isinstance(value, str):
            if value in BOT_KINDS or value == SELF:
                return cls(kind=value, name=value)
            raise TrainConfigError(f"{where}: must be 'random', 'tactical', 'self' or a snapshot "
                                   f"{{name, state_dict}} (got {value!r})")
        if isinstance(value, dict) and set(value) == {"name", "state_dict"} \
                and isinstance(value["name"], str) and value["name"] \
                and isinstance(value["state_dict"], str) and value["state_dict"]:
            return cls(kind="snapshot", name=value["name"], state_dict=value["state_dict"])
        raise TrainConfigError(f"{where}: a snapshot is {{\"name\": str, \"state_dict\": path}} (got {value!r})")

    def to_json(self) -> Any:
        return self.name if self.kind != "snapshot" else {"name": self.name, "state_dict": self.state_dict}


@dataclass
class TrainConfig:
    """What one training job does; the TypeScript side sends the same fields as JSON."""

    games_per_iteration: int = 2048
    """Games played per PPO iteration, all in lock-step; a multiple of 2 x the number of groups,
    so every group gets an even number of games and the learner moves first in exactly half."""

    iterations: int = 25
    """PPO iterations (rollout + update) in this job."""

    opponent_groups: list = field(default_factory=lambda: [["random"], ["tactical"]])
    """Groups of opponents; the games are shared equally between groups, and a group's games
    equally between its members. A member is 'random', 'tactical', 'self' (the learner's current
    weights, not trained on) or a snapshot {"name", "state_dict": local checkpoint path}."""

    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO hyperparameters (a JSON object becomes a PPOConfig)."""

    seed: int = 0
    """Seeds the initial weights, the bots and the sampling."""

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The network; ignored (taken from the file) when initial_state_dict is given."""

    checkpoint_every: int = 5
    """Iterations between checkpoints; the last iteration always checkpoints."""

    initial_state_dict: str | None = None
    """A local checkpoint to start from (the previous generation's snapshot); None = fresh net."""

    continue_optimizer: bool = True
    """When initial_state_dict also holds an optimizer state (main.py writes snapshot.pt with
    one), continue that Adam state instead of a fresh one. A generation is where the product
    stops to rate and pick opponents, not a learning boundary: a fresh Adam's first steps are
    full-size in every weight whatever its gradient history, a jolt to a trained policy. The
    learning rate is this config's ppo.learning_rate either way."""

    device: str = "auto"
    """'auto' (CUDA when available), 'cpu' or 'cuda' for the learner's forward and update passes."""

    # Derived after parsing.
    groups: list = field(init=False, repr=False)
    """opponent_groups parsed into lists of Opponent."""
    games_per_group: int = field(init=False)
    """games_per_iteration / number of groups."""

    def __post_init__(self) -> None:
        _positive_int("games_per_iteration", self.games_per_iteration)
        _positive_int("iterations", self.iterations)
        _positive_int("checkpoint_every", self.checkpoint_every)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise TrainConfigError(f"seed: must be a non-negative integer (got {self.seed!r})")
        if isinstance(self.ppo, dict):
            self.ppo = PPOConfig.from_dict(self.ppo)
        if isinstance(self.policy, dict):
            self.policy = PolicyConfig.from_dict(self.policy)
        if not isinstance(self.ppo, PPOConfig) or not isinstance(self.policy, PolicyConfig):
            raise TrainConfigError("ppo, policy: must be objects")
        if self.device not in ("auto", "cpu", "cuda"):
            raise TrainConfigError(f"device: must be auto, cpu or cuda (got {self.device!r})")
        if not isinstance(self.continue_optimizer, bool):
            raise TrainConfigError(f"continue_optimizer: must be true or false (got {self.continue_optimizer!r})")
        if self.initial_state_dict is not None and not (isinstance(self.initial_state_dict, str)
                                                        and self.initial_state_dict):
            raise TrainConfigError(f"initial_state_dict: must be a path or null (got {self.initial_state_dict!r})")
        groups = self.opponent_groups
        if not isinstance(groups, (list, tuple)) or not groups:
            raise TrainConfigError(f"opponent_groups: must be a non-empty list of groups (got {groups!r})")
        parsed = []
        for i, group in enumerate(groups):
            if not isinstance(group, (list, tuple)) or not group:
                raise TrainConfigError(f"opponent_groups[{i}]: must be a non-empty list of opponents (got {group!r})")
            parsed.append([Opponent.parse(member, f"opponent_groups[{i}][{j}]") for j, member in enumerate(group)])
        self.groups = parsed
        if self.games_per_iteration % (2 * len(parsed)):
            raise TrainConfigError(
                f"games_per_iteration: must be a multiple of 2 x {len(parsed)} groups = {2 * len(parsed)} "
                f"so the learner moves first in exactly half of every group's games (got {self.games_per_iteration})")
        self.games_per_group = self.games_per_iteration // len(parsed)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """From parsed JSON; an unknown field is an error (a typo must not silently use a default)."""
        if not isinstance(data, dict):
            raise TrainConfigError(f"train config: expected an object (got {type(data).__name__})")
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TrainConfigError(f"train config: unknown field(s) {unknown}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON form; checkpoints carry it so a resume can check it is the same run."""
        return {
            "games_per_iteration": self.games_per_iteration,
            "iterations": self.iterations,
            "opponent_groups": [[m.to_json() for m in group] for group in self.groups],
            "ppo": dataclasses.asdict(self.ppo),
            "seed": int(self.seed),
            "policy": self.policy.to_dict(),
            "checkpoint_every": self.checkpoint_every,
            "initial_state_dict": self.initial_state_dict,
            "continue_optimizer": self.continue_optimizer,
        }

    def group_names(self) -> list[str]:
        return ["+".join(m.name for m in group) for group in self.groups]


def assign_games(games: int, members_per_group: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Game i -> (group, member within the group, whether the learner moves first).

    Groups and seats come from seat_plan: within each group the seat alternates game by game.
    A group's games are then dealt to its members two at a time (one with each seat), so every
    member also gets both seats equally when its group's count is even. (Dealing them one at a
    time, k % members, would give every game of a member the same seat when members is even.)
    """
    group, learner_first = seat_plan(games, len(members_per_group))
    member = np.zeros(games, dtype=np.int64)
    for g, count in enumerate(members_per_group):
        rows = np.flatnonzero(group == g)
        member[rows] = (np.arange(rows.size) // 2) % count
    return group, member, learner_first


def game_plan(config: "TrainConfig") -> tuple[list[Opponent], np.ndarray, np.ndarray, np.ndarray]:
    """What every iteration plays: (the opponents, flat; per game its group, its index into
    the opponents, whether the learner moves first)."""
    opponents = [m for group in config.groups for m in group]
    offsets = np.cumsum([0] + [len(g) for g in config.groups])[:-1]
    group, member, learner_first = assign_games(config.games_per_iteration, [len(g) for g in config.groups])
    return opponents, group, offsets[group] + member, learner_first


@dataclass
class GameRecord:
    """The outcome of a batch of games and, when recorded, the learner's decisions."""

    outcome: np.ndarray
    """(N,) float: +1 learner won, -1 lost, 0 draw."""
    env_steps: int
    """Moves played, both sides, all games."""
    seconds: float
    transitions: dict[str, np.ndarray] | None = None
    """Rows in play order: obs, mask, action, log_prob, value, game, step (learner move index)."""


def _learner_act(net: PolicyNet, obs: np.ndarray, mask: np.ndarray, device: torch.device,
                 generator: torch.Generator, greedy: bool):
    """(actions, log-probs, values) for the rows given; samples on the CPU generator so a run is
    reproducible whatever device the net is on."""
    with torch.no_grad():
        logits, values = net(torch.from_numpy(obs).to(device))
        logits = masked_logits(logits, torch.from_numpy(mask).to(device)).float().cpu()
        log_probs = torch.log_softmax(logits, dim=1)
        if greedy:
            actions = logits.argmax(dim=1)
        else:
            actions = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(1)
        chosen = log_probs.gather(1, actions[:, None]).squeeze(1)
    return actions.numpy(), chosen.numpy(), values.float().cpu().numpy()


def play_games(net: PolicyNet, opponents: list[Opponent], opponent_nets: dict[str, PolicyNet],
               opponent_index: np.ndarray, learner_first: np.ndarray, rng: np.random.Generator,
               generator: torch.Generator, device: torch.device, greedy: bool = False,
               record: bool = False) -> GameRecord:
    """Plays len(opponent_index) games at once: game g against opponents[opponent_index[g]].

    Each ply, the learner moves in every game where it is to move (one forward pass), each
    snapshot in its games (one forward pass each), each bot vectorised over its games.
    """
    start = time.perf_counter()
    n = int(opponent_index.shape[0])
    env = Connect4Env(n)
    obs = env.reset()
    learner_color = np.where(learner_first, 1, -1).astype(np.int8)
    records: dict[str, list] = {k: [] for k in ("obs", "mask", "action", "log_prob", "value", "game", "step")}
    learner_moves = np.zeros(n, dtype=np.int64)
    bot_games = {kind: np.isin(opponent_index, [j for j, m in enumerate(opponents) if m.kind == kind])
                 for kind in BOT_KINDS}
    env_steps = 0
    net.eval()
    while not env.done.all():
        mask = env.legal_mask()
        live = ~env.done
        learner_turn = live & (env.to_move == learner_color)
        actions = np.full(n, -1, dtype=np.int64)
        rows = np.flatnonzero(learner_turn)
        if rows.size:
            act, logp, value = _learner_act(net, obs[rows], mask[rows], device, generator, greedy)
            actions[rows] = act
            if record:
                for key, val in (("obs", obs[rows]), ("mask", mask[rows]), ("action", act),
                                 ("log_prob", logp), ("value", value), ("game", rows),
                                 ("step", learner_moves[rows])):
                    records[key].append(val)
            learner_moves[rows] += 1
        opponent_turn = live & ~learner_turn
        for kind, bot in (("random", random_moves), ("tactical", tactical_moves)):
            # One vectorised call per bot kind and ply, however many groups it appears in.
            rows = np.flatnonzero(opponent_turn & bot_games[kind])
            if rows.size:
                actions[rows] = bot(env, rng)[rows]
        for j, opponent in enumerate(opponents):
            if opponent.kind in BOT_KINDS:
                continue
            rows = np.flatnonzero(opponent_turn & (opponent_index == j))
            if rows.size:
                opponent_net = net if opponent.kind == SELF else opponent_nets[opponent.name]
                actions[rows] = _learner_act(opponent_net, obs[rows], mask[rows], device, generator, greedy)[0]
        env_steps += int(live.sum())
        obs, _, _ = env.step(actions)
    outcome = (env.winner * learner_color).astype(np.float32)
    transitions = None
    if record:
        transitions = {k: np.concatenate(v) if v else np.zeros(0) for k, v in records.items()}
    return GameRecord(outcome=outcome, env_steps=env_steps, seconds=time.perf_counter() - start,
                      transitions=transitions)


def learner_batch(record: GameRecord, ppo: PPOConfig, device: torch.device) -> RolloutBatch:
    """The learner's transitions with GAE advantages: each game's learner moves form one episode
    whose only reward, the game's outcome, comes at its last move."""
    tr = record.transitions
    game, step = tr["game"].astype(np.int64), tr["step"].astype(np.int64)
    n = record.outcome.shape[0]
    steps = int(step.max()) + 1
    last_step = np.zeros(n, dtype=np.int64)
    np.maximum.at(last_step, game, step)
    # [T, N] grids; the cells after a game's last learner move are padding with done = 1, so
    # nothing flows across them and their advantages (never read back) stay 0.
    values = np.zeros((steps, n), dtype=np.float32)
    rewards = np.zeros((steps, n), dtype=np.float32)
    dones = np.ones((steps, n), dtype=np.float32)
    values[step, game] = tr["value"]
    dones[step, game] = (step == last_step[game]).astype(np.float32)
    rewards[last_step, np.arange(n)] = record.outcome
    advantages, returns = gae(rewards, values, dones, np.zeros(n, dtype=np.float32), ppo.gamma, ppo.gae_lambda)
    return RolloutBatch(
        obs=torch.from_numpy(tr["obs"]).to(device),
        legal_mask=torch.from_numpy(tr["mask"]).to(device),
        actions=torch.from_numpy(tr["action"].astype(np.int64)).to(device),
        log_probs=torch.from_numpy(tr["log_prob"].astype(np.float32)).to(device),
        advantages=torch.from_numpy(advantages[step, game].astype(np.float32)).to(device),
        returns=torch.from_numpy(returns[step, game].astype(np.float32)).to(device),
    )


def scores_by(outcome: np.ndarray, labels: np.ndarray, count: int) -> list[float]:
    """Score (wins + draws / 2) / games for each label 0..count-1; NaN-free (0 games -> 0)."""
    points = (outcome + 1.0) / 2.0
    games = np.bincount(labels, minlength=count)
    totals = np.bincount(labels, weights=points, minlength=count)
    return [float(t / g) if g else 0.0 for t, g in zip(totals, games)]


def evaluate(net: PolicyNet, opponent: str, games: int, seed: int) -> dict[str, float]:
    """The net's greedy score against a bot ('random' or 'tactical') over `games` games, half
    from each seat: {first, second, overall, games}. Runs on whatever device the net is on."""
    if opponent not in BOT_KINDS:
        raise ValueError(f"opponent: must be random or tactical (got {opponent!r})")
    games = _positive_int("games", games)
    if games % 2:
        raise ValueError(f"games: must be even so both seats get the same count (got {games})")
    _, learner_first = seat_plan(games, 1)
    record = play_games(net, [Opponent(opponent, opponent)], {}, np.zeros(games, dtype=np.int64),
                        learner_first, np.random.default_rng(seed), torch.Generator().manual_seed(seed),
                        next(net.parameters()).device, greedy=True)
    first, second = scores_by(record.outcome, (~learner_first).astype(np.int64), 2)
    return {"first": first, "second": second, "overall": float(((record.outcome + 1) / 2).mean()),
            "games": games}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise TrainConfigError("device: cuda was asked for but torch sees no CUDA device")
    return torch.device(name)


@dataclass
class TrainingCheckpoint:
    """What a checkpoint callback gets: call save(path) to write it (policy.save_checkpoint's
    format, loadable with weights_only=True)."""

    iteration: int
    net: PolicyNet
    optimizer: torch.optim.Optimizer
    progress: dict[str, Any]

    def save(self, path: str) -> None:
        save_checkpoint(path, self.net, self.optimizer, self.progress)


@dataclass
class TrainResult:
    net: PolicyNet
    curves: dict[str, list]
    """Columnar, one entry per iteration: iteration, score_by_group (list per group), policy_loss,
    value_loss, entropy, approx_kl, env_steps, env_steps_per_second, seconds."""
    group_names: list[str]
    env_steps: int
    rollout_seconds: float
    resumed_from: int
    """Iterations already done by the checkpoint this run resumed from (0 for a fresh start)."""
    optimizer: torch.optim.Optimizer | None = None
    """The learner's Adam, to save with the snapshot so the next generation can continue it."""

    @property
    def env_steps_per_second(self) -> float:
        return self.env_steps / self.rollout_seconds if self.rollout_seconds > 0 else 0.0


CURVE_KEYS = ("iteration", "score_by_group", "policy_loss", "value_loss", "entropy", "approx_kl",
              "env_steps", "env_steps_per_second", "seconds")


def _torch_state_to_json(generator: torch.Generator) -> list[int]:
    return generator.get_state().tolist()


def train(config: TrainConfig,
          on_progress: Callable[[dict[str, Any]], None] | None = None,
          on_checkpoint: Callable[[TrainingCheckpoint], None] | None = None,
          resume_from: str | None = None,
          identity: dict[str, Any] | None = None) -> TrainResult:
    """Runs config.iterations PPO iterations (fewer when resume_from already did some).

    identity (JSON) names the run and is stored in every checkpoint; resuming a checkpoint with
    another identity raises ResumeMismatchError. It defaults to config.to_dict(); a wrapper that
    downloads inputs to fresh local paths passes its spec instead, so the paths do not count.
    """
    identity = json.loads(json.dumps(identity if identity is not None else config.to_dict()))
    device = resolve_device(config.device)
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    initial_optimizer_state = None
    if config.initial_state_dict:
        initial = load_checkpoint(config.initial_state_dict)
        net = initial.net
        if config.continue_optimizer:
            initial_optimizer_state = initial.optimizer_state
    else:
        torch.manual_seed(config.seed)  # the initial weights
        net = PolicyNet(config.policy)
    net = net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.ppo.learning_rate, eps=1e-5)
    if initial_optimizer_state is not None:
        optimizer.load_state_dict(initial_optimizer_state)  # moves the moments to the net's device
        for param_group in optimizer.param_groups:
            param_group["lr"] = config.ppo.learning_rate
    curves: dict[str, list] = {key: [] for key in CURVE_KEYS}
    done_iterations = 0
    env_steps_total, rollout_seconds = 0, 0.0

    if resume_from is not None:
        checkpoint = load_checkpoint(resume_from, map_location=device)
        progress = checkpoint.progress
        if progress.get("identity") != identity:
            raise ResumeMismatchError(f"checkpoint {resume_from!r}: written by another run; "
                                      f"it has {progress.get('identity')!r}, this run is {identity!r}")
        net = checkpoint.net.to(device)
        optimizer = torch.optim.Adam(net.parameters(), lr=config.ppo.learning_rate, eps=1e-5)
        optimizer.load_state_dict(checkpoint.optimizer_state)
        rng.bit_generator.state = progress["numpy_rng"]
        generator.set_state(torch.tensor(progress["torch_rng"], dtype=torch.uint8))
        curves = progress["curves"]
        done_iterations = int(progress["iteration"])
        env_steps_total = int(progress["env_steps"])
        rollout_seconds = float(progress["rollout_seconds"])
    resumed_from = done_iterations

    opponent_nets = {}
    opponents = [m for group in config.groups for m in group]
    for m in opponents:
        if m.kind == "snapshot" and m.name not in opponent_nets:
            frozen = load_checkpoint(m.state_dict, map_location=device).net.to(device).eval()
            for p in frozen.parameters():
                p.requires_grad_(False)
            opponent_nets[m.name] = frozen
    opponents, group, opponent_index, learner_first = game_plan(config)
    group_names = config.group_names()

    for iteration in range(done_iterations + 1, config.iterations + 1):
        started = time.perf_counter()
        record = play_games(net, opponents, opponent_nets, opponent_index, learner_first, rng, generator,
                            device, greedy=False, record=True)
        batch = learner_batch(record, config.ppo, device)
        losses = ppo_update(net, optimizer, batch, config.ppo, generator=generator)
        env_steps_total += record.env_steps
        rollout_seconds += record.seconds
        row = {
            "iteration": iteration,
            "score_by_group": [round(s, 4) for s in scores_by(record.outcome, group, len(config.groups))],
            "policy_loss": round(losses["policy"], 5),
            "value_loss": round(losses["value"], 5),
            "entropy": round(losses["entropy"], 5),
            "approx_kl": round(losses["approx_kl"], 6),
            "env_steps": record.env_steps,
            "env_steps_per_second": round(record.env_steps / record.seconds, 1),
            "seconds": round(time.perf_counter() - started, 3),
        }
        for key in CURVE_KEYS:
            curves[key].append(row[key])
        if on_progress is not None:
            on_progress({**row, "groups": group_names, "iterations": config.iterations})
        if on_checkpoint is not None and (iteration % config.checkpoint_every == 0 or iteration == config.iterations):
            on_checkpoint(TrainingCheckpoint(iteration=iteration, net=net, optimizer=optimizer, progress={
                "identity": identity,
                "iteration": iteration,
                "numpy_rng": rng.bit_generator.state,
                "torch_rng": _torch_state_to_json(generator),
                "curves": curves,
                "env_steps": env_steps_total,
                "rollout_seconds": rollout_seconds,
            }))
    return TrainResult(net=net, curves=curves, group_names=group_names, env_steps=env_steps_total,
                       rollout_seconds=rollout_seconds, resumed_from=resumed_from, optimizer=optimizer)

