"""``python -m rlamd.bench race ENV --target SCORE``: time and env steps to a score.

Trains rlamd (``python -m rlamd.train``, its preset for the env) and each registered peer
that races (its own recipe, cited in its module; the table says when that is the peer's
own defaults), one after another, each its own process on the same device with the same
thread budget (``--threads``; ``OMP_NUM_THREADS`` for all), until an evaluation reaches
``--target``, ``--minutes`` of wall clock pass, or its own run length ends. Evaluation
is the same for all (:mod:`rlamd.bench.race_child`): every ``--eval-every`` env steps,
``--eval-episodes`` whole games on rlamd's env, unclipped, env seed ``10000 + step``, DQN
greedy with rlamd's evaluation epsilon, PPO sampling its policy. The clock runs from a
contender's process start to the moment its evaluation at or above the target is
written. The machine's other load is sampled during every run. Writes ``results.json``,
``race.png`` and each run's folder (``runs/ALGO_CONTENDER_sSEED``) under ``--out``; the
README (Benchmarks, Races) states the protocol in full.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .load import LoadMonitor
from .peer import get, peers, set_python
from .race_report import (
    RaceRun,
    print_race,
    race_one,
    read_evals,
    stop_reason,
    summary,
    write_race_chart,
)

__all__ = ["RaceProtocol", "contenders", "main", "race_one", "read_evals", "stop_reason"]

ALGOS = ("dqn", "ppo")


@dataclass(frozen=True)
class RaceProtocol:
    """The rules every contender of one race runs under."""

    env: str
    target: float
    algos: tuple[str, ...]
    minutes: float
    """Wall-clock budget per contender and seed."""
    eval_every: int
    eval_episodes: int
    threads: int
    device: str
    seeds: tuple[int, ...] = (1,)
    steps: int = 0
    """Run length for every contender (0: each one's own recipe)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rlamd_config(env: str, algo: str):
    from rlamd.config.layers import resolve

    return resolve({"train": {"env": env, "algo": algo}})


def eval_epsilon(env: str, algo: str) -> float:
    """DQN's evaluation epsilon for ``env`` (rlamd's preset; the same for every peer)."""
    return float(_rlamd_config(env, algo).dqn.eval_epsilon) if algo == "dqn" else 0.0


def contenders() -> tuple[str, ...]:
    """rlamd, then every registered peer that races, in registration order."""
    return ("rlamd", *(p.name for p in peers("race")))


def _skip_reason(who: str, proto: RaceProtocol, algo: str) -> str | None:
    """Why ``who`` cannot race here (None: it can)."""
    return None if who == "rlamd" else get(who).race_skip(proto.env, algo)


def command(
    who: str, proto: RaceProtocol, algo: str, seed: int, folder: Path
) -> tuple[list[str], Path, dict[str, Any]]:
    """(argv, its evals.csv, its settings) for one contender's run in ``folder``."""
    if who != "rlamd":
        cmd, settings = get(who).race_command(proto, algo, seed, folder)
        return cmd, folder / "evals.csv", settings
    every = ["--eval-every", str(proto.eval_every), "--eval-episodes", str(proto.eval_episodes)]
    cfg = _rlamd_config(proto.env, algo)
    steps = proto.steps or cfg.train.steps
    cmd = [sys.executable, "-m", "rlamd.train", proto.env, "--algo", algo, *every]
    cmd += ["--threads", str(proto.threads), "--seed", str(seed), "--device", proto.device]
    cmd += ["--steps", str(steps), "--logdir", str(folder.parent), "--run-name", folder.name]
    # Checkpoint once, at the end (and on the race's SIGINT), as the peers save nothing.
    cmd += ["--checkpoint-every", str(steps), "--set", "train.checkpoint_minutes=0"]
    settings = {"steps": steps, "num_envs": cfg.train.num_envs, **asdict(getattr(cfg, algo))}
    settings.update(source=f"rlamd's {cfg.train.family} preset for {algo}", tag="rlamd preset")
    return [*cmd, "--no-tensorboard"], folder / "evals.csv", settings


def run_race(proto: RaceProtocol, out: Path, contenders: tuple[str, ...], notes: list[str]):
    """Every (seed, algo, contender) in turn (contenders alternate: A B A B ...)."""
    runs: list[RaceRun] = []
    skipped: list[dict[str, str]] = []
    for seed in proto.seeds:
        for algo in proto.algos:
            for who in contenders:
                reason = _skip_reason(who, proto, algo)
                if reason is not None:
                    if not any(s["contender"] == who and s["algo"] == algo for s in skipped):
                        skipped.append({"contender": who, "algo": algo, "reason": reason})
                        notes.append(f"{who} {algo} skipped: {reason}")
                    continue
                runs.append(_one_run(who, proto, algo, seed, out))
    return runs, skipped


def _one_run(who: str, proto: RaceProtocol, algo: str, seed: int, out: Path) -> RaceRun:
    folder = out / "runs" / f"{algo}_{who}_s{seed}"
    cmd, evals, settings = command(who, proto, algo, seed, folder)
    shutil.rmtree(folder, ignore_errors=True)  # a new run: rlamd refuses a checkpointed folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    log = folder.parent / f"{folder.name}.log"
    print(f"race: {algo} {who} seed {seed} (log {log}) ...", flush=True)
    gpu = int(proto.device.partition(":")[2] or 0) if proto.device.startswith("cuda") else None
    with LoadMonitor(gpu=gpu) as mon:
        stopped, wall, curve, code = race_one(cmd, evals, log, proto.target, proto.minutes * 60)
    error = None
    if stopped == "failed":
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        error = f"exit {code}: {(lines or ['no output'])[-1]}"
    run = RaceRun(algo, who, seed, proto.target, stopped, round(wall, 1), tuple(curve),
                  mon.report, {"command": " ".join(["python", *cmd[1:]]), **settings}, error)  # fmt: skip
    best = run.best
    hit = run.hit
    print(
        f"race: {algo} {who}: "
        + (f"{proto.target:g} reached in {hit.seconds:,.0f} s, {hit.step:,} env steps" if hit
           else f"not reached ({stopped}); best {best.mean:.1f}" if best else f"{stopped}, no evaluation")
    )  # fmt: skip
    if mon.report is not None and (w := mon.report.warning(f"{algo} {who}")):
        print(w)
    return run


# Defaults per env family: (eval every, eval episodes, minutes per contender).
DEFAULTS = {"classic": (2_500, 10, 5.0), "atari": (50_000, 8, 15.0)}
_FLAGS = (  # flag, type, default, help
    ("--minutes", float, None, "wall-clock budget per contender (default: 5 classic control, 15 Atari)"),
    ("--eval-every", int, None, "env steps between evaluations (default: 2,500 classic, 50,000 Atari)"),
    ("--eval-episodes", int, None, "episodes per evaluation (default: 10 classic, 8 Atari)"),
    ("--threads", int, None, "cores each contender may use (default: the affinity mask)"),
    ("--seeds", int, 1, "seeds per contender (default: 1)"),
    ("--steps", int, 0, "run length for all (default: each contender's own recipe)"),
)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    from rlamd.device import DEVICE_HELP

    p = argparse.ArgumentParser(prog="python -m rlamd.bench race", description="Train rlamd and "
                                "each installed peer to a score; report the wall-clock seconds and "
                                "env steps each needed (protocol: see the README, Benchmarks).")  # fmt: skip
    p.add_argument("env", help="an env rlamd trains: cartpole, pong, breakout, ...")
    p.add_argument("--target", type=float, required=True, help="evaluation score to reach")
    p.add_argument(
        "--algo", default="both", choices=(*ALGOS, "both"), help="dqn, ppo or both (default)"
    )
    for flag, kind, default, text in _FLAGS:
        p.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--out", default="bench-out/race", help="folder (default: bench-out/race)")
    p.add_argument("--no-peers", action="store_true", help="race rlamd alone")
    p.add_argument("--contenders", default=None,
                   help=f"comma-separated, any of {', '.join(contenders())} (default: all)")  # fmt: skip
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                   help="run peer NAME under this interpreter (default: .venv-peers/NAME, "
                   "made by `bash scripts/setup.sh --bench-peers`, else this one)")  # fmt: skip
    return p


def _contenders(args: argparse.Namespace, p: argparse.ArgumentParser) -> tuple[str, ...]:
    """The contenders asked for, in race order; an unknown name exits naming the nearest."""
    import difflib

    every = contenders()
    names = every if args.contenders is None else [n.strip() for n in args.contenders.split(",")]
    for n in (n for n in names if n and n not in every):
        close = difflib.get_close_matches(n, every, n=1)
        p.error(f"--contenders: unknown '{n}'; accepted: {', '.join(every)}"
                + (f". Did you mean '{close[0]}'?" if close else ""))  # fmt: skip
    if not any(names):
        p.error(f"--contenders is empty; accepted: any of {', '.join(every)}")
    return ("rlamd",) if args.no_peers else tuple(c for c in every if c in names)


def _protocol(args: argparse.Namespace, p: argparse.ArgumentParser) -> RaceProtocol:
    """The protocol from the command line; a bad value exits with what is accepted."""
    import math

    from rlamd.device import DeviceError, resolve_device
    from rlamd.envs import parse_env_id
    from rlamd.threads import cores_available

    try:
        every, episodes, minutes = DEFAULTS[parse_env_id(args.env).family]
        device = str(resolve_device(args.device))
        for spec in args.peer_python:
            set_python(spec)
    except (ValueError, DeviceError) as exc:
        p.error(str(exc))
    proto = RaceProtocol(
        args.env, args.target, ALGOS if args.algo == "both" else (args.algo,),
        minutes if args.minutes is None else args.minutes, args.eval_every or every,
        args.eval_episodes or episodes, args.threads or cores_available(), device,
        tuple(range(1, args.seeds + 1)), args.steps,
    )  # fmt: skip
    checks = {
        "--target": (math.isfinite(proto.target), "a finite score"),
        "--minutes": (proto.minutes > 0, "minutes > 0"),
        "--eval-every": (proto.eval_every >= 1, "an integer >= 1"),
        "--eval-episodes": (proto.eval_episodes >= 1, "an integer >= 1"),
        "--threads": (proto.threads >= 1, "an integer >= 1"),
        "--seeds": (args.seeds >= 1, "an integer >= 1"),
        "--steps": (proto.steps >= 0, "0 (each recipe's) or a positive integer"),
    }
    for flag, (ok, accepted) in checks.items():
        if not ok:
            p.error(f"{flag} {getattr(args, flag[2:].replace('-', '_'))}; accepted: {accepted}")
    return proto


def _head(proto: RaceProtocol) -> str:
    return (f"race on {proto.env} to {proto.target:g}, device {proto.device}, {proto.threads} "
            f"threads each, up to {proto.minutes:g} min each; evaluation every {proto.eval_every:,} "
            f"env steps, {proto.eval_episodes} whole games (DQN epsilon "
            f"{eval_epsilon(proto.env, 'dqn'):g}, PPO sampled); seconds from process start, "
            "evaluations included")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    import torch

    from .common import machine_info

    p = _parser()
    args = p.parse_args(argv)
    proto = _protocol(args, p)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    print(_head(proto), flush=True)
    t0 = time.perf_counter()
    runs, skipped = run_race(proto, out, _contenders(args, p), notes)
    print_race(runs, _head(proto))
    chart = write_race_chart(out / "race.png", runs, f"{proto.env} to {proto.target:g}")
    if chart is None:
        notes.append("matplotlib not installed: chart skipped (bash scripts/setup.sh --bench)")
    doc = {
        "command": " ".join(["python -m rlamd.bench race", *(argv or sys.argv[2:])]),
        "machine": machine_info(torch.device(proto.device)),
        "protocol": proto.to_dict() | {"eval_epsilon_dqn": eval_epsilon(proto.env, "dqn")},
        "runs": [r.to_dict() for r in runs], "summary": summary(runs), "skipped": skipped,
        "notes": notes, "charts": [chart] if chart else [], "seconds": round(time.perf_counter() - t0, 1),
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    for n in notes:
        print(f"note: {n}")
    if any(r.load is not None and r.load.busy for r in runs):
        print("warning: the machine was busy during the race (others' cores per run: "
              "'others' above, 'load' in results.json); times are longer than on a quiet one")  # fmt: skip
    print(f"wrote {out / 'results.json'}{' and ' + chart if chart else ''}")
    return 0
