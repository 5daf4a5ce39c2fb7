"""DQN on Breakout, rlamd beside Stable-Baselines3, on the same machine at the same time.

    python scripts/dqn_vs_sb3.py --steps 500000 --seed 2 --out bench-out/dqn_vs_sb3
    python scripts/dqn_vs_sb3.py --report bench-out/dqn_vs_sb3   # table and chart again

Starts ``python -m rlamd.train breakout`` (rlamd's defaults; ``--set`` adds overrides) and
SB3's DQN with the RL Baselines3 Zoo's Atari recipe (``rlamd.bench.zoo``; ``--sb3-set``
overrides its keyword arguments, e.g. ``buffer_size=100000 optimize_memory_usage=false``)
as two processes, one thread each, pinned to one core each where ``taskset`` exists. Both
log every finished game (whole games across lives, unclipped scores) to
``OUT/{rlamd,sb3}/episodes.csv``; the report gives, at fixed env steps, the mean score of
the last 100 games each had finished by then (the scores both frameworks' progress lines
show, taken at the exploration epsilon of training), and draws both binned curves.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHECKPOINTS = (100_000, 150_000, 200_000, 250_000, 300_000, 400_000, 500_000)


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

    from rlamd.bench.zoo import SB3, recipe
    from rlamd.config import coerce

    torch.set_num_threads(1)
    gym.register_envs(ale_py)
    rec = recipe(SB3, "breakout", "dqn")
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
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no chart)")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
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
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=120)
    print(f"wrote {out / 'curves.png'}")


def _pinned(core: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *argv] if shutil.which("taskset") else argv


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("bench-out/dqn_vs_sb3"))
    p.add_argument("--set", action="append", default=[], help="rlamd SECTION.KEY=VALUE")
    p.add_argument("--sb3-set", nargs="*", default=[], metavar="KEY=VALUE", help="SB3 kwargs")
    p.add_argument("--report", type=Path, help="print the table of an earlier OUT and exit")
    p.add_argument("--sb3-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    overrides = dict(item.split("=", 1) for item in args.sb3_set)
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
