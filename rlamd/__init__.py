"""rlamd: reinforcement learning for AMD GPUs (ROCm), NVIDIA GPUs and the CPU."""

from __future__ import annotations

from .device import DeviceError, DeviceInfo, describe_device, resolve_device

__version__ = "0.1.0"

__all__ = ["DeviceError", "DeviceInfo", "__version__", "describe_device", "resolve_device"]
