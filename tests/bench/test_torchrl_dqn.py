"""TorchRL in the DQN suite's rows: its own DQN learner, and rlamd with its algorithm."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl")
pytest.importorskip("ale_py")


@pytest.mark.slow
def test_torchrl_dqn_rows_are_in_the_dqn_suite(monkeypatch):
    import rlamd.bench.dqn as dqn_bench
    from rlamd.bench.peer import get

    for other in ("sb3", "rllib"):  # only TorchRL's rows are under test here
        monkeypatch.setattr(get(other), "unavailable", lambda: "left out (test)")
    notes: list[str] = []
    figures = dqn_bench.run_dqn_suite(
        batches=(8,), iters=2, repeats=1, precisions=("fp32",), warm=40, notes=notes
    )
    by_name = {f.name: f for f in figures}
    for what in ("iterations", "learner"):
        assert by_name[f"dqn/torchrl_fp32/b8/{what}"].median > 0
        assert by_name[f"dqn/rlamd_fp32_torchrlalgo/b8/{what}"].median > 0
    assert by_name["dqn/torchrl_fp32/b8/learner"].meta["algorithm"] == "torchrl"
    assert not any("TorchRL skipped" in n for n in notes), notes
