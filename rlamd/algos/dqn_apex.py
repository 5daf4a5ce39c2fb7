"""DQN's halves on Ray (Ape-X, Horgan et al. 2018, https://arxiv.org/abs/1803.00933).

Each rollout worker runs :class:`ApexSource` (its own epsilons; ships :class:`Chunk`s with
the initial priorities it computed), each learner a :class:`ReplayShard`, and
:class:`rlamd.distributed.apex.ApexDriver` schedules them (the algorithms know nothing of
Ray; the distributed layer sits above them).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from rlamd.agents.dqn import DQN
from rlamd.envs import Step, VecEnv
from rlamd.replay.nstep import gamma_powers, nstep_window

from .base import obs_info
from .dqn_replay import build_replay

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig

__all__ = [
    "ApexSource",
    "Chunk",
    "ReplayShard",
    "apex_epsilons",
    "chunk_td_errors",
    "ship_frames",
    "unship_frames",
]


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


def apex_epsilons(cfg: RunConfig, index: int) -> list[float]:
    """Ape-X exploration rates of rollout actor ``index``'s envs, spread over all ``N``
    envs: ``eps_i = dqn.apex_epsilon ** (1 + dqn.apex_alpha * i / (N - 1))`` (Horgan et
    al. 2018)."""
    rc, d = cfg.ray, cfg.dqn
    n = rc.num_rollout_workers * rc.envs_per_worker
    out = []
    for j in range(rc.envs_per_worker):
        i = index * rc.envs_per_worker + j
        out.append(d.apex_epsilon ** (1 + d.apex_alpha * i / max(1, n - 1)))
    return out


class ApexSource:
    """A rollout worker's DQN half: fixed Ape-X epsilons, chunks with initial priorities."""

    def __init__(self, cfg: RunConfig, collector: Collector, agent: DQN, index: int) -> None:
        self.collector, self.agent = collector, agent
        self.epsilons = torch.tensor(apex_epsilons(cfg, index))
        self.frames = cfg.dqn.ship_frames and obs_info(collector.env)[2] > 1
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
        # Its own stream per rank under the run seed (seed + rank would give learner 1 of
        # seed s the draws of learner 0 of seed s + 1, and sweeps run consecutive seeds).
        self.replay = build_replay(
            dqn,
            env,
            agent.device,
            cfg.train.seed,
            log,
            num_streams=streams,
            capacity=share,
            stream=f"replay/{rank}",
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
        if chunk.priorities is not None:  # a uniform sampler ignores them
            # Records still waiting for their n-step window stay unsampleable and get the
            # running max priority when they become sampleable.
            shard.update_priorities(
                torch.from_numpy(pos.reshape(-1)), torch.from_numpy(chunk.priorities.reshape(-1))
            )
        return len(shard)

    def step(self, num_updates: int, beta: float) -> None:
        """``num_updates`` updates, each on ``batch_size / num_learners`` rows of the shard."""
        for _ in range(num_updates):
            self.agent.learn(self.replay, self.per_batch, beta)

    def describe(self) -> dict[str, Any]:
        return {"replay": self.replay.capacity}

    def metrics(self) -> dict[str, float]:
        return {"charts/replay_size": float(len(self.replay))}
