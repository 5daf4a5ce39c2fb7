"""DQN as an algorithm: presets, agent, replay, the off-policy loop and its Ape-X roles.

Single process: :class:`rlamd.loops.OffPolicyLoop` (collect -> replay -> updates).
On Ray (Ape-X, Horgan et al. 2018, https://arxiv.org/abs/1803.00933): each rollout
worker runs :class:`ApexSource` (its own epsilons; ships :class:`Chunk`s with the
initial priorities it computed), each learner a :class:`ReplayShard`, and
:class:`rlamd.distributed.apex.ApexDriver` schedules them (the algorithms know nothing of
Ray; the distributed layer sits above them).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np
import torch

from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.config import ConfigError
from rlamd.envs import Step, VecEnv
from rlamd.loops import OffPolicyLoop, learn_from_replay
from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer, bytes_per_transition
from rlamd.replay.nstep import gamma_powers, nstep_window

from .base import Policy, build_learner, obs_info

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.runconfig import RunConfig

__all__ = [
    "DQN_ALGORITHM",
    "ApexSource",
    "Chunk",
    "DQNAlgorithm",
    "ReplayShard",
    "build_replay",
    "ship_frames",
    "unship_frames",
]


DEFAULT_BUFFER: int = DQNConfig.buffer_size or 1_000_000
"""The most ``dqn.buffer_size=auto`` takes (the Atari default)."""


class Chunk(NamedTuple):
    """``T`` vector steps of one rollout worker's ``E`` envs, for a learner's replay shard.

    Stacked frames (Atari) travel once: with ``restacks`` set, ``obs`` holds only each
    step's newest frame, and :meth:`observations` rebuilds the stacks from the chunk's
    first stacks, shifting in one frame per step, with whole stacks wherever that chain
    breaks (a reset). That is about a quarter of the bytes of whole stacks.
    """

    obs: np.ndarray
    """``(T, E, *obs_shape)`` observations the actions were taken in, or, with
    ``restacks``, their newest frames only: ``(T, E, *frame_shape)``."""
    actions: np.ndarray
    """``(T, E)`` actions executed."""
    rewards: np.ndarray
    terminated: np.ndarray
    done: np.ndarray
    final: dict[int, np.ndarray]
    """Step t -> the ``(E, *obs_shape)`` final observations, for steps where an episode ended."""
    priorities: np.ndarray | None
    """``(T, E)`` initial priorities (|n-step TD error| from the worker's network), or None."""
    restacks: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
    """Frames-only chunks: step t -> ``(rows, their whole stacks)`` where a row's stack is
    not its previous one shifted by one frame (step 0: every row). None: ``obs`` holds
    whole observations."""

    def observations(self) -> np.ndarray:
        """``(T, E, *obs_shape)``: the observations, whole stacks rebuilt if shipped as frames."""
        if self.restacks is None:
            return self.obs
        return unship_frames(self.obs, self.restacks)


def ship_frames(stacks: np.ndarray) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Split ``(T, E, k, *frame)`` stacked observations into what a :class:`Chunk` ships.

    Returns ``(newest frames (T, E, *frame), restacks)`` with ``restacks`` as in
    :attr:`Chunk.restacks`. Breaks in the chain are found by comparing frames, not from
    the done flags, so :func:`unship_frames` is exact whatever the env does on a reset.
    """
    T, E = stacks.shape[:2]
    frames = np.ascontiguousarray(stacks[:, :, -1])
    restacks = {0: (np.arange(E), stacks[0].copy())}
    if T > 1:
        broken = (stacks[1:, :, :-1] != stacks[:-1, :, 1:]).reshape(T - 1, E, -1).any(-1)
        for t in np.flatnonzero(broken.any(1)) + 1:
            rows = np.flatnonzero(broken[t - 1])
            restacks[int(t)] = (rows, stacks[t, rows])
    return frames, restacks


def unship_frames(
    frames: np.ndarray, restacks: dict[int, tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """The ``(T, E, k, *frame)`` stacks :func:`ship_frames` split, rebuilt exactly.

    Raises:
        ValueError: ``restacks`` lacks step 0's stacks for every row.
    """
    T, E = frames.shape[:2]
    rows0, first = restacks.get(0, (np.empty(0, dtype=np.int64), None))
    if first is None or len(rows0) != E:
        raise ValueError(f"a frames-only chunk needs the whole stacks of all {E} rows at step 0")
    out = np.empty((T, *first.shape), dtype=frames.dtype)
    out[0] = first
    for t in range(1, T):
        out[t, :, :-1] = out[t - 1, :, 1:]
        out[t, :, -1] = frames[t]
        if t in restacks:
            rows, stacks = restacks[t]
            out[t, rows] = stacks
    return out


def free_memory(device: torch.device) -> int | None:
    """Bytes free for a new replay on ``device`` (host: MemAvailable), None if unknown."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        with open("/proc/meminfo", encoding="utf-8") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, RuntimeError, ValueError):
        return None


FREE_SHARE = 0.8
"""Share of the free memory a replay may take (the rest: networks, envs, the OS)."""


def fit_capacity(
    requested: int | None, per_transition: float, device: torch.device, log, *, setting: str
) -> int:
    """The replay capacity to allocate, checked against the free memory before allocating.

    ``requested`` None (``dqn.buffer_size=auto``) takes what fits in ``FREE_SHARE`` of the
    free memory, at most the 1M default, and says so; a number that does not fit stops the
    run with the size that would (the kernel's OOM killer would otherwise end it later,
    without a message or a checkpoint).

    Raises:
        ConfigError: ``requested`` does not fit.
    """
    free = free_memory(device)
    where = "host RAM" if device.type == "cpu" else f"{device} memory"
    if free is None:
        return requested or DEFAULT_BUFFER
    fits = int(FREE_SHARE * free / per_transition)
    need = (requested or 0) * per_transition
    if requested is None:
        size = min(fits, DEFAULT_BUFFER)
        log(
            f"rlamd: {setting}=auto: {size:,} transitions ({size * per_transition / 2**30:.1f} GiB "
            f"of the {free / 2**30:.1f} GiB free {where})"
        )
        return size
    if requested > fits:
        raise ConfigError(
            f"{setting}={requested:,} needs {need / 2**30:.1f} GiB of {where} but "
            f"{free / 2**30:.1f} GiB is free; accepted here: at most {fits:,} "
            f"(--set {setting}={fits}), or --set {setting}=auto to take what fits"
        )
    return requested


def build_replay(
    cfg: DQNConfig,
    env: VecEnv,
    device: torch.device,
    seed: int,
    log=print,
    *,
    num_streams: int | None = None,
    capacity: int | None = None,
    setting: str = "dqn.buffer_size",
) -> ReplayBuffer:
    """The replay a DQN run uses for ``env``, its size checked against the free memory.

    A Ray learner's shard passes its own ``num_streams`` (the envs of the rollout actors
    feeding it) and ``capacity`` (its share of ``cfg.buffer_size``).
    """
    shape, obs_dtype, stack = obs_info(env)
    asked = capacity or cfg.buffer_size
    per_t = bytes_per_transition(shape, obs_dtype, stack, env.num_actions, cfg.prioritized, asked)
    capacity = fit_capacity(capacity or cfg.buffer_size, per_t, device, log, setting=setting)
    kind: type[ReplayBuffer] = ReplayBuffer
    extra: dict[str, Any] = {}
    if cfg.prioritized:
        kind, extra = PrioritizedReplayBuffer, {"alpha": cfg.alpha, "epsilon": cfg.priority_eps}
    return kind(
        capacity,
        num_streams or env.num_envs,
        shape,
        obs_dtype,
        frame_stack=stack,
        num_actions=env.num_actions,
        n_step=cfg.n_step,
        gamma=cfg.gamma,
        device=device,
        seed=seed,
        **extra,
    )


@torch.no_grad()
def chunk_td_errors(
    q_values: torch.Tensor,
    final_values: torch.Tensor,
    actions: torch.Tensor,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    n_step: int,
) -> torch.Tensor:
    """|n-step TD error| of every transition in a chunk: Ape-X's initial priorities.

    Args:
        q_values: ``(T + 1, E, A)``, Q of the chunk's observations and of the one after.
        final_values: ``(T, E)``, max Q of the final observation where an episode was
            truncated (bootstrapped from), anything elsewhere.
        actions, rewards, terminated, done: ``(T, E)``.

    A window stops at a termination (no bootstrap), at a truncation (bootstrap from the
    final observation) or at the chunk's end (bootstrap from the next observation, with
    fewer than ``n_step`` rewards), exactly as the replay's n-step windows do, except
    that the learner sees the whole window later.
    """
    T, E = actions.shape
    v = q_values.float().max(-1).values  # (T + 1, E)
    q_sa = q_values[:T].float().gather(-1, actions[..., None].long()).squeeze(-1)
    terminated, done = terminated.bool(), done.bool()
    # Window (t, j) covers step t + j; the chunk's last step ends every window (its data
    # ends there), after which the bootstrap is the observation following the chunk.
    idx = (torch.arange(T)[:, None] + torch.arange(n_step)).clamp(max=T - 1)  # (T, n)
    last_step = idx == T - 1
    stop = (terminated | done)[idx] | last_step[..., None]  # (T, n, E)
    windows = (rewards.float()[idx], stop)
    ret, steps = nstep_window(
        *(w.permute(0, 2, 1).reshape(T * E, n_step) for w in windows), gamma_powers(gamma, n_step)
    )
    ret, steps = ret.reshape(T, E), steps.reshape(T, E)
    t = torch.arange(T)[:, None].expand(T, E)
    last = t + steps - 1  # the window's last step, per (t, env)
    cols = torch.arange(E).expand(T, E)
    ended_by_termination = terminated[last, cols]
    truncated = done[last, cols] & ~ended_by_termination
    following = v[t + steps, cols]  # the next observation (index T: after the chunk)
    boot = torch.where(truncated, final_values[last, cols], following)
    boot = torch.where(ended_by_termination, torch.zeros_like(boot), boot)
    return (q_sa - (ret + gamma**steps * boot)).abs()


class ApexSource:
    """A rollout worker's DQN half: fixed Ape-X epsilons, chunks with initial priorities."""

    def __init__(self, cfg: RunConfig, collector: Collector, agent: DQN, index: int) -> None:
        self.collector, self.agent = collector, agent
        self.epsilons = torch.tensor(cfg.ray.epsilons(index))
        self.frames = cfg.ray.ship_frames and obs_info(collector.env)[2] > 1
        """Ship newest frames, not whole stacks (stacked observations only)."""

    def collect(self, num_steps: int) -> tuple[Chunk, list[Step]]:
        agent, col, eps = self.agent, self.collector, self.epsilons
        obs, steps, final = [], [], {}
        for t in range(num_steps):
            before, _, s = col.step(lambda o: agent.act(o, eps))
            obs.append(before)
            steps.append(s)
            if s.done.any():
                final[t] = s.final_obs
        chunk = Chunk(
            obs=np.stack(obs),
            actions=np.stack([s.actions for s in steps]),
            rewards=np.stack([s.reward for s in steps]).astype(np.float32),
            terminated=np.stack([s.terminated for s in steps]),
            done=np.stack([s.done for s in steps]),
            final=final,
            priorities=None,
        )
        if agent.cfg.prioritized:
            chunk = chunk._replace(priorities=self._priorities(chunk).numpy())
        if self.frames:
            frames, restacks = ship_frames(chunk.obs)
            chunk = chunk._replace(obs=frames, restacks=restacks)
        return chunk, steps

    @torch.no_grad()
    def _priorities(self, c: Chunk) -> torch.Tensor:
        agent, cfg = self.agent, self.agent.cfg
        T, E = c.obs.shape[:2]
        every = torch.from_numpy(
            np.concatenate([c.obs.reshape(T * E, *c.obs.shape[2:]), self.collector.obs])
        )
        with agent.precision.autocast():
            q = agent.q(every).float().reshape(T + 1, E, -1)
        final_v = torch.zeros(T, E)
        cut = np.argwhere(c.done & ~c.terminated)
        if cut.size:
            f = torch.from_numpy(np.stack([c.final[t][e] for t, e in cut]))
            with agent.precision.autocast():
                final_v[cut[:, 0], cut[:, 1]] = agent.q(f).float().max(1).values
        flags = (torch.from_numpy(x) for x in (c.actions, c.rewards, c.terminated, c.done))
        return chunk_td_errors(q, final_v, *flags, cfg.gamma, cfg.n_step)


class ReplayShard:
    """A learner's DQN half: its prioritized replay shard, fed by chunks, sampled by updates."""

    def __init__(
        self, cfg: RunConfig, agent: DQN, env: VecEnv, rank: int, world: int, streams: int, log
    ) -> None:
        dqn = cfg.dqn
        self.agent = agent
        self.per_batch = dqn.batch_size // world
        share = dqn.buffer_size // world if dqn.buffer_size else None
        self.replay = build_replay(
            dqn, env, agent.device, cfg.train.seed + rank, log, num_streams=streams, capacity=share
        )

    def feed(self, payload: Chunk, slot: int) -> int:
        """Store a worker's chunk (its envs are streams ``slot..``) with its priorities;
        stacks shipped as frames are rebuilt first (:meth:`Chunk.observations`)."""
        shard, chunk = self.replay, payload
        T, E = chunk.actions.shape
        obs = chunk.observations()
        streams = np.arange(slot, slot + E)
        pos = np.empty((T, E), dtype=np.int64)
        with warnings.catch_warnings():
            # Arrays from Ray's object store are read-only; the shard only reads them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            for t in range(T):
                pos[t] = shard.add(
                    obs[t],
                    chunk.actions[t],
                    chunk.rewards[t],
                    chunk.terminated[t],
                    chunk.done[t],
                    chunk.final.get(t),
                    streams,
                )
        if chunk.priorities is not None and isinstance(shard, PrioritizedReplayBuffer):
            # Records still waiting for their n-step window stay unsampleable and get the
            # running max priority when they become sampleable.
            shard.update_priorities(
                torch.from_numpy(pos.reshape(-1)), torch.from_numpy(chunk.priorities.reshape(-1))
            )
        return len(shard)

    def step(self, num_updates: int, beta: float) -> None:
        """``num_updates`` updates, each on ``batch_size / num_learners`` rows of the shard."""
        for _ in range(num_updates):
            learn_from_replay(self.replay, self.agent, self.per_batch, beta=beta)

    def describe(self) -> dict[str, Any]:
        return {"replay": self.replay.capacity}

    def metrics(self) -> dict[str, float]:
        return {"charts/replay_size": float(len(self.replay))}


class DQNAlgorithm:
    """DQN (``--algo dqn``): see :mod:`rlamd.agents.dqn` for the update."""

    name = "dqn"
    presets: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "classic": {
            "train": {
                "steps": 60_000,
                "num_envs": 4,
                "eval_every": 20_000,
                "checkpoint_every": 20_000,
                "log_every": 2_000,
                "eval_episodes": 10,
            },
            "dqn": {
                "buffer_size": 50_000,
                "batch_size": 64,
                "lr": 1e-3,
                "adam_eps": 1e-8,
                "learning_starts": 1_000,
                "train_frequency": 2,
                "target_update_interval": 250,
                "exploration_fraction": 0.2,
                "eps_end": 0.02,
                "eval_epsilon": 0.0,
                "n_step": 3,
                "alpha": 0.6,
            },
        },
    }

    def build_agent(self, cfg: RunConfig, device: torch.device, env: VecEnv, log=None) -> DQN:
        return build_learner(DQN, cfg.dqn, cfg, device, env, log)

    def policy(self, agent: DQN, cfg: RunConfig, epsilon: float | None = None) -> Policy:
        eps = cfg.dqn.eval_epsilon if epsilon is None else epsilon
        return lambda obs: agent.act(obs, eps)

    def local_loop(
        self, cfg: RunConfig, collector: Collector, agent: DQN, start_step: int, log
    ) -> OffPolicyLoop:
        replay = build_replay(cfg.dqn, collector.env, agent.device, cfg.train.seed, log)
        return OffPolicyLoop(collector, replay, agent, cfg.dqn, cfg.train.steps, start_step)

    def rollout_source(
        self, cfg: RunConfig, collector: Collector, agent: DQN, index: int
    ) -> ApexSource:
        return ApexSource(cfg, collector, agent, index)

    def learner_part(
        self, cfg: RunConfig, agent: DQN, env: VecEnv, rank: int, world: int, streams: int, log
    ) -> ReplayShard:
        return ReplayShard(cfg, agent, env, rank, world, streams, log)


DQN_ALGORITHM = DQNAlgorithm()
