"""What a race records and shows: every run's evaluations (with the seconds from its
process start to the race seeing each written), the table, and the chart."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlamd.charts import new_chart, save_chart

from .common import report
from .load import LoadReport
from .peer import get

__all__ = ["EvalPoint", "RaceRun", "print_race", "summary", "write_race_chart"]


def _label(who: str) -> str:
    return "rlamd" if who == "rlamd" else get(who).label


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of a run: env steps trained, its score, and seconds since start."""

    step: int
    mean: float
    std: float
    episodes: int
    seconds: float


@dataclass(frozen=True)
class RaceRun:
    """One contender's run. ``stopped``: ``target``, ``minutes`` (wall budget spent),
    ``finished`` (its steps done) or ``failed`` (``error``: the last line it wrote)."""

    algo: str
    contender: str
    seed: int
    target: float
    stopped: str
    wall: float
    curve: tuple[EvalPoint, ...] = ()
    load: LoadReport | None = None
    recipe: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def hit(self) -> EvalPoint | None:
        return next((p for p in self.curve if p.mean >= self.target), None)

    @property
    def best(self) -> EvalPoint | None:
        return max(self.curve, key=lambda p: p.mean, default=None)

    def to_dict(self) -> dict[str, Any]:
        hit, best = self.hit, self.best
        head = {k: getattr(self, k) for k in ("algo", "contender", "seed", "target")}
        head |= {"reached": hit is not None, "seconds_to_target": hit and hit.seconds}
        head |= {"steps_to_target": hit and hit.step, "best_score": best and best.mean}
        head |= {"best_step": best and best.step, "stopped": self.stopped}
        load = None if self.load is None else self.load.to_dict()
        head |= {"wall_seconds": self.wall, "evaluations": [asdict(p) for p in self.curve]}
        return head | {"load": load, "recipe": self.recipe, "error": self.error}


def summary(runs: list[RaceRun]) -> list[dict[str, Any]]:
    """Per (algo, contender): runs, those that reached the target, their median s and steps."""
    out = []
    for algo, who in dict.fromkeys((r.algo, r.contender) for r in runs):
        mine = [r for r in runs if (r.algo, r.contender) == (algo, who)]
        hits = [r.hit for r in mine if r.hit is not None]
        seconds = statistics.median(h.seconds for h in hits) if hits else None
        steps = statistics.median(h.step for h in hits) if hits else None
        head = {"algo": algo, "contender": who, "runs": len(mine), "reached": len(hits)}
        out.append(head | {"median_seconds": seconds, "median_steps": steps})
    return out


def print_race(runs: list[RaceRun], head: str) -> None:
    """The race table, then one line per algorithm setting rlamd beside each peer."""
    table = []
    for r in runs:
        hit, best, load = r.hit, r.best, r.load
        ready = "-" if load is None or load.runnable is None else f"{load.runnable:.1f}"
        others = "-" if load is None or load.during is None else f"{load.during:.2f}"
        when = ("not reached",) * 2 if hit is None else (f"{hit.seconds:,.0f}", f"{hit.step:,}")
        who = (r.algo, _label(r.contender), str(r.recipe.get("tag", "-")), str(r.seed))
        best_at = "-" if best is None else f"{best.mean:.1f} at {best.step:,}"
        table.append((*who, *when, best_at, r.stopped, others, ready))
    columns = ("algo", "framework", "settings", "seed", "seconds", "env steps", "best score")
    report(head, table, (*columns, "stopped", "others' cores", "ready threads"))
    rows = {(x["algo"], x["contender"]): x for x in summary(runs)}
    for (algo, who), s in rows.items():
        mine = rows.get((algo, "rlamd"))
        if who == "rlamd" or s["median_seconds"] is None or not mine or not mine["median_seconds"]:
            continue
        times = s["median_seconds"] / mine["median_seconds"]
        verdict = f"{times:.2f}x faster" if times >= 1 else f"{1 / times:.2f}x slower"
        verdict += " (medians over the seeds that reached it)" if s["runs"] > 1 else ""
        ours = f"rlamd {mine['median_seconds']:,.0f} s ({mine['median_steps']:,.0f} env steps)"
        theirs = f"{_label(who)} {s['median_seconds']:,.0f} s ({s['median_steps']:,.0f})"
        print(f"{algo}: to the target, {ours}, {theirs}: rlamd {verdict}")


def write_race_chart(path: Path, runs: list[RaceRun], title: str) -> str | None:
    """Score against seconds and env steps, a row per algorithm; None without matplotlib."""
    algos = list(dict.fromkeys(r.algo for r in runs))
    got = new_chart(len(algos), 2, (11, 3.6 * len(algos))) if algos else None
    if got is None:
        return None
    fig, axes = got
    for row, algo in zip(axes, algos, strict=True):
        labelled: set[str] = set()
        for r in (r for r in runs if r.algo == algo and r.curve):
            label = None if r.contender in labelled else _label(r.contender)
            colour = "#c0392b" if r.contender == "rlamd" else get(r.contender).colour
            labelled.add(r.contender)
            xs = ([p.seconds for p in r.curve], [p.step for p in r.curve])
            for ax, x in zip(row, xs, strict=True):
                ax.plot(x, [p.mean for p in r.curve], "o-", ms=3, color=colour, label=label)
        xlabels = ("wall-clock seconds (process start)", "env steps")
        for ax, xlabel in zip(row, xlabels, strict=True):
            ax.axhline(runs[0].target, ls="--", color="#7f8c8d", lw=1)
            ax.set(xlabel=xlabel, ylabel="evaluation score", title=f"{title}: {algo}")
            ax.grid(alpha=0.3)
            if labelled:
                ax.legend(loc="lower right")
    return save_chart(fig, path)
