"""What the doctor reports: one :class:`Check` per finding, gathered in a :class:`Report`.

Each check has a status (PASS, WARN, FAIL or SKIP), what was seen and, for anything not
PASS, the concrete fix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .known_errors import explain

__all__ = ["ENV_VARS", "FAIL", "LAYERS", "PASS", "SKIP", "WARN", "Check", "Report"]

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
LAYERS = (
    "hardware",
    "driver",
    "runtime",
    "framework",
    "architecture",
    "distributed",
    "application",
)
"""The layers in the order they are checked and printed."""
ENV_VARS = (
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "HSA_OVERRIDE_GFX_VERSION",
    "PYTORCH_HIP_ALLOC_CONF",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_DEBUG",
)
"""The variables the report lists, set or not: they decide which GPU runs and how RCCL connects."""


@dataclass
class Check:
    """One finding of the doctor."""

    layer: str
    """One of ``LAYERS``."""
    name: str
    """What was checked, e.g. ``/dev/kfd``."""
    status: str
    """PASS, WARN, FAIL or SKIP."""
    seen: str
    """What was found, in words."""
    fix: str | None = None
    """What to do about it (None when there is nothing to do)."""
    ms: float | None = None
    """How long an application check took, in milliseconds."""


@dataclass
class Report:
    """Every check of one doctor run, and the verdict on the device asked for."""

    device: str
    """The device spelling the doctor was asked about, e.g. ``auto`` or ``hip:1``."""
    checks: list[Check] = field(default_factory=list)
    """The checks in the order they ran."""
    usable: bool = False
    """Whether the device can run rlamd."""
    verdict: str = ""
    """One line that sums the report up."""
    environment: dict[str, str | None] = field(default_factory=dict)
    """Each of ``ENV_VARS`` and its value, None when it is not set."""

    def add(
        self,
        layer: str,
        name: str,
        status: str,
        seen: str,
        fix: str | None = None,
        ms: float | None = None,
    ) -> Check:
        """Append a check and return it."""
        c = Check(layer, name, status, seen, fix, ms)
        self.checks.append(c)
        return c

    def to_dict(self) -> dict:
        """The report as plain JSON-ready data (what ``--json`` prints)."""
        return {
            "device": self.device,
            "usable": self.usable,
            "verdict": self.verdict,
            "environment": dict(self.environment),
            "checks": [asdict(c) for c in self.checks],
        }

    def first(self, status: str) -> Check | None:
        """The first check with ``status``, or None."""
        return next((c for c in self.checks if c.status == status), None)


def fix_from_table(message: str, fallback: str) -> str:
    """The fixes of the first known error matching ``message``, else ``fallback``."""
    rows = explain(message)
    return " ".join(rows[0].fixes) if rows else fallback
