"""The doctor's distributed layer: what a Ray run on this node would meet.

ROCR_VISIBLE_DEVICES (which Ray refuses on AMD GPUs, or stacks under HIP_VISIBLE_DEVICES)
and the interface ``NCCL_SOCKET_IFNAME`` selects for RCCL.
"""

from __future__ import annotations

from rlamd.visibility import ray_visibility_problem

from .report import PASS, SKIP, WARN, Report
from .system import System

__all__ = ["check_distributed", "interfaces_matching"]


def check_distributed(r: Report, system: System, *, amd: bool) -> None:
    """What a Ray run on this node would meet: ROCR_VISIBLE_DEVICES, and RCCL's interface.

    Args:
        r: the report to add to.
        system: the machine.
        amd: whether the machine has an AMD GPU or a ROCm build of torch.
    """
    env = system.environ
    rocr = env.get("ROCR_VISIBLE_DEVICES")
    refused = ray_visibility_problem(env, amd=True)
    if refused is not None and refused.variable == "ROCR_VISIBLE_DEVICES":
        where = (
            "" if amd else "; this machine has no AMD GPU, so only nodes that have one are affected"
        )
        r.add(
            "distributed", "ROCR_VISIBLE_DEVICES and Ray", WARN, refused.seen + where, refused.fix
        )
    elif rocr is not None:
        r.add(
            "distributed",
            "ROCR_VISIBLE_DEVICES and Ray",
            WARN,
            f"ROCR_VISIBLE_DEVICES={rocr!r} and "
            f"HIP_VISIBLE_DEVICES={env.get('HIP_VISIBLE_DEVICES')!r} are both set: ROCm applies "
            "ROCR_VISIBLE_DEVICES first and HIP_VISIBLE_DEVICES counts within what is left, and "
            "so does the HIP_VISIBLE_DEVICES Ray gives each learner",
            "Keep one: `unset ROCR_VISIBLE_DEVICES` and list the cards in HIP_VISIBLE_DEVICES "
            "(Ray refuses ROCR_VISIBLE_DEVICES alone, and early 2.4x releases refuse it in any "
            "case).",
        )
    _check_ifname(r, system)


def _check_ifname(r: Report, system: System) -> None:
    ifname = system.environ.get("NCCL_SOCKET_IFNAME")
    if ifname is None:
        return
    names = system.net_interfaces()
    if names is None:
        seen = f"{ifname!r}; cannot list this machine's interfaces (/sys/class/net)"
        r.add("distributed", "NCCL_SOCKET_IFNAME", SKIP, seen)
        return
    matched = interfaces_matching(ifname, names)
    if matched:
        r.add("distributed", "NCCL_SOCKET_IFNAME", PASS, f"{ifname!r} selects {', '.join(matched)}")
        return
    r.add(
        "distributed",
        "NCCL_SOCKET_IFNAME",
        WARN,
        f"{ifname!r} selects no interface of this machine ({', '.join(names) or 'none'})",
        "Name the interface that carries this node's cluster address (`ip -br addr`), e.g. "
        "`export NCCL_SOCKET_IFNAME=eth0`, before `ray start`; RCCL cannot connect otherwise.",
    )


def interfaces_matching(spec: str, names: list[str]) -> list[str]:
    """The interfaces RCCL/NCCL would consider for ``NCCL_SOCKET_IFNAME=spec``.

    NCCL's syntax: comma-separated name prefixes; a leading ``=`` means exact names and a
    leading ``^`` excludes the listed ones (then the rest, except ``lo``, are candidates).
    """
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.removeprefix("^")
    exact = spec.startswith("=")
    parts = [p.strip() for p in spec.removeprefix("=").split(",") if p.strip()]

    def hit(name: str) -> bool:
        return name in parts if exact else any(name.startswith(p) for p in parts)

    if exclude:
        return [n for n in names if not hit(n) and n != "lo"]
    return [n for n in names if hit(n)]
