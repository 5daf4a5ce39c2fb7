"""The device checks of a run's settings: the device exists on this machine, and the
precision and graph settings work on it.

Apart from :mod:`rlamd.config.checks` (which calls :func:`check_device` from
``check_run``) because these ask this machine, not the settings alone. The rules
themselves live with what they guard (:func:`rlamd.precision.precision_refusal`,
:func:`rlamd.graphs.graph_refusal`); here they become one-line setting errors.
"""

from __future__ import annotations

from typing import Any

from .errors import bad_setting

__all__ = ["check_device"]


def _learner_device_type(cfg: Any, api: Any) -> tuple[str, int | None] | None:
    """The type (``cpu``, ``cuda``, ``mps``) and index of the device updates run on, or
    None when only the Ray cluster can tell."""
    from rlamd.device import DeviceError, KernelCoverageError, parse_device_spec, resolve_device

    train = cfg.train
    if cfg.ray.enabled:
        # Learners resolve their device on their own node: this machine says nothing.
        kind, _ = parse_device_spec(train.device)
        gpus = cfg.ray.gpus_per_learner
        if kind == "cpu" or gpus == 0:
            return "cpu", None
        return ("cuda", None) if gpus is not None and gpus > 0 else None
    try:
        device = resolve_device(train.device, api=api)
    except KernelCoverageError as exc:
        # The card exists but this torch has no kernels for it: auto would pick it too.
        why = str(exc).rstrip(".")
        raise bad_setting("train", "device", train.device, "cpu until fixed", why=why) from None
    except DeviceError as exc:
        count = api.device_count() if api.gpu_available() else 0
        gpus = f", cuda:0 to cuda:{count - 1} (or hip:N)" if count else ""
        raise bad_setting(
            "train",
            "device",
            train.device,
            f"auto, cpu{gpus} on this machine",
            why=str(exc).rstrip("."),
        ) from None
    return device.type, device.index


def check_device(cfg: Any, *, api: Any = None) -> None:
    """The device exists here, and ``train.precision`` and ``train.graph`` work on it.

    On Ray the learners' device is decided on their nodes: only what the settings
    alone imply is checked (``--gpus-per-learner 0`` or ``--device cpu``: CPU learners).

    Raises:
        ConfigError: no such device here; a ROCm GPU this torch has no kernels for (the
            preflight of :func:`rlamd.device.resolve_device`, which says the fix before
            rocBLAS or MIOpen would abort the process); fp16 on the CPU (no fp16 autocast); bf16 on a
            GPU without bf16 (autocast would quietly run in fp32); ``graph='on'``
            without a GPU (graphs are CUDA/HIP only).
    """
    from rlamd.device import TorchQueries
    from rlamd.graphs import graph_refusal
    from rlamd.precision import precision_refusal

    api = api or TorchQueries()
    found = _learner_device_type(cfg, api)
    if found is None:
        return
    kind, index = found
    train = cfg.train
    # A Ray learner's GPU is not this machine's: its bf16 support is not asked here.
    local_gpu = kind == "cuda" and not cfg.ray.enabled
    has_bf16 = api.gpu_bf16(index or 0) if local_gpu and train.precision == "bf16" else True
    name = api.device_properties(index or 0).get("name", "this GPU") if not has_bf16 else ""
    refused = precision_refusal(train.precision, kind, has_bf16, name)
    if refused is not None:
        why, accepted = refused
        raise bad_setting("train", "precision", train.precision, accepted, why=why)
    refused = graph_refusal(train.graph, kind)
    if refused is not None:
        why, accepted = refused
        raise bad_setting("train", "graph", train.graph, accepted, why=why)
