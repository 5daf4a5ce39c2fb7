"""rlamd beside Stable-Baselines3 2.9.2 (DQN, SAC, TD3), same machine, same time, one core each.

    python scripts/dqn_vs_sb3.py --steps 500000 --seed 2 --out bench-out/dqn_vs_sb3
    python scripts/dqn_vs_sb3.py --report bench-out/dqn_vs_sb3   # table and chart again
    python scripts/dqn_vs_sb3.py --algo sac --env Pendulum-v1 --steps 20000 --seeds 1 2 3 \
        --out bench-out/sac_pendulum
    python scripts/dqn_vs_sb3.py --algo sac --report bench-out/sac_pendulum
    python scripts/dqn_vs_sb3.py --summary bench-out/sac_pendulum bench-out/td3_hopper

DQN (the default) races on Breakout, as below. SAC and TD3 race on any ``Box`` env with the
RL Zoo's hyperparameters for it (:data:`CONTINUOUS`, translated into rlamd's ``--set``
items and SB3's keyword arguments), seed after seed: both evaluate the mean action on 10
episodes every ``--eval-every`` env steps (``OUT/seedS/{rlamd,sb3}/evals.csv``), and the
report gives the mean evaluation return over the seeds at equal env steps and the
updates per second with learning included (the median of the log intervals after
learning starts; env stepping and acting included, evaluations not), with a chart.

Starts ``python -m rlamd.train breakout`` (rlamd's defaults; ``--set`` adds overrides) and
SB3's DQN with the RL Baselines3 Zoo's Atari recipe (``rlamd/bench/peers/sb3.toml``;
``--sb3-set`` overrides its keyword arguments, e.g. ``buffer_size=100000
optimize_memory_usage=false``)
as two processes, one thread each, pinned to one core each where ``taskset`` exists. Both
log every finished game (whole games across lives, unclipped scores) to
``OUT/{rlamd,sb3}/episodes.csv``; the report gives, at fixed env steps, the mean score of
the last 100 games each had finished by then (the scores both frameworks' progress lines
show, taken at the exploration epsilon of training), and draws both binned curves.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

CHECKPOINTS = (100_000, 150_000, 200_000, 250_000, 300_000, 400_000, 500_000)

ZOO = "DLR-RM/rl-baselines3-zoo hyperparams"
MUJOCO = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5", "Swimmer-v5")


class Race(NamedTuple):
    """One algorithm on one env: SB3's keyword arguments (the Zoo's) and rlamd's ``--set``
    items for the same settings (what rlamd's defaults do not already hold)."""

    sb3: dict[str, Any]
    rlamd: tuple[str, ...]
    source: str


# The Zoo writes TD3's noise as ``noise_type: normal, noise_std``; SB3 adds it to actions
# scaled to [-1, 1], the unit of rlamd's td3.exploration_noise (half-widths of the box).
# Its Pendulum entry trains once per episode for as many steps (train_freq [1, episode],
# gradient_steps -1): the same updates per episode as 1 and 1, which both sides use here.
CONTINUOUS: dict[tuple[str, str], Race] = {
    ("sac", "Pendulum-v1"): Race(
        {"learning_rate": 1e-3},
        ("sac.lr=1e-3", "sac.learning_starts=100"),
        f"{ZOO}/sac.yml, Pendulum-v1 (SB3's defaults otherwise)",
    ),
    ("sac", "mujoco"): Race(
        {"learning_starts": 10_000},
        (),
        f"{ZOO}/sac.yml, mujoco-defaults (SB3's defaults otherwise)",
    ),
    ("td3", "Pendulum-v1"): Race(
        {
            "gamma": 0.98,
            "buffer_size": 200_000,
            "learning_starts": 10_000,
            "noise_std": 0.1,
            "learning_rate": 1e-3,
            "policy_kwargs": {"net_arch": [400, 300]},
        },
        ("td3.gamma=0.98", "td3.buffer_size=200000"),
        f"{ZOO}/td3.yml (a02f4fbf), Pendulum",
    ),
    ("td3", "mujoco"): Race(
        {
            "learning_starts": 10_000,
            "noise_std": 0.1,
            "learning_rate": 1e-3,
            "batch_size": 256,
            "policy_kwargs": {"net_arch": [400, 300]},
        },
        (),
        f"{ZOO}/td3.yml (d29756c4), mujoco-defaults",
    ),
}


def race(algo: str, env: str) -> Race:
    """The settings for ``algo`` on ``env`` (MuJoCo tasks share the Zoo's entry)."""
    key = (algo, "mujoco" if env in MUJOCO else env)
    if key not in CONTINUOUS:
        known = ", ".join(sorted({e for a, e in CONTINUOUS if a == algo} | set(MUJOCO)))
        raise SystemExit(f"--env {env}: no Zoo recipe for {algo} here; accepted: {known}")
    return CONTINUOUS[key]


def _sb3_main(steps: int, seed: int, out: Path, overrides: dict[str, str]) -> None:
    """The SB3 side (run in its own process): the Zoo's Atari DQN, logging every game."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecFrameStack

    from rlamd.bench.peer import get
    from rlamd.config import coerce

    torch.set_num_threads(1)
    gym.register_envs(ale_py)
    rec = get("sb3").recipe("breakout", "dqn")
    kwargs = dict(rec.kwargs)
    for key, text in overrides.items():
        kind = type(kwargs[key]) if key in kwargs else str
        kwargs[key] = coerce("sb3", key, text, kind)
    policy = kwargs.pop("policy")
    env = VecFrameStack(make_atari_env("BreakoutNoFrameskip-v4", n_envs=1, seed=seed), n_stack=4)
    model = DQN(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "episodes.csv", "w", encoding="utf-8", buffering=1)
    log.write("step,score,frames\n")  # SB3 counts a game's length in emulator frames

    class Games(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:  # SB3's Monitor sits under the life-loss wrapper
                    log.write(
                        f"{self.num_timesteps},{info['episode']['r']},{info['episode']['l']}\n"
                    )
            return True

    model.learn(steps, callback=Games())


def _sb3_continuous(
    algo: str, env_id: str, steps: int, seed: int, out: Path, eval_every: int, log_every: int
) -> None:
    """The SB3 side of a SAC or TD3 race (its own process): the Zoo's settings, the mean
    action evaluated on 10 episodes every ``eval_every`` steps, progress every
    ``log_every`` steps (seconds without the evaluations, updates so far)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.noise import NormalActionNoise

    from rlamd.logger import EVALS_HEADER, eval_row

    torch.set_num_threads(1)
    kwargs = dict(race(algo, env_id).sb3)
    env = gym.make(env_id)
    noise = kwargs.pop("noise_std", None)
    if noise is not None:
        n = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), noise * np.ones(n))
    kind = {"sac": SAC, "td3": TD3}[algo]
    model = kind("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    eval_env = Monitor(gym.make(env_id))
    eval_env.reset(seed=10_000 + seed)
    out.mkdir(parents=True, exist_ok=True)
    evals = open(out / "evals.csv", "w", encoding="utf-8", buffering=1)
    evals.write(EVALS_HEADER + "\n")
    progress = open(out / "progress.csv", "w", encoding="utf-8", buffering=1)
    progress.write("step,seconds,updates\n")
    clock = {"start": time.perf_counter(), "evals": 0.0}

    class Marks(BaseCallback):
        def _on_step(self) -> bool:
            step = self.num_timesteps
            if step % log_every == 0:
                spent = time.perf_counter() - clock["start"] - clock["evals"]
                progress.write(f"{step},{spent:.3f},{model._n_updates}\n")
            if step % eval_every == 0:
                t0 = time.perf_counter()
                mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10)
                clock["evals"] += time.perf_counter() - t0
                evals.write(eval_row(step, mean, std, 10))
            return True

    model.learn(steps, callback=Marks())


_LINE = re.compile(r"step ([\d,]+)/[\d,]+ \| SPS [\d,.]+ \| upd/s ([\d,.]+)")


def _rate(rates: list[float]) -> float | None:
    """The median update rate of the log intervals once learning runs (the first, which
    straddles the start of learning, left out)."""
    learning = [r for r in rates if r > 0][1:]
    return statistics.median(learning) if learning else None


def updates_per_s(run: Path) -> tuple[float | None, float | None]:
    """``(rlamd, SB3)`` updates per second of one seed's runs (see :func:`_rate`)."""
    ours = []
    log = run / "rlamd.log"
    if log.exists():
        for m in _LINE.finditer(log.read_text(encoding="utf-8", errors="replace")):
            ours.append(float(m.group(2).replace(",", "")))
    theirs = []
    progress = run / "sb3" / "progress.csv"
    if progress.exists():
        with open(progress, encoding="utf-8") as f:
            rows = [(float(r["seconds"]), int(r["updates"])) for r in csv.DictReader(f)]
        for (t0, u0), (t1, u1) in itertools.pairwise(rows):
            theirs.append((u1 - u0) / max(t1 - t0, 1e-9))
    return _rate(ours), _rate(theirs)


PAIR = "pair.txt"
"""Written into a seed folder whose rlamd and SB3 runs shared the machine's time, one core
each (:func:`_continuous`): only such seeds' updates/s are set against each other (a run
of one side alone, compared with the other's rows from another day, is not)."""


def pair_ratios(runs: list[Path]) -> list[tuple[str, float]]:
    """``(seed folder, rlamd's updates/s over SB3's)`` of the seeds run as pairs."""
    got = [(r.name, updates_per_s(r)) for r in runs if (r / PAIR).exists()]
    return [(name, a / b) for name, (a, b) in got if a and b]


def _cell(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.0f}"
    return f"{statistics.mean(values):.0f}±{statistics.stdev(values):.0f}"


def _race(out: Path) -> tuple[list[Path], dict[str, list[dict[int, float]]], list[int]]:
    """A SAC or TD3 race folder's seed folders, both sides' evaluations per seed, and
    every evaluation mark either side reached."""
    from rlamd.logger import read_evals

    runs = sorted(p for p in out.glob("seed*") if p.is_dir())
    sides = {"rlamd": "rlamd", "SB3": "sb3"}
    evals = {name: [read_evals(r / d / "evals.csv") for r in runs] for name, d in sides.items()}
    marks = sorted(set().union(*(e.keys() for es in evals.values() for e in es)))
    return runs, evals, marks


def report_evals(out: Path, title: str = "") -> None:
    """The table (mean evaluation return over the seeds at each evaluation both sides
    reached, updates/s) and ``OUT/curves.png`` of a SAC or TD3 race in ``out``."""
    runs, evals, marks = _race(out)
    rates = [updates_per_s(r) for r in runs]
    counts = {name: sum(1 for e in es if e) for name, es in evals.items()}
    seeds = " / ".join(f"{n} ({name})" for name, n in counts.items())
    print(
        f"{title or out.name}: mean evaluation return over "
        f"{counts['rlamd'] if len(set(counts.values())) == 1 else seeds} seeds (mean±std), "
        "10 episodes of the mean action each"
    )
    print(f"{'framework':<10}" + "".join(f"{m / 1000:>10g}k" for m in marks) + "    updates/s")
    for i, name in enumerate(evals):
        cells = [_cell([e[m] for e in evals[name] if m in e]) for m in marks]
        ups = [r[i] for r in rates if r[i] is not None]
        rate = f"{statistics.median(ups):9.1f}" if ups else "        -"
        print(f"{name:<10}" + "".join(f"{c:>11}" for c in cells) + f"    {rate}")
    if ratios := pair_ratios(runs):
        cells = ", ".join(f"{name} {r:.2f}" for name, r in ratios)
        print(f"updates/s ratio rlamd/SB3, seeds run side by side: {cells}")
    if alone := [r.name for r in runs if not (r / PAIR).exists()]:
        print(f"(not run side by side, so no ratio: {', '.join(alone)})")
    for line in compare_lines(evals["rlamd"], evals["SB3"], marks):
        print(line)
    _chart(out, marks, evals, title or out.name)


def _num(value: float, sign: bool = False, scale: float | None = None) -> str:
    """Thousands separated, with decimals only where ``scale`` (default: the value) is
    small (a gap of 0.4 is not 0)."""
    size = abs(value if scale is None else scale)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2
    return f"{value:{'+' if sign else ''},.{digits}f}"


def _gap(figure: tuple[float, float, float], scale: float | None = None) -> str:
    """``+12 [-3, +27]`` (decimals alike), or the point alone where there is no interval,
    its decimals set by ``scale`` (the values it is the gap of: -56 between 1,708 and
    1,764, not -56.0)."""
    point, low, high = figure
    if math.isnan(low):
        return _num(point, True, scale)
    scale = max(abs(point), abs(low), abs(high))
    return " ".join(
        (_num(point, True, scale), f"[{_num(low, True, scale)}, {_num(high, True, scale)}]")
    )


def _size(*sides: list[float]) -> float:
    """The largest magnitude among the compared values (sets a lone gap's decimals)."""
    return max(abs(v) for side in sides for v in side)


def _share(figure: tuple[float, float, float]) -> str:
    point, low, high = figure
    return f"{point:.2f}" + ("" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]")


def _spread(values: list[float]) -> str:
    """``mean ± sd``, or the one value of a single seed."""
    mean = statistics.mean(values)
    if len(values) < 2:
        return _num(mean)
    return f"{_num(mean)} ± {_num(statistics.stdev(values), scale=mean)}"


class Samples(NamedTuple):
    """What :func:`_samples` found to compare, or why nothing."""

    at: tuple[str, list[float], list[float]] | None
    """``(mark, rlamd's returns, SB3's)`` at the last evaluation two runs a side reached"""
    curve: tuple[str, list[float], list[float]] | None
    """``(span, rlamd's, SB3's)``: each of those runs' mean over the evaluations they all
    reached (the area under its curve: one evaluation's swing counts for one of many);
    None below two such evaluations"""
    note: str
    """runs left out (they stopped earlier), or why there is nothing to compare"""


def _samples(ours: list[dict], theirs: list[dict], marks: list[int], least: int = 2) -> Samples:
    """``least``: how many runs a side an evaluation needs (1 lets a single seed through)."""
    mine, peer = [e for e in ours if e], [e for e in theirs if e]
    if not mine or not peer:
        side = "rlamd" if not mine else "SB3"
        return Samples(None, None, f"no {side} evaluations here: nothing to compare")
    both = [m for m in marks if min(sum(m in e for e in side) for side in (mine, peer)) >= least]
    if not both:
        runs = "two runs" if least == 2 else "a run"
        return Samples(None, None, f"no evaluation that {runs} a side reached: no comparison")
    last = both[-1]
    a, b = [e for e in mine if last in e], [e for e in peer if last in e]
    left = len(mine) + len(peer) - len(a) - len(b)
    note = f"{left} run(s) that stopped before {last / 1000:g}k left out" if left else ""
    at = (f"{last / 1000:g}k", [e[last] for e in a], [e[last] for e in b])
    shared = [m for m in marks if m <= last and all(m in e for e in (*a, *b))]
    if len(shared) < 2:
        return Samples(at, None, note)
    span = f"{shared[0] / 1000:g}k-{last / 1000:g}k"
    curve = [[statistics.mean(e[m] for m in shared) for e in side] for side in (a, b)]
    return Samples(at, (span, *curve), note)


def compare_lines(ours: list[dict], theirs: list[dict], marks: list[int]) -> list[str]:
    """rlamd against SB3 (:func:`rlamd.sweep.stats.compare`) on the :func:`_samples`:
    the gap of the means with its 95% interval, the IQM's gap, the probability of
    improvement and its test (bootstrap intervals for those two from
    :data:`rlamd.sweep.stats.BOOTSTRAP_RUNS` seeds a side)."""
    from rlamd.sweep.stats import BOOTSTRAP_RUNS, compare

    got = _samples(ours, theirs, marks)
    lines = []
    for label, sample in (("at {}", got.at), ("mean of the evaluations {}", got.curve)):
        if sample is None:
            continue
        span, mine, peer = sample
        c = compare(mine, peer)
        iqm = f", IQM {_gap(c.iqm_gap)}" if min(c.n) >= 4 else ""
        lines.append(
            f"{label.format(span)}, {c.n[0]} and {c.n[1]} seeds: rlamd - SB3 mean "
            f"{_gap(c.mean_gap)}{iqm}; P(rlamd > SB3) {_share(c.improvement)}"
            f" (Mann-Whitney p = {c.p_value:.2f})"
        )
    if lines:
        lines.append(
            "(95% intervals in brackets: Welch's t for the mean, a bootstrap over seeds for "
            f"the IQM and P from {BOOTSTRAP_RUNS} seeds a side; P: a run of each drawn at "
            "random, 0.5 a tie)"
        )
    return lines + ([f"({got.note})"] if got.note else [])


def summary(dirs: list[Path]) -> list[str]:
    """A markdown table, one row per race folder: seeds a side, the last evaluation two
    runs a side reached, both sides' mean ± sd there, rlamd's mean minus SB3's there and
    over the curve (:func:`_samples`) with Welch's 95% intervals, the probability of
    improvement over the curve with the Mann-Whitney p-value, and the median of the
    updates/s ratios of the seeds run side by side (:data:`PAIR`), with their count.
    A folder with one seed a side gets its row too: the values and gaps without spread,
    intervals or p-value (the report of such a folder compares nothing)."""
    from rlamd.sweep.stats import compare

    rows = [
        "| run | seeds | at | rlamd | SB3 | rlamd - SB3 [95% CI] | over the curve [95% CI] "
        "| P(rlamd > SB3), curve (p) | updates/s ratio (pairs) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for out in dirs:
        runs, evals, marks = _race(out)
        ratios = [r for _, r in pair_ratios(runs)]
        ratio = f"{statistics.median(ratios):.2f}x ({len(ratios)})" if ratios else "-"
        counts = [sum(map(bool, evals[k])) for k in ("rlamd", "SB3")]
        seeds = " / ".join(map(str, counts))
        least = 1 if min(counts) == 1 else 2
        got = _samples(evals["rlamd"], evals["SB3"], marks, least)
        if got.at is None:
            rows.append(f"| {out.name} | {seeds} | {got.note} | - | - | - | - | - | {ratio} |")
            continue
        at, mine, peer = got.at
        cells = [f"{at}" + (f" ({got.note})" if got.note else ""), _spread(mine), _spread(peer)]
        cells.append(_gap(compare(mine, peer).mean_gap, _size(mine, peer)))
        if got.curve is None:
            cells += ["-", "-"]
        else:
            curve = compare(*got.curve[1:])
            p = f"{curve.improvement[0]:.2f} ({curve.p_value:.2f})" if least == 2 else "-"
            cells += [_gap(curve.mean_gap, _size(*got.curve[1:])), p]
        rows.append(f"| {out.name} | {seeds} | " + " | ".join(cells) + f" | {ratio} |")
    return rows


def _axes() -> tuple[Any, Any]:
    """A 7 x 4 chart (:func:`rlamd.charts.new_chart`); (None, None) without matplotlib."""
    from rlamd.charts import new_chart

    if (got := new_chart(1, 1, (7, 4))) is None:
        print("(matplotlib is not installed: no chart)")
        return None, None
    return got[0], got[1][0, 0]


def _save(fig: Any, path: Path) -> None:
    from rlamd.charts import save_chart

    print(f"wrote {save_chart(fig, path)}")


def _chart(out: Path, marks: list[int], evals: dict, title: str) -> None:
    fig, ax = _axes()
    if fig is None:
        return
    for name, runs in evals.items():
        xs = [m for m in marks if any(m in e for e in runs)]
        values = [[e[m] for e in runs if m in e] for m in xs]
        ax.plot(xs, [statistics.mean(v) for v in values], label=name)
        ax.fill_between(xs, [min(v) for v in values], [max(v) for v in values], alpha=0.2)
    ax.set(xlabel="env steps", ylabel="mean evaluation return", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, out / "curves.png")


def _mean_last_100(path: Path, step: int) -> float | None:
    """None while the run has not got near ``step`` (its last game ended before 98% of it)."""
    with open(path, encoding="utf-8") as f:
        games = [(int(float(r["step"])), float(r["score"])) for r in csv.DictReader(f)]
    scores = [score for at, score in games if at <= step]
    if not scores or games[-1][0] < 0.98 * step:
        return None
    return sum(scores[-100:]) / len(scores[-100:])


def report(out: Path, steps: int) -> None:
    """Print the table and draw ``OUT/curves.png`` from the two episodes.csv files."""
    sides = {"rlamd": out / "rlamd" / "episodes.csv", "SB3": out / "sb3" / "episodes.csv"}
    marks = [c for c in CHECKPOINTS if c <= steps]
    print("mean of the last 100 finished games at env steps")
    print("framework " + "".join(f"{m // 1000:>8}k" for m in marks))
    for name, path in sides.items():
        values = [_mean_last_100(path, m) for m in marks]
        print(f"{name:<10}" + "".join("       -" if v is None else f"{v:9.2f}" for v in values))
    fig, ax = _axes()
    if fig is None:
        return
    for name, path in sides.items():
        xs = list(range(20_000, steps + 1, 20_000))
        ys = [_mean_last_100(path, x) for x in xs]
        ax.plot(
            [x for x, y in zip(xs, ys, strict=True) if y is not None],
            [y for y in ys if y is not None],
            label=name,
        )
    ax.set(xlabel="env steps", ylabel="mean of the last 100 games", title="DQN on Breakout")
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, out / "curves.png")


def _pinned(core: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *argv] if shutil.which("taskset") else argv


def _continuous(args: argparse.Namespace) -> int:
    """A SAC or TD3 race, one seed after another (each: rlamd and SB3 side by side)."""
    sets = race(args.algo, args.env).rlamd
    codes = []
    for seed in args.seeds:
        run = args.out / f"seed{seed}"
        run.mkdir(parents=True, exist_ok=True)
        rlamd = [sys.executable, "-m", "rlamd.train", args.env, "--algo", args.algo]
        rlamd += ["--steps", str(args.steps), "--seed", str(seed), "--threads", "1"]
        rlamd += ["--eval-every", str(args.eval_every), "--logdir", str(run), "--run-name", "rlamd"]
        rlamd += ["--set=train.eval_episodes=10", f"--set=train.log_every={args.log_every}"]
        rlamd += [f"--set={s}" for s in (*sets, *args.set)]
        sb3 = [sys.executable, __file__, "--sb3-child", "--algo", args.algo, "--env", args.env]
        sb3 += ["--steps", str(args.steps), "--seeds", str(seed), "--out", str(run)]
        sb3 += ["--eval-every", str(args.eval_every), "--log-every", str(args.log_every)]
        start = time.time()
        with open(run / "rlamd.log", "w", encoding="utf-8") as log:
            procs = [
                subprocess.Popen(_pinned(0, rlamd), stdout=log, stderr=subprocess.STDOUT),
                subprocess.Popen(_pinned(1, sb3)),
            ]
            codes += [proc.wait() for proc in procs]
        span = " to ".join(
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)) for t in (start, time.time())
        )
        (run / PAIR).write_text(f"rlamd and SB3 side by side, one core each, {span} UTC\n")
        print(f"seed {seed}: both done in {(time.time() - start) / 60:.0f} min (exit {codes[-2:]})")
    report_evals(args.out, f"{args.algo.upper()} on {args.env}")
    return max(codes)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algo", choices=("dqn", "sac", "td3"), default="dqn")
    p.add_argument("--env", default=None, help="a Box env for sac/td3 (default Pendulum-v1)")
    p.add_argument("--steps", type=int, default=None, help="default: 500k (dqn), 20k")
    p.add_argument("--seed", type=int, default=1, help="dqn's one seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="sac/td3 seeds")
    p.add_argument("--eval-every", type=int, default=2_000, help="sac/td3 evaluations")
    p.add_argument("--log-every", type=int, default=1_000, help="sac/td3 progress rows")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="rlamd SECTION.KEY=VALUE")
    p.add_argument("--sb3-set", nargs="*", default=[], metavar="KEY=VALUE", help="SB3 kwargs")
    p.add_argument("--report", type=Path, help="print the table of an earlier OUT and exit")
    p.add_argument(
        "--summary",
        type=Path,
        nargs="+",
        metavar="OUT",
        help="one markdown row per earlier SAC/TD3 OUT (gaps with 95%% intervals) and exit",
    )
    p.add_argument("--sb3-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.report is not None and not args.report.is_dir():
        p.error(f"--report {args.report}: no such folder; give the --out of an earlier run")
    if args.summary:
        if args.report is not None:
            p.error("--summary and --report: give one (--summary takes several folders)")
        bad = [
            f"{d} ({'no seed folders in it' if d.is_dir() else 'no such folder'})"
            for d in args.summary
            if not any(r.is_dir() for r in d.glob("seed*"))
        ]
        if bad:
            p.error(f"--summary: {', '.join(bad)}; accepted: the --out of earlier SAC/TD3 races")
        print("\n".join(summary(args.summary)))
        return 0
    continuous = args.algo != "dqn" or (args.report and any(args.report.glob("seed*/")))
    args.env = args.env or ("Pendulum-v1" if continuous else "breakout")
    args.steps = args.steps or (20_000 if continuous else 500_000)
    args.out = args.out or Path(f"bench-out/{args.algo}_vs_sb3")
    overrides = dict(item.split("=", 1) for item in args.sb3_set)
    if continuous:
        if args.sb3_child:
            _sb3_continuous(
                args.algo,
                args.env,
                args.steps,
                args.seeds[0],
                args.out / "sb3",
                args.eval_every,
                args.log_every,
            )
            return 0
        if args.report:
            report_evals(args.report)
            return 0
        return _continuous(args)
    if args.sb3_child:
        _sb3_main(args.steps, args.seed, args.out / "sb3", overrides)
        return 0
    if args.report:
        report(args.report, args.steps)
        return 0
    rlamd = [sys.executable, "-m", "rlamd.train", "breakout", "--steps", str(args.steps)]
    rlamd += ["--seed", str(args.seed), "--threads", "1", "--eval-every", "0"]
    rlamd += ["--logdir", str(args.out), "--run-name", "rlamd"]
    rlamd += [f"--set={s}" for s in args.set]
    sb3 = [sys.executable, __file__, "--sb3-child", "--steps", str(args.steps)]
    sb3 += ["--seed", str(args.seed), "--out", str(args.out), "--sb3-set", *args.sb3_set]
    start = time.time()
    procs = [subprocess.Popen(_pinned(i, cmd)) for i, cmd in enumerate((rlamd, sb3))]
    codes = [proc.wait() for proc in procs]
    print(f"both done in {(time.time() - start) / 60:.0f} min (exit {codes})")
    report(args.out, args.steps)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
