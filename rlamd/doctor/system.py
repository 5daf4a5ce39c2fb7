"""Everything the doctor reads about the machine, behind one object tests can fake.

Files are read below ``root`` (``/`` for real), commands run with a timeout and never
need root, and torch is asked through :class:`rlamd.device.TorchQueries`. Nothing here
changes the system.
"""

from __future__ import annotations

import grp
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rlamd.device import TorchQueries

__all__ = ["GpuOnBus", "System"]

AMD, NVIDIA = "0x1002", "0x10de"
# PCI classes: 0x03xxxx display controllers, 0x12xxxx processing accelerators (Instinct).
_GPU_CLASSES = ("0x03", "0x12")


@dataclass(frozen=True)
class GpuOnBus:
    slot: str
    vendor: str
    device_id: str
    name: str


def _run_real(cmd: list[str], timeout: float) -> tuple[int, str] | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return (124, f"{cmd[0]} did not answer within {timeout:.0f} s")
    except OSError as exc:
        return (126, str(exc))
    return p.returncode, p.stdout + p.stderr


@dataclass
class System:
    """The machine as the doctor sees it (all fields injectable for tests)."""

    root: Path = Path("/")
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    run: Callable[[list[str], float], tuple[int, str] | None] = _run_real
    torch: TorchQueries = field(default_factory=TorchQueries)
    groups: Callable[[], set[str]] | None = None
    access: Callable[[Path], bool] | None = None
    timeout: float = 5.0

    # ------------------------------------------------------------------ files
    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def read(self, p: str | Path) -> str | None:
        path = p if isinstance(p, Path) else self.path(p)
        try:
            return path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None

    def can_use(self, p: Path) -> bool:
        if self.access is not None:
            return self.access(p)
        return os.access(p, os.R_OK | os.W_OK)

    def user_groups(self) -> set[str]:
        if self.groups is not None:
            return self.groups()
        names = set()
        for gid in os.getgroups():
            try:
                names.add(grp.getgrgid(gid).gr_name)
            except KeyError:
                pass
        return names

    # ------------------------------------------------------------------ hardware
    def gpus_on_bus(self) -> list[GpuOnBus]:
        base = self.path("/sys/bus/pci/devices")
        found = []
        if base.is_dir():
            for dev in sorted(base.iterdir()):
                vendor = (self.read(dev / "vendor") or "").lower()
                klass = (self.read(dev / "class") or "").lower()
                if vendor in (AMD, NVIDIA) and klass.startswith(_GPU_CLASSES):
                    device_id = (self.read(dev / "device") or "?").lower()
                    found.append(
                        GpuOnBus(
                            dev.name, vendor, device_id, self._pci_name(dev.name, vendor, device_id)
                        )
                    )
        return found

    def _pci_name(self, slot: str, vendor: str, device_id: str) -> str:
        out = self.run(["lspci", "-s", slot, "-mm"], self.timeout)
        if out and out[0] == 0 and out[1].strip():
            parts = re.findall(r'"([^"]*)"', out[1])
            if len(parts) >= 3:
                return f"{parts[1]} {parts[2]}".strip()
        brand = "AMD" if vendor == AMD else "NVIDIA"
        return f"{brand} GPU (PCI device {device_id})"

    # ------------------------------------------------------------------ driver
    def amdgpu_loaded(self) -> bool:
        return self.path("/sys/module/amdgpu").is_dir()

    def render_nodes(self) -> list[Path]:
        dri = self.path("/dev/dri")
        return sorted(dri.glob("renderD*")) if dri.is_dir() else []

    # ------------------------------------------------------------------ runtime
    def rocm_version(self) -> tuple[str, str] | None:
        """(version, file it was read from), from $ROCM_PATH or /opt/rocm."""
        dirs = [self.environ["ROCM_PATH"]] if self.environ.get("ROCM_PATH") else []
        for d in [*dirs, "/opt/rocm"]:
            text = self.read(self.path(d) / ".info" / "version")
            if text:
                return text.split("-")[0], f"{d.rstrip('/')}/.info/version"
        return None

    def rocminfo_gfx(self) -> tuple[list[str], str] | None:
        """gfx names of GPU agents from rocminfo, or None if rocminfo is missing."""
        out = self.run(["rocminfo"], self.timeout)
        if out is None:
            return None
        rc, text = out
        names = [m for m in re.findall(r"^\s*Name:\s+(gfx[0-9a-f]+)", text, re.MULTILINE)]
        return list(dict.fromkeys(names)), (
            "" if rc == 0 else text.strip().splitlines()[-1] if text.strip() else f"exit {rc}"
        )

    def kfd_gfx(self) -> list[str]:
        """gfx names from the KFD topology (no tool needed).

        ``gfx_target_version 100300`` reads as ``gfx1030``.
        """
        nodes = self.path("/sys/class/kfd/kfd/topology/nodes")
        names = []
        if nodes.is_dir():
            for node in sorted(nodes.iterdir()):
                props = self.read(node / "properties") or ""
                m = re.search(r"gfx_target_version\s+(\d+)", props)
                if m and int(m.group(1)):
                    v = int(m.group(1))
                    major, minor, step = v // 10000, v // 100 % 100, v % 100
                    names.append(
                        f"gfx{major}{minor:x}{step:x}"
                        if major < 10
                        else f"gfx{major}{minor}{step:x}"
                    )
        return names

    def smi(self) -> str | None:
        for cmd in (["amd-smi", "static", "--asic"], ["rocm-smi", "--showproductname"]):
            out = self.run(cmd, self.timeout)
            if out is not None:
                return f"{cmd[0]}: " + (
                    out[1].strip().splitlines()[0] if out[1].strip() else f"exit {out[0]}"
                )
        return None

    # ------------------------------------------------------------------ network
    def net_interfaces(self) -> list[str] | None:
        """This machine's network interface names (``/sys/class/net``), or None if unreadable."""
        net = self.path("/sys/class/net")
        if not net.is_dir():
            return None
        return sorted(p.name for p in net.iterdir())
