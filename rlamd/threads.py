"""A thread budget for one rlamd process: env stepping, torch and numba share its cores.

Three thread pools live in a training process, and each assumes by default that it owns
every core of the machine: ale-py's C++ vector env (``num_threads``), torch's OpenMP
intra-op pool, and numba's (idle in rlamd: its kernels are not ``parallel=True``). On
top, the GNU OpenMP runtime torch ships spin-waits at the end of every parallel region
before it sleeps. Beside one busy process on a 2-core machine that turned PPO on
Breakout 8x slower: a spinning or descheduled OpenMP thread holds up every small op.

This module decides the split once (:func:`plan_threads`, a pure function), applies it
(:func:`apply_threads`) and says it in one log line (:func:`describe`):

* the budget is ``train.threads``, else the CPUs Ray gave an actor (:func:`ray_cpus`),
  else the cores in the process's affinity mask (:func:`cores_available`), never
  ``os.cpu_count()``, which counts cores a container or ``taskset`` does not give us;
* env stepping and the network run one after the other in a collector (act, then step),
  so each gets the whole budget in turn rather than a slice of it;
* idle OpenMP threads spin only briefly before they sleep (:data:`OPENMP_ENV`), so an
  idle pool hardly competes with the env threads or a neighbour; and :class:`LoadWatch`
  lowers torch's threads while other processes hold cores. The OpenMP runtimes read
  these variables once, when torch loads them: :func:`prepare_env` must run before the
  first ``import torch`` of the process (``import rlamd`` does it).

Example:
    >>> from rlamd.threads import apply_threads, describe, plan_threads
    >>> plan = plan_threads(None, num_envs=8)   # the cores in the affinity mask
    >>> apply_threads(plan)
    >>> print(describe(plan))
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from rlamd.cpuload import PROC, CpuSampler, cores_available
from rlamd.envvars import flag, sanitize

__all__ = [
    "OPENMP_ENV",
    "LoadWatch",
    "ThreadPlan",
    "apply_threads",
    "cores_available",
    "describe",
    "plan_threads",
    "prepare_env",
    "ray_cpus",
    "threads_for_load",
]

# Set (unless the user set them) before torch loads its OpenMP runtime. GNU libgomp (what
# torch's Linux wheels ship) spins 300,000 rounds at the end of a parallel region before it
# sleeps; 20,000 (tens of microseconds) keeps back-to-back ops fast and lets an idle thread
# sleep soon after. OMP_WAIT_POLICY=PASSIVE (no spin at all) cost about 8% of DQN's updates
# alone on 2 cores (measured with `python -m rlamd.bench dqn`, same run). KMP_BLOCKTIME=0:
# sleep at once in Intel's libiomp, which torch builds linked against MKL's OpenMP use.
OPENMP_ENV: dict[str, str] = {"GOMP_SPINCOUNT": "20000", "KMP_BLOCKTIME": "0"}
WAIT_POLICY = "brief spin (GOMP_SPINCOUNT=20000), then sleep"


@dataclass(frozen=True)
class ThreadPlan:
    """How one process uses its cores; see :func:`plan_threads`."""

    cores: int
    """The budget: cores this process may keep busy."""
    source: str
    """Where the budget came from: ``train.threads``, ``ray num_cpus`` or ``affinity mask``."""
    env_threads: int
    """ale-py ``AtariVectorEnv`` worker threads (at most one per env)."""
    torch_threads: int
    """torch intra-op threads (``torch.set_num_threads``)."""
    numba_threads: int
    """numba's thread pool size (rlamd's kernels are serial; this only caps the pool)."""
    wait_policy: str
    """How idle OpenMP threads wait: a brief spin, then sleep (:data:`OPENMP_ENV`)."""


def ray_cpus(resources: Mapping[str, float]) -> int:
    """The thread budget of a Ray actor from its assigned resources.

    Args:
        resources: ``ray.get_runtime_context().get_assigned_resources()`` inside the actor
            (Ray already folds placement-group names such as ``CPU_group_0_...`` into
            ``CPU``), e.g. ``{"CPU": 2.0, "GPU": 1.0}``.

    Returns:
        ``floor(CPU)``, at least 1: a fractional or zero CPU share still runs one thread.
    """
    cpus = float(resources.get("CPU", 0.0))
    if not math.isfinite(cpus) or cpus < 0:
        raise ValueError(f"CPU={cpus!r} in the Ray resources; accepted: a number >= 0")
    return max(1, int(cpus))


def plan_threads(
    cores: int | None,
    num_envs: int,
    *,
    source: str | None = None,
    available: int | None = None,
) -> ThreadPlan:
    """Split a core budget between env stepping, torch and numba (pure: nothing is set).

    Args:
        cores: the budget (``train.threads``, or :func:`ray_cpus` in a Ray actor); None
            takes ``available``.
        num_envs: envs this process steps (more env threads than envs would idle).
        source: what to call the budget in :func:`describe` (default: ``train.threads``
            when ``cores`` is given, else ``affinity mask``).
        available: the cores in the affinity mask (default: :func:`cores_available`);
            passed by tests and by callers that already know it.

    Returns:
        The plan. A collector acts with the network, then steps the envs, then acts again:
        the two phases never overlap, so each may use the whole budget.

    Raises:
        ValueError: ``cores`` or ``num_envs`` below 1.
    """
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise ValueError(
            f"threads={cores!r}; accepted: an integer >= 1, or none for the cores in the "
            "affinity mask"
        )
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}; accepted: an integer >= 1")
    if cores is None:
        budget = available if available is not None else cores_available()
        origin = source or "affinity mask"
    else:
        budget = cores
        origin = source or "train.threads"
    budget = max(1, int(budget))
    return ThreadPlan(
        cores=budget,
        source=origin,
        env_threads=min(num_envs, budget),
        torch_threads=budget,
        numba_threads=budget,
        wait_policy=WAIT_POLICY,
    )


def prepare_env(environ: MutableMapping[str, str] | None = None) -> bool:
    """Ask OpenMP for sleeping idle threads, unless the user chose a policy.

    Must run before the process first imports torch (the OpenMP runtime reads these
    variables once, when it loads); ``rlamd/__init__.py`` calls it first thing. Also
    caps numba's pool (``NUMBA_NUM_THREADS``, read when numba is imported) at the
    affinity mask rather than the machine.

    ``RLAMD_OPENMP_DEFAULTS=1`` leaves the environment alone (the libraries' own
    defaults; the contention benchmark's "before" figure uses it). A thread variable
    that numba or OpenMP could not read is taken out first (:func:`rlamd.envvars.sanitize`:
    imports never fail on one; the commands refuse it with its name).

    Args:
        environ: the environment to fill (default ``os.environ``; tests pass a dict, Ray
            launchers pass the ``env_vars`` of an actor's ``runtime_env``).

    Returns:
        True if the wait policy is in force for this process: torch is not loaded yet,
        or it was loaded with the policy already set. False: torch was imported first
        with another policy, or the defaults were asked for, and idle threads spin.
    """
    env = os.environ if environ is None else environ
    sanitize(environ)
    if flag(os.environ, "RLAMD_OPENMP_DEFAULTS"):
        return False
    for key, value in OPENMP_ENV.items():
        env.setdefault(key, value)
    if "numba" not in sys.modules:
        env.setdefault("NUMBA_NUM_THREADS", str(cores_available()))
    if environ is not None:
        return True
    return "torch" not in sys.modules or all(os.environ.get(k) == v for k, v in OPENMP_ENV.items())


_applied_wait_policy: bool | None = None


def apply_threads(plan: ThreadPlan) -> None:
    """Set torch's and numba's thread counts from ``plan`` in this process.

    ale-py's threads are not set here: pass ``plan.env_threads`` to ``make_env(...,
    threads=...)``. Call it before the first parallel op (before envs and networks are
    built), and again in each Ray actor with its own plan. The OpenMP wait policy comes
    from :func:`prepare_env`, which must have run before torch was imported.
    """
    global _applied_wait_policy
    _applied_wait_policy = prepare_env()
    import torch

    if torch.get_num_threads() != plan.torch_threads:
        torch.set_num_threads(plan.torch_threads)
    numba = sys.modules.get("numba")
    if numba is not None:
        # Only an already-started pool is resized: set_num_threads would start one, and
        # rlamd's kernels never use it. An unstarted pool is capped by NUMBA_NUM_THREADS.
        try:
            from numba.np.ufunc import parallel as _numba_parallel

            if getattr(_numba_parallel, "_is_initialized", False):
                numba.set_num_threads(min(plan.numba_threads, numba.config.NUMBA_NUM_THREADS))
        except (ImportError, ValueError, RuntimeError):  # an odd numba build: leave it be
            pass


def describe(plan: ThreadPlan) -> str:
    """One log line: the budget, where it came from, and the split."""
    waits = plan.wait_policy
    if "OMP_WAIT_POLICY" in os.environ:
        waits = f"{os.environ['OMP_WAIT_POLICY'].lower()} (your OMP_WAIT_POLICY)"
    elif _applied_wait_policy is False:
        waits = "the runtime's long spin (torch was imported before rlamd)"
    return (
        f"rlamd: threads {plan.cores} ({plan.source}): envs {plan.env_threads}, "
        f"torch {plan.torch_threads}, numba {plan.numba_threads}; idle OpenMP threads {waits}"
    )


def threads_for_load(budget: int, others_busy: float, cores: int) -> int:
    """torch threads to use now: the budget, less the cores other processes keep busy.

    OpenMP splits each op evenly over its threads and waits for the last one, so a
    thread that shares its core with a busy neighbour holds up every op; one thread
    fewer than the cores left free is faster then. Pure: the numbers come from
    :class:`LoadWatch`.

    Args:
        budget: the plan's ``torch_threads``.
        others_busy: cores' worth of CPU time other processes used lately (0.0-cores).
        cores: the cores this process may run on (its affinity mask).

    Returns:
        ``round(cores - others_busy)`` clamped to ``[1, budget]``.
    """
    free = cores - max(0.0, others_busy)
    return max(1, min(budget, int(free + 0.5)))


class LoadWatch:
    """Follows other processes' CPU use and resizes torch's pool to what is left.

    Call :meth:`update` often (every loop iteration); it samples ``/proc`` at most once
    per ``interval`` seconds and calls ``torch.set_num_threads`` only when the answer of
    :func:`threads_for_load` changes. A no-op where ``/proc`` is missing.
    """

    def __init__(self, plan: ThreadPlan, interval: float = 2.0, proc: Path = PROC) -> None:
        import time

        self.plan, self.interval = plan, interval
        self._clock = time.monotonic
        self._sampler = CpuSampler(proc=proc)  # this process and its workers are not "other"
        self._at = self._clock()
        self.threads = plan.torch_threads
        self.others_busy = 0.0

    def update(self) -> int:
        """Re-sample if ``interval`` has passed; returns the torch threads in force."""
        now = self._clock()
        if now - self._at < self.interval:
            return self.threads
        self._at, got = now, self._sampler.sample()
        if got is None:
            return self.threads
        self.others_busy = got[0]
        want = threads_for_load(self.plan.torch_threads, self.others_busy, self.plan.cores)
        if want != self.threads:
            import torch

            torch.set_num_threads(want)
            self.threads = want
        return self.threads
