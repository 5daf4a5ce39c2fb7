"""``python -m rlamd.doctor``: why ROCm, the driver or PyTorch won't use the GPU, and the fix."""

from __future__ import annotations

from .checks import Check, Report, diagnose
from .known_errors import KNOWN_ERRORS, KnownError, explain
from .system import System

__all__ = ["KNOWN_ERRORS", "Check", "KnownError", "Report", "System", "diagnose", "explain"]
