"""A sweep's results: a table per configuration over seeds, the best one as TOML, the curves.

:func:`write_report` reads the sweep folder alone (``sweep.json`` and each trial's
``trial.json``, ``progress.csv`` and ``config.toml``; no Ray), so ``rlamd sweep --report
DIR`` works at any time, during the sweep too, and on a machine without Ray. It writes:

* ``results.md``: per configuration, the seeds finished, the mean with its 95% Student t
  interval, the IQM with its 95% stratified bootstrap interval from
  :data:`~rlamd.sweep.stats.BOOTSTRAP_RUNS` seeds (:mod:`rlamd.sweep.stats`), min and max
  of the final evaluations, env steps and training wall time per trial; then the trials
  that failed or stopped;
* ``best.toml``: the best configuration's settings (highest IQM; lowest with ``--mode
  min``), which ``python -m rlamd.train --config best.toml`` runs;
* ``curves.png``: score against env steps and against wall clock, IQM over seeds with
  its interval as a band, or the mean and its t interval below ``BOOTSTRAP_RUNS`` seeds
  (:mod:`rlamd.sweep.curves`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from rlamd.config import to_toml
from rlamd.storage import write_text_atomic

from .plan import load_plan
from .stats import BOOTSTRAP_RUNS, Interval, summarize
from .trial import STOP_WAIT_S, read_record, save_record

SETTLE_S = STOP_WAIT_S + 10.0
"""How long a stopped trial's worker may take to write its last record."""

__all__ = ["Group", "best_toml", "groups", "table", "write_report"]


@dataclass
class Group:
    """One configuration's trials."""

    id: str
    settings: dict[str, str]
    trials: list[dict[str, Any]]

    @property
    def done(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t.get("status") == "done" and "final" in t]

    def finals(self) -> list[float]:
        return [float(t["final"]["mean"]) for t in self.done]

    def summary(self) -> Interval:
        return summarize(self.finals())


def _trial_dirs(sweep_dir: Path) -> list[Path]:
    """Trial run folders (a hidden ``.NAME.dead-N``, a start that died before its first
    checkpoint and was set aside, is not one)."""
    return sorted(
        p
        for p in sweep_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / "trial.json").is_file()
    )


def groups(sweep_dir: Path) -> list[Group]:
    """The sweep's trials by configuration, in configuration order."""
    out: dict[str, Group] = {}
    for run_dir in _trial_dirs(sweep_dir):
        record = read_record(run_dir)
        if not record:
            continue
        record["run_dir"] = str(run_dir)
        cid = record.get("config_id", "?")
        group = out.setdefault(cid, Group(cid, dict(record.get("settings", {})), []))
        group.trials.append(record)
    return [out[k] for k in sorted(out)]


def mark_stopped_early(sweep_dir: Path, scheduler: str, settle_s: float = SETTLE_S) -> int:
    """After a sweep whose every trial ended: a trial that is neither done nor failed was
    stopped by the scheduler (Tune ends its worker, so the trial cannot say so itself).
    A stopped worker may still be writing its last record ("stopped", once its run has
    checkpointed) after Tune returned: records still "running" get up to ``settle_s`` for
    that first, so that no late write undoes the mark. Returns how many were marked."""
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and any(
        read_record(d).get("status") in ("starting", "running") for d in _trial_dirs(sweep_dir)
    ):
        time.sleep(0.2)
    marked = 0
    for run_dir in _trial_dirs(sweep_dir):
        record = read_record(run_dir)
        if record and record.get("status") not in ("done", "failed", "stopped early"):
            record.update(status="stopped early", stopped_by=scheduler)
            save_record(run_dir, record)
            marked += 1
    return marked


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _settings_text(settings: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in settings.items()) or "(the flags alone)"


def _with_interval(point: float, low: float, high: float) -> str:
    if math.isnan(low):
        return _fmt(point)
    return f"{_fmt(point)} [{_fmt(low)}, {_fmt(high)}]"


def table(gs: list[Group], seeds: int) -> str:
    """The Markdown table: one row per configuration, and a line on the intervals where a
    configuration has fewer than :data:`~rlamd.sweep.stats.BOOTSTRAP_RUNS` seeds done."""
    rows = [
        "| config | settings | seeds done | final eval mean [95% CI] | IQM [95% CI] | min | max "
        "| env steps / trial | wall s / trial |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in gs:
        s = g.summary()
        done = g.done
        steps = np.mean([t["env_steps"] for t in done]) if done else math.nan
        wall = np.mean([t["wall_s"] for t in done]) if done else math.nan
        rows.append(
            f"| {g.id} | {_settings_text(g.settings)} | {len(done)}/{seeds} "
            f"| {_with_interval(s.mean, s.mean_low, s.mean_high)} "
            f"| {_with_interval(s.iqm, s.low, s.high)} | {_fmt(s.min)} | {_fmt(s.max)} "
            f"| {_fmt(float(steps), 0)} | {_fmt(float(wall))} |"
        )
    if any(0 < len(g.done) < BOOTSTRAP_RUNS for g in gs):
        rows += [
            "",
            f"The mean's interval is Student's t. The IQM gets a bootstrap interval from "
            f"{BOOTSTRAP_RUNS} seeds: in a simulation a 95% percentile bootstrap of one "
            "group's IQM missed 24% of the time at 3 seeds, 8% at 5 and 9% at 7 "
            "(rlamd.sweep.stats.BOOTSTRAP_RUNS).",
        ]
    return "\n".join(rows)


def _problems(gs: list[Group]) -> list[str]:
    lines = []
    for g in gs:
        for t in g.trials:
            status = t.get("status", "?")
            if status == "done":
                continue
            step = f"{t.get('env_steps', 0):,}"
            if status == "failed":
                last = t.get("error") or ["(no output)"]
                lines.append(f"- {t.get('name')}: failed at step {step}: {last[-1]}")
            elif status == "stopped early":
                by = str(t.get("stopped_by", "the scheduler")).upper()
                lines.append(f"- {t.get('name')}: stopped early by {by} at step {step}")
            else:  # running now, or stopped by an interrupted sweep
                lines.append(f"- {t.get('name')}: not finished, last seen at step {step}")
    return lines


def best(gs: list[Group], mode: str) -> Group | None:
    scored = [g for g in gs if g.done]
    if not scored:
        return None
    sign = 1.0 if mode == "max" else -1.0
    return max(scored, key=lambda g: sign * g.summary().iqm)


def best_toml(group: Group, sweep_name: str, reset_threads: bool) -> str:
    """The best configuration's settings as a config file a new run reads on its own: the
    first finished trial's saved ``config.toml``, with the sweep's folder, name and thread
    share taken out (resolved again, so the file is checked)."""
    from rlamd.config.layers import resolve

    run_dir = Path(group.done[0]["run_dir"])
    sets = ["train.logdir=runs", "train.run_name=none"]
    if reset_threads:
        sets.append("train.threads=none")
    cfg = resolve({}, config_file=str(run_dir / "config.toml"), sets=sets)
    s = group.summary()
    head = (
        f"# The best configuration of sweep {sweep_name}: {group.id} "
        f"({_settings_text(group.settings)}),\n# by the IQM of its final evaluations over "
        f"{s.n} seeds: IQM {_with_interval(s.iqm, s.low, s.high)}, mean "
        f"{_with_interval(s.mean, s.mean_low, s.mean_high)} (intervals are 95%; this file "
        f"keeps seed {cfg.train.seed}).\n# Run it with: python -m rlamd.train --config "
        "best.toml\n\n"
    )
    return head + to_toml(cfg.run_sections())


def write_report(sweep_dir: str | Path, out: IO[str] | None = None) -> int:
    """Write ``results.md``, ``best.toml`` and ``curves.png``; print the table to ``out``.

    Returns:
        The number of finished trials.
    """
    sweep_dir = Path(sweep_dir)
    plan_ = load_plan(sweep_dir)
    gs = groups(sweep_dir)
    seeds = len(plan_.job["seeds"])
    text = f"# Sweep {plan_.name}\n\n{table(gs, seeds)}\n"
    problems = _problems(gs)
    if problems:
        text += "\nTrials not done:\n" + "\n".join(problems) + "\n"
    chosen = best(gs, plan_.mode)
    if chosen is not None:
        toml = best_toml(chosen, plan_.name, plan_.job.get("threads") is not None)
        write_text_atomic(sweep_dir / "best.toml", toml)
        text += f"\nBest: {chosen.id} ({_settings_text(chosen.settings)}) -> best.toml\n"
    from .curves import plot_curves

    chart = plot_curves(gs, sweep_dir / "curves.png", title=plan_.name)
    text += f"\n{chart}\n"
    write_text_atomic(sweep_dir / "results.md", text)
    if out is not None:
        print(text, file=out, flush=True)
    return sum(len(g.done) for g in gs)
