"""The PyTorch install commands the doctor prints: pinned, as ``scripts/setup.sh`` installs.

The README's rule is that torch is always pinned. ``TORCH_PIN`` is the default of
``scripts/setup.sh`` (``RLAMD_TORCH_VERSION``, which it reads from this file); the ROCm
index comes from the table in :mod:`.wheels`, which setup.sh runs too, so the doctor's
commands name the index setup.sh would install from. ``tests/test_doctor_install.py`` and
``tests/test_setup_script.py`` fail when they drift apart.
"""

from __future__ import annotations

import os
import shutil
import sys

from .wheels import HostTooOld, newest_index, pick

__all__ = [
    "DEFAULT_ROCM",
    "TORCH_PIN",
    "python_command",
    "rocm_index_url",
    "torch_install_fix",
]

TORCH_PIN = "2.13.0"
"""The torch release ``scripts/setup.sh`` pins (its ``RLAMD_TORCH_VERSION`` default)."""
DEFAULT_ROCM = newest_index(TORCH_PIN).removeprefix("rocm")
"""The ROCm of the index ``scripts/setup.sh`` uses when it finds no system ROCm: the
newest PyTorch publishes for ``TORCH_PIN``."""
_FLAVOURS = ("rocm", "cuda", "cpu")


def rocm_index_url(rocm: str | None = None) -> str:
    """The ROCm index ``scripts/setup.sh`` installs ``TORCH_PIN`` from on a host with ROCm
    ``rocm`` (``7.1.0`` -> ``.../whl/rocm7.2``); ``None`` (no host ROCm) gives the newest.

    Raises:
        HostTooOld: every wheel of the pin needs a newer driver; the message says the ways out.
    """
    return pick(TORCH_PIN, rocm).url


def python_command(executable: str | None = None, cwd: str | None = None) -> str:
    """How a printed command should call the running interpreter.

    A relative path when it lives under ``cwd`` (``.venv/bin/python``), ``python`` when that
    name on PATH is this very interpreter, else the absolute path: a bare ``python`` in a
    fresh shell is often another Python without torch.
    """
    exe = os.path.abspath(executable or sys.executable)
    here = os.path.abspath(cwd or os.getcwd())
    if exe.startswith(here.rstrip(os.sep) + os.sep):
        return os.path.relpath(exe, here)
    on_path = shutil.which("python")
    if on_path and os.path.abspath(on_path) == exe:
        return "python"
    return exe


def torch_install_fix(
    flavour: str = "rocm", rocm: str | None = None, python: str | None = None
) -> str:
    """The fix text that installs the pinned torch build of ``flavour``.

    Args:
        flavour: ``rocm``, ``cuda`` or ``cpu`` (the values of ``RLAMD_TORCH``).
        rocm: the system ROCm version (``7.1.0``), which picks the wheel index as
            ``scripts/setup.sh`` does; None for ``DEFAULT_ROCM``.
        python: the interpreter to call; None for :func:`python_command`.

    The installed torch is removed first: pip counts ``2.13.0+cpu`` as satisfying
    ``torch==2.13.0`` and would otherwise keep the wrong build. On a host too old for every
    ROCm wheel of the pin the text is setup.sh's paragraph instead (upgrade, an older pin,
    or AMD's wheels), never an index that does not exist.

    Raises:
        ValueError: for a flavour other than rocm, cuda or cpu.
    """
    if flavour not in _FLAVOURS:
        raise ValueError(f"flavour={flavour!r}; accepted: {', '.join(_FLAVOURS)}")
    py = python or python_command()
    if flavour == "rocm":
        try:
            rocm_index_url(rocm)
        except HostTooOld as exc:
            return f"Uninstall this torch (`{py} -m pip uninstall -y torch`), then: {exc}"
    index = {
        "rocm": f" --index-url {rocm_index_url(rocm)}",
        "cuda": "",  # Linux wheels on PyPI are CUDA builds
        "cpu": " --index-url https://download.pytorch.org/whl/cpu",
    }[flavour]
    what = {"rocm": "ROCm", "cuda": "CUDA", "cpu": "CPU"}[flavour]
    uninstall = f"{py} -m pip uninstall -y torch"
    return (
        f"Install the pinned {what} build as scripts/setup.sh does, from the repository root: "
        f"`{uninstall} && RLAMD_TORCH={flavour} bash scripts/setup.sh`; or by hand: "
        f"`{uninstall} && {py} -m pip install torch=={TORCH_PIN}{index}`."
    )
