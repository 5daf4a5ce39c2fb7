"""The gfx tables the doctor prints, from :mod:`rlamd.gfx` (where the run's preflight reads
them too): ``HSA_OVERRIDE_GFX_VERSION`` per family, and which ISA an override runs as."""

from __future__ import annotations

from rlamd.gfx import FAMILY_OVERRIDES, OVERRIDE_RULE, gfx_for_override, override_for

__all__ = ["FAMILY_OVERRIDES", "OVERRIDE_RULE", "gfx_for_override", "override_for"]
