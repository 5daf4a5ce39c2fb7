"""PPO and DQN throughput alone and beside one busy single-threaded process, which should
cost rlamd about its share of the cores, not most of its throughput. Each condition is a
child built once (``--serve ALGO MODE``: OpenMP's wait policy is fixed when torch loads);
the parent interleaves their windows. ``rlamd (budget)``: ``rlamd.train``'s thread plan;
``rlamd (untuned)``: the libraries' defaults; and every peer in ``contention``. Breakout on
the CPU: PPO 8 envs x 128 steps, 4 x 4 minibatches; DQN 8 envs, batch 32, an update per 4."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from rlamd.threads import OPENMP_ENV, cores_available

from .child import Child
from .common import MIN_REPEATS, Contender, Figure, each_peer, interleave, ratio, report, rlamd_loop
from .peer import get

__all__ = ["NEIGHBOUR", "busy_neighbour", "run_contention_suite"]

GAME, ALGOS, NUM_ENVS = "breakout", ("ppo", "dqn"), 8
NEIGHBOUR = "while True: pass"
"""The busy neighbour: one single-threaded process that never sleeps."""
_THREAD_VARS = ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")
_THREAD_VARS += ("MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@contextmanager
def busy_neighbour(active: bool = True) -> Iterator[subprocess.Popen | None]:
    """One spinning process for the block (None unless ``active``), always reaped."""
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR]) if active else None
    try:
        yield proc
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def _build(algo: str, mode: str, env_name: str = GAME, num_envs: int = NUM_ENVS, warm: int = 1000):
    """(iterate() -> env steps, close, thread line) for one condition, in this process."""
    import torch

    line = f"torch {torch.get_num_threads()}, ale-py default, OpenMP default"
    if mode not in ("budget", "untuned"):
        return (*get(mode).contention(algo, num_envs, warm), line)
    threads = watch = None
    if mode == "budget":
        from rlamd.threads import LoadWatch, apply_threads, describe, plan_threads

        plan = plan_threads(None, num_envs)  # as LocalEngine does on a CPU, default budget
        apply_threads(plan)
        threads, watch = plan.env_threads, LoadWatch(plan)
        line = describe(plan).removeprefix("rlamd: ") + "; torch threads follow the load"
    train = {"env": env_name, "algo": algo, "num_envs": num_envs, "threads": threads}
    loop, _ = rlamd_loop(train | {"device": "cpu", "precision": "fp32"}, warm)

    def iterate() -> int:
        if watch is not None:
            watch.update()
        before = loop.step
        loop.iterate()
        return loop.step - before

    return iterate, loop.collector.close, line


def _window(iterate, seconds: float) -> float:
    """One untimed iteration, then env steps/s over ``seconds`` of wall time."""
    iterate()  # first-call allocations, kernel selection, caches after an idle wait
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        done += iterate()
    return done / (time.perf_counter() - t0)


class _Child:
    """One condition's child process, built once and asked for a window at a time."""

    def __init__(self, algo: str, mode: str, env_name: str, timeout: float) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
        # Budget: rlamd's wait policy; otherwise the libraries' own defaults, which rlamd
        # must not replace in this child.
        env |= OPENMP_ENV if mode == "budget" else {"RLAMD_OPENMP_DEFAULTS": "1"}
        cmd = [sys.executable, "-m", __name__, "--serve", algo, mode, "--env", env_name]
        self.child, self.timeout = Child(cmd, stdin=True, env=env), timeout
        self.threads = self.child.ask(None, timeout)["threads"]

    def measure(self, seconds: float) -> float:
        return float(self.child.ask(f"measure {seconds}", self.timeout)["rate"])

    def close(self) -> None:
        self.child.close(grace=30)


def _figures(algo, children, seconds, env_name, notes, repeats) -> list[Figure]:
    """Every child alone and beside the neighbour, interleaved windows of ``seconds / repeats``;
    a child failing mid-way loses its figures, with a note."""
    window, dead, contenders = seconds / repeats, set(), []

    def run(mode: str, busy: bool) -> float:
        if mode not in dead:
            try:
                with busy_neighbour(busy):
                    return children[mode].measure(window)
            except RuntimeError as exc:
                dead.add(mode)
                notes.append(f"contention {algo}/{mode}: {exc}")
        return float("nan")

    meta = {"algo": algo, "seconds": window, "env": env_name, "cores": cores_available()}
    for mode, child in children.items():
        for busy in (False, True):
            name = f"contention/{mode}/{algo}/{'busy' if busy else 'alone'}"
            more = {"mode": mode, "neighbour": busy, "threads": child.threads}
            contenders.append(Contender(name, "env steps/s", partial(run, mode, busy), meta | more))
    figures = interleave(contenders, repeats=repeats, warmup=0)
    return [f for f in figures if f.meta["mode"] not in dead]


def run_contention_suite(
    seconds: float = 20.0,
    algos: tuple[str, ...] = ALGOS,
    peers: bool = True,
    env_name: str = GAME,
    notes: list[str] | None = None,
    repeats: int = MIN_REPEATS,
) -> list[Figure]:
    """``contention/{mode}/{algo}/alone`` and ``.../busy`` (env steps/s), the busy one with
    ``meta["ratio"]`` (busy / alone per round) and ``ratio_range``; peers play Breakout only."""
    notes = [] if notes is None else notes
    names = {"budget": "rlamd (budget)", "untuned": "rlamd (untuned)"}
    for peer, _ in each_peer("contention", peers, notes, lambda p: p):
        if env_name == GAME:
            names[peer.name] = peer.label
        else:
            notes.append(f"contention: {peer.label} skipped on {env_name} (its runs play {GAME})")
    figures, rows, lines = [], [], []
    for algo in algos:
        children = {}
        for mode in names:
            try:
                children[mode] = _Child(algo, mode, env_name, 10 * seconds + 300)
            except (RuntimeError, OSError) as exc:
                notes.append(f"contention {algo}/{mode}: {exc}")
        try:
            got = _figures(algo, children, seconds, env_name, notes, repeats)
        finally:
            for child in children.values():
                child.close()
        figures += got
        for alone, busy in zip(got[::2], got[1::2], strict=True):
            r, who = ratio(busy, alone, "ratio").text(""), names[busy.meta["mode"]]
            cells = (f"{alone.median:,.0f}", f"{busy.median:,.0f}", r, alone.meta["threads"])
            rows.append((algo, who, *cells))
        alone = {f.meta["mode"]: f for f in got[::2]}
        if "budget" in alone and "untuned" in alone:
            r = ratio(alone["budget"], alone["untuned"]).text()
            why = "(the thread budget must not cost throughput)"
            lines.append(f"{algo}: alone, budget / untuned = {r} {why}")
    head = (
        f"contention on {cores_available()} cores: {env_name}, {NUM_ENVS} envs, env steps/s "
        f'alone and beside one busy process (`python -c "{NEIGHBOUR}"`); median of interleaved '
        f"windows of {seconds / repeats:.1f} s (every condition once per round); ratio: busy / "
        "alone per round, median (min-max)"
    )
    report(head, rows, ("algo", "who", "alone", "with neighbour", "ratio", "threads"), lines)
    return figures


if __name__ == "__main__":  # a condition's child: built once, then a JSON line per window
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.contention")
    p.add_argument("--serve", nargs=2, metavar=("ALGO", "MODE"), required=True)
    p.add_argument("--env", default=GAME)
    a = p.parse_args()
    iterate, close, line = _build(*a.serve, a.env)
    try:
        print(json.dumps({"ready": True, "threads": line}), flush=True)
        for command in sys.stdin:  # "measure SECONDS"
            rate = _window(iterate, float(command.split()[1]))
            print(json.dumps({"rate": rate, "threads": line}), flush=True)
    finally:
        close()
