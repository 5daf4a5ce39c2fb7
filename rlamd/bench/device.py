"""The ceilings: copy bandwidths and matmul TFLOP/s per precision (like rocm-bandwidth-test)."""

from __future__ import annotations

import torch

from .common import Figure, measure, repeat, report

__all__ = ["run_device_suite"]


def run_device_suite(device: torch.device | str = "cpu", quick: bool = False, repeats: int = 5):
    """GB/s of host->device, device->host and device->device copies (pinned host memory on
    GPUs), then square matmul TFLOP/s per precision (no fp16 on the CPU: its fp16 matmul is
    unoptimised and no CPU training uses it)."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    n = ((64 if quick else 256) if gpu else (32 if quick else 128)) * 2**20 // 4
    host = torch.ones(n, dtype=torch.float32, pin_memory=gpu)
    dev_a = torch.empty(n, dtype=torch.float32, device=device)
    dev_b = torch.empty_like(dev_a)
    figures: list[Figure] = []
    for name, dst, src in (
        ("host->device", dev_a, host),
        ("device->host", host, dev_a),
        ("device->device", dev_b, dev_a),
    ):
        copy = repeat(lambda d=dst, s=src: d.copy_(s, non_blocking=True), 5, 5 * n * 4 / 1e9)
        opts = {"repeats": repeats, "device": device, "bytes": n * 4}
        figures.append(measure(f"device/bandwidth/{name}", "GB/s", copy, **opts))
    size = (2048 if quick else 4096) if gpu else (1024 if quick else 2048)
    reps = 20 if gpu else 3
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for label, dtype in dtypes.items():
        if gpu or label != "fp16":
            a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
            mm = repeat(lambda a=a, b=b: torch.mm(a, b), reps, reps * 2 * size**3 / 1e12)
            opts = {"repeats": repeats, "device": device, "size": size}
            figures.append(measure(f"device/matmul/{label}", "TFLOP/s", mm, **opts))
    rows = [(f.name.removeprefix("device/"), f"{f.median:,.3f}", f.unit) for f in figures]
    report(f"device: {device} (median of {repeats})", rows, ("figure", "median", "unit"))
    return figures
