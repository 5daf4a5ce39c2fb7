"""The doctor's application layer: a few real operations on the chosen device.

Allocate, copy, matmul, conv forward/backward, autocast, one replay sample and one DQN
update, each timed; the first to raise is explained from the known-errors table.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np
import torch

from .report import FAIL, PASS, WARN, Report, fix_from_table

__all__ = ["run_application_checks"]


def _alloc(dev: torch.device) -> str:
    x = torch.empty(16 * 2**20, dtype=torch.float32, device=dev)
    x.fill_(1.0)
    return "64 MiB allocated and filled"


def _copy(dev: torch.device) -> str:
    host = torch.arange(4 * 2**20, dtype=torch.float32)
    back = host.to(dev).cpu()
    if not torch.equal(host, back):
        raise RuntimeError("host -> device -> host copy changed the data")
    return "16 MiB host -> device -> host, identical"


def _matmul(dev: torch.device) -> str:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    err = ((a.to(dev) @ b.to(dev)).cpu() - a @ b).abs().max().item()
    if err > 1e-2:
        raise RuntimeError(f"512x512 matmul differs from the CPU's by {err:.3g}")
    return f"512x512 fp32, max error vs CPU {err:.1e}"


def _conv(dev: torch.device) -> str:
    layer = torch.nn.Conv2d(4, 32, 8, stride=4).to(dev)
    x = torch.rand(8, 4, 84, 84, device=dev, requires_grad=True)
    layer(x).square().mean().backward()
    if not torch.isfinite(x.grad).all():
        raise RuntimeError("conv backward produced non-finite gradients")
    return "Conv2d 4->32 on 8x4x84x84, forward + backward"


def _autocast(dev: torch.device, dtype: torch.dtype) -> str:
    a = torch.randn(256, 256, device=dev)
    with torch.autocast(dev.type, dtype=dtype):
        y = a @ a
    if y.dtype != dtype or not torch.isfinite(y).all():
        raise RuntimeError(f"autocast {dtype} gave {y.dtype} / non-finite values")
    return f"matmul under autocast -> {str(dtype).removeprefix('torch.')}"


def _replay(dev: torch.device) -> str:
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


def _dqn_update(dev: torch.device) -> str:
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.precision import Precision
    from rlamd.replay import ReplayBatch

    agent = DQN(DQNConfig(), (4, 84, 84), 4, dev, Precision("fp32", dev))
    n = 8

    def frames() -> torch.Tensor:
        return torch.randint(0, 255, (n, 4, 84, 84), dtype=torch.uint8, device=dev)

    obs = frames()
    actions = torch.zeros(n, dtype=torch.long, device=dev)
    rewards = torch.ones(n, device=dev)
    next_obs = frames()
    batch = ReplayBatch(
        obs,
        actions,
        rewards,
        next_obs,
        torch.full((n,), 0.99, device=dev),
        torch.ones(n, device=dev),
        torch.arange(n, device=dev),
    )
    agent.update_on(batch)
    return "one DQN update (Nature CNN, batch 8)"


def _replay_kernels(r: Report, dev: torch.device) -> None:
    """Whether the replay's Triton kernels run on this GPU (a warning, not a failure:
    without them the trees use plain torch ops, slower but correct)."""
    from rlamd.replay.segment_tree import triton_unusable

    why = triton_unusable(dev)
    if why is None:
        r.add("application", "replay kernels (Triton)", PASS, f"Triton runs the trees on {dev}")
        return
    fix = (
        "Training works: the replay trees use plain torch ops, which sample more slowly. "
        "Triton releases compile for CDNA (gfx90a, gfx942), RDNA3/4 and NVIDIA GPUs, not "
        "for RDNA2 (gfx103x); elsewhere install the Triton that matches your PyTorch "
        "(ROCm: pytorch-triton-rocm from the same index URL as torch)."
    )
    r.add("application", "replay kernels (Triton)", WARN, why, fix)


def _timed(r: Report, name: str, fn: Callable[[], str], device: str) -> bool:
    t0 = time.perf_counter()
    try:
        seen = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as exc:  # the first error is caught and explained
        msg = f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        fix = fix_from_table(str(exc), "See the message; run with --json for a bug report.")
        r.add("application", name, FAIL, msg, fix)
        return False
    r.add("application", name, PASS, seen, ms=(time.perf_counter() - t0) * 1e3)
    return True


def run_application_checks(r: Report, device: str) -> bool:
    """Allocate, copy, matmul, conv fwd/bwd, autocast, one replay sample and one DQN update.

    Args:
        r: the report each operation's check is added to.
        device: a torch device string, e.g. ``cuda:0`` or ``cpu``.

    Returns:
        True when every operation passed; the checks stop at the first that fails.
    """
    dev = torch.device(device)
    steps: list[tuple[str, Callable[[torch.device], str]]] = [
        ("allocate", _alloc),
        ("copy host<->device", _copy),
        ("matmul", _matmul),
        ("conv forward/backward", _conv),
    ]
    if dev.type == "cuda":
        steps.append(("fp16 autocast", functools.partial(_autocast, dtype=torch.float16)))
    steps.append(("bf16 autocast", functools.partial(_autocast, dtype=torch.bfloat16)))
    steps += [("replay sample", _replay), ("DQN update", _dqn_update)]
    for name, fn in steps:
        if not _timed(r, name, functools.partial(fn, dev), device):
            return False
    if dev.type == "cuda":
        _replay_kernels(r, dev)
    return True
