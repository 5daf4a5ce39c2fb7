"""``python -m rlamd.sweep.bench ENV``: aggregate env steps/s of trials packed on one machine.

Example::

    nice -n 5 python -m rlamd.sweep.bench cartpole --algo ppo --steps 60000 --trials 1,2,4
    python -m rlamd.sweep.bench breakout --algo ppo --device cuda --trials 1,4,8 --plain

First one ``python -m rlamd.train`` run alone (the baseline), then for each count K a sweep
of K seeds on Ray Tune (``--cpus-per-trial`` = cores / K, so each trial's thread budget is
its share), or, with ``--plain`` (or without Ray), K plain ``rlamd.train`` processes with
``--threads`` = cores / K: the packing a sweep does, without Tune. Every run folder's
``episodes.csv`` is polled; the aggregate speed is the env steps all runs added between
the moment the last one passed 10% of its steps and the moment the first one finished
(all K training at once, start-up left out). Prints each figure and its ratio to the
run alone measured just before it, and the wall time of each sweep; ``--rounds N`` repeats
the whole and prints the median ratio (on a shared machine the load moves between runs).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlamd.logger import read_rows
from rlamd.threads import cores_available

__all__ = ["aggregate_sps", "main"]

POLL_S = 0.5


def _last_step(run_dir: Path) -> int:
    rows = read_rows(run_dir / "episodes.csv", "step,score,length")
    return int(rows[-1][0]) if rows else 0


def aggregate_sps(samples: list[tuple[float, list[int]]], steps: int, k: int) -> float:
    """Env steps/s of all runs together while all K trained (from polled samples)."""
    warm = [(t, s) for t, s in samples if len(s) == k and min(s) >= 0.1 * steps]
    if len(warm) < 2:
        return float("nan")
    t1, s1 = warm[0]
    end = next(((t, s) for t, s in warm if max(s) >= steps * 0.98), warm[-1])
    t2, s2 = end
    return (sum(s2) - sum(s1)) / (t2 - t1) if t2 > t1 else float("nan")


def _poll(procs: list[subprocess.Popen], folders, steps: int, k: int) -> tuple[float, float]:
    """Poll until every process exits; returns (aggregate SPS, wall seconds)."""
    started, samples = time.monotonic(), []
    while any(p.poll() is None for p in procs):
        time.sleep(POLL_S)
        runs = folders()
        if len(runs) == k:
            samples.append((time.monotonic(), [_last_step(r) for r in runs]))
    bad = [p.returncode for p in procs if p.returncode != 0]
    if bad:
        raise RuntimeError(f"a benchmark run exited with status {bad[0]}")
    return aggregate_sps(samples, steps, k), time.monotonic() - started


def _plain(args, k: int, root: Path) -> tuple[float, float]:
    threads = max(1, cores_available() // k)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlamd.train",
                args.env,
                "--algo",
                args.algo,
                "--steps",
                str(args.steps),
                "--device",
                args.device,
                "--seed",
                str(seed),
                "--threads",
                str(threads),
                "--logdir",
                str(root),
                "--run-name",
                f"k{k}_s{seed}",
                "--no-tensorboard",
                "--eval-every",
                "0",
                *args.extra,
            ],
            stdout=subprocess.DEVNULL,
        )
        for seed in range(k)
    ]
    return _poll(procs, lambda: sorted(root.glob(f"k{k}_s*")), args.steps, k)


def _ray(args, k: int, root: Path) -> tuple[float, float]:
    share = cores_available() / k
    cmd = [
        sys.executable,
        "-m",
        "rlamd.sweep",
        args.env,
        "--algo",
        args.algo,
        "--steps",
        str(args.steps),
        "--device",
        args.device,
        "--seeds",
        str(k),
        "--cpus-per-trial",
        f"{share:g}",
        "--gpus-per-trial",
        f"{args.gpus_per_trial(k):g}",
        "--logdir",
        str(root),
        "--name",
        f"k{k}",
        "--quiet",
        "--no-tensorboard",
        "--eval-every",
        "0",
        *args.extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    return _poll([proc], lambda: sorted((root / f"k{k}").glob("c*_s*")), args.steps, k)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlamd.sweep.bench", description=__doc__)
    p.add_argument("env")
    p.add_argument("--algo", default="ppo")
    p.add_argument("--steps", type=int, default=60_000)
    p.add_argument("--trials", default="1,2,4", help="counts of trials at once")
    p.add_argument("--device", default="cpu")
    p.add_argument("--plain", action="store_true", help="plain processes, not Ray Tune")
    p.add_argument("--rounds", type=int, default=1, help="rounds of alone-then-packed")
    p.add_argument("extra", nargs="*", help="more rlamd.train flags, after --")
    args = p.parse_args(argv)
    counts = [int(x) for x in args.trials.split(",")]
    on_gpu = args.device != "cpu"
    args.gpus_per_trial = lambda k: (1.0 / k) if on_gpu else 0.0
    use_ray = not args.plain and importlib.util.find_spec("ray") is not None
    if not args.plain and not use_ray:
        print(
            "bench: Ray is not installed (bash scripts/setup.sh --ray): packing trials as "
            "plain processes instead",
            flush=True,
        )
    ratios: dict[int, list[float]] = {k: [] for k in counts}
    for r in range(args.rounds):  # each round: the run alone, then every count, side by side
        with tempfile.TemporaryDirectory(prefix="rlamd-sweep-bench-") as tmp:
            root = Path(tmp)
            alone, alone_wall = _plain(args, 1, root / "alone")
            print(
                f"round {r + 1}: one run alone: {alone:,.0f} env steps/s ({alone_wall:.1f} s wall)",
                flush=True,
            )
            for k in counts:
                sps, wall = (_ray if use_ray else _plain)(args, k, root / f"packed{k}")
                kind = "Tune trials" if use_ray else "plain processes"
                ratios[k].append(sps / alone)
                print(
                    f"round {r + 1}: {k} {kind} at once: {sps:,.0f} env steps/s in all = "
                    f"{sps / alone:.2f}x the run alone; {k} x {args.steps:,} steps took "
                    f"{wall:.1f} s wall",
                    flush=True,
                )
    for k, values in ratios.items():
        print(
            f"{k} at once: median {statistics.median(values):.2f}x the run alone over "
            f"{len(values)} round(s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
