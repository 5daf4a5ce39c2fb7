"""Turn a run's episodes.csv / evals.csv into a binned score curve (CSV + PNG).

    python scripts/plot_run.py runs/breakout_dqn_500k --bin 20000 --out results/breakout_dqn_500k \
        --ref "random play=1.7" --ref "CleanRL DQN @1M (seed 1)=67.1@1000000"

``--ref LABEL=VALUE[@STEP]`` draws a horizontal line, or a marker at STEP.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path


def read_csv(path: Path) -> list[dict[str, float]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="run folder holding episodes.csv")
    p.add_argument("--bin", type=int, default=20_000, help="env steps per point (default: 20000)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    p.add_argument("--ref", action="append", default=[], help="LABEL=VALUE[@STEP] reference")
    p.add_argument("--title", default=None)
    return p.parse_args()


def bin_scores(episodes: list[dict[str, float]], width: int) -> list[tuple[int, float, int]]:
    """``(bin end step, mean score, episodes)`` per ``width`` env steps, in step order."""
    bins: dict[int, list[float]] = {}
    for e in episodes:
        bins.setdefault(int(e["step"] // width), []).append(e["score"])
    return [((b + 1) * width, statistics.fmean(s), len(s)) for b, s in sorted(bins.items())]


def write_csv(
    path: Path, rows: list[tuple[int, float, int]], evals: list[dict[str, float]]
) -> None:
    """One line per bin; each evaluation goes on the first bin ending at or after its step."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "mean_training_score", "episodes", "eval_mean", "eval_std"])
        pending = sorted(evals, key=lambda e: e["step"])
        for step, mean, n in rows:
            ev = pending.pop(0) if pending and pending[0]["step"] <= step else None
            eval_mean = f"{ev['mean']:.2f}" if ev else ""
            eval_std = f"{ev['std']:.2f}" if ev else ""
            w.writerow([step, f"{mean:.3f}", n, eval_mean, eval_std])


def plot(
    args: argparse.Namespace, rows: list[tuple[int, float, int]], evals: list[dict[str, float]]
) -> None:
    """The training curve, the evaluations with error bars and the ``--ref`` lines, as PNG."""
    from rlamd.charts import new_chart, save_chart

    got = new_chart(1, 1, (7, 4))
    if got is None:
        raise SystemExit("plot_run.py needs matplotlib: bash scripts/setup.sh --dev")
    fig, ax = got[0], got[1][0, 0]
    ax.plot(
        [r[0] for r in rows], [r[1] for r in rows], label="rlamd, training episodes (mean per bin)"
    )
    if evals:
        ax.errorbar(
            [e["step"] for e in evals],
            [e["mean"] for e in evals],
            yerr=[e["std"] for e in evals],
            fmt="o",
            capsize=3,
            label="rlamd, evaluation (whole games)",
        )
    for ref in args.ref:
        label, _, value = ref.partition("=")
        value, _, at = value.partition("@")
        if at:
            ax.plot([float(at)], [float(value)], "s", label=f"{label} (published)")
        else:
            ax.axhline(float(value), ls="--", lw=1, color="gray", label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("game score (unclipped)")
    ax.set_title(args.title or args.run.name)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save_chart(fig, args.out.with_suffix(".png"))


def main() -> None:
    args = parse_args()
    episodes = read_csv(args.run / "episodes.csv")
    evals = read_csv(args.run / "evals.csv")
    if not episodes:
        raise SystemExit(f"{args.run}/episodes.csv is missing or empty")
    rows = bin_scores(episodes, args.bin)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(args.out.with_suffix(".csv"), rows, evals)
    plot(args, rows, evals)
    print(f"wrote {args.out.with_suffix('.csv')} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
