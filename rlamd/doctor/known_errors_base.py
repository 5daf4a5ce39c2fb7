"""The shape of a known error, and the fix texts several of them share.

The rows live in :mod:`.known_errors_gpu` (kernels, memory, faults, MIOpen, rocBLAS) and
:mod:`.known_errors_system` (install, driver, permissions, visibility, RCCL);
:mod:`.known_errors` puts them in the order ``explain`` answers in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .gfx import OVERRIDE_RULE
from .install import torch_install_fix

__all__ = [
    "CONTAINER_FIX",
    "DOCTOR_FIX",
    "GROUPS_FIX",
    "OVERRIDE_FIX",
    "ROCM_FIX",
    "THEROCK_FIX",
    "KnownError",
]

ROCM_FIX = torch_install_fix("rocm")
OVERRIDE_FIX = (
    f"For a consumer card AMD does not list, set its family's override before starting Python: "
    f"{OVERRIDE_RULE}. Find your gfx name with `rocminfo | grep gfx` or `python -m rlamd.doctor`. "
    "This is unofficial and unsupported by AMD; a card the wheel lists needs no override."
)
THEROCK_FIX = (
    "Or install AMD's torch built for your gfx (TheRock's per-gfx indexes): `python -m pip "
    "uninstall -y torch && python -m pip install --pre torch --index-url "
    "https://rocm.nightlies.amd.com/v2/gfx1151/` (gfx120X-all, gfx110X-all or gfx103X-all in "
    "place of gfx1151 for RDNA4, RDNA3, RDNA2), then `RLAMD_TORCH=skip bash scripts/setup.sh`."
)
DOCTOR_FIX = "Run `python -m rlamd.doctor` to see the layer that fails and its fix."
GROUPS_FIX = (
    "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`, then "
    "log out and in (or `newgrp render`)."
)
CONTAINER_FIX = (
    "In a container pass the devices and groups: `docker run --device=/dev/kfd --device=/dev/dri "
    "--group-add video --group-add render ...` (and `--security-opt seccomp=unconfined`)."
)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(frozen=True)
class KnownError:
    """One failure people meet, how to recognise it, and what to do."""

    key: str
    """Stable identifier (JSON output, tests)."""
    title: str
    """One line naming the failure."""
    patterns: tuple[str, ...]
    """Regular expressions (case-insensitive) for the stable part of the message: paths,
    PIDs, addresses, sizes and gfx names vary and are not matched literally."""
    causes: tuple[str, ...]
    """The usual causes, most common first."""
    fixes: tuple[str, ...]
    """What to do, as commands where there is one; the first is the one to try first."""
    source: str = ""
    """A public issue showing the message (its URL)."""

    def match(self, text: str) -> re.Match[str] | None:
        """The earliest match of any pattern in ``text``, or None."""
        found = [m for p in self.patterns if (m := _compiled(p).search(text))]
        return min(found, key=lambda m: m.start()) if found else None

    def matches(self, text: str) -> bool:
        return self.match(text) is not None
