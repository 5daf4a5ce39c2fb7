"""PPO and DQN throughput alone and beside one busy single-threaded process.

A second process on the machine (TensorBoard, an evaluation, another run, the other Ray
actors) should cost rlamd about its share of the cores, not most of its throughput.
Every figure here is measured in a child interpreter, because the OpenMP wait policy is
fixed when torch loads; the parent only starts children and the neighbour
(``python -c "while True: pass"``), which it always kills. Each child is built once and
then measures a window when asked; the parent interleaves the windows (every condition
alone and beside the neighbour once per round), so drift hits every condition alike. Conditions, in one run:

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
The ratio is the env steps/s beside the neighbour over the env steps/s alone, per round.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from .common import MIN_REPEATS, Contender, Figure, interleave, note_ratio, print_table, ratio
from .contention_child import ALGOS, GAME, NUM_ENVS, run_child

__all__ = ["NEIGHBOUR", "busy_neighbour", "run_child", "run_contention_suite"]

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


def _child_env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    if mode == "budget":
        from rlamd.threads import OPENMP_ENV

        env.update(OPENMP_ENV)
    else:
        # The libraries' own defaults: rlamd must not set its wait policy in this child.
        env["RLAMD_OPENMP_DEFAULTS"] = "1"
    return env


class _Child:
    """One condition's child process, built once and asked for a window at a time."""

    def __init__(self, algo: str, mode: str, env_name: str, timeout: float) -> None:
        self.algo, self.mode, self.timeout = algo, mode, timeout
        cmd = [sys.executable, "-m", "rlamd.bench.contention_child", "--serve", algo, mode]
        self.proc = subprocess.Popen(
            [*cmd, "--env", env_name],
            env=_child_env(mode),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.threads = self._answer()["threads"]

    def _answer(self) -> dict[str, Any]:
        """The child's next JSON line; RuntimeError (with its last words) when none comes."""
        import select

        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("{"):
                    return json.loads(line)
                if not line:  # the child ended
                    break
        self.close()
        tail = (self.proc.stderr.read() if self.proc.stderr else "").strip().splitlines()
        raise RuntimeError(
            f"{self.algo}/{self.mode} child failed (exit {self.proc.returncode}): "
            f"{(tail or ['no output'])[-1]}"
        )

    def measure(self, seconds: float) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"measure {seconds}\n")
        self.proc.stdin.flush()
        return float(self._answer()["rate"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


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


def _start(
    algo: str, modes: list[str], env_name: str, timeout: float, notes: list[str]
) -> dict[str, _Child]:
    """A child per mode, built and waiting; one that fails to start is left out, noted."""
    children: dict[str, _Child] = {}
    for mode in modes:
        try:
            children[mode] = _Child(algo, mode, env_name, timeout)
        except (RuntimeError, OSError) as exc:
            notes.append(f"contention {algo}/{mode}: {exc}")
    return children


def _algo_figures(
    algo: str,
    children: dict[str, _Child],
    seconds: float,
    env_name: str,
    notes: list[str],
    repeats: int,
) -> list[Figure]:
    """Every child alone and beside the neighbour, in interleaved rounds of windows of
    ``seconds / repeats``; a child that fails mid-way loses its figures, with a note."""
    window, dead = seconds / repeats, set()

    def once(mode: str, busy: bool):
        def run() -> float:
            if mode in dead:
                return float("nan")
            try:
                with busy_neighbour(busy):
                    return children[mode].measure(window)
            except RuntimeError as exc:
                dead.add(mode)
                notes.append(f"contention {algo}/{mode}: {exc}")
                return float("nan")

        return run

    contenders = [
        Contender(
            f"contention/{mode}/{algo}/{'busy' if busy else 'alone'}",
            "env steps/s",
            once(mode, busy),
            {
                "algo": algo,
                "mode": mode,
                "neighbour": busy,
                "threads": child.threads,
                "seconds": window,
                "env": env_name,
                "cores": _cores(),
            },
        )
        for mode, child in children.items()
        for busy in (False, True)
    ]
    figures = interleave(contenders, repeats=repeats, warmup=0)
    return [f for f in figures if f.meta["mode"] not in dead]


def _report(
    figures: list[Figure],
    rows: list[tuple[str, ...]],
    algos: tuple[str, ...],
    window: float,
    env_name: str,
) -> None:
    print(
        f"\ncontention on {_cores()} cores: {env_name}, {NUM_ENVS} envs, env steps/s alone and "
        f'beside one busy process (`python -c "{NEIGHBOUR}"`); median of interleaved windows '
        f"of {window:.1f} s (every condition once per round); ratio: busy / alone per round, "
        "median (min-max)"
    )
    print_table(rows, ("algo", "who", "alone", "with neighbour", "ratio", "threads"))
    by = {(f.meta["mode"], f.meta["algo"], f.meta["neighbour"]): f for f in figures}
    for algo in algos:
        new, old = by.get(("budget", algo, False)), by.get(("untuned", algo, False))
        if new and old:
            print(
                f"{algo}: alone, budget / untuned = {ratio(new, old).text()} "
                "(the thread budget must not cost throughput)"
            )


def run_contention_suite(
    seconds: float = 20.0,
    algos: tuple[str, ...] = ALGOS,
    peers: bool = True,
    env_name: str = GAME,
    notes: list[str] | None = None,
    repeats: int = MIN_REPEATS,
) -> list[Figure]:
    """Measure every (algo, mode) alone and beside the neighbour; print the table.

    One child per (algo, mode) is started and built once; the parent then asks each for
    a window at a time, interleaved: every mode alone and beside the neighbour once per
    round, ``repeats`` rounds.

    Args:
        seconds: timed wall time per condition, over all rounds (each child adds its
            start-up once, and an untimed iteration per window).
        algos: ``ppo`` and/or ``dqn``.
        peers: measure Stable-Baselines3 too, when it is installed.
        env_name: the game for rlamd (``cartpole`` for plumbing tests; SB3 skips then).
        notes: receives a line for each skipped peer or failed condition.
        repeats: rounds (windows per condition).

    Returns:
        Two figures per condition, ``contention/{mode}/{algo}/alone`` and ``.../busy``
        (env steps/s), the busy one with ``meta["ratio"]`` = busy / alone (median per
        round) and ``meta["ratio_range"]``.
    """
    notes = [] if notes is None else notes
    modes = _modes(peers, env_name, notes)
    timeout = 10 * seconds + 300
    names = {"budget": "rlamd (budget)", "untuned": "rlamd (untuned)", "sb3": "SB3"}
    figures: list[Figure] = []
    rows: list[tuple[str, ...]] = []
    for algo in algos:
        children = _start(algo, modes, env_name, timeout, notes)
        try:
            got = _algo_figures(algo, children, seconds, env_name, notes, repeats)
        finally:
            for child in children.values():
                child.close()
        figures += got
        for alone, busy in zip(got[::2], got[1::2], strict=True):
            r = ratio(busy, alone)
            note_ratio(busy, "ratio", r)
            rows.append(
                (
                    algo,
                    names[busy.meta["mode"]],
                    f"{alone.median:,.0f}",
                    f"{busy.median:,.0f}",
                    r.cell(),
                    alone.meta["threads"],
                )
            )
    _report(figures, rows, algos, seconds / repeats, env_name)
    return figures


def _cores() -> int:
    from rlamd.threads import cores_available

    return cores_available()
