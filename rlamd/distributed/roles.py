"""The two roles a Ray run places: rollout workers and learners.

They are plain classes built from the same pieces as a single-process run (Collector,
agents, replay): what differs per algorithm comes from the algorithm object
(:mod:`rlamd.algos`), a rollout source for the worker and a learner half.
:mod:`rlamd.distributed.driver` wraps them in Ray actors, and the tests can run them
in-process. Nothing here imports Ray at module level.

Data that crosses the object store:

* DQN chunk (worker -> learner): ``dqn.chunk_steps`` vector steps as numpy arrays, plus the
  initial priorities the worker computed with its copy of the Q-network (Ape-X).
* PPO rows (worker -> learners): the flat training rows of one rollout, GAE included
  (:meth:`rlamd.agents.ppo.PPO.flatten`).
* Weights (learner 0 -> workers): the acting network's state dict on the CPU.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple

import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.device import describe_device, ray_learner_device, resolve_device
from rlamd.engine import device_memory_mb
from rlamd.envs import make_env
from rlamd.graphs import release_methods
from rlamd.precision import configure_tf32
from rlamd.threads import ThreadPlan, apply_threads, plan_threads, ray_cpus
from rlamd.threads import describe as describe_threads

from .sync import free_port, init_group, time_allreduce

__all__ = ["CollectInfo", "Learner", "RolloutWorker", "to_cpu"]


class CollectInfo(NamedTuple):
    """What the driver gets back from a collect call (the data goes to a learner)."""

    env_steps: int
    episodes: list[tuple[float, int]]
    """(real score, length) of every episode that ended."""
    incarnation: int = 0
    """Random per worker process: a new value means Ray restarted the worker, even when no
    call failed (a call made while it restarts waits for it instead of failing)."""


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor moved to the CPU (what may cross to a GPU-less driver)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


class RolloutWorker:
    """Steps its own vector env with a CPU copy of the policy.

    Args:
        cfg: the run's configuration.
        index: this worker's number (0..W-1): its seed and, for DQN, its epsilons.
        reconstructed: Ray restarted this actor (it then reseeds, to not replay the same games).
    """

    def __init__(self, cfg: RunConfig, index: int, reconstructed: bool = False) -> None:
        train = cfg.train
        self.index = index
        device = torch.device("cpu")
        torch.manual_seed(train.seed)
        plan = _actor_threads(cfg.ray.envs_per_worker)
        self.env = make_env(
            train.env,
            num_envs=cfg.ray.envs_per_worker,
            atari=cfg.atari,
            threads=plan.env_threads,
            module=train.env_module,
            env_cfg=cfg.env,
        )
        seed = train.seed + 1_000 * (index + 1)
        if reconstructed:  # a new seed below ALE's limit of 2**31 (rlamd.config.checks.seed_range)
            limit = 2**31 - 1 - cfg.ray.envs_per_worker
            seed = (seed + int.from_bytes(os.urandom(4), "little")) % limit
        # The worker's own seed drives its agent's acting stream too: with the run seed,
        # every worker would explore with one sequence.
        worker_cfg = dataclasses.replace(cfg, train=dataclasses.replace(train, seed=seed))
        self.agent = build_agent(worker_cfg, device, self.env)
        self.collector = Collector(self.env, device, seed=seed)
        self.source = get_algorithm(train.algo).rollout_source(
            cfg, self.collector, self.agent, index
        )
        self.version = -1
        self.incarnation = int.from_bytes(os.urandom(4), "little")
        """Differs from the previous process's: see :attr:`CollectInfo.incarnation`."""

    def set_weights(self, weights: dict[str, torch.Tensor] | None, version: int) -> None:
        if weights is not None and version != self.version:
            self.agent.policy_net.load_state_dict(weights)
            self.version = version

    def collect(
        self, weights: dict[str, torch.Tensor] | None, version: int, num_steps: int
    ) -> tuple[Any, CollectInfo]:
        """One DQN chunk or one PPO rollout, with this actor's current weights.

        Returns ``(payload, info)``: the payload (a DQN chunk, PPO's rows) goes to a
        learner, the small info to the driver.
        """
        self.set_weights(weights, version)
        payload, steps = self.source.collect(num_steps)
        episodes = [e for s in steps for e in s.finished()]
        info = CollectInfo(len(steps) * self.collector.num_envs, episodes, self.incarnation)
        return payload, info

    def close(self) -> None:
        self.collector.close()


def _actor_threads(num_envs: int) -> ThreadPlan:
    """Set this actor's threads from its Ray ``num_cpus`` (not the node's cores)."""
    cpus = None
    try:
        import ray

        context = ray.get_runtime_context() if ray.is_initialized() else None
        if context is not None and context.get_actor_id() is not None:  # inside an actor
            cpus = ray_cpus(context.get_assigned_resources())
    except ImportError:
        pass
    plan = plan_threads(cpus, num_envs, source="ray num_cpus" if cpus else None)
    apply_threads(plan)
    return plan


def _ray_gpu_ids() -> list | None:
    """The GPUs Ray assigned this actor, or None outside a Ray worker process."""
    try:
        import ray
    except ImportError:
        return None
    return list(ray.get_gpu_ids()) if ray.is_initialized() else None


class Learner:
    """One learner: the agent on its device and its algorithm's half (a DQN replay shard...).

    Args:
        cfg: the run's configuration.
        rank, world_size: this learner's place among the learners.
        device_spec: what :func:`rlamd.device.resolve_device` gets (``cpu``, ``cuda``...).
        num_streams: DQN: envs of the rollout actors feeding this learner's shard.
    """

    def __init__(
        self, cfg: RunConfig, rank: int, world_size: int, device_spec: str, num_streams: int = 0
    ) -> None:
        train = cfg.train
        self.rank, self.world_size, self.cfg = rank, world_size, cfg
        gpu_ids = _ray_gpu_ids()
        self.device = resolve_device(ray_learner_device(device_spec, gpu_ids))
        self.messages: list[str] = [describe_threads(_actor_threads(1))]
        configure_tf32(train.tf32, self.device)
        torch.manual_seed(train.seed)  # identical initial weights on every learner
        probe = make_env(
            train.env, num_envs=1, atari=cfg.atari, module=train.env_module, env_cfg=cfg.env
        )
        self.agent = build_agent(cfg, self.device, probe, log=self.messages.append)
        self.sync = None
        if gpu_ids:
            self.messages.append(
                f"rlamd: learner {rank}: Ray GPU(s) {list(gpu_ids)} -> {self.device} "
                f"(HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES')!r}, "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
            )
        algo = get_algorithm(train.algo)
        self.part = algo.learner_part(
            cfg, self.agent, probe, rank, world_size, num_streams, self.messages.append
        )
        probe.close()

    # ------------------------------------------------------------------ group
    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: this node's address and a free port for the process group."""
        import ray  # only ever called inside a Ray actor

        return ray.util.get_node_ip_address(), free_port()

    def join(self, address: str, port: int) -> str:
        """Join the learners' process group; gradients are averaged from now on."""
        if self.world_size > 1:
            self.attach(
                init_group(
                    address,
                    port,
                    self.rank,
                    self.world_size,
                    self.device,
                    self.cfg.ray.group_timeout_s,
                )
            )
        return str(self.device)

    def attach(self, sync: Any) -> None:
        """Average gradients and batch statistics through ``sync`` (a GradSync); the
        learn steps then run eagerly (an all-reduce inside a graph is not captured)."""
        self.sync = self.agent.sync = sync
        self.agent.precision.grad_sync = sync.grads
        release_methods(self.agent, "gradients are all-reduced between learners")

    def describe(self) -> dict:
        """Where this learner runs (for the logged cluster layout)."""
        info = describe_device(self.device)
        return {
            "rank": self.rank,
            "summary": info.summary(),
            "precision": self.agent.precision.mode,
            **self.part.describe(),
            "messages": list(self.messages),
        }

    # ------------------------------------------------------------------ learning
    def feed(self, payload: Any, slot: int) -> int:
        """Hand a worker's payload to the algorithm's half (``slot``: its first stream)."""
        return self.part.feed(payload, slot)

    def step(self, *args: Any, metrics: bool = False) -> dict | None:
        """Learn (``args`` as the algorithm's driver and half agree); metrics if asked."""
        self.part.step(*args)
        return self.read_metrics() if metrics else None

    # ------------------------------------------------------------------ state
    def read_metrics(self) -> dict:
        return {
            **self.agent.read_metrics(),
            **self.part.metrics(),
            "updates": float(self.agent.updates),
            "system/device_memory_mb": device_memory_mb(self.device),
        }

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
        return time_allreduce(self.device, sizes, iters)
