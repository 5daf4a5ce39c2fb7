"""What ran where: the machine record a run folder's ``device.json`` and a benchmark's
``results.json`` hold (as Stable-Baselines3 saves its system info beside a model)."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import torch

from rlamd.device import DeviceInfo, describe_device

__all__ = ["machine_info"]


def machine_info(device: torch.device | str, info: DeviceInfo | None = None) -> dict[str, Any]:
    """What ran where: the date, OS, CPU, Python, torch (HIP, CUDA), ``device`` described
    (``info``, else :func:`describe_device`) and torch's threads. A run folder's
    ``device.json`` and a benchmark's ``results.json`` record it."""
    info = info or describe_device(device)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hip": info.hip_version,
        "cuda": info.cuda_version,
        "device": info.to_dict(),
        "torch_threads": torch.get_num_threads(),
    }
