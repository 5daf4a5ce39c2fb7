"""What a race records and shows: every run's evaluations, the table, and the chart.

A run is one contender (rlamd or a peer) training one algorithm with one seed. Its
curve holds every evaluation: env steps, mean score over the evaluation's episodes and
the wall-clock seconds from the contender's process start to the moment the race saw
that evaluation written (so start-up, training and every evaluation so far count).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import print_table
from .load import LoadReport

__all__ = ["EvalPoint", "RaceRun", "print_race", "race_one", "read_evals", "stop_reason", "summary"]

POLL_S = 0.2
"""How often the race reads a contender's evals.csv (the clock's resolution)."""
GRACE_S = 120.0
"""Seconds a contender has to exit after SIGINT before it is killed."""


def _label(who: str) -> str:
    from .peer import get

    return "rlamd" if who == "rlamd" else get(who).label


def _colour(who: str) -> str:
    from .peer import get

    return "#c0392b" if who == "rlamd" else get(who).colour


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of a run."""

    step: int
    """Env steps trained when it ran (agent decisions summed over envs)."""
    mean: float
    """Mean score over its episodes."""
    std: float
    episodes: int
    seconds: float
    """Wall clock from the contender's process start to the evaluation being written."""


@dataclass(frozen=True)
class RaceRun:
    """One contender's run to the target."""

    algo: str
    contender: str
    """``rlamd`` or a peer's name."""
    seed: int
    target: float
    stopped: str
    """``target`` (reached it), ``minutes`` (the wall budget ran out), ``finished`` (its
    own step budget ran out) or ``failed`` (the process ended with an error)."""
    wall: float
    """Seconds from its process start until it exited."""
    curve: tuple[EvalPoint, ...] = ()
    load: LoadReport | None = None
    recipe: dict[str, Any] = field(default_factory=dict)
    """The settings it trained with (and where they come from)."""
    error: str | None = None
    """The last line the process wrote, when it failed."""

    @property
    def hit(self) -> EvalPoint | None:
        """The first evaluation at or above the target."""
        return next((p for p in self.curve if p.mean >= self.target), None)

    @property
    def best(self) -> EvalPoint | None:
        return max(self.curve, key=lambda p: p.mean, default=None)

    def to_dict(self) -> dict[str, Any]:
        hit, best = self.hit, self.best
        return {
            "algo": self.algo,
            "contender": self.contender,
            "seed": self.seed,
            "target": self.target,
            "reached": hit is not None,
            "seconds_to_target": None if hit is None else hit.seconds,
            "steps_to_target": None if hit is None else hit.step,
            "best_score": None if best is None else best.mean,
            "best_step": None if best is None else best.step,
            "stopped": self.stopped,
            "wall_seconds": self.wall,
            "evaluations": [p.__dict__ for p in self.curve],
            "load": None if self.load is None else self.load.to_dict(),
            "recipe": self.recipe,
            "error": self.error,
        }


def _result(run: RaceRun) -> tuple[str, str, str]:
    """(seconds to target, env steps to target, best score) table cells."""
    hit, best = run.hit, run.best
    best_cell = "-" if best is None else f"{best.mean:.1f} at {best.step:,}"
    if hit is None:
        return "not reached", "not reached", best_cell
    return f"{hit.seconds:,.0f}", f"{hit.step:,}", best_cell


def summary(runs: list[RaceRun]) -> list[dict[str, Any]]:
    """Per (algo, contender): seeds run and reached, median seconds and steps to target
    over the seeds that reached it."""
    out = []
    keys = dict.fromkeys((r.algo, r.contender) for r in runs)
    for algo, who in keys:
        mine = [r for r in runs if (r.algo, r.contender) == (algo, who)]
        hits = [r.hit for r in mine if r.hit is not None]
        out.append(
            {
                "algo": algo,
                "contender": who,
                "runs": len(mine),
                "reached": len(hits),
                "median_seconds": statistics.median(h.seconds for h in hits) if hits else None,
                "median_steps": statistics.median(h.step for h in hits) if hits else None,
            }
        )
    return out


def print_race(runs: list[RaceRun], head: str) -> None:
    """The race table, then one line per algorithm setting rlamd beside each peer."""
    print(f"\n{head}")
    rows = []
    for r in runs:
        secs, steps, best = _result(r)
        load = "-" if r.load is None else r.load.cell()
        ready = "-" if r.load is None or r.load.runnable is None else f"{r.load.runnable:.1f}"
        tag = str(r.recipe.get("tag", "-"))
        rows.append(
            (
                r.algo,
                _label(r.contender),
                tag,
                str(r.seed),
                secs,
                steps,
                best,
                r.stopped,
                load,
                ready,
            )
        )
    head = (
        "algo",
        "framework",
        "settings",
        "seed",
        "seconds",
        "env steps",
        "best score",
        "stopped",
    )
    print_table(rows, (*head, "others' cores", "ready threads"))
    rows_by = {(x["algo"], x["contender"]): x for x in summary(runs)}
    for (algo, who), s in rows_by.items():
        mine = rows_by.get((algo, "rlamd"))
        if who == "rlamd" or s["median_seconds"] is None or mine is None:
            continue
        if mine["median_seconds"] is not None:
            times = s["median_seconds"] / mine["median_seconds"]
            verdict = f"{times:.2f}x faster" if times >= 1 else f"{1 / times:.2f}x slower"
            print(
                f"{s['algo']}: to the target, rlamd {mine['median_seconds']:,.0f} s "
                f"({mine['median_steps']:,.0f} env steps), {_label(s['contender'])} "
                f"{s['median_seconds']:,.0f} s ({s['median_steps']:,.0f}): rlamd {verdict}"
                + (" (medians over the seeds that reached it)" if s["runs"] > 1 else "")
            )


def write_race_chart(path: Path, runs: list[RaceRun], title: str) -> str | None:
    """Score against wall clock and against env steps, a row per algorithm; None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    algos = list(dict.fromkeys(r.algo for r in runs))
    if not algos:
        return None
    fig, axes = plt.subplots(len(algos), 2, figsize=(11, 3.6 * len(algos)), squeeze=False)
    for row, algo in zip(axes, algos, strict=True):
        labelled: set[str] = set()
        for r in (r for r in runs if r.algo == algo):
            if not r.curve:
                continue
            label = None if r.contender in labelled else _label(r.contender)
            labelled.add(r.contender)
            for ax, xs in zip(
                row, ([p.seconds for p in r.curve], [p.step for p in r.curve]), strict=True
            ):
                ax.plot(
                    xs,
                    [p.mean for p in r.curve],
                    "o-",
                    ms=3,
                    color=_colour(r.contender),
                    label=label,
                )
        for ax, xlabel in zip(
            row, ("wall-clock seconds (process start)", "env steps"), strict=True
        ):
            ax.axhline(runs[0].target, ls="--", color="#7f8c8d", lw=1)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("evaluation score")
            ax.set_title(f"{title}: {algo}")
            ax.grid(alpha=0.3)
            if labelled:
                ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def stop_reason(curve: list[EvalPoint], elapsed: float, target: float, budget_s: float):
    """The stopping rule: ``"target"`` once an evaluation's mean is at or above
    ``target``, ``"minutes"`` once ``elapsed`` passed ``budget_s``, else None."""
    if any(p.mean >= target for p in curve):
        return "target"
    if elapsed >= budget_s:
        return "minutes"
    return None


def read_evals(path: Path) -> list[tuple[int, float, float, int]]:
    """The complete rows of an ``evals.csv`` (step,mean,std,episodes); [] before it exists.
    A half-written last line is left for the next read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    rows = []
    for line in text.split("\n")[1:-1]:  # header; the part after the last newline
        step, mean, std, episodes = line.split(",")
        rows.append((int(step), float(mean), float(std), int(episodes)))
    return rows


def _interrupt(proc: subprocess.Popen) -> None:
    """SIGINT to the contender's process group, then SIGKILL after :data:`GRACE_S`."""
    for sig, wait in ((signal.SIGINT, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def race_one(
    cmd: list[str], evals: Path, log: Path, target: float, budget_s: float
) -> tuple[str, float, list[EvalPoint], int | None]:
    """Run ``cmd`` (its own process group), watching ``evals`` every :data:`POLL_S`.

    Returns (stop reason, wall seconds, curve, exit code): ``target``, ``minutes``,
    ``finished`` (it ended by itself, exit 0) or ``failed``.
    """
    env = {**os.environ, "OMP_NUM_THREADS": _threads_of(cmd), "MKL_NUM_THREADS": _threads_of(cmd)}
    curve: list[EvalPoint] = []
    evals.unlink(missing_ok=True)  # a previous run's rows must not count
    with open(log, "w", encoding="utf-8") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            while True:
                done = proc.poll() is not None
                now = time.monotonic() - t0
                curve += [EvalPoint(*row, now) for row in read_evals(evals)[len(curve) :]]
                reason = stop_reason(curve, now, target, budget_s)
                if reason is not None and not done:
                    _interrupt(proc)
                    return reason, time.monotonic() - t0, curve, proc.returncode
                if done:
                    ok = proc.returncode == 0 or reason == "target"
                    return reason or ("finished" if ok else "failed"), now, curve, proc.returncode
                time.sleep(POLL_S)
        except BaseException:  # Ctrl-C in the race: stop the contender too
            _interrupt(proc)
            raise


def _threads_of(cmd: list[str]) -> str:
    return cmd[cmd.index("--threads") + 1] if "--threads" in cmd else "1"
