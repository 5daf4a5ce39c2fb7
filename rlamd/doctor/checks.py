"""The doctor's ladder: hardware, driver, runtime, framework, architecture, application.

Each check reports PASS, WARN, FAIL or SKIP with what was seen and, for anything not
PASS, the concrete fix. On NVIDIA and CPU-only machines nothing AMD-specific FAILs:
missing AMD parts are SKIPs there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from rlamd.device import parse_device_spec

from .known_errors import explain
from .system import AMD, NVIDIA, System

__all__ = ["FAMILY_OVERRIDES", "Check", "Report", "diagnose"]

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
LAYERS = ("hardware", "driver", "runtime", "framework", "architecture", "application")

# Consumer cards AMD's wheels do not list, and the ISA of their family that they can borrow
# (unofficial): RDNA2 -> gfx1030, RDNA3 -> gfx1100, Vega APUs -> gfx900.
FAMILY_OVERRIDES = {
    **{f"gfx103{c}": "10.3.0" for c in "123456"},
    **{f"gfx110{c}": "11.0.0" for c in "123"},
    "gfx1150": "11.0.0", "gfx1151": "11.0.0", "gfx1152": "11.0.0",
    "gfx902": "9.0.0", "gfx909": "9.0.0", "gfx90c": "9.0.0",
}  # fmt: skip
ROCM_INDEX = "https://download.pytorch.org/whl/rocm{}"


@dataclass
class Check:
    layer: str
    name: str
    status: str
    seen: str
    fix: str | None = None
    ms: float | None = None


@dataclass
class Report:
    device: str
    checks: list[Check] = field(default_factory=list)
    usable: bool = False
    verdict: str = ""

    def add(
        self,
        layer: str,
        name: str,
        status: str,
        seen: str,
        fix: str | None = None,
        ms: float | None = None,
    ) -> Check:
        c = Check(layer, name, status, seen, fix, ms)
        self.checks.append(c)
        return c

    def to_dict(self) -> dict:
        return {"device": self.device, "usable": self.usable, "verdict": self.verdict,
                "checks": [asdict(c) for c in self.checks]}  # fmt: skip

    def first(self, status: str) -> Check | None:
        return next((c for c in self.checks if c.status == status), None)


def _gfx_for_override(value: str) -> str | None:
    """``10.3.0`` -> ``gfx1030``; ``9.0.0`` -> ``gfx900``; ``9.0.10`` -> ``gfx90a``."""
    try:
        major, minor, step = (int(x) for x in value.strip().split("."))
    except ValueError:
        return None
    return f"gfx{major}{minor:x}{step:x}" if major < 10 else f"gfx{major}{minor}{step:x}"


def _fix_from_table(message: str, fallback: str) -> str:
    rows = explain(message)
    return " ".join(rows[0].fixes) if rows else fallback


def diagnose(system: System, device: str = "auto", *, app: bool = True) -> Report:
    """Walk the ladder for ``device`` and decide whether it is usable."""
    kind, index = parse_device_spec(device)
    index = index or 0
    r = Report(device=device)
    env = system.environ
    gpus = system.gpus_on_bus()
    amd = [g for g in gpus if g.vendor == AMD]
    nvidia = [g for g in gpus if g.vendor == NVIDIA]
    wants_amd = kind in ("hip", "rocm") or (kind in ("auto", "gpu") and bool(amd))
    wants_gpu = kind in ("cuda", "hip", "rocm", "gpu") or (kind == "auto" and bool(gpus))

    # ---------------------------------------------------------------- hardware
    if amd:
        r.add(
            "hardware", "AMD GPU on the PCI bus", PASS, "; ".join(f"{g.slot} {g.name}" for g in amd)
        )
    elif nvidia:
        r.add("hardware", "AMD GPU on the PCI bus", SKIP,
              f"no AMD GPU; NVIDIA: {'; '.join(g.name for g in nvidia)}")  # fmt: skip
    elif not system.path("/sys/bus/pci/devices").is_dir():
        r.add("hardware", "AMD GPU on the PCI bus", WARN if wants_amd else SKIP,
              "cannot read /sys/bus/pci (container without sysfs?)",
              "Run on the host, or start the container with /sys mounted." if wants_amd else None)  # fmt: skip
    else:
        r.add("hardware", "GPU on the PCI bus", FAIL if wants_gpu else SKIP,
              "no GPU on the PCI bus: CPU only",
              "Check the card is seated and powered (`lspci | grep -iE 'vga|display|accel'`); in a VM or "
              "container, pass the GPU through." if wants_gpu else None)  # fmt: skip

    # ---------------------------------------------------------------- driver
    if amd:
        if system.amdgpu_loaded():
            r.add("driver", "amdgpu kernel module", PASS, "loaded")
        else:
            r.add("driver", "amdgpu kernel module", FAIL, "not loaded (/sys/module/amdgpu missing)",
                  "Load it: `sudo modprobe amdgpu`; if that fails install the driver of your ROCm release "
                  "(amdgpu-dkms) and read `sudo dmesg | grep -i amdgpu`.")  # fmt: skip
        groups = system.user_groups()
        group_fix = "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`, then log in again."
        kfd = system.path("/dev/kfd")
        if not kfd.exists():
            r.add("driver", "/dev/kfd", FAIL, "missing",
                  "The ROCm kernel driver (KFD) is not active: load amdgpu (above); in a container pass "
                  "`--device=/dev/kfd --device=/dev/dri`.")  # fmt: skip
        elif system.can_use(kfd):
            r.add("driver", "/dev/kfd", PASS, "present, read/write for this user")
        else:
            r.add("driver", "/dev/kfd", FAIL,
                  f"present but not read/write for this user (groups: {', '.join(sorted(groups)) or 'none'})", group_fix)  # fmt: skip
        nodes = system.render_nodes()
        if not nodes:
            r.add(
                "driver",
                "/dev/dri/renderD*",
                FAIL,
                "no render nodes",
                "Load amdgpu; in a container pass `--device=/dev/dri`.",
            )
        else:
            denied = [n.name for n in nodes if not system.can_use(n)]
            if denied:
                r.add(
                    "driver",
                    "/dev/dri/renderD*",
                    FAIL,
                    f"not read/write for this user: {', '.join(denied)}",
                    group_fix,
                )
            else:
                r.add("driver", "/dev/dri/renderD*", PASS, ", ".join(n.name for n in nodes))
    else:
        r.add("driver", "amdgpu, /dev/kfd, /dev/dri", SKIP, "no AMD GPU")

    # ---------------------------------------------------------------- runtime
    rocm = system.rocm_version()
    info_gfx: list[str] = []
    if amd:
        if rocm:
            r.add("runtime", "ROCm version", PASS, f"ROCm {rocm[0]} ({rocm[1]})")
        else:
            r.add("runtime", "ROCm version", WARN, "no system ROCm found ($ROCM_PATH, /opt/rocm)",
                  "PyTorch's ROCm wheels bring their own runtime, so training can work without it; install "
                  "ROCm for rocminfo/rocm-smi and the matching kernel driver.")  # fmt: skip
        got = system.rocminfo_gfx()
        if got is None:
            info_gfx = system.kfd_gfx()
            r.add("runtime", "rocminfo agents", SKIP if info_gfx else WARN,
                  f"rocminfo not installed; KFD topology: {', '.join(info_gfx) or 'no GPU nodes'}")  # fmt: skip
        else:
            info_gfx, err = got
            if err:
                r.add("runtime", "rocminfo agents", FAIL, f"rocminfo failed: {err}",
                      _fix_from_table(err, "Fix the driver layer above first."))  # fmt: skip
            elif info_gfx:
                r.add("runtime", "rocminfo agents", PASS, ", ".join(info_gfx))
            else:
                r.add("runtime", "rocminfo agents", FAIL, "rocminfo lists no GPU agent",
                      "The runtime cannot see the card: fix the driver layer, or set HSA_OVERRIDE_GFX_VERSION for an unlisted card.")  # fmt: skip
        smi = system.smi()
        if smi:
            r.add("runtime", "rocm-smi / amd-smi", PASS, smi)
    else:
        r.add("runtime", "ROCm", SKIP, f"no AMD GPU{f'; ROCm {rocm[0]} installed' if rocm else ''}")

    # ---------------------------------------------------------------- framework
    t = system.torch
    hip, cuda = t.hip_version(), t.cuda_version()
    build = f"ROCm/HIP {hip}" if hip else (f"CUDA {cuda}" if cuda else "CPU-only")
    rocm_mm = ".".join(rocm[0].split(".")[:2]) if rocm else "6.4"
    wheel_fix = (f"Install a ROCm build: `pip uninstall -y torch && pip install torch --index-url "
                 f"{ROCM_INDEX.format(rocm_mm)}` (or `RLAMD_TORCH=rocm bash scripts/setup.sh`).")  # fmt: skip
    if amd and not hip:
        r.add(
            "framework",
            "PyTorch build",
            FAIL,
            f"torch {t.torch_version()} is a {build} build on an AMD machine",
            wheel_fix,
        )
    elif nvidia and not amd and not cuda and wants_gpu:
        r.add("framework", "PyTorch build", FAIL, f"torch {t.torch_version()} is a {build} build on an NVIDIA machine",
              "Install a CUDA build: `pip install torch` (Linux wheels on PyPI are CUDA builds).")  # fmt: skip
    elif kind in ("hip", "rocm") and not hip:
        r.add(
            "framework",
            "PyTorch build",
            FAIL,
            f"torch {t.torch_version()} is a {build} build; --device {device} needs ROCm",
            wheel_fix,
        )
    else:
        r.add("framework", "PyTorch build", PASS, f"torch {t.torch_version()}, {build}")
    if hip and rocm:
        th, sr = ".".join(hip.split(".")[:2]), ".".join(rocm[0].split(".")[:2])
        if th != sr:
            r.add("framework", "torch HIP vs system ROCm", WARN, f"torch built for HIP {th}, system ROCm {sr}",
                  f"Usually works (the wheel carries its runtime) if the driver is new enough; for a match install from "
                  f"{ROCM_INDEX.format(sr)}.")  # fmt: skip
        else:
            r.add("framework", "torch HIP vs system ROCm", PASS, f"both {th}")
    vis = {
        v: env[v]
        for v in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
        if v in env
    }
    hiding = [f"{k}={v!r}" for k, v in vis.items() if v.strip() in ("", "-1")]
    if hiding and wants_gpu:
        r.add("framework", "visibility variables", FAIL, f"{', '.join(hiding)} hides every GPU",
              f"Unset it (`unset {hiding[0].split('=')[0]}`) or list the cards to use, e.g. HIP_VISIBLE_DEVICES=0.")  # fmt: skip
    elif (
        "HIP_VISIBLE_DEVICES" in vis
        and "CUDA_VISIBLE_DEVICES" in vis
        and vis["HIP_VISIBLE_DEVICES"] != vis["CUDA_VISIBLE_DEVICES"]
    ):
        r.add("framework", "visibility variables", WARN,
              f"HIP_VISIBLE_DEVICES={vis['HIP_VISIBLE_DEVICES']!r} and CUDA_VISIBLE_DEVICES={vis['CUDA_VISIBLE_DEVICES']!r} differ",
              "On ROCm both apply one after the other; keep one of them (HIP_VISIBLE_DEVICES).")  # fmt: skip
    elif vis:
        r.add(
            "framework",
            "visibility variables",
            PASS,
            ", ".join(f"{k}={v!r}" for k, v in vis.items()),
        )
    available = (hip or cuda) and t.gpu_available() and t.device_count() > 0
    names: list[str] = []
    torch_gfx: list[str] = []
    if available:
        for i in range(t.device_count()):
            props = t.device_properties(i)
            names.append(
                f"{i}: {props['name']}"
                + (f" ({props['arch'].split(':')[0]})" if props.get("arch") else "")
            )
            if props.get("arch"):
                torch_gfx.append(props["arch"].split(":")[0])
        r.add(
            "framework",
            "torch sees the GPU",
            PASS,
            f"{t.device_count()} device(s): {'; '.join(names)}",
        )
    elif hip or cuda:
        status = FAIL if wants_gpu else SKIP
        r.add("framework", "torch sees the GPU", status, f"{build} build, torch.cuda.is_available() is False",
              _fix_from_table("No HIP GPUs are available" if hip else "torch.cuda.is_available() False", "")
              if status == FAIL else None)  # fmt: skip
    else:
        r.add("framework", "torch sees the GPU", SKIP if not wants_gpu else FAIL, "CPU-only build: CPU only",
              None if not wants_gpu else wheel_fix if amd or kind in ("hip", "rocm") else "Install a GPU build of PyTorch.")  # fmt: skip

    # ---------------------------------------------------------------- architecture
    override = env.get("HSA_OVERRIDE_GFX_VERSION")
    if amd and hip:
        shipped = t.arch_list() if hasattr(t, "arch_list") else []
        cards = torch_gfx or info_gfx or system.kfd_gfx()
        for gfx in dict.fromkeys(cards):
            supported = gfx in shipped
            if override:
                borrowed = _gfx_for_override(override)
                if supported and borrowed == gfx:
                    r.add("architecture", gfx, PASS, f"{gfx} is in this torch's targets")
                elif supported:
                    r.add("architecture", gfx, WARN, f"{gfx} is supported, yet HSA_OVERRIDE_GFX_VERSION={override} makes it run as {borrowed}",
                          "Unset HSA_OVERRIDE_GFX_VERSION: this card does not need it.")  # fmt: skip
                elif borrowed in shipped:
                    r.add("architecture", gfx, WARN, f"{gfx} is not in this torch's targets; HSA_OVERRIDE_GFX_VERSION={override} runs it as {borrowed}",
                          "Unofficial and unsupported by AMD: if kernels crash, try a ROCm wheel that lists this card.")  # fmt: skip
                else:
                    r.add("architecture", gfx, FAIL, f"HSA_OVERRIDE_GFX_VERSION={override} ({borrowed}) is not among this torch's targets either",
                          f"Use {FAMILY_OVERRIDES.get(gfx, 'the version of a listed card of the same family')} for {gfx}.")  # fmt: skip
            elif supported:
                r.add("architecture", gfx, PASS, f"{gfx} is in this torch's targets")
            elif gfx in FAMILY_OVERRIDES:
                r.add("architecture", gfx, FAIL, f"{gfx} is not in this torch's targets ({', '.join(shipped) or 'unknown'})",
                      f"Set `export HSA_OVERRIDE_GFX_VERSION={FAMILY_OVERRIDES[gfx]}` before starting Python "
                      "(unofficial: AMD does not support it, but it is how consumer cards of this family run ROCm).")  # fmt: skip
            else:
                r.add("architecture", gfx, FAIL, f"{gfx} is not in this torch's targets ({', '.join(shipped) or 'unknown'})",
                      "No known override fits this card: use a PyTorch/ROCm release that lists it.")  # fmt: skip
        if not cards:
            r.add(
                "architecture",
                "gfx",
                SKIP,
                "no gfx name found (rocminfo, KFD topology and torch all silent)",
            )
    elif override and not amd:
        r.add("architecture", "HSA_OVERRIDE_GFX_VERSION", WARN, f"set to {override} on a machine without an AMD GPU",
              "Unset it.")  # fmt: skip
    else:
        r.add("architecture", "gfx targets", SKIP, "no AMD GPU with a ROCm build")

    # ---------------------------------------------------------------- verdict and application
    blocking = [c for c in r.checks if c.status == FAIL]
    use_gpu = bool(available) and wants_gpu and not blocking
    target = f"cuda:{index}" if use_gpu else "cpu"
    if wants_gpu and not use_gpu:
        r.usable = False
        first = blocking[0] if blocking else None
        r.verdict = (f"GPU not usable: {first.name}: {first.seen}" if first else "GPU not usable") + \
            ". Fix the first FAIL above, then run the doctor again."  # fmt: skip
        r.add("application", "device checks", SKIP, f"skipped: no usable GPU for --device {device}")
        return r
    if use_gpu and index >= t.device_count():
        r.add("application", "device index", FAIL, f"--device {device} but {t.device_count()} GPU(s) visible: {'; '.join(names)}",
              "Use an index from the list (visibility variables renumber from 0).")  # fmt: skip
        r.verdict = "GPU index out of range."
        return r
    ok = run_application_checks(r, target) if app else True
    r.usable = ok
    where = "CPU only" if target == "cpu" else f"{names[index] if index < len(names) else target}"
    if not gpus and target == "cpu":
        where = "CPU only (no GPU on this machine)"
    elif nvidia and not amd and target != "cpu":
        where = f"no AMD GPU; CUDA device usable: {where}"
    r.verdict = f"usable: {where}" if ok else f"not usable: {target} failed the application checks"
    return r


def _timed(r: Report, name: str, fn: Callable[[], str], device: str) -> bool:
    import torch

    t0 = time.perf_counter()
    try:
        seen = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as exc:  # the first error is caught and explained
        msg = f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        r.add(
            "application",
            name,
            FAIL,
            msg,
            _fix_from_table(str(exc), "See the message; run with --json for a bug report."),
        )
        return False
    r.add("application", name, PASS, seen, ms=(time.perf_counter() - t0) * 1e3)
    return True


def run_application_checks(r: Report, device: str) -> bool:
    """Allocate, copy, matmul, conv fwd/bwd, autocast, one replay sample and one DQN update."""
    import numpy as np
    import torch

    dev = torch.device(device)

    def alloc() -> str:
        x = torch.empty(16 * 2**20, dtype=torch.float32, device=dev)
        x.fill_(1.0)
        return "64 MiB allocated and filled"

    def copy() -> str:
        host = torch.arange(4 * 2**20, dtype=torch.float32)
        back = host.to(dev).cpu()
        if not torch.equal(host, back):
            raise RuntimeError("host -> device -> host copy changed the data")
        return "16 MiB host -> device -> host, identical"

    def matmul() -> str:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
        err = ((a.to(dev) @ b.to(dev)).cpu() - a @ b).abs().max().item()
        if err > 1e-2:
            raise RuntimeError(f"512x512 matmul differs from the CPU's by {err:.3g}")
        return f"512x512 fp32, max error vs CPU {err:.1e}"

    def conv() -> str:
        layer = torch.nn.Conv2d(4, 32, 8, stride=4).to(dev)
        x = torch.rand(8, 4, 84, 84, device=dev, requires_grad=True)
        layer(x).square().mean().backward()
        if not torch.isfinite(x.grad).all():
            raise RuntimeError("conv backward produced non-finite gradients")
        return "Conv2d 4->32 on 8x4x84x84, forward + backward"

    def autocast(dtype: torch.dtype) -> Callable[[], str]:
        def run() -> str:
            a = torch.randn(256, 256, device=dev)
            with torch.autocast(dev.type, dtype=dtype):
                y = a @ a
            if y.dtype != dtype or not torch.isfinite(y).all():
                raise RuntimeError(f"autocast {dtype} gave {y.dtype} / non-finite values")
            return f"matmul under autocast -> {str(dtype).removeprefix('torch.')}"

        return run

    def replay() -> str:
        from rlamd.replay import PrioritizedReplayBuffer

        buf = PrioritizedReplayBuffer(
            8 * 64, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, device=dev
        )
        z = np.zeros(8, dtype=bool)
        frames = np.random.default_rng(0).integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
        for _ in range(16):
            buf.add(frames, np.zeros(8), np.ones(8, np.float32), z, z)
        b = buf.sample(32)
        buf.update_priorities(b.indices, b.returns.abs() + 0.1)
        return f"prioritized sample of 32 Atari stacks + update on {dev}"

    def dqn_update() -> str:
        from rlamd.agents.dqn import DQN, DQNConfig
        from rlamd.precision import Precision
        from rlamd.replay import ReplayBatch

        agent = DQN(DQNConfig(), (4, 84, 84), 4, dev, Precision("fp32", dev))
        n = 8
        batch = ReplayBatch(
            torch.randint(0, 255, (n, 4, 84, 84), dtype=torch.uint8, device=dev), torch.zeros(n, dtype=torch.long, device=dev),
            torch.ones(n, device=dev), torch.randint(0, 255, (n, 4, 84, 84), dtype=torch.uint8, device=dev),
            torch.full((n,), 0.99, device=dev), torch.ones(n, device=dev), torch.arange(n, device=dev),
        )  # fmt: skip
        agent.update(batch)
        return "one DQN update (Nature CNN, batch 8)"

    steps: list[tuple[str, Callable[[], str]]] = [
        ("allocate", alloc), ("copy host<->device", copy), ("matmul", matmul), ("conv forward/backward", conv),
    ]  # fmt: skip
    if dev.type == "cuda":
        steps.append(("fp16 autocast", autocast(torch.float16)))
    steps.append(("bf16 autocast", autocast(torch.bfloat16)))
    steps += [("replay sample", replay), ("DQN update", dqn_update)]
    for name, fn in steps:
        if not _timed(r, name, fn, device):
            return False
    return True
