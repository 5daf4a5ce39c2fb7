"""The PyTorch install commands the doctor prints: pinned, as ``scripts/setup.sh`` installs.

The README's rule is that torch is always pinned. ``TORCH_PIN`` and ``DEFAULT_ROCM`` are
the defaults of ``scripts/setup.sh`` (``RLAMD_TORCH_VERSION`` and the ROCm index it uses
when no system ROCm is found); ``tests/test_doctor_install.py`` fails when they drift apart.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = [
    "DEFAULT_ROCM",
    "TORCH_PIN",
    "python_command",
    "rocm_index_url",
    "torch_install_fix",
]

TORCH_PIN = "2.13.0"
"""The torch release ``scripts/setup.sh`` pins (its ``RLAMD_TORCH_VERSION`` default)."""
DEFAULT_ROCM = "6.4"
"""The ROCm wheel index ``scripts/setup.sh`` uses when it finds no system ROCm."""
_FLAVOURS = ("rocm", "cuda", "cpu")


def rocm_index_url(rocm: str | None = None) -> str:
    """PyTorch's wheel index for ROCm ``X.Y`` (``6.4.1-120`` -> ``.../whl/rocm6.4``).

    ``None`` gives the index of ``DEFAULT_ROCM``, as ``scripts/setup.sh`` does.
    """
    major_minor = ".".join((rocm or DEFAULT_ROCM).split("-")[0].split(".")[:2])
    return f"https://download.pytorch.org/whl/rocm{major_minor}"


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
        rocm: the system ROCm version (``6.3.2``), which picks the wheel index as
            ``scripts/setup.sh`` does; None for ``DEFAULT_ROCM``.
        python: the interpreter to call; None for :func:`python_command`.

    The installed torch is removed first: pip counts ``2.13.0+cpu`` as satisfying
    ``torch==2.13.0`` and would otherwise keep the wrong build.

    Raises:
        ValueError: for a flavour other than rocm, cuda or cpu.
    """
    if flavour not in _FLAVOURS:
        raise ValueError(f"flavour={flavour!r}; accepted: {', '.join(_FLAVOURS)}")
    py = python or python_command()
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
