"""The clamped mixed-precision update every agent uses (docs/ARCHITECTURE.md, rule 5).

One call, :meth:`Precision.step`, turns a loss into an optimizer step:

1. backward, with the loss scaled by a dynamic factor in fp16 (bf16 and fp32 need none);
2. gradients unscaled, clipped by global norm, then clamped by value;
3. if the loss or the gradient norm is not finite the update is skipped and counted,
   never applied; in fp16 the scale backs off (x0.5) and grows (x2) after 2000 good steps.

The skip decision stays on the device: fused Adam/AdamW take a ``found_inf`` tensor and
leave parameters, moments and step counts untouched when it is 1, so no host
synchronisation is needed. Other optimizers fall back to one ``.item()`` per update.

Why clamp as well as clip: some AMD fp16 stacks produce isolated huge or non-finite
gradient entries; clamping bounds each entry so one bad value cannot dominate the
norm-clipped direction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

import torch

from rlamd.device import rocm_build

__all__ = [
    "PRECISIONS",
    "Precision",
    "configure_tf32",
    "load_optimizer_state",
    "make_optimizer",
    "precision_refusal",
    "resolve_precision",
    "set_lr",
]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def precision_refusal(
    spec: str, device_type: str, gpu_bf16: bool = True, gpu_name: str = "this GPU"
) -> tuple[str, str] | None:
    """Why precision ``spec`` cannot run on a device of type ``device_type``, with what
    is accepted there: ``(why, accepted)``, or None when it can. The one place these
    rules live (:func:`resolve_precision` and the configuration's device checks ask it).

    fp16 has no autocast on the CPU; bf16 on a GPU without it would quietly run in fp32.
    """
    if spec == "fp16" and device_type == "cpu":
        return "updates run on the CPU, which has no fp16 autocast", "auto, fp32 or bf16 there"
    if spec == "bf16" and device_type == "cuda" and not gpu_bf16:
        return (
            f"{gpu_name} has no bf16; autocast would quietly run in fp32",
            "auto, fp32 or fp16 there",
        )
    return None


def resolve_precision(
    spec: str,
    device: torch.device,
    native_bf16: bool,
    *,
    mlp: bool = False,
) -> str:
    """Pick ``fp32``, ``bf16`` or ``fp16`` for ``spec`` on ``device``.

    ``auto`` takes bf16 wherever it is native (GPUs that support it, CPUs with AVX-512
    BF16 or AMX), else fp16 on a GPU and fp32 on the CPU. Measured on this project's
    2-core AVX-512-BF16 CPU (Nature CNN DQN update, fused Adam): bf16 autocast gave 33.9
    updates/s against fp32's 15.0 at batch 128, and 100 against 55 at batch 32.

    ``mlp``: a network without a CNN (vector observations). It takes fp32 under ``auto``
    on every device. Small matmuls gain nothing from half precision and the casts cost
    more (PPO on CartPole, 64 wide: fp32 8,889 env steps/s, bf16 5,374). Wide ones run
    faster in bf16 on such CPUs, but learn worse: SAC on HalfCheetah-v5, 300k steps,
    seeds 1 and 2, ended at 7,251 and 6,145 in bf16 against 7,664 and 6,631 in fp32,
    while fp32 still made 1.13x SB3's updates/s (README, SAC and TD3). On GPUs an MLP's
    step is bound by kernel launches anyway. ``--precision bf16`` still asks for it.

    Raises:
        ValueError: an unknown ``spec``, or fp16 on the CPU (:func:`precision_refusal`).
    """
    if spec not in PRECISIONS:
        raise ValueError(f"precision={spec!r}; accepted: {', '.join(PRECISIONS)}")
    if spec != "auto":
        if precision_refusal(spec, device.type) is not None:  # fp16 on the CPU
            raise ValueError(
                f"precision={spec!r} is not supported on the CPU (no fp16 autocast); "
                "accepted there: fp32, bf16, auto"
            )
        return spec
    if mlp:
        return "fp32"
    if native_bf16:
        return "bf16"
    return "fp16" if device.type == "cuda" else "fp32"


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    lr: float,
    eps: float,
    device: torch.device,
    *,
    capturable: bool = False,
) -> torch.optim.Optimizer:
    """Adam, fused where this torch supports it on ``device`` (sync-free skipping).

    With ``capturable`` (for steps captured by :mod:`rlamd.graphs`; GPUs only) the step
    counters and the learning rate live on the device: the learning rate is then a 0-d
    tensor in ``param_groups[i]["lr"]``, to be changed in place (``fill_``), never rebound.
    """
    params = list(params)
    capturable = capturable and device.type == "cuda"
    if capturable:
        opt = torch.optim.Adam(
            params, lr=torch.tensor(lr, device=device), eps=eps, fused=True, capturable=True
        )
        # Warm-up steps run uncaptured by design (rlamd.graphs): silence torch's warning.
        opt._warned_capturable_if_run_uncaptured = True  # type: ignore[attr-defined]
        return opt
    try:
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=device.type in ("cuda", "cpu", "mps"))
    except (RuntimeError, TypeError):  # pragma: no cover - old torch / unsupported device
        return torch.optim.Adam(params, lr=lr, eps=eps)


_RUN_SETTINGS = ("capturable", "fused", "foreach", "differentiable")


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a saved optimizer ``state`` while keeping this run's own settings and tensors.

    ``Optimizer.load_state_dict`` takes every saved group key but ``params``: a checkpoint
    from a CPU or ``--graph off`` run would bring back ``capturable=False`` (a captured
    step then fails), a CPU learning rate that a capturable step reads once, at capture,
    and never again, and the old run's ``lr`` and ``eps``, undoing a ``--set ...lr`` that
    the resume reported as changed. So only the saved moments and step counters are
    loaded; the implementation switches, the learning rate (its tensor, the one a
    captured graph reads, and its value: this run's configured one, which a schedule
    sets again before each update) and ``eps`` stay this run's. Step counters move to
    where this run keeps them. State tensors that already exist (moments of a step
    taken, perhaps captured) are filled in place, so a captured step keeps reading them.
    """
    kept = ("lr", "eps", *_RUN_SETTINGS)
    mine = [{k: g[k] for k in kept if k in g} for g in optimizer.param_groups]
    existing = {p: dict(s) for p, s in optimizer.state.items()}
    optimizer.load_state_dict(state)
    for group, own in zip(optimizer.param_groups, mine, strict=True):
        group.update(own)
        on_device = bool(group.get("capturable") or group.get("fused"))
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor):
                where = p.device if on_device else torch.device("cpu")
                optimizer.state[p]["step"] = step.to(where, torch.float32)
            _refill(optimizer.state.get(p, {}), existing.get(p, {}))


def _refill(loaded: dict, before: dict) -> None:
    """Put ``loaded``'s tensors into ``before``'s (same shape, dtype, device) in place."""
    for key, value in loaded.items():
        old = before.get(key)
        if (
            isinstance(value, torch.Tensor)
            and isinstance(old, torch.Tensor)
            and (old.shape, old.dtype, old.device) == (value.shape, value.dtype, value.device)
        ):
            old.copy_(value)
            loaded[key] = old


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every group's learning rate: in place where it is a device tensor (capturable
    optimizers, whose captured steps read that tensor), else as a float."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def configure_tf32(enabled: bool, device: torch.device) -> bool:
    """Allow (or forbid) TF32 for fp32 matmuls and convolutions on ``device``'s GPU.

    TF32 keeps fp32's range with a 10-bit mantissa and runs fp32 GEMMs on tensor cores
    (NVIDIA Ampere and later; AMD MI300 through hipBLASLt). It changes GPU kernels only:
    the CPU path computes exactly as before. On ROCm builds whose hipBLASLt honours TF32
    only when asked through the environment, ``HIPBLASLT_ALLOW_TF32=1`` is set too
    (before the first GEMM; a value you set yourself wins).

    Returns:
        whether TF32 is now allowed for ``device`` (False on the CPU).
    """
    if device.type != "cuda":
        return False
    if enabled and rocm_build():
        import os

        os.environ.setdefault("HIPBLASLT_ALLOW_TF32", "1")
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return enabled


class Precision:
    """Autocast + scaled, clipped, clamped, skip-on-non-finite updates.

    Args:
        mode: ``fp32``, ``bf16`` or ``fp16`` (see :func:`resolve_precision`).
        device: where the model lives.
        max_grad_norm: global-norm clip (``None`` disables clipping).
        grad_clamp: clamp every gradient entry to ``[-c, c]`` (``None`` disables).
        init_scale, growth_interval: fp16 dynamic loss scale settings.
    """

    def __init__(
        self,
        mode: str,
        device: torch.device,
        *,
        max_grad_norm: float | None = 10.0,
        grad_clamp: float | None = 100.0,
        init_scale: float = 2.0**16,
        growth_interval: int = 2000,
    ) -> None:
        if mode not in PRECISIONS[1:]:
            raise ValueError(f"mode={mode!r}; accepted: fp32, bf16, fp16 (resolve 'auto' first)")
        self.mode, self.device = mode, device
        self.max_grad_norm, self.grad_clamp = max_grad_norm, grad_clamp
        self.growth_interval = growth_interval
        self.scale = torch.full((), init_scale if mode == "fp16" else 1.0, device=device)
        self._growth = torch.zeros((), dtype=torch.int32, device=device)
        self.skipped = torch.zeros((), dtype=torch.long, device=device)
        """Updates skipped because the loss or a gradient was not finite."""
        self.last_grad_norm = torch.zeros((), device=device)
        """Gradient norm of the last update (after unscaling, before clipping)."""
        self.grad_sync: Callable[[list[torch.Tensor], torch.Tensor], torch.Tensor] | None = None
        """Set by a distributed learner: averages the gradients (and the loss) over all
        learners right after backward, so every learner clips, skips and steps alike."""

    @property
    def dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.mode)

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Autocast region for the forward pass and loss (a no-op in fp32)."""
        if self.mode == "fp32":
            yield
            return
        with torch.autocast(device_type=self.device.type, dtype=self.dtype):
            yield

    def step(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
    ) -> torch.Tensor:
        """Backward and apply one clamped update; returns the device flag ``applied``."""
        optimizer.zero_grad(set_to_none=False)
        (loss.float() * self.scale if self.mode == "fp16" else loss.float()).backward()
        grads = [p.grad for p in params if p.grad is not None]
        loss_value = loss.detach().float()
        if self.grad_sync is not None:
            loss_value = self.grad_sync(grads, loss_value)
        if self.mode == "fp16":
            torch._foreach_mul_(grads, 1.0 / self.scale)
        if self.max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm, foreach=True)
        else:
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        if self.grad_clamp is not None:
            torch.nn.utils.clip_grad_value_(params, self.grad_clamp, foreach=True)
        finite = torch.isfinite(norm) & torch.isfinite(loss_value)
        found_inf = (~finite).float()
        self.last_grad_norm = norm.detach()
        if _fused(optimizer):
            optimizer.found_inf = found_inf  # type: ignore[attr-defined]
            optimizer.grad_scale = None  # type: ignore[attr-defined]
            optimizer.step()
        elif bool(finite):  # pragma: no cover - non-fused fallback syncs once
            optimizer.step()
        self.skipped += (~finite).long()
        if self.mode == "fp16":
            torch._amp_update_scale_(
                self.scale, self._growth, found_inf, 2.0, 0.5, self.growth_interval
            )
        return finite

    def state_dict(self) -> dict[str, torch.Tensor | str]:
        return {
            "mode": self.mode,
            "scale": self.scale.cpu(),
            "growth": self._growth.cpu(),
            "skipped": self.skipped.cpu(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.scale = state["scale"].to(self.device)
        self._growth = state["growth"].to(self.device)
        self.skipped = state["skipped"].to(self.device)


def _fused(optimizer: torch.optim.Optimizer) -> bool:
    return all(group.get("fused", False) for group in optimizer.param_groups)
