"""The ``[ray]`` settings, the layout plan and the errors (importable without Ray)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlamd.config import ConfigError
from rlamd.device import parse_device_spec

__all__ = [
    "ClusterFitError",
    "LearnerFailed",
    "RayConfig",
    "RunFailed",
    "WorkersFailed",
    "fmt_resources",
    "learner_device_spec",
    "plan_layout",
]


class ClusterFitError(ConfigError):
    """The requested actors do not fit the cluster (raised before training starts)."""


class RunFailed(RuntimeError):
    """The cluster lost what the run needs; it stops (or restarts from its last checkpoint)."""


class LearnerFailed(RunFailed):
    """A learner actor died."""


class WorkersFailed(RunFailed):
    """Rollout workers died more often than ``ray.max_worker_restarts`` allows."""


@dataclass(frozen=True)
class RayConfig:
    """How a ``--ray`` run is spread over a Ray cluster."""

    enabled: bool = False
    """Train on Ray: rollout actors feed one learner per GPU (--ray)."""
    address: str | None = None
    """Cluster to join: host:port, 'auto', or 'local' for a new one (default: RAY_ADDRESS or a running cluster, else a new local one)."""
    num_rollout_workers: int = 2
    """Rollout actors, each with its own vector env and policy copy on the CPU."""
    envs_per_worker: int = 4
    """Envs stepped together by each rollout actor."""
    num_learners: int = 1
    """Learner actors; more than one all-reduce their gradients every update."""
    gpus_per_learner: float | None = None
    """GPUs per learner, fractions allowed (default: 1 where the cluster has GPUs, else 0)."""
    cpus_per_worker: float = 1.0
    """CPUs reserved for each rollout actor."""
    cpus_per_learner: float = 1.0
    """CPUs reserved for each learner actor."""
    chunk_steps: int = 32
    """DQN: vector steps per chunk a rollout actor ships (chunk_steps x envs_per_worker transitions)."""
    ship_frames: bool = True
    """DQN: chunks carry each env's newest frame per step and learners rebuild the stacks (false: whole stacks, about 4x the bytes on Atari)."""
    weights_every: int = 100
    """DQN: learner updates between weight broadcasts to rollout workers (Ape-X: every 400 frames)."""
    apex_epsilon: float = 0.4
    """DQN: base of the Ape-X epsilon spread, eps_i = base^(1 + alpha i/(N-1)) over all N envs (Horgan et al. 2018)."""
    apex_alpha: float = 7.0
    """DQN: exponent range of the Ape-X epsilon spread."""
    max_worker_restarts: int = 20
    """Times Ray restarts each dead rollout actor (-1: always)."""
    max_failures: int = 0
    """Times the run restarts itself from its last checkpoint after a learner died (0: stop and say how to resume)."""
    placement_timeout_s: float = 60.0
    """Seconds to wait for the cluster to place every actor before giving up with a report."""
    group_timeout_s: float = 300.0
    """Seconds a learner waits on the others (process-group setup, each all-reduce)."""
    stall_timeout_s: float = 600.0
    """Seconds the driver waits for any rollout worker's data (restarts on other nodes included) before it stops the run with a report."""

    def __post_init__(self) -> None:
        for name in (
            "num_rollout_workers",
            "envs_per_worker",
            "num_learners",
            "chunk_steps",
            "weights_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in (
            "cpus_per_worker",
            "cpus_per_learner",
            "placement_timeout_s",
            "group_timeout_s",
            "stall_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: a number > 0")
        if self.gpus_per_learner is not None and self.gpus_per_learner < 0:
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; accepted: 0, a fraction such as "
                "0.5, or a whole number of GPUs"
            )
        if (
            self.gpus_per_learner is not None
            and self.gpus_per_learner > 1
            and self.gpus_per_learner % 1
        ):
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; above 1 Ray accepts only whole GPUs"
            )
        if not 0.0 < self.apex_epsilon <= 1.0:
            raise ValueError(f"ray.apex_epsilon={self.apex_epsilon}; accepted: a number in (0, 1]")
        if self.apex_alpha < 0:
            raise ValueError(f"ray.apex_alpha={self.apex_alpha}; accepted: a number >= 0")
        if self.max_worker_restarts < -1:
            raise ValueError(
                f"ray.max_worker_restarts={self.max_worker_restarts}; accepted: -1 (always) or an integer >= 0"
            )
        if self.max_failures < 0:
            raise ValueError(f"ray.max_failures={self.max_failures}; accepted: an integer >= 0")

    def epsilons(self, index: int) -> list[float]:
        """Ape-X exploration rates of rollout actor ``index``'s envs, spread over all envs."""
        n = self.num_rollout_workers * self.envs_per_worker
        out = []
        for j in range(self.envs_per_worker):
            i = index * self.envs_per_worker + j
            out.append(self.apex_epsilon ** (1 + self.apex_alpha * i / max(1, n - 1)))
        return out


def learner_device_spec(train_device: str, gpus: float) -> str:
    """What a learner actor resolves: its (first) visible GPU, or the CPU."""
    kind, _ = parse_device_spec(train_device)
    if gpus > 0:
        if kind in ("cpu", "mps"):
            raise ConfigError(
                f"train.device={train_device!r} but ray.gpus_per_learner={gpus}; give learners "
                "no GPU (--gpus-per-learner 0) or a GPU device (--device auto)"
            )
        return "cuda" if kind == "auto" else kind  # Ray makes the learner's GPU(s) visible as 0..
    if kind not in ("auto", "cpu"):
        raise ConfigError(
            f"train.device={train_device!r} but ray.gpus_per_learner=0: learners would get no GPU; "
            "set --gpus-per-learner 1 (or a fraction such as 0.5)"
        )
    return "cpu"


def fmt_resources(res: dict[str, float]) -> str:
    return f"{res.get('CPU', 0):g} CPU, {res.get('GPU', 0):g} GPU"


def plan_layout(rc, nodes: list[dict[str, float]]) -> dict[str, Any]:
    """Bundles for the learners and the workers, or a ClusterFitError saying why not.

    ``nodes`` are the alive nodes' total resources (``ray.nodes()``).
    """
    cluster_gpus = sum(n.get("GPU", 0) for n in nodes)
    gpus = (
        rc.gpus_per_learner
        if rc.gpus_per_learner is not None
        else (1.0 if cluster_gpus >= 1 else 0.0)
    )
    learner = {"CPU": rc.cpus_per_learner, **({"GPU": gpus} if gpus else {})}
    worker = {"CPU": rc.cpus_per_worker}
    need = {
        "CPU": rc.num_learners * rc.cpus_per_learner + rc.num_rollout_workers * rc.cpus_per_worker,
        "GPU": rc.num_learners * gpus,
    }
    have = {"CPU": sum(n.get("CPU", 0) for n in nodes), "GPU": cluster_gpus}
    asked = (
        f"{rc.num_rollout_workers} rollout workers x {rc.cpus_per_worker:g} CPU + "
        f"{rc.num_learners} learners x ({fmt_resources(learner)}) = {fmt_resources(need)}"
    )
    per_node = "; ".join(f"node {i}: {fmt_resources(n)}" for i, n in enumerate(nodes))
    where = f"the cluster has {fmt_resources(have)} on {len(nodes)} node(s) ({per_node})"
    if need["CPU"] > have["CPU"] + 1e-9 or need["GPU"] > have["GPU"] + 1e-9:
        raise ClusterFitError(
            f"the Ray layout does not fit: asked for {asked}, but {where}. Lower "
            "--num-rollout-workers / --num-learners / --gpus-per-learner (fractions such as 0.5 "
            "share a GPU) or ray.cpus_per_worker, or add nodes"
        )
    if not any(all(n.get(k, 0) >= v for k, v in learner.items()) for n in nodes):
        raise ClusterFitError(
            f"no node can hold one learner ({fmt_resources(learner)}): {where}. A learner's GPUs must "
            "sit on one node; lower --gpus-per-learner"
        )
    return {"learner": learner, "worker": worker, "gpus": gpus, "asked": asked, "where": where}
