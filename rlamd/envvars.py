"""Every environment variable rlamd reads, checked, and refused in one line that names it.

Two kinds:

* rlamd's own (``RLAMD_TREE_BACKEND``, ``RLAMD_OPENMP_DEFAULTS``,
  ``RLAMD_SKIP_KERNEL_CHECK``) and the ones rlamd reads to decide something
  (``TRITON_INTERPRET``, ``HSA_OVERRIDE_GFX_VERSION``), or set where the user has not
  (``PYTORCH_HIP_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF``, checked for their
  ``option:value`` shape only: torch knows its options). An empty value means unset.
* thread-pool variables that numba and the OpenMP runtime read when they load
  (``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``,
  ``KMP_BLOCKTIME``; rlamd sets some of them, :mod:`rlamd.threads`). A bad one would
  break ``import numba`` (``NUMBA_NUM_THREADS=0`` raises) or make libgomp print a
  warning, before any rlamd code could say why. :func:`sanitize` (run by ``import
  rlamd``, before torch and numba load) takes such a value out of the environment, so
  imports and ``--help`` always work; :func:`check_environment` (run by the commands
  before any work) then refuses it, with what it was.

Other variables rlamd looks at only to see whether they are set (``MALLOC_*``,
``RAY_ADDRESS``) or passes on (the GPU visibility lists, checked by
:mod:`rlamd.visibility` where Ray needs them) are the libraries' to check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

from rlamd.config.errors import bad_setting, closest
from rlamd.cpuload import cores_available

__all__ = ["VARIABLES", "EnvVar", "check_environment", "flag", "sanitize"]


def _one_of(*names: str) -> Callable[[str], bool]:
    return lambda v: v.strip().lower() in names


def _thread_counts(v: str) -> bool:
    parts = v.split(",")
    return all(p.strip().isdigit() and int(p) >= 1 for p in parts)


_SPINS = re.compile(r"\s*(\d+\s*[kmgt]?|infinite|infinity)\s*", re.I)
_BLOCKTIME = re.compile(r"\s*(\d+\s*(ms|us)?|infinite)\s*", re.I)
_GFX = re.compile(r"\d+\.\d+\.\d+")
_OPTION = r"\s*\w+\s*:\s*(\[[^\]]*\]|[^,\[\]:]+)\s*"  # max_split_size_mb:128, x:[256:1,>:8]
_ALLOC_CONF = re.compile(rf"{_OPTION}(,{_OPTION})*")
_FLAGS = ("0", "1")
_TRUE = ("1", "true", "on")  # what Triton's own switches read as on
_FALSE = ("0", "false", "off")


@dataclass(frozen=True)
class EnvVar:
    """One variable: what it accepts, in words and as a test, and who reads it."""

    name: str
    accepted: str
    """What is accepted, in words (the error's ``accepted:`` part)."""
    valid: Callable[[str], bool]
    """True for an accepted (non-empty) value."""
    reader: str
    """Who reads it (the error's ``why``)."""
    early: bool = False
    """Read by a library as it loads: a bad value is taken out by :func:`sanitize`."""
    nearest: Callable[[str], str | None] = lambda v: None
    """The nearest accepted value, when there is one."""


def _close(*names: str) -> Callable[[str], str | None]:
    def nearest(v: str) -> str | None:
        return closest(v.strip().lower(), names)

    return nearest


VARIABLES: tuple[EnvVar, ...] = (
    EnvVar(
        "RLAMD_TREE_BACKEND",
        "auto, torch, numba or triton (empty: auto)",
        _one_of("auto", "torch", "numba", "triton"),
        "rlamd's replay trees",
        nearest=_close("auto", "torch", "numba", "triton"),
    ),
    EnvVar("RLAMD_OPENMP_DEFAULTS", "0 or 1 (empty: 0)", _one_of(*_FLAGS), "rlamd.threads"),
    EnvVar("RLAMD_SKIP_KERNEL_CHECK", "0 or 1 (empty: 0)", _one_of(*_FLAGS), "rlamd.device"),
    EnvVar(
        "TRITON_INTERPRET",
        "1, true or on; 0, false or off (empty: off)",
        _one_of(*_TRUE, *_FALSE),
        "Triton and rlamd's replay trees",
    ),
    EnvVar(
        "HSA_OVERRIDE_GFX_VERSION",
        "a version such as 10.3.0 or 11.0.0",
        lambda v: bool(_GFX.fullmatch(v.strip())),
        "the ROCm runtime and rlamd's kernel check",
    ),
    *(
        EnvVar(
            name,
            "comma-separated option:value pairs, e.g. expandable_segments:True",
            lambda v: bool(_ALLOC_CONF.fullmatch(v)),
            "torch's GPU memory allocator (rlamd sets a default where it is unset)",
        )
        for name in ("PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    ),
    EnvVar(
        "NUMBA_NUM_THREADS",
        "an integer >= 1",
        lambda v: v.strip().isdigit() and int(v) >= 1,
        "numba",
        early=True,
        nearest=lambda v: str(cores_available()),
    ),
    EnvVar(
        "OMP_NUM_THREADS",
        "an integer >= 1 (or a comma list of them)",
        _thread_counts,
        "the OpenMP runtime torch loads",
        early=True,
        nearest=lambda v: str(cores_available()),
    ),
    EnvVar(
        "OMP_WAIT_POLICY",
        "ACTIVE or PASSIVE",
        _one_of("active", "passive"),
        "the OpenMP runtime torch loads",
        early=True,
        nearest=lambda v: (_close("active", "passive")(v) or "").upper() or None,
    ),
    EnvVar(
        "GOMP_SPINCOUNT",
        "a number of spins >= 0 (suffixes k, M, G, T), or INFINITE",
        lambda v: bool(_SPINS.fullmatch(v)),
        "GNU OpenMP (libgomp)",
        early=True,
        nearest=lambda v: "0",
    ),
    EnvVar(
        "KMP_BLOCKTIME",
        "milliseconds >= 0, or infinite",
        lambda v: bool(_BLOCKTIME.fullmatch(v)),
        "Intel/LLVM OpenMP",
        early=True,
        nearest=lambda v: "0",
    ),
)

_removed: dict[str, str] = {}
"""Early variables :func:`sanitize` took out of ``os.environ``, with their values."""


def sanitize(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Take bad values of the variables libraries read as they load out of ``environ``
    (default ``os.environ``), so that importing numba and torch cannot fail on them.

    Returns the names removed; :func:`check_environment` still refuses them afterwards.
    """
    env = os.environ if environ is None else environ
    removed = []
    for var in VARIABLES:
        value = env.get(var.name)
        if var.early and value is not None and not var.valid(value):
            del env[var.name]
            removed.append(var.name)
            if environ is None:
                _removed[var.name] = value
    return removed


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse the first bad value among :data:`VARIABLES` (empty values count as unset).

    Raises:
        ConfigError: one line, e.g. ``NUMBA_NUM_THREADS='0' (environment variable read by
            numba); accepted: an integer >= 1, or unset it. Did you mean 2?``
    """
    env = os.environ if environ is None else environ
    for var in VARIABLES:
        value = _removed.get(var.name) if environ is None else None
        value = env.get(var.name) if value is None else value  # the user's, not our default
        if value is None or value == "" or var.valid(value):
            continue
        raise bad_setting(
            "",
            var.name,
            value,
            f"{var.accepted}, or unset it",
            why=f"environment variable read by {var.reader}",
            close=var.nearest(value),
        )


def flag(environ: Mapping[str, str], name: str) -> bool:
    """A yes/no variable: on for 1/true/on, off when unset, empty or anything else
    (:func:`check_environment` refuses anything else before a run starts)."""
    return environ.get(name, "").strip().lower() in _TRUE
