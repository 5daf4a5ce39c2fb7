"""The bench's load reports: the busy rule, GPU readers, and a real bench run beside a busy
process (no timings asserted). Whose CPU time counts as "other": tests/test_cpuload.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from rlamd.bench import load
from rlamd.bench.load import BUSY_CORES, LoadMonitor, LoadReport


def test_without_proc_nothing_is_measured_or_warned(tmp_path):
    with LoadMonitor(before_s=0.0, interval=0.05, proc=tmp_path / "missing") as mon:
        time.sleep(0.1)
    report = mon.report
    assert report is not None
    assert (report.before, report.during, report.peak, report.runnable) == (None,) * 4
    assert not report.busy and report.warning("x") is None


def test_busy_rule_and_warning():
    def report(**kw):
        base = {"cores": 2, "before": 0.0, "during": 0.0, "peak": 0.0, "own": 1.0}
        return LoadReport(**{**base, **kw, "samples": 3, "seconds": 1.0})

    assert not report(before=0.1, during=BUSY_CORES).busy  # at the threshold: quiet
    assert report(during=BUSY_CORES + 0.01).busy
    assert report(before=0.9).busy
    assert report(gpu_before=40.0).busy and not report(gpu_before=20.0, gpu_during=99.0).busy
    line = report(before=0.5, during=1.25, peak=1.9, runnable=6.5).warning("the ppo suite")
    assert line.startswith("warning: busy machine during the ppo suite")
    assert "6.5 threads ready to run" in line
    assert "1.25 of 2 cores" in line and "0.50 before" in line and "peak 1.90" in line
    assert report(during=1.0).to_dict()["busy"] is True


def test_gpu_readers_parse_each_tool_and_skip_silently(monkeypatch):
    assert load._parse("nvidia-smi", "17\n83\n", 1) == 83.0
    assert load._parse("nvidia-smi", "[N/A]\n", 0) is None
    rocm = json.dumps({"card1": {"GPU use (%)": "9"}, "card0": {"GPU use (%)": "42"}})
    assert load._parse("rocm-smi", rocm, 0) == 42.0 and load._parse("rocm-smi", "{}", 0) is None
    amd = json.dumps([{"gpu": 0, "usage": {"gfx_activity": {"value": 55, "unit": "%"}}}])
    assert load._parse("amd-smi", amd, 0) == 55.0 and load._parse("amd-smi", "not json", 0) is None
    monkeypatch.setattr(load.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "torch", None)
    assert load.gpu_utilisation(0) is None


@pytest.mark.slow
def test_a_bench_beside_a_busy_process_says_so(tmp_path):
    """The neighbour is not the bench's child, so its CPU time is other processes' load."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        cmd = [sys.executable, "-m", "rlamd.bench", "device", "--quick", "--device", "cpu"]
        out = subprocess.run(
            [*cmd, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
        )
    finally:
        spinner.kill()
        spinner.wait()
    assert out.returncode == 0, out.stderr
    assert "warning: busy machine during the device suite" in out.stdout
    doc = json.loads((tmp_path / "results.json").read_text())
    device = doc["load"]["device"]
    assert device["busy"] is True and device["during"] > BUSY_CORES
    assert device["cores"] >= 1 and device["samples"] >= 1 and device["threshold"] == BUSY_CORES
