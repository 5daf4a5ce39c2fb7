"""The ceilings: copy bandwidths and matmul TFLOP/s per precision (like rocm-bandwidth-test)."""

from __future__ import annotations

import torch

from .common import Figure, measure, print_table

__all__ = ["run_device_suite"]


def run_device_suite(
    device: torch.device | str = "cpu", quick: bool = False, repeats: int = 5
) -> list[Figure]:
    """GB/s of host->device, device->host and device->device copies (pinned host memory on
    GPUs), then square matmul TFLOP/s per precision (no fp16 on the CPU: its fp16 matmul
    is unoptimised and no CPU training uses it)."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    n = ((64 if quick else 256) if gpu else (32 if quick else 128)) * 2**20 // 4
    host = torch.ones(n, dtype=torch.float32, pin_memory=gpu)
    dev_a = torch.empty(n, dtype=torch.float32, device=device)
    dev_b = torch.empty_like(dev_a)

    def copy(dst, src, times=5):
        def run() -> float:
            for _ in range(times):
                dst.copy_(src, non_blocking=True)
            return times * n * 4 / 1e9

        return run

    pairs = (
        ("host->device", dev_a, host),
        ("device->host", host, dev_a),
        ("device->device", dev_b, dev_a),
    )
    figures = [measure(f"device/bandwidth/{name}", "GB/s", copy(dst, src), repeats=repeats, device=device,
                       bytes=n * 4) for name, dst, src in pairs]  # fmt: skip
    size = (4096 if not quick else 2048) if gpu else (1024 if quick else 2048)
    for label, dtype in {
        "fp32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }.items():
        if not gpu and label == "fp16":
            continue
        a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
        reps = 20 if gpu else 3

        def mm(a=a, b=b, reps=reps) -> float:
            for _ in range(reps):
                torch.mm(a, b)
            return reps * 2 * size**3 / 1e12

        figures.append(
            measure(
                f"device/matmul/{label}", "TFLOP/s", mm, repeats=repeats, device=device, size=size
            )
        )
    print(f"\ndevice: {device} (median of {repeats})")
    print_table([(f.name.removeprefix("device/"), f"{f.median:,.3f}", f.unit) for f in figures],
                ("figure", "median", "unit"))  # fmt: skip
    return figures
