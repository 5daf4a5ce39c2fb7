"""The doctor's ladder, from hardware up to a few real operations on the device.

The layers: hardware, driver, runtime, framework, architecture, distributed, application.

Each check reports PASS, WARN, FAIL or SKIP with what was seen and, for anything not
PASS, the concrete fix. On NVIDIA and CPU-only machines nothing AMD-specific FAILs:
missing AMD parts are SKIPs there. One module per group of layers does the checking
(:mod:`.layers`, :mod:`.framework`, :mod:`.distributed`, :mod:`.application`); this one walks
them in order and gives the verdict.
"""

from __future__ import annotations

from .application import run_application_checks
from .distributed import check_distributed, interfaces_matching
from .framework import TorchSeen, check_architecture, check_framework
from .gfx import FAMILY_OVERRIDES
from .layers import Asked, check_driver, check_hardware, check_runtime
from .report import ENV_VARS, FAIL, LAYERS, PASS, SKIP, WARN, Check, Report
from .system import System

__all__ = [
    "ENV_VARS",
    "FAIL",
    "FAMILY_OVERRIDES",
    "LAYERS",
    "PASS",
    "SKIP",
    "WARN",
    "Check",
    "Report",
    "diagnose",
    "interfaces_matching",
    "run_application_checks",
]


def diagnose(system: System, device: str = "auto", *, app: bool = True) -> Report:
    """Walk the ladder for ``device`` and decide whether it is usable.

    Args:
        system: the machine (the real one, or a fake for tests).
        device: the device spelling to judge, as ``--device`` takes it.
        app: whether to run the application checks (real operations) on the device.

    Returns:
        The report: every check, whether the device is usable, and a one-line verdict.

    Raises:
        ValueError: ``device`` is not a spelling rlamd accepts.
    """
    asked = Asked.of(system, device)
    r = Report(device=device)
    r.environment = {name: system.environ.get(name) for name in ENV_VARS}
    check_hardware(r, system, asked)
    check_driver(r, system, asked)
    rocm, info_gfx = check_runtime(r, system, asked)
    seen = check_framework(r, system, asked, rocm)
    check_architecture(r, system, asked, seen, info_gfx)
    check_distributed(r, system, amd=bool(asked.amd) or bool(seen.hip))
    _finish(r, system, asked, seen, app=app)
    return r


def _finish(r: Report, system: System, asked: Asked, seen: TorchSeen, *, app: bool) -> None:
    """The application layer on the device that will run, and the verdict."""
    blocking = [c for c in r.checks if c.status == FAIL]
    use_gpu = seen.available and asked.wants_gpu and not blocking
    target = f"cuda:{asked.index}" if use_gpu else "cpu"
    if asked.wants_gpu and not use_gpu:
        r.usable = False
        first = blocking[0] if blocking else None
        head = f"GPU not usable: {first.name}: {first.seen}" if first else "GPU not usable"
        r.verdict = head + ". Fix the first FAIL above, then run the doctor again."
        seen_text = f"skipped: no usable GPU for --device {asked.device}"
        r.add("application", "device checks", SKIP, seen_text)
        return
    if use_gpu and asked.index >= (count := system.torch.device_count()):
        r.add(
            "application",
            "device index",
            FAIL,
            f"--device {asked.device} but {count} GPU(s) visible: {'; '.join(seen.names)}",
            "Use an index from the list (visibility variables renumber from 0).",
        )
        r.verdict = "GPU index out of range."
        return
    ok = run_application_checks(r, target) if app else True
    r.usable = ok
    names, index = seen.names, asked.index
    where = "CPU only" if target == "cpu" else (names[index] if index < len(names) else target)
    if not asked.gpus and target == "cpu":
        where = "CPU only (no GPU on this machine)"
    elif asked.nvidia and not asked.amd and target != "cpu":
        where = f"no AMD GPU; CUDA device usable: {where}"
    r.verdict = f"usable: {where}" if ok else f"not usable: {target} failed the application checks"
