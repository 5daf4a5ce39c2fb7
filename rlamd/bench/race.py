"""``python -m rlamd.bench race ENV --target SCORE``: time and env steps to a score.

rlamd (its preset) and each racing peer (its recipe) train in turn, each a process with the
same device and threads, until an evaluation (the same for all) reaches the target, the
minutes pass or the run ends; timed from process start to that evaluation. A peer's process,
``python -m rlamd.bench.race PEER --env ENV ...`` (:func:`child_main`), runs its
``race_train``, evaluated on the race's schedule as rlamd's runner evaluates (rlamd's env,
:func:`rlamd.evaluate.eval_seed`) into ``DIR/evals.csv``; SIGINT or SIGTERM stops it at the
peer's next chance; exit 0 (3: the peer cannot run here)."""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any

import numpy as np
import torch

from rlamd.children import stop
from rlamd.config.layers import resolve
from rlamd.device import DeviceError, resolve_device
from rlamd.envs import AtariConfig, parse_env_id
from rlamd.evaluate import eval_seed, evaluate_episodes
from rlamd.logger import EVALS_HEADER, eval_row, read_rows
from rlamd.machine import machine_info
from rlamd.threads import cores_available

from .child import thread_env
from .common import write_results
from .load import LoadMonitor
from .peer import PeerUnavailable, get, nearest, peer_arguments, peers, use_peer_python
from .race_report import EvalPoint, RaceRun, print_race, summary, write_race_chart

__all__ = ["Evaluations", "RaceProtocol", "child_main", "command", "main", "read_evals"]

ALGOS = ("dqn", "ppo")
POLL_S, GRACE_S = 0.2, 120.0  # evals.csv read every POLL_S (the clock's resolution); SIGINT grace
DEFAULTS = {"classic": (2_500, 10, 5.0), "atari": (50_000, 8, 15.0)}
"""Per env family: (eval every, eval episodes, minutes per contender)."""


@dataclass(frozen=True)
class RaceProtocol:
    """The rules every contender of one race runs under: ``minutes`` per contender and
    seed, ``steps`` the run length for all (0: each one's own recipe)."""

    env: str
    target: float
    algos: tuple[str, ...]
    minutes: float
    eval_every: int
    eval_episodes: int
    threads: int
    device: str
    seeds: tuple[int, ...] = (1,)
    steps: int = 0

    def eval_epsilon(self, algo: str) -> float:
        """DQN's evaluation epsilon (rlamd's preset's, for every peer)."""
        return float(_preset(self.env, algo).dqn.eval_epsilon) if algo == "dqn" else 0.0

    def child_args(self, algo: str) -> list[str]:
        """The protocol as a peer's process (:func:`child_main`) takes it."""
        args = ["--env", self.env, "--algo", algo, "--eval-every", str(self.eval_every)]
        args += ["--eval-episodes", str(self.eval_episodes), "--threads", str(self.threads)]
        args += ["--device", self.device, "--eval-epsilon", str(self.eval_epsilon(algo))]
        return [*args, "--steps", str(self.steps)] if self.steps else args


def _preset(env: str, algo: str):
    return resolve({"train": {"env": env, "algo": algo}})


def _skip_reason(who: str, proto: RaceProtocol, algo: str) -> str | None:
    return None if who == "rlamd" else get(who).race_skip(proto.env, algo)


def command(who: str, proto: RaceProtocol, algo: str, seed: int, folder: Path):
    """(argv, its evals.csv, its settings) for one contender's run in ``folder``."""
    if who != "rlamd":
        cmd, settings = get(who).race_command(proto, algo, seed, folder)
        return cmd, folder / "evals.csv", settings
    every = ["--eval-every", str(proto.eval_every), "--eval-episodes", str(proto.eval_episodes)]
    cfg = _preset(proto.env, algo)
    steps = proto.steps or cfg.train.steps
    cmd = [sys.executable, "-m", "rlamd.train", proto.env, "--algo", algo, *every]
    cmd += ["--threads", str(proto.threads), "--seed", str(seed), "--device", proto.device]
    cmd += ["--steps", str(steps), "--logdir", str(folder.parent), "--run-name", folder.name]
    # Checkpoint once, at the end (and on the race's SIGINT), as the peers save nothing.
    cmd += ["--checkpoint-every", str(steps), "--set", "train.checkpoint_minutes=0"]
    settings = {"steps": steps, "num_envs": cfg.train.num_envs, **asdict(getattr(cfg, algo))}
    settings.update(source=f"rlamd's {cfg.train.family} preset for {algo}", tag="rlamd preset")
    return [*cmd, "--no-tensorboard"], folder / "evals.csv", settings


def stop_reason(curve: list[EvalPoint], elapsed: float, target: float, budget_s: float):
    """``"target"`` once an evaluation reached ``target``, ``"minutes"`` past ``budget_s``,
    else None."""
    if any(p.mean >= target for p in curve):
        return "target"
    return "minutes" if elapsed >= budget_s else None


def read_evals(path: Path) -> list[tuple[int, float, float, int]]:
    """An ``evals.csv``'s whole rows (a half-written last line waits for the next read)."""
    return [(int(s), float(m), float(d), int(e)) for s, m, d, e in read_rows(path, EVALS_HEADER)]


def race_one(cmd: list[str], evals: Path, log: Path, target: float, budget_s: float):
    """Run ``cmd`` (own process group), reading ``evals`` every :data:`POLL_S`: (``target``,
    ``minutes``, ``finished`` (exit 0) or ``failed``; wall seconds, curve, exit code)."""
    threads = cmd[cmd.index("--threads") + 1] if "--threads" in cmd else "1"
    curve: list[EvalPoint] = []
    evals.unlink(missing_ok=True)  # a previous run's rows must not count
    with open(log, "w", encoding="utf-8") as out:
        t0 = time.monotonic()
        env, to = thread_env(threads), {"stdout": out, "stderr": subprocess.STDOUT}
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, **to)
        try:
            while True:
                done, now = proc.poll() is not None, time.monotonic() - t0
                curve += [EvalPoint(*row, now) for row in read_evals(evals)[len(curve) :]]
                reason = stop_reason(curve, now, target, budget_s)
                if reason is not None and not done:
                    stop(proc, GRACE_S, group=True)
                    return reason, time.monotonic() - t0, curve, proc.returncode
                if done:
                    ok = proc.returncode == 0 or reason == "target"
                    return reason or ("finished" if ok else "failed"), now, curve, proc.returncode
                time.sleep(POLL_S)
        except BaseException:  # Ctrl-C in the race: stop the contender too
            stop(proc, GRACE_S, group=True)
            raise


def run_race(proto: RaceProtocol, out: Path, contenders: tuple[str, ...], notes: list[str]):
    """Every (seed, algo, contender) in turn (contenders alternate: A B A B ...)."""
    runs, skipped = [], []
    for seed, algo, who in product(proto.seeds, proto.algos, contenders):
        if (reason := _skip_reason(who, proto, algo)) is None:
            runs.append(_one_run(who, proto, algo, seed, out, notes))
        elif not any(s["contender"] == who and s["algo"] == algo for s in skipped):
            skipped.append({"contender": who, "algo": algo, "reason": reason})
            notes.append(f"{who} {algo} skipped: {reason}")
    return runs, skipped


def _one_run(
    who: str, proto: RaceProtocol, algo: str, seed: int, out: Path, notes: list
) -> RaceRun:
    folder = out / "runs" / f"{algo}_{who}_s{seed}"
    cmd, evals, settings = command(who, proto, algo, seed, folder)
    shutil.rmtree(folder, ignore_errors=True)  # a new run: rlamd refuses a checkpointed folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    log = folder.parent / f"{folder.name}.log"
    print(f"race: {algo} {who} seed {seed} (log {log}) ...", flush=True)
    gpu = int(proto.device.partition(":")[2] or 0) if proto.device.startswith("cuda") else None
    with LoadMonitor(gpu=gpu) as mon:
        stopped, wall, curve, code = race_one(cmd, evals, log, proto.target, proto.minutes * 60)
    error, lines = None, log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    if stopped == "failed":
        error = f"exit {code}: {(lines or ['no output'])[-1]}"
    if warned := [w for w in lines if w.startswith("warning: ")]:  # a peer's child said so
        last = f"{len(warned)}, the last: {warned[-1]}"
        notes.append(f"{algo} {who} seed {seed}: warnings in {log}: {last}")
    recipe = {"command": " ".join(["python", *cmd[1:]]), **settings}
    got = (stopped, round(wall, 1), tuple(curve), mon.report, recipe, error)
    run = RaceRun(algo, who, seed, proto.target, *got)
    said = f"{stopped}, no evaluation"
    if run.hit:
        said = f"{proto.target:g} reached in {run.hit.seconds:,.0f} s, {run.hit.step:,} env steps"
    elif run.best:
        said = f"not reached ({stopped}); best {run.best.mean:.1f}"
    print(f"race: {algo} {who}: {said}")
    if w := mon.report.warning(f"{algo} {who}"):
        print(w)
    return run


def _parser(every: tuple[str, ...]) -> argparse.ArgumentParser:
    what = "Train rlamd and each installed peer to a score; report the wall-clock seconds and "
    what += "env steps each needed (protocol: see the README, Benchmarks)."
    p = argparse.ArgumentParser(prog="python -m rlamd.bench race", description=what)
    p.add_argument("env", help="an env rlamd trains: cartpole, pong, breakout, ...")
    p.add_argument("--target", type=float, required=True, help="evaluation score to reach")
    p.add_argument("--algo", default="both", choices=(*ALGOS, "both"), help="default: both")
    for flag, kind, default, text in (
        ("--minutes", float, None, "budget per contender (default: 5 classic control, 15 Atari)"),
        ("--eval-every", int, None, "env steps between evaluations (default: 2,500 / 50,000)"),
        ("--eval-episodes", int, None, "episodes per evaluation (default: 10 classic, 8 Atari)"),
        ("--threads", int, None, "cores each contender may use (default: the affinity mask)"),
        ("--seeds", int, 1, "seeds per contender (default: 1)"),
        ("--steps", int, 0, "run length for all (default: each contender's own recipe)"),
    ):
        p.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument("--contenders", help=f"comma-separated, of {', '.join(every)} (default: all)")
    peer_arguments(p, "race rlamd alone", "bench-out/race")
    return p


def _protocol(args: argparse.Namespace, p: argparse.ArgumentParser, every: tuple[str, ...]):
    """(protocol, contenders in race order); a bad value exits saying what is accepted."""
    names = every if args.contenders is None else [n.strip() for n in args.contenders.split(",")]
    for n in (n for n in names if n and n not in every):
        p.error(f"--contenders: {nearest('', n, every)}")
    if not any(names):
        p.error(f"--contenders is empty; accepted: any of {', '.join(every)}")
    try:
        each, episodes, minutes = DEFAULTS[parse_env_id(args.env).family]
        device = str(resolve_device(args.device))
    except (ValueError, DeviceError) as exc:
        p.error(str(exc))
    use_peer_python(args, p)
    for flag, ok, accepted in (  # 0 or none: the default
        ("--target", math.isfinite(args.target), "a finite score"),
        ("--minutes", args.minutes is None or args.minutes > 0, "minutes > 0"),
        ("--eval-every", (args.eval_every or 1) >= 1, "an integer >= 1"),
        ("--eval-episodes", (args.eval_episodes or 1) >= 1, "an integer >= 1"),
        ("--threads", (args.threads or 1) >= 1, "an integer >= 1"),
        ("--seeds", args.seeds >= 1, "an integer >= 1"),
        ("--steps", args.steps >= 0, "0 (each recipe's) or a positive integer"),
    ):
        if not ok:
            p.error(f"{flag} {getattr(args, flag[2:].replace('-', '_'))}; accepted: {accepted}")
    algos = ALGOS if args.algo == "both" else (args.algo,)
    given = (args.minutes or minutes, args.eval_every or each, args.eval_episodes or episodes)
    threads, seeds = args.threads or cores_available(), tuple(range(1, args.seeds + 1))
    proto = RaceProtocol(args.env, args.target, algos, *given, threads, device, seeds, args.steps)
    return proto, ("rlamd",) if args.no_peers else tuple(c for c in every if c in names)


def main(argv: list[str] | None = None) -> int:
    every = ("rlamd", *(p.name for p in peers("race")))
    p = _parser(every)
    args = p.parse_args(argv)
    proto, contenders = _protocol(args, p, every)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    head = (
        f"race on {proto.env} to {proto.target:g}, device {proto.device}, {proto.threads} "
        f"threads each, up to {proto.minutes:g} min each; evaluation every {proto.eval_every:,} "
        f"env steps, {proto.eval_episodes} whole games (DQN epsilon {proto.eval_epsilon('dqn'):g}, "
        "PPO sampled); seconds from process start, evaluations included"
    )
    print(head, flush=True)
    notes: list[str] = []
    t0 = time.perf_counter()
    runs, skipped = run_race(proto, out, contenders, notes)
    print_race(runs, head)
    chart = write_race_chart(out / "race.png", runs, f"{proto.env} to {proto.target:g}")
    if chart is None:
        notes.append("matplotlib not installed: chart skipped (bash scripts/setup.sh --bench)")
    doc = {"command": " ".join(["python -m rlamd.bench race", *(argv or sys.argv[2:])])}
    doc |= {"machine": machine_info(torch.device(proto.device))}
    doc |= {"protocol": asdict(proto) | {"eval_epsilon_dqn": proto.eval_epsilon("dqn")}}
    doc |= {"runs": [r.to_dict() for r in runs], "summary": summary(runs), "skipped": skipped}
    doc |= {"notes": notes, "charts": [chart] if chart else []}
    doc |= {"seconds": round(time.perf_counter() - t0, 1)}
    busy = "the race" if any(r.load and r.load.busy for r in runs) else ""
    why = "others' cores per run above, 'load' of each run in results.json; times are longer"
    write_results(out, doc, busy, f"{why} than on a quiet one")
    return 0


class Evaluations:
    """The race's evaluation schedule and protocol, writing ``evals.csv`` like rlamd's."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.env, self.every, self.episodes = args.env, args.eval_every, args.eval_episodes
        self.atari = AtariConfig() if parse_env_id(args.env).family == "atari" else None
        self.epsilon, self.due_at = args.eval_epsilon, self.every
        self.seed, self.rng = args.seed, np.random.default_rng(args.seed)
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        self.csv = open(Path(args.dir) / "evals.csv", "w", encoding="utf-8", buffering=1)
        self.csv.write(EVALS_HEADER + "\n")

    def maybe(self, step: int, policy: Callable[[torch.Tensor], torch.Tensor]) -> bool:
        """Evaluate when ``step`` reached the next multiple of ``every`` (then the next)."""
        if step < self.due_at:
            return False
        seed = eval_seed(self.seed, step)
        opts = {"device": torch.device("cpu"), "seed": seed, "atari": self.atari}
        played = evaluate_episodes(policy, self.env, self.episodes, **opts)
        if scores := played.scores:
            self.csv.write(eval_row(step, fmean(scores), pstdev(scores), len(scores)))
        else:  # no row and the reason, as rlamd's runner (Logger.evaluation) does
            print(
                f"eval at {step:,}: no evaluation episode finished{played.note()}", file=sys.stderr
            )
        self.due_at = (step // self.every + 1) * self.every
        return True

    def explore(self, actions: Any, n: int) -> torch.Tensor:
        """``actions``, each replaced by a uniform one of ``n`` with the DQN epsilon."""
        actions = np.asarray(actions)
        if self.epsilon > 0:
            random = self.rng.integers(0, n, len(actions))
            actions = np.where(self.rng.random(len(actions)) < self.epsilon, random, actions)
        return torch.as_tensor(actions)


def child_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.race")
    p.add_argument("peer", help="a registered peer's name")
    p.add_argument("--env", required=True, help="rlamd's env name (cartpole, pong ...)")
    p.add_argument("--algo", required=True, choices=ALGOS)
    p.add_argument("--dir", required=True, help="run folder: evals.csv goes here")
    for flag in ("--eval-every", "--eval-episodes", "--threads"):
        p.add_argument(flag, type=int, required=True)
    p.add_argument("--steps", type=int, default=0, help="run length (0: the recipe's)")
    p.add_argument("--eval-epsilon", type=float, default=0.0, help="DQN's evaluation epsilon")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH")
    args, stopping, evals = p.parse_args(argv), threading.Event(), None
    use_peer_python(args, p)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        if (reason := get(args.peer).unavailable()) is not None:
            raise PeerUnavailable(reason)
        torch.set_num_threads(args.threads)
        evals = Evaluations(args)
        get(args.peer).race_train(args, stopping, evals)
    except PeerUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 3
    finally:
        if evals is not None:
            evals.csv.close()
    return 0


if __name__ == "__main__":  # a peer's process in a race
    sys.exit(child_main())
