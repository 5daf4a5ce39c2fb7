"""What ``--explain`` knows about the machine it runs on, and the fixes that fit it.

:func:`read_facts` reads a :class:`~.system.System` (the KFD topology for every AMD GPU and
its gfx, APU or discrete, ROCm and kernel versions, amdgpu and ttm module parameters, the
kernel command line, WSL, the wheel's targets, the override set). :func:`advice` turns the
``here`` topics a known error names into commands for this machine, from the templates of
``errors/machines.toml``; ``flags`` are the facts an entry's ``machine`` field matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import tomllib

from rlamd.gfx import gfx_for_override, override_for, therock_index

from .system import AMD, System

__all__ = ["TOPICS", "Gpu", "MachineFacts", "advice", "read_facts"]

TOPICS = ("override", "hide_igpu", "apu_gtt", "lockup_timeout", "iommu", "wsl", "driver")
"""The ``here`` topics a known error may name."""
_PARAMS = ("lockup_timeout", "gttsize", "noretry", "cwsr_enable", "ppfeaturemask")


@cache
def _data() -> dict:
    text = (resources.files("rlamd.doctor") / "errors" / "machines.toml").read_text("utf-8")
    return tomllib.loads(text)


@dataclass(frozen=True)
class Gpu:
    index: int
    """Position among the AMD GPUs in KFD (rocminfo, HIP_VISIBLE_DEVICES) order."""
    gfx: str
    apu: bool
    name: str = ""


@dataclass(frozen=True)
class MachineFacts:
    gpus: tuple[Gpu, ...] = ()
    amd_on_bus: int = 0
    rocm: str | None = None
    kernel: str | None = None
    driver: str = "the kernel"
    """``amdgpu-dkms X`` when /sys/module/amdgpu/version exists, else the kernel's own."""
    params: dict[str, str] = field(default_factory=dict)
    """amdgpu module parameters (and ``ttm.pages_limit``) as sysfs shows them."""
    cmdline: str = ""
    wsl: bool = False
    targets: tuple[str, ...] = ()
    override: str | None = None
    ram_gib: float = 0.0
    gtt_bytes: int | None = None

    @property
    def has_amd_gpu(self) -> bool:
        return bool(self.gpus or self.amd_on_bus or self.wsl)

    @property
    def flags(self) -> frozenset[str]:
        """The facts a known error's ``machine`` field names."""
        out = set()
        if any(g.apu for g in self.gpus):
            out.add("apu")
            if any(not g.apu for g in self.gpus):
                out.add("igpu_and_dgpu")
        if self.wsl:
            out.add("wsl")
        return frozenset(out)

    def summary(self) -> str:
        """One line: the GPUs, versions and targets --explain works from."""
        gpus = ", ".join(
            f"{g.index} {g.gfx} {'integrated' if g.apu else 'discrete'}"
            + (f" ({g.name})" if g.name else "")
            for g in self.gpus
        )
        parts = [f"AMD GPUs: {gpus}" if gpus else "no AMD GPU in the KFD topology"]
        parts.append(f"ROCm {self.rocm or 'not installed'}, kernel {self.kernel or '?'}")
        if self.targets:
            parts.append(f"torch targets {','.join(self.targets)}")
        if self.override:
            parts.append(f"HSA_OVERRIDE_GFX_VERSION={self.override}")
        if self.wsl:
            parts.append("WSL")
        return "; ".join(parts)


def _node_gpus(system: System) -> list[tuple[str, bool]]:
    nodes = system.path("/sys/class/kfd/kfd/topology/nodes")
    found = []
    if nodes.is_dir():
        for node in sorted(nodes.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            props = system.read(node / "properties") or ""
            values = dict(re.findall(r"^(\w+)\s+(\d+)", props, re.MULTILINE))
            v = int(values.get("gfx_target_version", 0))
            if not v:
                continue
            major, minor, step = v // 10000, v // 100 % 100, v % 100
            gfx = f"gfx{major}{minor:x}{step:x}" if major < 10 else f"gfx{major}{minor}{step:x}"
            cpu_and_gpu = int(values.get("cpu_cores_count", 0)) and int(values.get("simd_count", 0))
            found.append((gfx, bool(cpu_and_gpu) or gfx in _data()["apu"]["gfx"]))
    return found


def _torch_facts(system: System) -> tuple[tuple[str, ...], list[str]]:
    """The wheel's targets and the names of the devices it sees (empty when unknown)."""
    try:
        if system.torch.hip_version() is None:
            return (), []
        targets = tuple(a.split(":", 1)[0] for a in system.torch.arch_list())
        names = [
            system.torch.device_properties(i).get("name", "")
            for i in range(system.torch.device_count())
        ]
    except Exception:  # no torch, or a broken one: the facts say less
        return (), []
    return targets, names


def read_facts(system: System) -> MachineFacts:
    """This machine as --explain needs it; never raises (a fact it cannot read is left out)."""
    nodes = _node_gpus(system)
    targets, names = _torch_facts(system)
    gpus = tuple(
        Gpu(i, gfx, apu, names[i] if i < len(names) else "") for i, (gfx, apu) in enumerate(nodes)
    )
    params = {}
    for p in _PARAMS:
        value = system.read(f"/sys/module/amdgpu/parameters/{p}")
        if value is not None:
            params[p] = value
    pages = system.read("/sys/module/ttm/parameters/pages_limit")
    if pages is not None:
        params["ttm.pages_limit"] = pages
    kernel = system.read("/proc/sys/kernel/osrelease")
    meminfo = system.read("/proc/meminfo") or ""
    mem = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
    version = system.read("/sys/module/amdgpu/version")
    rocm = system.rocm_version()
    gtt = [
        system.read(p) for p in system.root.glob("sys/class/drm/card*/device/mem_info_gtt_total")
    ]
    return MachineFacts(
        gpus=gpus,
        amd_on_bus=sum(g.vendor == AMD for g in system.gpus_on_bus()),
        rocm=rocm[0] if rocm else None,
        kernel=kernel,
        driver=f"amdgpu-dkms {version}" if version else "the kernel",
        params=params,
        cmdline=system.read("/proc/cmdline") or "",
        wsl=bool(kernel and "microsoft" in kernel.lower()) or system.path("/dev/dxg").exists(),
        targets=targets,
        override=system.environ.get("HSA_OVERRIDE_GFX_VERSION") or None,
        ram_gib=int(mem.group(1)) / 2**20 if mem else 0.0,
        gtt_bytes=next((int(g) for g in gtt if g and g.isdigit()), None),
    )


def _override(f: MachineFacts) -> list[tuple[str, dict]]:
    out = []
    for g in sorted(f.gpus, key=lambda g: g.apu):  # the discrete card first
        fill = {"index": g.index, "gfx": g.gfx, "name": g.name or g.gfx, "override": f.override}
        value = override_for(g.gfx)
        listed = g.gfx in f.targets
        if listed:
            out.append(("override_listed_but_set" if f.override else "override_listed", fill))
        elif value and f.override and f.override != value:
            out.append(("override_wrong", {**fill, "value": value}))
        elif value and (not f.override or gfx_for_override(f.override) not in f.targets):
            out.append(("override_needed", {**fill, "value": value}))
        elif not value and therock_index(g.gfx):
            out.append(("therock", {**fill, "index": therock_index(g.gfx)}))
    return out


def _hide_igpu(f: MachineFacts) -> list[tuple[str, dict]]:
    if "igpu_and_dgpu" not in f.flags:
        return []
    keep = [g for g in f.gpus if not g.apu]
    return [
        (
            "hide_igpu",
            {
                "keep": ",".join(str(g.index) for g in keep),
                "dgpus": ", ".join(f"GPU {g.index} {g.gfx}" for g in keep),
                "igpus": ", ".join(f"GPU {g.index} {g.gfx}" for g in f.gpus if g.apu),
            },
        )
    ]


def _apu_gtt(f: MachineFacts) -> list[tuple[str, dict]]:
    if "apu" not in f.flags or not f.ram_gib:
        return []
    want = int(f.ram_gib * 3 / 4)
    gtt = f"{f.gtt_bytes / 2**30:.0f} GiB" if f.gtt_bytes else "an unknown amount"
    fill = {"gtt_gib": gtt, "want_gib": want, "ram_gib": f"{f.ram_gib:.0f}", "pages": want * 262144}
    return [("apu_gtt", fill)]


def _simple(f: MachineFacts, topic: str) -> list[tuple[str, dict]]:
    if topic == "lockup_timeout" and "lockup_timeout" in f.params:
        return [("lockup_timeout", {"lockup_timeout": f.params["lockup_timeout"] or "empty"})]
    if topic == "iommu" and f.cmdline:
        has = "iommu=pt" in f.cmdline.split()
        return [("iommu_present" if has else "iommu_missing", {"cmdline": f.cmdline[:120]})]
    if topic == "wsl" and f.wsl:
        return [("wsl", {"kernel": f.kernel or "?"})]
    if topic == "driver" and f.kernel:
        return [
            ("driver", {"kernel": f.kernel, "rocm": f.rocm or "not installed", "driver": f.driver})
        ]
    return []


def advice(facts: MachineFacts, topics: tuple[str, ...]) -> list[str]:
    """The lines for this machine of each topic in ``topics`` (in that order)."""
    texts = _data()["advice"]
    made = {"override": _override, "hide_igpu": _hide_igpu, "apu_gtt": _apu_gtt}
    lines = []
    for topic in topics:
        items = made[topic](facts) if topic in made else _simple(facts, topic)
        lines += [texts[name].format_map(fill) for name, fill in items]
    return lines
