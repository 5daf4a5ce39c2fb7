"""What a sweep runs, as ``sweep.json`` holds it (written by a new sweep, read on resume
and by the report)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SPEC", "TUNE_DIR", "Plan", "SweepError", "load_plan"]

SPEC = "sweep.json"
TUNE_DIR = "tune"
"""Tune's experiment folder inside the sweep's (``Tuner.restore`` reads it)."""


class SweepError(Exception):
    """A sweep that cannot run or resume; ``str()`` is the one line to print."""


@dataclass
class Plan:
    """Everything a sweep runs; written to ``sweep.json`` and read back on resume."""

    job: dict[str, Any]
    """What every trial gets (:func:`rlamd.sweep.trial.run_trial`'s ``config["job"]``)."""
    search: str = "grid"
    samples: int = 1
    sample: dict[str, list] = field(default_factory=dict)
    """``--sample`` settings for Optuna: key -> [kind, *args]."""
    grid: dict[str, list[str]] = field(default_factory=dict)
    scheduler: str = "none"
    metric: str = "score"
    mode: str = "max"
    grace_steps: int = 0
    steps: int = 0
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    max_concurrent: int | None = None
    name: str = ""
    logdir: str = "runs"

    @property
    def trials(self) -> int:
        seeds = len(self.job["seeds"])
        if self.search == "optuna":
            return self.samples * seeds
        return len(self.job["configurations"]) * seeds


def load_plan(sweep_dir: Path) -> Plan:
    try:
        data = json.loads((sweep_dir / SPEC).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(
            f"{sweep_dir} is not a sweep folder (no {SPEC}); accepted: a folder "
            "that `rlamd sweep` made"
        ) from None
    except ValueError as exc:
        raise SweepError(f"{sweep_dir / SPEC} is not readable JSON ({exc})") from None
    return Plan(**data)
