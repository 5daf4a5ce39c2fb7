"""Which settings have a command-line flag of their own, and the settings list ``--help``
prints. Every other setting is reached with ``--set section.key=value``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlamd.algos import ALGORITHMS
from rlamd.graphs import GRAPH_MODES
from rlamd.precision import PRECISIONS

from .sections import RunConfig
from .values import field_docs

__all__ = ["RAY_FLAGS", "SWITCHES", "TRAIN_FLAGS", "settings_epilog"]

TRAIN_FLAGS: dict[str, dict[str, Any]] = {
    "algo": {"choices": ALGORITHMS.keys()},  # live: plugins registered later count too
    "env_module": {"metavar": "MODULE"},
    "steps": {"type": int},
    "num_envs": {"type": int},
    "device": {},
    "precision": {"choices": PRECISIONS},
    "seed": {"type": int},
    "logdir": {},
    "run_name": {},
    "eval_every": {"type": int},
    "eval_episodes": {"type": int},
    "checkpoint_every": {"type": int},
    "log_every": {"type": int},
    "graph": {"choices": GRAPH_MODES},
    "threads": {"type": int},
    "profile": {"type": int, "metavar": "STEPS"},
}
"""``[train]`` fields with a flag of their own (``--steps``, ``--num-envs``, ...), and their
argparse options."""

SWITCHES = ("compile", "save_replay")
"""``[train]`` booleans switched on by a bare flag (``--compile``, ``--save-replay``)."""

RAY_FLAGS = {
    "enabled": "--ray",
    "address": "--ray-address",
    "num_rollout_workers": "--num-rollout-workers",
    "envs_per_worker": "--envs-per-worker",
    "num_learners": "--num-learners",
    "gpus_per_learner": "--gpus-per-learner",
    "max_failures": "--max-failures",
}
"""``[ray]`` fields with a flag of their own (``--ray`` sets ``ray.enabled``, ...)."""


def settings_epilog() -> str:
    """Every setting, its default and its docstring, by section; then the presets."""
    lines = [
        "settings for --set SECTION.KEY=VALUE (and [SECTION] tables in --config), with defaults:"
    ]
    for name, obj in RunConfig().sections().items():
        docs = field_docs(type(obj))
        lines.append(f"  [{name}]")
        for f in dataclasses.fields(obj):
            lines.append(f"    {name}.{f.name} = {getattr(obj, f.name)!r}: {docs.get(f.name, '')}")
    for algo in ALGORITHMS.values():
        for family, preset in algo.presets.items():
            values = ", ".join(
                f"{s}.{k}={v}" for s, vals in preset.items() for k, v in vals.items()
            )
            lines.append(f"{family} preset for {algo.name}: {values}")
    return "\n".join(lines)
