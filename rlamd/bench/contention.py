"""PPO and DQN throughput alone and beside one busy single-threaded process.

A second process on the machine (TensorBoard, an evaluation, another run, the other Ray
actors) should cost rlamd about its share of the cores, not most of its throughput.
Every figure here is measured in a fresh interpreter, because the OpenMP wait policy is
fixed when torch loads; the parent only starts children and the neighbour
(``python -c "while True: pass"``), which it always kills. Conditions, in one run:

* ``rlamd (budget)``: the thread plan of :mod:`rlamd.threads` (``plan_threads`` over
  the affinity mask, ``apply_threads``, ale-py threads from the plan, idle OpenMP
  threads asleep, torch's threads following the other processes' load with
  ``LoadWatch``), what ``python -m rlamd.train`` uses on a CPU;
* ``rlamd (untuned)``: the same loop with the libraries' own defaults (torch and ale-py
  threads over every core, GNU OpenMP's spin-then-sleep), the behaviour before the
  thread budget: the "before" figure;
* ``SB3``: Stable-Baselines3's PPO and DQN with their defaults, when installed.

Workloads (Breakout, the Nature CNN, on the CPU, as ``python -m rlamd.train`` runs them):
PPO 8 envs x 128 steps, 4 epochs x 4 minibatches; DQN 8 envs, batch 32, one update per
4 env steps, prioritized replay, after a short warm-up fill. SB3 gets the same settings.
The ratio is the env steps/s beside the neighbour over the env steps/s alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

from .common import Figure, print_table

__all__ = ["NEIGHBOUR", "busy_neighbour", "run_child", "run_contention_suite"]

GAME, GYM_ID = "breakout", "BreakoutNoFrameskip-v4"
ALGOS = ("ppo", "dqn")
MODES = ("budget", "untuned", "sb3")
NUM_ENVS = 8
# The busy neighbour: one single-threaded process that never sleeps.
NEIGHBOUR = "while True: pass"
# Variables a child must not inherit for its mode to mean what it says.
_THREAD_VARS = (
    "OMP_WAIT_POLICY",
    "KMP_BLOCKTIME",
    "GOMP_SPINCOUNT",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)


class busy_neighbour:
    """``with busy_neighbour(active):`` runs one spinning process for the block (if active).

    The process is killed and reaped on leaving the block, whatever happens inside it.
    """

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> busy_neighbour:
        if self.active:
            self.proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------- in the child
def _rlamd_iterate(algo: str, env_name: str, num_envs: int, threads: int | None, warm: int):
    """Build the loop ``python -m rlamd.train`` runs; returns (iterate() -> env steps, close)."""
    import torch

    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos import build_agent, get_algorithm
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env

    device = torch.device("cpu")
    env = make_env(env_name, num_envs=num_envs, threads=threads)
    train = TrainConfig(
        env=env_name,
        algo=algo,
        num_envs=num_envs,
        device="cpu",
        precision="fp32",
        steps=10_000_000,
        threads=threads,
    )
    cfg = RunConfig(train=train, dqn=replace(DQNConfig(), learning_starts=warm, buffer_size=50_000))
    agent = build_agent(cfg, device, env)
    collector = Collector(env, device, seed=0)
    loop = get_algorithm(algo).local_loop(cfg, collector, agent, 0, lambda _text: None)
    while loop.step < warm and algo == "dqn":
        loop.iterate()

    def iterate() -> int:
        before = loop.step
        loop.iterate()
        return loop.step - before

    return iterate, collector.close


def _sb3_iterate(algo: str, num_envs: int, warm: int):
    """SB3's PPO or DQN with rlamd's settings; returns (iterate() -> env steps, close)."""
    from rlamd.bench.peers import sb3_atari

    if algo == "ppo":
        model = sb3_atari("ppo", num_envs, "cpu")
        per = 128 * num_envs
    else:
        # train_freq counts vector steps: num_envs / 4 updates per vector step, as rlamd.
        model = sb3_atari("dqn", num_envs, "cpu", warm=warm, per_update=max(1, num_envs // 4))
        model.learn(total_timesteps=warm)
        per = 16 * num_envs

    def iterate() -> int:
        model.learn(total_timesteps=per, reset_num_timesteps=False)
        return per

    return iterate, model.get_env().close


def run_child(
    algo: str,
    mode: str,
    seconds: float,
    *,
    env_name: str = GAME,
    num_envs: int = NUM_ENVS,
    warm: int = 1_000,
    chunks: int = 3,
) -> dict[str, Any]:
    """Measure one condition in this process: env steps/s over ``chunks`` equal windows.

    Args:
        algo: ``ppo`` or ``dqn``.
        mode: ``budget`` (rlamd's thread plan), ``untuned`` (library defaults) or ``sb3``.
        seconds: timed wall time, after one untimed warm-up iteration.
        env_name: the game (``cartpole`` keeps the tests fast; SB3 always plays Breakout).
        num_envs: envs stepped together.
        warm: DQN replay fill before the timing starts.
        chunks: the timed window is split in this many parts; their rates are the repeats.

    Returns:
        ``{"rates": [...], "threads": "..."}``: env steps/s per chunk and the thread setup.
    """
    import torch

    threads: int | None = None
    line = f"torch {torch.get_num_threads()}, ale-py default, OpenMP default"
    watch = None
    if mode == "budget":
        from rlamd.threads import LoadWatch, apply_threads, describe, plan_threads

        # As rlamd.engine.LocalEngine does on a CPU with the default budget.
        plan = plan_threads(None, num_envs)
        apply_threads(plan)
        threads, line = plan.env_threads, describe(plan).removeprefix("rlamd: ")
        watch = LoadWatch(plan)
        line += "; torch threads follow the load"
    if mode == "sb3":
        iterate, close = _sb3_iterate(algo, num_envs, warm)
    else:
        iterate, close = _rlamd_iterate(algo, env_name, num_envs, threads, warm)
    if watch is not None:
        step_once = iterate

        def iterate() -> int:
            watch.update()
            return step_once()

    try:
        iterate()  # warm-up: first-call allocations and kernel selection
        rates = []
        for _ in range(chunks):
            done, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds / chunks:
                done += iterate()
            rates.append(done / (time.perf_counter() - t0))
    finally:
        close()
    return {"rates": rates, "threads": line}


# ---------------------------------------------------------------------- in the parent
def _child_env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    if mode == "budget":
        from rlamd.threads import OPENMP_ENV

        env.update(OPENMP_ENV)
    else:
        # The libraries' own defaults: rlamd must not set its wait policy in this child.
        env["RLAMD_OPENMP_DEFAULTS"] = "1"
    return env


def _measure(
    algo: str, mode: str, seconds: float, neighbour: bool, env_name: str, timeout: float
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "rlamd.bench.contention",
        "--child",
        algo,
        mode,
        "--seconds",
        str(seconds),
        "--env",
        env_name,
    ]
    with busy_neighbour(neighbour):
        proc = subprocess.run(
            cmd, env=_child_env(mode), capture_output=True, text=True, timeout=timeout, check=False
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{algo}/{mode} child failed (exit {proc.returncode}): {tail[0]}")
    return json.loads(lines[-1])


def _modes(peers: bool, env_name: str, notes: list[str]) -> list[str]:
    """The conditions to measure: rlamd's two, plus SB3 when installed and on its game."""
    modes = ["budget", "untuned"]
    if peers:
        from .peers import PeerUnavailable, sb3

        try:
            sb3()
            if env_name == GAME:
                modes.append("sb3")
            else:
                notes.append(f"contention: SB3 skipped on {env_name} (its runs play {GAME})")
        except PeerUnavailable as exc:
            notes.append(f"Stable-Baselines3 skipped: {exc}")
    return modes


def _pair(
    algo: str, mode: str, seconds: float, env_name: str, timeout: float, notes: list[str]
) -> dict[bool, Figure]:
    """One condition alone (``False``) then beside the neighbour (``True``); a failed
    child ends the pair early with a note."""
    pair: dict[bool, Figure] = {}
    for busy in (False, True):
        try:
            out = _measure(algo, mode, seconds, busy, env_name, timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            notes.append(f"contention {algo}/{mode}: {exc}")
            break
        rates = out["rates"]
        pair[busy] = Figure(
            f"contention/{mode}/{algo}/{'busy' if busy else 'alone'}",
            "env steps/s",
            statistics.median(rates),
            min(rates),
            max(rates),
            rates,
            {
                "algo": algo,
                "mode": mode,
                "neighbour": busy,
                "threads": out["threads"],
                "seconds": seconds,
                "env": env_name,
                "cores": _cores(),
            },
        )
    return pair


def _report(
    figures: list[Figure],
    rows: list[tuple[str, ...]],
    algos: tuple[str, ...],
    seconds: float,
    env_name: str,
) -> None:
    print(
        f"\ncontention on {_cores()} cores: {env_name}, {NUM_ENVS} envs, env steps/s alone and "
        f'beside one busy process (`python -c "{NEIGHBOUR}"`); median of 3 windows of '
        f"{seconds / 3:.1f} s"
    )
    print_table(rows, ("algo", "who", "alone", "with neighbour", "ratio", "threads"))
    by = {(f.meta["mode"], f.meta["algo"], f.meta["neighbour"]): f for f in figures}
    for algo in algos:
        new, old = by.get(("budget", algo, False)), by.get(("untuned", algo, False))
        if new and old:
            print(
                f"{algo}: alone, budget / untuned = {new.median / old.median:.2f}x "
                "(the thread budget must not cost throughput)"
            )


def run_contention_suite(
    seconds: float = 20.0,
    algos: tuple[str, ...] = ALGOS,
    peers: bool = True,
    env_name: str = GAME,
    notes: list[str] | None = None,
) -> list[Figure]:
    """Measure every (algo, mode) alone and beside the neighbour; print the table.

    Args:
        seconds: timed wall time per measurement (each child adds its start-up).
        algos: ``ppo`` and/or ``dqn``.
        peers: measure Stable-Baselines3 too, when it is installed.
        env_name: the game for rlamd (``cartpole`` for plumbing tests; SB3 skips then).
        notes: receives a line for each skipped peer or failed condition.

    Returns:
        Two figures per condition, ``contention/{mode}/{algo}/alone`` and ``.../busy``
        (env steps/s), the busy one with ``meta["ratio"]`` = busy / alone.
    """
    notes = [] if notes is None else notes
    modes = _modes(peers, env_name, notes)
    timeout = 10 * seconds + 300
    names = {"budget": "rlamd (budget)", "untuned": "rlamd (untuned)", "sb3": "SB3"}
    figures: list[Figure] = []
    rows: list[tuple[str, ...]] = []
    for algo in algos:
        for mode in modes:
            pair = _pair(algo, mode, seconds, env_name, timeout, notes)
            figures += pair.values()
            if len(pair) == 2:
                alone, busy = pair[False], pair[True]
                ratio = busy.median / alone.median
                busy.meta["ratio"] = ratio
                rows.append(
                    (
                        algo,
                        names[mode],
                        f"{alone.median:,.0f}",
                        f"{busy.median:,.0f}",
                        f"{ratio:.2f}",
                        alone.meta["threads"],
                    )
                )
    _report(figures, rows, algos, seconds, env_name)
    return figures


def _cores() -> int:
    from rlamd.threads import cores_available

    return cores_available()


def main(argv: list[str] | None = None) -> int:
    """The child entry: ``python -m rlamd.bench.contention --child ALGO MODE``."""
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.contention")
    p.add_argument("--child", nargs=2, metavar=("ALGO", "MODE"), required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--env", default=GAME)
    args = p.parse_args(argv)
    algo, mode = args.child
    if algo not in ALGOS or mode not in MODES:
        p.error(
            f"--child {algo} {mode}; accepted: ALGO in {', '.join(ALGOS)}, "
            f"MODE in {', '.join(MODES)}"
        )
    print(json.dumps(run_child(algo, mode, args.seconds, env_name=args.env)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
