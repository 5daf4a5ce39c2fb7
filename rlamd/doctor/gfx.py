"""gfx names, and the ``HSA_OVERRIDE_GFX_VERSION`` a consumer card AMD does not list can borrow.

ROCm reads ``HSA_OVERRIDE_GFX_VERSION=MAJOR.MINOR.STEP`` and then runs the card as that ISA
(``10.3.0`` is gfx1030). Consumer Radeon cards that PyTorch's ROCm wheels ship no kernels
for run the kernels of their family's listed card this way: RDNA2 gfx103x (RX 6700 XT is
gfx1031, RX 6600 gfx1032) as gfx1030 with ``10.3.0``, RDNA3 gfx110x (RX 7800/7700 XT are
gfx1101, RX 7600 gfx1102) as gfx1100 with ``11.0.0``. AMD does not support it; it is what
ROCm's issue tracker and user guides give (ROCm/ROCm#2353, ROCm/TheRock#1719), and RDNA3
cards need ``11.0.0``: ``10.3.0`` does not run on them.
"""

from __future__ import annotations

__all__ = ["FAMILY_OVERRIDES", "OVERRIDE_RULE", "gfx_for_override", "override_for"]

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
