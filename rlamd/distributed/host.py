"""What an algorithm's Ray driver may use of the engine that hosts it (a Protocol), and
the registry of drivers.

:class:`rlamd.distributed.driver.RayEngine` implements it; the drivers
(:mod:`rlamd.distributed.apex`, :mod:`rlamd.distributed.ppo_sync`, a plugin's) only see
this, so the engine can import them without an import cycle. Each driver's module
registers it under its algorithm's name (:func:`register_driver`); nothing here names one.
"""

from __future__ import annotations

from typing import Any, Protocol

from rlamd.config.sections import RayConfig, RunConfig, TrainConfig

__all__ = ["DRIVERS", "DriverHost", "register_driver"]

DRIVERS: dict[str, type] = {}
"""Algorithm name -> the class that schedules its actors on Ray (docs/ARCHITECTURE.md)."""


def register_driver(name: str, driver: type) -> type:
    """Schedule algorithm ``name``'s Ray actors with ``driver`` (built with the engine, a
    :class:`DriverHost`; see :class:`rlamd.distributed.apex.ApexDriver`)."""
    DRIVERS[name] = driver
    return driver


class DriverHost(Protocol):
    cfg: RunConfig
    train: TrainConfig
    rc: RayConfig
    learners: list[Any]
    """Learner actor handles, by rank."""
    step: int
    """Env steps collected; the driver adds to it as data arrives."""
    updates: int
    version: int
    """Version of the weights workers get with their next call."""
    latest: dict[str, float]
    """Learner 0's newest metrics; the driver updates it."""

    def collect(self, w: int, num_steps: int) -> tuple[Any, Any]:
        """Ask worker ``w`` for ``num_steps`` vector steps: ``(payload ref, info ref)``."""
        ...

    def publish_weights(self) -> None: ...
    def receive(self, w: int, info_ref: Any) -> Any | None:
        """Worker ``w``'s collect info, or None if the worker was lost (counted)."""
        ...

    def payload_lost(self, w: int) -> None: ...
    def get(self, refs: list, what: str, lost: list | None = None) -> list: ...
    def wait(self, refs: list) -> list:
        """One ready ref of ``refs``; stops the run when nothing arrives in time."""
        ...
