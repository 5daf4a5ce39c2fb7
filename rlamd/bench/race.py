"""``python -m rlamd.bench race ENV --target SCORE``: time and env steps to a score.

Trains rlamd and each installed peer, one after another, on the same device with the
same thread budget, each until an evaluation reaches ``--target`` or its budget ends:

* **contenders**: rlamd as ``python -m rlamd.train`` runs it (its preset for the env);
  Stable-Baselines3 with the RL Baselines3 Zoo's hyperparameters; RLlib (new API stack)
  with its tuned example, where ``ray`` imports (recipes and sources:
  :mod:`rlamd.bench.zoo`). Each is its own process, started the same way;
* **evaluation**, the same for all: every ``--eval-every`` env steps (at the first
  point at or after each multiple where the framework lets the race in: rlamd after a
  loop iteration, SB3 after a vector step, RLlib after a training iteration; the
  evaluation's env-step count is recorded), ``--eval-episodes`` whole games on
  rlamd's env (unclipped scores, no life loss as episode end, env seed ``10000 + step``),
  DQN greedy with rlamd's evaluation epsilon for the env (0 on classic control, 0.05 on
  Atari), PPO sampling its policy; peers play rlamd's observations through their own
  networks (:mod:`rlamd.bench.race_child`);
* **clock**: wall-clock seconds from a contender's process start to the moment its
  evaluation at or above the target is written: interpreter start, imports, training
  and every evaluation so far count, alike for everyone;
* **stopping rule**: the first evaluation with a mean at or above the target (the race
  sends SIGINT then), ``--minutes`` of wall clock (SIGINT, "not reached"), or the
  contender's own step budget (its recipe's run length, or ``--steps``);
* **thread budget**: ``--threads`` cores (default: the affinity mask) for each: rlamd
  ``--threads``, SB3 and RLlib ``torch.set_num_threads``, ``OMP_NUM_THREADS`` for all,
  RLlib ``ray.init(num_cpus=...)``; env counts are each framework's own.

The machine's other load is sampled during every run. Writes ``results.json``,
``race.png`` (score against wall clock and against env steps) and each run's folder
(``runs/ALGO_CONTENDER_sSEED``, replaced when the race runs again) under ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .load import LoadMonitor
from .race_report import EvalPoint, RaceRun, print_race, summary, write_race_chart
from .zoo import RLLIB, SB3, recipe

__all__ = ["CONTENDERS", "RaceProtocol", "main", "race_one", "read_evals", "stop_reason"]

CONTENDERS = ("rlamd", "sb3", "rllib")
ALGOS = ("dqn", "ppo")
POLL_S = 0.2
"""How often the race reads a contender's evals.csv (the clock's resolution)."""
GRACE_S = 120.0
"""Seconds a contender has to exit after SIGINT before it is killed."""


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


def _skip_reason(who: str, proto: RaceProtocol, algo: str) -> str | None:
    """Why ``who`` cannot race here (None: it can)."""
    if who == "sb3":
        if importlib.util.find_spec("stable_baselines3") is None:
            return "Stable-Baselines3 not installed (bash scripts/setup.sh --bench)"
        if recipe(SB3, proto.env, algo) is None:
            return f"no RL Zoo recipe for {proto.env} / {algo}"
    if who == "rllib":
        if importlib.util.find_spec("ray") is None:
            return "Ray not installed (bash scripts/setup.sh --ray)"
        if recipe(RLLIB, proto.env, algo) is None:
            return f"no RLlib recipe for {proto.env} / {algo} in this bench (CartPole only)"
    return None


def command(
    who: str, proto: RaceProtocol, algo: str, seed: int, folder: Path
) -> tuple[list[str], Path, dict[str, Any]]:
    """(argv, its evals.csv, its recipe) for one contender's run in ``folder``."""
    common = ["--threads", str(proto.threads), "--seed", str(seed), "--device", proto.device]
    every = ["--eval-every", str(proto.eval_every), "--eval-episodes", str(proto.eval_episodes)]
    if who == "rlamd":
        cfg = _rlamd_config(proto.env, algo)
        steps = proto.steps or cfg.train.steps
        cmd = [sys.executable, "-m", "rlamd.train", proto.env, "--algo", algo, *every, *common]
        cmd += ["--steps", str(steps), "--logdir", str(folder.parent), "--run-name", folder.name]
        # Checkpoint once, at the end (and on the race's SIGINT), as the peers save nothing.
        cmd += ["--checkpoint-every", str(steps), "--set", "train.checkpoint_minutes=0"]
        cmd += ["--no-tensorboard"]
        settings = {"steps": steps, "num_envs": cfg.train.num_envs, **asdict(getattr(cfg, algo))}
        settings["source"] = f"rlamd's {cfg.train.family} preset for {algo}"
        return cmd, folder / "evals.csv", settings
    table = SB3 if who == "sb3" else RLLIB
    rec = recipe(table, proto.env, algo)
    assert rec is not None
    cmd = [sys.executable, "-m", "rlamd.bench.race_child", who, "--env", proto.env]
    cmd += ["--algo", algo, *every, *common, "--dir", str(folder)]
    cmd += ["--eval-epsilon", str(eval_epsilon(proto.env, algo))]
    if proto.steps:
        cmd += ["--steps", str(proto.steps)]
    return cmd, folder / "evals.csv", {**rec.to_dict(), "steps": proto.steps or rec.steps}


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


def _parser() -> argparse.ArgumentParser:
    from rlamd.device import DEVICE_HELP

    p = argparse.ArgumentParser(
        prog="python -m rlamd.bench race",
        description="Train rlamd and each installed peer to a score; report the wall-clock "
        "seconds and env steps each needed (protocol: see the README, Benchmarks).",
    )
    p.add_argument("env", help="an env rlamd trains: cartpole, pong, breakout, ...")
    p.add_argument("--target", type=float, required=True, help="evaluation score to reach")
    p.add_argument(
        "--algo", default="both", choices=(*ALGOS, "both"), help="dqn, ppo or both (default)"
    )
    p.add_argument(
        "--minutes", type=float, default=None,
        help="wall-clock budget per contender (default: 5 classic control, 15 Atari)",
    )  # fmt: skip
    p.add_argument("--eval-every", type=int, default=None,
                   help="env steps between evaluations (default: 2,500 classic, 50,000 Atari)")  # fmt: skip
    p.add_argument("--eval-episodes", type=int, default=None,
                   help="episodes per evaluation (default: 10 classic, 8 Atari)")  # fmt: skip
    p.add_argument("--threads", type=int, default=None,
                   help="cores each contender may use (default: the affinity mask)")  # fmt: skip
    p.add_argument("--seeds", type=int, default=1, help="seeds per contender (default: 1)")
    p.add_argument("--steps", type=int, default=0,
                   help="run length for all (default: each contender's own recipe)")  # fmt: skip
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--out", default="bench-out/race", help="folder (default: bench-out/race)")
    p.add_argument("--no-peers", action="store_true", help="race rlamd alone")
    p.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"comma-separated, any of {', '.join(CONTENDERS)} (default: all)",
    )
    return p


def _contenders(args: argparse.Namespace, p: argparse.ArgumentParser) -> tuple[str, ...]:
    """The contenders asked for, in race order; an unknown name exits naming the nearest."""
    import difflib

    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    for n in names:
        if n not in CONTENDERS:
            close = difflib.get_close_matches(n, CONTENDERS, n=1)
            p.error(
                f"--contenders: unknown '{n}'; accepted: {', '.join(CONTENDERS)}"
                + (f". Did you mean '{close[0]}'?" if close else "")
            )
    if not names:
        p.error(f"--contenders is empty; accepted: any of {', '.join(CONTENDERS)}")
    chosen = tuple(c for c in CONTENDERS if c in names)
    return ("rlamd",) if args.no_peers else chosen


def _protocol(args: argparse.Namespace, p: argparse.ArgumentParser) -> RaceProtocol:
    """The protocol from the command line; a bad value exits with what is accepted."""
    import math

    from rlamd.device import DeviceError, resolve_device
    from rlamd.envs import parse_env_id
    from rlamd.threads import cores_available

    try:
        family = parse_env_id(args.env).family
        device = str(resolve_device(args.device))
    except (ValueError, DeviceError) as exc:
        p.error(str(exc))
    every, episodes, minutes = DEFAULTS[family]
    proto = RaceProtocol(
        env=args.env,
        target=args.target,
        algos=ALGOS if args.algo == "both" else (args.algo,),
        minutes=minutes if args.minutes is None else args.minutes,
        eval_every=args.eval_every or every,
        eval_episodes=args.eval_episodes or episodes,
        threads=args.threads or cores_available(),
        device=device,
        seeds=tuple(range(1, args.seeds + 1)),
        steps=args.steps,
    )
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
    eps = eval_epsilon(proto.env, "dqn")
    return (
        f"race on {proto.env} to {proto.target:g}, device {proto.device}, {proto.threads} "
        f"threads each, up to {proto.minutes:g} min each; evaluation every "
        f"{proto.eval_every:,} env steps, {proto.eval_episodes} whole games (DQN epsilon "
        f"{eps:g}, PPO sampled); seconds from process start, evaluations included"
    )


def main(argv: list[str] | None = None) -> int:
    from .common import machine_info

    p = _parser()
    args = p.parse_args(argv)
    proto = _protocol(args, p)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    contenders = _contenders(args, p)
    notes: list[str] = []
    print(_head(proto), flush=True)
    t0 = time.perf_counter()
    runs, skipped = run_race(proto, out, contenders, notes)
    print_race(runs, _head(proto))
    chart = write_race_chart(out / "race.png", runs, f"{proto.env} to {proto.target:g}")
    if chart is None:
        notes.append("matplotlib not installed: chart skipped (bash scripts/setup.sh --bench)")
    import torch

    doc = {
        "command": " ".join(["python -m rlamd.bench race", *(argv or sys.argv[2:])]),
        "machine": machine_info(torch.device(proto.device)),
        "protocol": proto.to_dict() | {"eval_epsilon_dqn": eval_epsilon(proto.env, "dqn")},
        "runs": [r.to_dict() for r in runs],
        "summary": summary(runs),
        "skipped": skipped,
        "notes": notes,
        "charts": [chart] if chart else [],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    for n in notes:
        print(f"note: {n}")
    if any(r.load is not None and r.load.busy for r in runs):
        print("warning: the machine was busy during the race (others' cores per run: "
              "'others' above, 'load' in results.json); times are longer than on a quiet one")  # fmt: skip
    print(f"wrote {out / 'results.json'}{' and ' + chart if chart else ''}")
    return 0
