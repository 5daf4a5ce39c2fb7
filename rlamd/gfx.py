"""gfx names, and the ``HSA_OVERRIDE_GFX_VERSION`` a consumer card AMD does not list can borrow.

ROCm reads ``HSA_OVERRIDE_GFX_VERSION=MAJOR.MINOR.STEP`` and then runs the card as that ISA
(``10.3.0`` is gfx1030). Consumer Radeon cards that PyTorch's ROCm wheels ship no kernels
for run the kernels of their family's listed card this way: RDNA2 gfx103x (RX 6700 XT is
gfx1031, RX 6600 gfx1032) as gfx1030 with ``10.3.0``, RDNA3 gfx110x (RX 7800/7700 XT are
gfx1101, RX 7600 gfx1102) as gfx1100 with ``11.0.0``. AMD does not support it; it is what
ROCm's issue tracker and user guides give (ROCm/ROCm#2353, ROCm/TheRock#1719), and RDNA3
cards need ``11.0.0``: ``10.3.0`` does not run on them.

Kernel coverage (:func:`kernel_coverage`): a card runs a ROCm wheel only if the wheel's
arch list names its gfx (else ``hipErrorNoBinaryForGpu`` / ``invalid device function``) and
rocBLAS ships Tensile files for it (else rocBLAS prints ``Cannot read ...TensileLibrary.dat:
Illegal seek for GPU arch : gfx1031`` and aborts the process, ROCm/rocBLAS#1339). Both are
checked before training (:func:`rlamd.device.resolve_device`) and by the doctor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FAMILY_OVERRIDES",
    "OVERRIDE_RULE",
    "THEROCK_INDEXES",
    "KernelCoverage",
    "gfx_for_override",
    "kernel_coverage",
    "override_for",
    "tensile_archs",
    "therock_index",
]

# Unlisted cards and the override of their family's listed ISA (unofficial):
# RDNA2 -> gfx1030, RDNA3 and RDNA3.5 APUs -> gfx1100, Vega APUs -> gfx900.
FAMILY_OVERRIDES: dict[str, str] = {
    **{f"gfx103{c}": "10.3.0" for c in "123456"},
    **{f"gfx110{c}": "11.0.0" for c in "123"},
    "gfx1150": "11.0.0",
    "gfx1151": "11.0.0",
    "gfx1152": "11.0.0",
    "gfx902": "9.0.0",
    "gfx909": "9.0.0",
    "gfx90c": "9.0.0",
}

OVERRIDE_RULE = (
    "RDNA2 gfx103x (gfx1031 RX 6700 XT, gfx1032 RX 6600, gfx1034/gfx1035/gfx1036) -> "
    "`export HSA_OVERRIDE_GFX_VERSION=10.3.0`; RDNA3 gfx110x (gfx1101 RX 7800/7700 XT, "
    "gfx1102 RX 7600, gfx1103 Radeon 780M) -> `export HSA_OVERRIDE_GFX_VERSION=11.0.0`"
)
"""The family rule in one line, for fixes and ``--explain``."""


def override_for(gfx: str) -> str | None:
    """The override an unlisted card can borrow (``gfx1031`` -> ``10.3.0``), or None.

    Accepts names with feature suffixes (``gfx1031:xnack-``) and any case.
    """
    return FAMILY_OVERRIDES.get(gfx.split(":", 1)[0].strip().lower())


def gfx_for_override(value: str) -> str | None:
    """The ISA an override makes the card run as: ``10.3.0`` -> ``gfx1030``.

    Below gfx10 the minor and step are one hex digit each (``9.0.10`` -> ``gfx90a``).
    Returns None for anything that is not three dot-separated whole numbers.
    """
    try:
        major, minor, step = (int(x) for x in value.strip().split("."))
    except ValueError:
        return None
    return f"gfx{major}{minor:x}{step:x}" if major < 10 else f"gfx{major}{minor}{step:x}"


THEROCK_INDEXES: dict[str, str] = {
    "gfx94": "https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/",
    "gfx950": "https://rocm.nightlies.amd.com/v2/gfx950-dcgpu/",
    "gfx103": "https://rocm.nightlies.amd.com/v2/gfx103X-all/",
    "gfx110": "https://rocm.nightlies.amd.com/v2/gfx110X-all/",
    "gfx1150": "https://rocm.nightlies.amd.com/v2-staging/gfx1150/",
    "gfx1151": "https://rocm.nightlies.amd.com/v2/gfx1151/",
    "gfx120": "https://rocm.nightlies.amd.com/v2/gfx120X-all/",
}
"""AMD's per-gfx torch indexes (TheRock), by gfx prefix; the longest prefix wins
(https://github.com/ROCm/TheRock/blob/main/RELEASES.md; in use in ROCm/TheRock#2110 for
gfx120X-all, #3065 for gfx1151, #1940 for gfx1150)."""

_GFX = re.compile(r"(?<![0-9a-z])gfx[0-9a-f]{3,4}(?![0-9a-z])", re.IGNORECASE)


def therock_index(gfx: str) -> str | None:
    """TheRock's torch index for ``gfx`` (``gfx1151`` -> ``.../v2/gfx1151/``), or None."""
    name = gfx.split(":", 1)[0].strip().lower()
    hits = [prefix for prefix in THEROCK_INDEXES if name.startswith(prefix)]
    return THEROCK_INDEXES[max(hits, key=len)] if hits else None


def tensile_archs(library: Path | None) -> set[str] | None:
    """The gfx names rocBLAS has Tensile files for in ``library``; None if it is no folder
    or its file names name no gfx (then the check cannot tell).

    rocBLAS keeps one set per architecture (``TensileLibrary_lazy_gfx1030.dat``,
    ``Kernels.so-000-gfx1030.hsaco``, ``TensileLibrary_..._gfx1030.co``); a name's gfx is
    read from the file name.
    """
    if library is None or not library.is_dir():
        return None
    found: set[str] = set()
    for entry in library.iterdir():
        found.update(m.group(0).lower() for m in _GFX.finditer(entry.name))
    return found or None  # one merged library names no gfx: unknown, not "none"


@dataclass(frozen=True)
class KernelCoverage:
    """Whether a ROCm torch build carries kernels for one card."""

    gfx: str
    """The card's gfx name as torch reports it (``gfx1031``)."""
    runs_as: str
    """The ISA the runtime loads kernels for: ``gfx`` or what HSA_OVERRIDE_GFX_VERSION names."""
    override: str | None
    """HSA_OVERRIDE_GFX_VERSION as set (None when unset)."""
    arch_list: tuple[str, ...]
    """torch's compiled targets (empty: unknown, not checked)."""
    tensile: tuple[str, ...] | None
    """gfx names with rocBLAS Tensile files (None: no rocBLAS library folder found)."""

    @property
    def in_arch_list(self) -> bool | None:
        return self.runs_as in self.arch_list if self.arch_list else None

    @property
    def in_tensile(self) -> bool | None:
        return None if self.tensile is None else self.runs_as in self.tensile

    @property
    def wrong_family(self) -> bool:
        """An override that runs the card as another family's ISA (RDNA3 as 10.3.0)."""
        family = override_for(self.gfx)
        return bool(self.override and family and gfx_for_override(family) != self.runs_as)

    @property
    def ok(self) -> bool:
        """False only when a check ran and found the card's kernels missing or foreign."""
        known_gap = self.in_arch_list is False or self.in_tensile is False
        return not known_gap and not self.wrong_family

    def problem(self) -> str | None:
        """What is missing, in words; None when nothing known is."""
        if self.ok:
            return None
        what = self.gfx + (f" (run as {self.runs_as} by the override)" if self.override else "")
        missing = []
        if self.wrong_family:
            missing.append(f"{self.runs_as} is another family's ISA")
        if self.in_arch_list is False:
            missing.append(f"not among this torch's targets ({', '.join(self.arch_list)})")
        if self.in_tensile is False:
            have = ", ".join(sorted(self.tensile or ())) or "none"
            missing.append(f"rocBLAS has no Tensile kernels for it (it has: {have})")
        return f"{what}: {'; '.join(missing)}"

    def fix(self) -> str:
        """What to do: the family's override, or a wheel built for this gfx."""
        family = override_for(self.gfx)
        steps = []
        if family and not self.override:
            steps.append(
                f"set `export HSA_OVERRIDE_GFX_VERSION={family}` before starting Python "
                "(unofficial: AMD does not support it; it runs the card as its family's "
                f"listed {gfx_for_override(family)})"
            )
        elif family and gfx_for_override(family) != self.runs_as:
            steps.append(
                f"use its family's `export HSA_OVERRIDE_GFX_VERSION={family}` instead of "
                f"{self.override}"
            )
        elif self.override:
            steps.append(f"HSA_OVERRIDE_GFX_VERSION={self.override} does not help here: unset it")
        index = therock_index(self.gfx)
        if index:
            steps.append(
                f"or install AMD's torch built for this gfx: `python -m pip uninstall -y torch "
                f"&& python -m pip install --pre torch --index-url {index}`, then "
                "`RLAMD_TORCH=skip bash scripts/setup.sh`"
            )
        steps.append("or run on the CPU (`--device cpu`)")
        first = steps[0][3:] if steps[0].startswith("or ") else steps[0]
        return "; ".join([first[0].upper() + first[1:], *steps[1:]]) + "."


def kernel_coverage(
    gfx: str, arch_list: Iterable[str], tensile: Iterable[str] | None, override: str | None
) -> KernelCoverage:
    """Weigh a card against a torch build (pure: callers gather the inputs).

    Args:
        gfx: the card's gfx name (feature suffixes such as ``:xnack-`` are dropped).
        arch_list: ``torch.cuda.get_arch_list()`` (empty: unknown).
        tensile: :func:`tensile_archs` of the wheel's rocBLAS library (None: unknown).
        override: ``HSA_OVERRIDE_GFX_VERSION`` (None or empty: unset).
    """
    name = gfx.split(":", 1)[0].strip().lower()
    borrowed = gfx_for_override(override) if override else None
    return KernelCoverage(
        gfx=name,
        runs_as=borrowed or name,
        override=override or None,
        arch_list=tuple(a.split(":", 1)[0].lower() for a in arch_list),
        tensile=None if tensile is None else tuple(sorted(tensile)),
    )
