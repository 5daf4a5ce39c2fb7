"""The two roles a Ray run places: rollout workers and learners.

They are plain classes built from the same pieces as a single-process run (Collector,
agents, replay, ``learn_from_replay``); :mod:`rlamd.distributed.driver` wraps them in
Ray actors, and the tests can run them in-process. Nothing here imports Ray.

Data that crosses the object store:

* DQN chunk (worker -> learner): ``chunk_steps`` vector steps as numpy arrays, plus the
  initial priorities the worker computed with its copy of the Q-network (Ape-X).
* PPO rows (worker -> learners): the flat training rows of one rollout, GAE included
  (:meth:`rlamd.agents.ppo.PPO.flatten`).
* Weights (learner 0 -> workers): the acting network's state dict on the CPU.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["Chunk", "CollectInfo", "Learner", "RolloutWorker", "chunk_td_errors", "to_cpu"]


class Chunk(NamedTuple):
    """``T`` vector steps of one rollout worker's ``E`` envs, for a learner's replay shard."""

    obs: np.ndarray
    """``(T, E, *obs_shape)`` observations the actions were taken in."""
    actions: np.ndarray
    """``(T, E)`` actions executed."""
    rewards: np.ndarray
    terminated: np.ndarray
    done: np.ndarray
    final: dict[int, np.ndarray]
    """Step t -> the ``(E, *obs_shape)`` final observations, for steps where an episode ended."""
    priorities: np.ndarray | None
    """``(T, E)`` initial priorities (|n-step TD error| from the worker's network), or None."""


class CollectInfo(NamedTuple):
    """What the driver gets back from a collect call (the data goes to a learner)."""

    env_steps: int
    episodes: list[tuple[float, int]]
    """(real score, length) of every episode that ended."""


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor moved to the CPU (what may cross to a GPU-less driver)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


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
    T = actions.shape[0]
    v = q_values.float().max(-1).values
    q_sa = q_values[:T].float().gather(-1, actions[..., None].long()).squeeze(-1)
    rewards, terminated, done = rewards.float(), terminated.bool(), done.bool()
    ended = terminated | done
    t = torch.arange(T)
    ret = torch.zeros(T, rewards.shape[1])
    boot = torch.zeros_like(ret)
    alive = torch.ones_like(ret)
    for k in range(n_step):
        j = t + k
        inside = (j < T)[:, None].float()
        jj = j.clamp(max=T - 1)
        # Out of the chunk: bootstrap from the observation after it (index T).
        leaving = alive * (1 - inside)
        boot += leaving * gamma**k * v[T]
        alive = alive * inside
        ret += alive * gamma**k * rewards[jj]
        stop = alive * ended[jj].float()
        cont = torch.where(terminated[jj], torch.zeros_like(ret), final_values[jj])
        boot += stop * gamma ** (k + 1) * cont
        alive = alive * (1 - stop)
    boot += alive * gamma**n_step * v[(t + n_step).clamp(max=T)]
    return (q_sa - (ret + boot)).abs()


class RolloutWorker:
    """Steps its own vector env with a CPU copy of the policy.

    Args:
        sections: the run's configuration sections (``train``, ``dqn``/``ppo``, ``atari``, ``ray``).
        index: this worker's number (0..W-1): its seed and, for DQN, its epsilons.
        reconstructed: Ray restarted this actor (it then reseeds, to not replay the same games).
    """

    def __init__(self, sections: dict[str, Any], index: int, reconstructed: bool = False) -> None:
        from rlamd.collector import Collector
        from rlamd.envs import make_env
        from rlamd.train import build_agent

        train, rc = sections["train"], sections["ray"]
        self.index, self.algo = index, train.algo
        device = torch.device("cpu")
        torch.manual_seed(train.seed)
        self.env = make_env(train.env, num_envs=rc.envs_per_worker, atari=sections["atari"])
        self.agent, _ = build_agent(sections, device, env=self.env)
        seed = train.seed + 1_000 * (index + 1)
        if reconstructed:
            seed += int.from_bytes(os.urandom(3), "little") * 1_000_000
        self.collector = Collector(self.env, device, seed=seed)
        self.version = -1
        if self.algo == "dqn":
            self.epsilons = torch.tensor(rc.epsilons(index))
        else:
            from rlamd.loops import OnPolicyLoop

            self.loop = OnPolicyLoop(self.collector, self.agent, sections["ppo"], train.steps)

    def set_weights(self, weights: dict[str, torch.Tensor] | None, version: int) -> None:
        if weights is not None and version != self.version:
            self.agent.policy_net.load_state_dict(weights)
            self.version = version

    def collect(self, weights: dict[str, torch.Tensor] | None, version: int, num_steps: int) -> tuple[Any, CollectInfo]:  # fmt: skip
        """One DQN chunk or one PPO rollout, with this actor's current weights.

        Returns ``(payload, info)``: the payload (a :class:`Chunk`, or PPO's
        :class:`~rlamd.agents.ppo.PPORows`) goes to a learner, the small info to the driver.
        """
        self.set_weights(weights, version)
        if self.algo == "dqn":
            payload, steps = self._dqn_chunk(num_steps)
        else:
            steps = self.loop.collect()
            last = self.agent.value(self.collector.obs_tensor())
            payload = self.agent.flatten(self.loop.rollout, last)
        episodes = [e for s in steps for e in s.finished()]
        info = CollectInfo(len(steps) * self.collector.num_envs, episodes)
        return payload, info

    def _dqn_chunk(self, T: int) -> tuple[Chunk, list]:
        agent, col, eps = self.agent, self.collector, self.epsilons
        obs, steps, final = [], [], {}
        for t in range(T):
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
        return chunk_td_errors(q, final_v, *(torch.from_numpy(x) for x in (c.actions, c.rewards, c.terminated, c.done)),
                               cfg.gamma, cfg.n_step)  # fmt: skip

    def close(self) -> None:
        self.collector.close()


class Learner:
    """One learner: the agent on its device and, for DQN, its prioritized replay shard.

    Args:
        sections: the run's configuration.
        rank, world_size: this learner's place among the learners.
        device_spec: what :func:`rlamd.device.resolve_device` gets (``cpu``, ``cuda``...).
        num_streams: DQN: envs of the rollout actors feeding this learner's shard.
    """

    def __init__(self, sections: dict[str, Any], rank: int, world_size: int, device_spec: str,
                 num_streams: int = 0) -> None:  # fmt: skip
        from rlamd.device import resolve_device
        from rlamd.envs import make_env
        from rlamd.train import build_agent, build_replay

        train = sections["train"]
        self.rank, self.world_size, self.sections = rank, world_size, sections
        self.device = resolve_device(device_spec)
        torch.manual_seed(train.seed)  # identical initial weights on every learner
        probe = make_env(train.env, num_envs=1, atari=sections["atari"])
        self.agent, _ = build_agent(sections, self.device, env=probe)
        self.sync = None
        self.shard = None
        self.messages: list[str] = []
        if train.algo == "dqn":
            cfg = sections["dqn"]
            self.per_batch = cfg.batch_size // world_size
            self.shard = build_replay(cfg, probe, self.device, train.seed + rank, self.messages.append,
                                      num_streams=num_streams, capacity=cfg.buffer_size // world_size)  # fmt: skip
        probe.close()

    # ------------------------------------------------------------------ group
    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: this node's address and a free port for the process group."""
        import ray

        from .sync import free_port

        return ray.util.get_node_ip_address(), free_port()

    def join(self, address: str, port: int) -> str:
        """Join the learners' process group; gradients are averaged from now on."""
        from .sync import init_group

        if self.world_size > 1:
            self.attach(init_group(address, port, self.rank, self.world_size, self.device,
                                   self.sections["ray"].group_timeout_s))  # fmt: skip
        return str(self.device)

    def attach(self, sync: Any) -> None:
        """Average gradients and batch statistics through ``sync`` (a GradSync)."""
        self.sync = self.agent.sync = sync
        self.agent.precision.grad_sync = sync.grads

    def describe(self) -> dict:
        """Where this learner runs (for the logged cluster layout)."""
        from rlamd.device import describe_device

        info = describe_device(self.device)
        return {"rank": self.rank, "summary": info.summary(), "precision": self.agent.precision.mode,
                "replay": self.shard.capacity if self.shard is not None else 0,
                "messages": list(self.messages)}  # fmt: skip

    # ------------------------------------------------------------------ DQN
    def add(self, chunk: Chunk, first_stream: int) -> int:
        """Store a worker's chunk in this shard, with the worker's priorities; returns the shard's size."""
        shard = self.shard
        T, E = chunk.actions.shape
        streams = np.arange(first_stream, first_stream + E)
        pos = np.empty((T, E), dtype=np.int64)
        with warnings.catch_warnings():
            # Arrays from Ray's object store are read-only; the shard only reads them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            for t in range(T):
                pos[t] = shard.add(chunk.obs[t], chunk.actions[t], chunk.rewards[t], chunk.terminated[t],
                                   chunk.done[t], chunk.final.get(t), streams)  # fmt: skip
        if chunk.priorities is not None:  # the worker's config is prioritized, so is this shard
            # Records still waiting for their n-step window stay unsampleable and get the
            # running max priority when they become sampleable.
            shard.update_priorities(torch.from_numpy(pos.reshape(-1)), torch.from_numpy(chunk.priorities.reshape(-1)))  # fmt: skip
        return len(shard)

    def train(self, num_updates: int, beta: float, metrics: bool = False) -> dict | None:
        """``num_updates`` updates, each on ``batch_size / num_learners`` rows of this shard."""
        from rlamd.loops import learn_from_replay

        kwargs = {"beta": beta} if hasattr(self.shard, "update_priorities") else {}
        for _ in range(num_updates):
            learn_from_replay(self.shard, self.agent, self.per_batch, **kwargs)
        return self.read_metrics() if metrics else None

    def update_batch(self, batch: Any) -> None:
        """One DQN update on a given batch (its rows are this learner's share)."""
        self.agent.update(type(batch)(*(t.to(self.device) for t in batch)))

    # ------------------------------------------------------------------ PPO
    def learn(self, progress: float, metrics: bool, *parts: Any) -> dict | None:
        """A PPO iteration on this learner's share of the rollouts (PPORows, one per worker)."""
        from rlamd.agents.ppo import PPORows

        self.agent.set_progress(progress)
        self.agent.learn(PPORows.cat(list(parts), self.device))
        return self.read_metrics() if metrics else None

    # ------------------------------------------------------------------ state
    def read_metrics(self) -> dict:
        out = {**self.agent.read_metrics(), "updates": float(self.agent.updates)}
        if self.shard is not None:
            out["charts/replay_size"] = float(len(self.shard))
        if self.device.type == "cuda":
            out["system/device_memory_mb"] = torch.cuda.memory_allocated(self.device) / 2**20
        return out

    def weights(self) -> dict[str, torch.Tensor]:
        """The acting network's weights on the CPU."""
        return to_cpu(self.agent.policy_net.state_dict())

    def state(self) -> dict:
        """The agent's whole state on the CPU (for checkpoints)."""
        return to_cpu(self.agent.state_dict())

    def load(self, agent_state: dict) -> None:
        self.agent.load_state_dict(agent_state)

    def allreduce_times(self, sizes: list[int], iters: int) -> list[tuple[int, list[float]]]:
        """All-reduce timings in this learners' group (``python -m rlamd.bench allreduce``)."""
        from .sync import time_allreduce

        return time_allreduce(self.device, sizes, iters)

    def parameters_vector(self) -> torch.Tensor:
        """All parameters flattened, on the CPU (tests compare learners with it)."""
        return torch.cat([p.detach().reshape(-1).cpu() for p in self.agent.params])
