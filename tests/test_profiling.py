"""rlamd.profiling: the trace of N loop steps holds the named ranges; spans are free when off."""

from __future__ import annotations

import json

import pytest
import torch

from rlamd.profiling import RANGES, Profile, call_cost, span


def _iteration():
    x = torch.randn(64, 64)
    for name in RANGES:
        with span(name):
            x = x @ x.T / 64


def test_trace_holds_the_ranges_of_exactly_the_recorded_steps(tmp_path):
    lines = []
    prof = Profile(tmp_path / "profile", steps=2, skip=1, log=lines.append)
    for i in range(6):
        prof.step()
        with span("marker"):
            with torch.profiler.record_function(f"iteration{i}"):
                _iteration()
    assert prof.done and prof.path is not None and prof.path.exists()
    events = json.loads(prof.path.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert set(RANGES) <= names
    assert {"iteration1", "iteration2"} <= names  # skip=1, then two steps
    assert not {"iteration0", "iteration3", "iteration4"} & names
    assert len(lines) == 1 and "2 steps" in lines[0] and "perfetto" in lines[0]


def test_stop_writes_a_short_run_and_spans_are_shared_no_ops_when_off(tmp_path):
    assert span("act") is span("update")  # nothing records: one shared null context
    with Profile(tmp_path, steps=100, log=lambda s: None) as prof:
        prof.step()
        _iteration()
    assert prof.path is not None and "update" in prof.path.read_text()
    assert span("act") is span("env")


def test_zero_steps_records_nothing(tmp_path):
    prof = Profile(tmp_path / "p", steps=0)
    prof.step()
    assert not prof.active and prof.stop() is None and not (tmp_path / "p").exists()
    with pytest.raises(ValueError, match="accepted: integers >= 0"):
        Profile(tmp_path, steps=-1)


def test_call_cost_counts_the_ops_doing_work_on_the_cpu():
    a = torch.randn(32, 32)
    # mm runs resolve_conj below it and still counts; add_ of a tensor is one op
    cost = call_cost(lambda: a.mm(a).add_(a), "cpu", iters=4)
    assert cost["kernels"] == cost["launches"] == 2
    assert cost["host_us"] > 0 and cost["device_us"] is None
    assert call_cost(lambda: a.view(-1).unsqueeze(0).t(), "cpu")["kernels"] == 0  # views only
    assert call_cost(lambda: a.expand_as(a).movedim(0, 1).type_as(a), "cpu")["kernels"] == 0
    # contiguous() of a transposed view copies (clone -> copy_): the copy is the one op
    assert call_cost(lambda: a.t().contiguous(), "cpu")["kernels"] == 1
