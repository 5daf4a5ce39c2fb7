"""The Ray layout plan and the errors of a distributed run (importable without Ray).

The ``[ray]`` settings themselves are :class:`rlamd.config.sections.RayConfig`.
"""

from __future__ import annotations

import os
from typing import Any

from rlamd.config.errors import ConfigError
from rlamd.device import parse_device_spec

__all__ = [
    "ClusterFitError",
    "LearnerFailed",
    "RunFailed",
    "WorkersFailed",
    "actor_options",
    "fmt_resources",
    "learner_device_spec",
    "plan_layout",
    "set_variables",
]


class ClusterFitError(ConfigError):
    """The requested actors do not fit the cluster (raised before training starts)."""


class RunFailed(RuntimeError):
    """The cluster lost what the run needs; it stops (or restarts from its last checkpoint)."""


class LearnerFailed(RunFailed):
    """A learner actor died."""


class WorkersFailed(RunFailed):
    """Rollout workers died more often than ``ray.max_worker_restarts`` allows."""


def actor_options(names: tuple[str, ...]) -> dict[str, Any]:
    """The ``.options()`` that pass this process's environment variables ``names`` (those
    set) to an actor: Ray merges these ``env_vars`` into the job's own runtime env, so a
    worker on another node sees them too (a local cluster's workers inherit them anyway).
    The driver passes ``RLAMD_PLUGINS``, so a plugin algorithm loads in every actor."""
    found = set_variables(names)
    return {"runtime_env": {"env_vars": found}} if found else {}


def set_variables(names: tuple[str, ...]) -> dict[str, str]:
    """This process's environment variables ``names`` that are set (and not blank)."""
    return {name: os.environ[name] for name in names if os.environ.get(name, "").strip()}


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
