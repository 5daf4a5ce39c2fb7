"""The bench's load sampling: whose CPU time counts as "other", the busy rule, GPU readers,
and a real bench run beside a busy process (no timings asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlamd.bench import load
from rlamd.bench.load import BUSY_CORES, CpuSampler, LoadMonitor, LoadReport


class FakeProc:
    """A /proc with a machine line and per-process stat files that tests change."""

    def __init__(self, root: Path, cores: int = 2) -> None:
        self.root, self.cores = root, cores
        root.mkdir(exist_ok=True)
        self.busy = self.idle = 0
        self.running = 1
        self.procs: dict[int, tuple[int, int, int]] = {}  # pid -> (ppid, own, children)
        self.write()

    def write(self) -> None:
        # user nice system idle iowait irq softirq steal
        (self.root / "stat").write_text(
            f"cpu  {self.busy} 0 0 {self.idle} 0 0 0 0 0 0\nprocs_running {self.running}\n"
        )
        for d in self.root.iterdir():
            if d.is_dir() and int(d.name) not in self.procs:
                (d / "stat").unlink()
                d.rmdir()
        for pid, (ppid, own, kids) in self.procs.items():
            (self.root / str(pid)).mkdir(exist_ok=True)
            # pid (comm) state ppid ... field 14/15 utime stime, 16/17 cutime cstime
            fields = ["S", str(ppid), *["0"] * 9, str(own), "0", str(kids), "0", "0"]
            (self.root / str(pid) / "stat").write_text(f"{pid} (a (b) c) {' '.join(fields)}\n")

    def advance(self, busy: int, idle: int, **procs: tuple[int, int, int] | None) -> None:
        self.busy += busy
        self.idle += idle
        for key, value in procs.items():
            pid = int(key[1:])
            if value is None:
                self.procs.pop(pid, None)
            else:
                self.procs[pid] = value
        self.write()


def _sampler(fake: FakeProc, monkeypatch) -> CpuSampler:
    monkeypatch.setattr(load.os, "cpu_count", lambda: fake.cores)
    return CpuSampler(pid=100, proc=fake.root)


def test_own_tree_is_not_other_load(tmp_path, monkeypatch):
    fake = FakeProc(tmp_path / "proc")
    fake.advance(0, 0, p100=(1, 0, 0), p101=(100, 0, 0), p200=(1, 0, 0))
    s = _sampler(fake, monkeypatch)
    # 400 ticks over 2 cores = 200 per core; 300 busy, of which our tree used 20 + 80.
    fake.advance(300, 100, p100=(1, 20, 0), p101=(100, 80, 0), p200=(1, 200, 0))
    others, own = s.sample()
    assert own == pytest.approx(0.5) and others == pytest.approx(1.0)
    fake.running = 5
    fake.write()
    assert load.runnable(fake.root) == 4  # the reader itself is not counted


def test_a_reaped_child_is_counted_once_and_a_new_one_whole(tmp_path, monkeypatch):
    fake = FakeProc(tmp_path / "proc")
    fake.advance(0, 0, p100=(1, 0, 0), p101=(100, 50, 0))
    s = _sampler(fake, monkeypatch)
    # 101 ran 30 more ticks (80 in all) and was reaped by 100 (its children's time +80);
    # 102 started within the interval and ran 40.
    fake.advance(200, 200, p100=(1, 10, 80), p101=None, p102=(100, 40, 0))
    others, own = s.sample()
    assert own * 200 == pytest.approx(10 + 30 + 40)
    assert others * 200 == pytest.approx(200 - 80)


def test_a_worker_gone_unreaped_keeps_the_time_it_was_seen_using(tmp_path, monkeypatch):
    """Regression: a peer's worker pool killed with its parent is reaped by init, so its time
    never reaches our tree's child times; the whole-run figure once came from the tree's
    start-to-end ticks alone and called the workers' 1.2 cores "others" (a Pong race)."""
    fake = FakeProc(tmp_path / "proc")
    fake.advance(0, 0, p100=(1, 0, 0))
    s = _sampler(fake, monkeypatch)
    mark = s.ticks
    # 101 (our child) starts a worker 102; the worker runs 150 ticks of a 200-tick core.
    fake.advance(200, 200, p100=(1, 0, 0), p101=(100, 10, 0), p102=(101, 150, 0))
    s.sample()
    # Both end, reaped outside our tree: 100's children's time does not grow.
    fake.advance(100, 300, p101=None, p102=None)
    s.sample()
    others, own = s.mean_since(mark)
    assert own * 400 == pytest.approx(160)  # two 200-tick intervals of one core each
    assert others * 400 == pytest.approx(300 - 160)
    assert s.mean_since(s.ticks) is None  # no sample since: no figure


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
