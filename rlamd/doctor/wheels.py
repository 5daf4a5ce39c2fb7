"""Which ROCm wheel index PyTorch publishes for a torch release, and which host runs it.

The one table that ``scripts/setup.sh`` and the doctor both read. setup.sh runs before
rlamd (and torch) are installed, so it runs this file by path
(``python rlamd/doctor/wheels.py pick --torch 2.13.0 --rocm 6.2.4``): it imports only the
standard library and no other rlamd module, and keeps Python 3.8 syntax.

What PyTorch publishes. Each torch release is built for one or two ROCm versions only,
one index per version (``https://download.pytorch.org/whl/rocmX.Y[.Z]``). The pairs below
are the ones pytorch.org's install commands name: "Installing previous versions of
PyTorch" (https://pytorch.org/get-started/previous-versions/, e.g. 2.6.0 -> rocm6.1 and
rocm6.2.4, 2.9.0 and 2.9.1 -> rocm6.4, 2.10.0 -> rocm7.1, 2.11.0 and 2.12.0 -> rocm7.2)
and, for 2.13.0, the "Start locally" selector at its release (ROCm 7.2; recorded in
https://github.com/PyTorchKR/pytorch.kr/pull/102, and ``torch 2.13.0+rocm7.2`` wheels
are in public use). A pair that is not listed may exist (pytorch.org names one index per
release since 2.7), but setup.sh never picks a pair this table does not confirm.

What the host needs. A ROCm wheel carries its own ROCm user-space libraries; the host
supplies the amdgpu kernel driver. AMD supports a kernel driver with user space up to two
releases apart ("User and kernel-space support matrix",
https://rocm.docs.amd.com/projects/install-on-linux/en/latest/reference/user-kernel-space-compat-matrix.html;
release order 5.6, 5.7, 6.0, 6.1, 6.2, 6.3, 6.4, 7.0, 7.1, 7.2), and ROCm 7.2.x lists the
drivers of ROCm 7.0 to 7.2 (amdgpu 30.10-30.30, ROCm 7.2.2 release notes,
https://github.com/ROCm/legacy-rocm-build/releases/tag/rocm-7.2.2). So ``OLDEST_HOST``
gives, per index, the oldest host ROCm (the driver installed with it) known to run it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

__all__ = [
    "INDEX_BASE",
    "OLDEST_HOST",
    "TORCH_ROCM_INDEXES",
    "HostTooOld",
    "Pick",
    "UnknownTorch",
    "index_url",
    "main",
    "newest_index",
    "older_pin",
    "pick",
    "version_tuple",
]

INDEX_BASE = "https://download.pytorch.org/whl/"

TORCH_ROCM_INDEXES = {
    "2.13.0": ("rocm7.2",),
    "2.12.0": ("rocm7.2",),
    "2.11.0": ("rocm7.2",),
    "2.10.0": ("rocm7.1",),
    "2.9.1": ("rocm6.4",),
    "2.9.0": ("rocm6.4",),
    "2.8.0": ("rocm6.4",),
    "2.7.1": ("rocm6.3",),
    "2.7.0": ("rocm6.3",),
    "2.6.0": ("rocm6.1", "rocm6.2.4"),
    "2.5.1": ("rocm6.1", "rocm6.2"),
    "2.5.0": ("rocm6.1", "rocm6.2"),
    "2.4.1": ("rocm6.1",),
    "2.4.0": ("rocm6.1",),
    "2.3.1": ("rocm6.0",),
    "2.3.0": ("rocm6.0",),
}
"""torch release -> the ROCm indexes pytorch.org names for it (rlamd needs torch >= 2.3)."""

OLDEST_HOST = {
    "rocm7.2": "7.0",
    "rocm7.1": "6.4",
    "rocm6.4": "6.2",
    "rocm6.3": "6.1",
    "rocm6.2.4": "6.0",
    "rocm6.2": "6.0",
    "rocm6.1": "5.7",
    "rocm6.0": "5.6",
}
"""ROCm index -> the oldest host ROCm (its amdgpu driver) that runs the wheels (two releases)."""

DRIVER_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/"
THEROCK_DOCS = "https://github.com/ROCm/TheRock/blob/main/RELEASES.md"
RADEON_DOCS = (
    "https://rocm.docs.amd.com/projects/radeon-ryzen/en/latest/docs/install/installrad/"
    "native_linux/install-pytorch.html"
)


def version_tuple(text: str) -> tuple[int, ...]:
    """``6.2.4-120`` -> ``(6, 2, 4)``; ``rocm7.2`` -> ``(7, 2)``.

    Raises:
        ValueError: no leading dotted whole numbers.
    """
    core = text.strip().lower()
    if core.startswith("rocm"):
        core = core[4:]
    core = core.split("-")[0].split("+")[0]
    parts = []
    for piece in core.split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    if not parts:
        raise ValueError(f"{text!r} is not a ROCm version (accepted: X.Y or X.Y.Z, e.g. 6.4.1)")
    return tuple(parts)


def index_url(index: str) -> str:
    """``rocm7.2`` -> ``https://download.pytorch.org/whl/rocm7.2``."""
    return INDEX_BASE + index


def newest_index(torch_version: str) -> str:
    """The newest ROCm index the table lists for ``torch_version``.

    Raises:
        UnknownTorch: the table has no ROCm wheel for that release.
    """
    return max(_indexes(torch_version), key=version_tuple)


@dataclass(frozen=True)
class Pick:
    """The index setup.sh installs ``torch`` from, and why."""

    torch: str
    """The torch release, e.g. ``2.13.0``."""
    index: str
    """The index name, e.g. ``rocm7.2``."""
    reason: str
    """One sentence: why this index for this host."""

    @property
    def url(self) -> str:
        return index_url(self.index)


class UnknownTorch(ValueError):
    """The table lists no ROCm wheel for this torch release."""


class HostTooOld(ValueError):
    """Every ROCm wheel of this torch release needs a newer host driver than this one."""


def _indexes(torch_version: str) -> tuple[str, ...]:
    found = TORCH_ROCM_INDEXES.get(torch_version.strip().split("+")[0])
    if found is None:
        known = ", ".join(TORCH_ROCM_INDEXES)
        raise UnknownTorch(
            f"torch {torch_version} has no ROCm wheel in rlamd's table (rlamd/doctor/wheels.py); "
            f"releases it lists: {known}. Nearest: {next(iter(TORCH_ROCM_INDEXES))}. "
            "Give RLAMD_TORCH_INDEX_URL=https://download.pytorch.org/whl/rocmX.Y to use an "
            "index you know has it."
        )
    return found


def pick(torch_version: str, host_rocm: str | None) -> Pick:
    """The ROCm index for ``torch_version`` on a host with ROCm ``host_rocm``.

    The host's own ``X.Y`` when the table lists it for that release, otherwise the newest
    index whose oldest supported host is not newer than the host. ``None`` (no ROCm version
    found) gives the newest index of the release.

    Raises:
        UnknownTorch: the table lists no ROCm wheel for ``torch_version``.
        HostTooOld: every index of the release needs a newer driver; the message is the
            paragraph setup.sh prints (upgrade, an older pin, or AMD's own wheels).
        ValueError: ``host_rocm`` is not a version.
    """
    indexes = _indexes(torch_version)
    chosen = _choose(torch_version, indexes, host_rocm)
    if chosen is None:
        raise HostTooOld(_too_old(torch_version, str(host_rocm), indexes))
    return chosen


def _choose(torch_version: str, indexes: tuple[str, ...], host_rocm: str | None) -> Pick | None:
    if host_rocm is None:
        best = max(indexes, key=version_tuple)
        return Pick(
            torch_version,
            best,
            f"no host ROCm version found: the newest index for torch {torch_version}, which "
            f"needs the amdgpu driver of ROCm {OLDEST_HOST[best]} or newer",
        )
    host = version_tuple(host_rocm)
    same = [i for i in indexes if version_tuple(i)[:2] == host[:2]]
    if same:
        return Pick(torch_version, max(same, key=version_tuple), f"published for ROCm {host_rocm}")
    usable = [i for i in indexes if version_tuple(OLDEST_HOST[i]) <= host]
    if not usable:
        return None
    best = max(usable, key=version_tuple)
    return Pick(
        torch_version,
        best,
        f"torch {torch_version} has no wheel for ROCm {'.'.join(map(str, host[:2]))}; "
        f"{best} runs on its driver (ROCm {OLDEST_HOST[best]} or newer; the wheel brings "
        "its own ROCm libraries)",
    )


def older_pin(host_rocm: str) -> Pick | None:
    """The newest torch release (with its index) whose wheels run on this host, or None."""
    for version, indexes in TORCH_ROCM_INDEXES.items():
        chosen = _choose(version, indexes, host_rocm)
        if chosen is not None:
            return chosen
    return None


def _too_old(torch_version: str, host_rocm: str, indexes: tuple[str, ...]) -> str:
    need = min((OLDEST_HOST[i] for i in indexes), key=version_tuple)
    urls = ", ".join(index_url(i) for i in indexes)
    older = older_pin(host_rocm)
    if older is not None:
        alt = (
            f"(2) pin an older torch that this driver runs (rlamd is tested on "
            f"{torch_version}): `RLAMD_TORCH_VERSION={older.torch} "
            f"RLAMD_TORCH_INDEX_URL={older.url} bash scripts/setup.sh`; "
        )
    else:
        alt = "(2) no torch release rlamd supports (2.3 or newer) has a wheel for this driver; "
    return (
        f"torch {torch_version} has ROCm wheels only at {urls}, which need the amdgpu driver "
        f"of ROCm {need} or newer, and this host has ROCm {host_rocm}. "
        f"Either (1) upgrade the driver and ROCm to {need} or newer ({DRIVER_DOCS}; on "
        "Ubuntu 24.04: `wget https://repo.radeon.com/amdgpu-install/7.2/ubuntu/noble/"
        "amdgpu-install_7.2.70200-1_all.deb && sudo apt install "
        "./amdgpu-install_7.2.70200-1_all.deb && sudo apt update && sudo apt install "
        "amdgpu-dkms rocm && sudo reboot`), then run setup.sh again; "
        f"{alt}or (3) use AMD's own wheels, which also cover Radeon and new gfx cards "
        f"(TheRock's per-gfx indexes, {THEROCK_DOCS}: gfx1151, gfx120X-all, gfx110X-all, "
        "gfx103X-all): `.venv/bin/python -m pip install --pre torch --index-url "
        "https://rocm.nightlies.amd.com/v2/gfx1151/ && RLAMD_TORCH=skip bash scripts/setup.sh`"
        f" (your gfx in place of gfx1151; Radeon wheels from repo.radeon.com: {RADEON_DOCS})."
    )


def main(argv: list[str] | None = None) -> int:
    """``wheels.py pick --torch V [--rocm X.Y.Z]``: print the index URL, then the reason.

    Exit status 0 with two lines on stdout; 3 when the host is too old (the paragraph on
    stderr); 4 when the table lacks the release; 2 for a malformed version.
    """
    p = argparse.ArgumentParser(prog="wheels.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("pick", help="the ROCm index setup.sh installs torch from")
    q.add_argument("--torch", required=True, help="torch release, e.g. 2.13.0")
    q.add_argument("--rocm", default="", help="host ROCm version ('' when none was found)")
    args = p.parse_args(argv)
    try:
        chosen = pick(args.torch, args.rocm or None)
    except HostTooOld as exc:
        print(str(exc), file=sys.stderr)
        return 3
    except UnknownTorch as exc:
        print(str(exc), file=sys.stderr)
        return 4
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(chosen.url)
    print(chosen.reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
