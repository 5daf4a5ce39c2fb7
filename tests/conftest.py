"""Shared test fixtures: a fixed torch thread count so runs are comparable on 2 cores."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _threads() -> None:
    torch.set_num_threads(2)


def gpu_device() -> torch.device | None:
    return torch.device("cuda", 0) if torch.cuda.is_available() else None
