"""Other processes' CPU use from /proc: whose time counts as "other" (this process tree's
does not, reaped or gone), and torch's pool following it (:class:`rlamd.threads.LoadWatch`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from rlamd import cpuload
from rlamd.cpuload import CpuSampler
from rlamd.threads import LoadWatch, ThreadPlan


class FakeProc:
    """A /proc with a machine line and per-process stat files that tests change; with
    ``children``, the kernel's ``task/PID/children`` lists too. ``per_core``: (busy, idle)
    ticks of each core's ``cpuN`` line, when set."""

    def __init__(self, root: Path, cores: int = 2, children: bool = False) -> None:
        self.root, self.cores, self.children = root, cores, children
        root.mkdir(exist_ok=True)
        self.busy = self.idle = 0
        self.running = 1
        self.per_core: list[tuple[int, int]] = []
        self.procs: dict[int, tuple[int, int, int]] = {}  # pid -> (ppid, own, children)
        self.write()

    def write(self) -> None:
        # user nice system idle iowait irq softirq steal
        (self.root / "stat").write_text(
            f"cpu  {self.busy} 0 0 {self.idle} 0 0 0 0 0 0\nprocs_running {self.running}\n"
        )
        if self.per_core:
            with open(self.root / "stat", "a") as f:
                for n, (busy, idle) in enumerate(self.per_core):
                    f.write(f"cpu{n} {busy} 0 0 {idle} 0 0 0 0 0 0\n")
        for d in self.root.iterdir():
            if d.is_dir() and int(d.name) not in self.procs:
                shutil.rmtree(d)
        for pid, (ppid, own, kids) in self.procs.items():
            (self.root / str(pid)).mkdir(exist_ok=True)
            if self.children:
                (self.root / str(pid) / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
                mine = " ".join(str(c) for c, (pp, _, _) in self.procs.items() if pp == pid)
                (self.root / str(pid) / "task" / str(pid) / "children").write_text(mine)
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
    monkeypatch.setattr(cpuload.os, "cpu_count", lambda: fake.cores)
    monkeypatch.setattr(cpuload, "_mask", lambda: None)
    return CpuSampler(pid=100, proc=fake.root)


@pytest.mark.parametrize("children", [False, True], ids=["scan", "children-lists"])
def test_own_tree_is_not_other_load(tmp_path, monkeypatch, children):
    fake = FakeProc(tmp_path / "proc", children=children)
    fake.advance(0, 0, p100=(1, 0, 0), p101=(100, 0, 0), p200=(1, 0, 0))
    s = _sampler(fake, monkeypatch)
    # 400 ticks over 2 cores = 200 per core; 300 busy, of which our tree used 20 + 80.
    fake.advance(300, 100, p100=(1, 20, 0), p101=(100, 80, 0), p200=(1, 200, 0))
    others, own = s.sample()
    assert own == pytest.approx(0.5) and others == pytest.approx(1.0)
    fake.running = 5
    fake.write()
    assert cpuload.runnable(fake.root) == 4  # the reader itself is not counted


@pytest.mark.parametrize("children", [False, True], ids=["scan", "children-lists"])
def test_a_reaped_child_is_counted_once_and_a_new_one_whole(tmp_path, monkeypatch, children):
    fake = FakeProc(tmp_path / "proc", children=children)
    fake.advance(0, 0, p100=(1, 0, 0), p101=(100, 50, 0))
    s = _sampler(fake, monkeypatch)
    # 101 ran 30 more ticks (80 in all) and was reaped by 100 (its children's time +80);
    # 102 started within the interval and ran 40.
    fake.advance(200, 200, p100=(1, 10, 80), p101=None, p102=(100, 40, 0))
    others, own = s.sample()
    assert own * 200 == pytest.approx(10 + 30 + 40)
    assert others * 200 == pytest.approx(200 - 80)


@pytest.mark.parametrize("children", [False, True], ids=["scan", "children-lists"])
def test_a_worker_gone_unreaped_keeps_the_time_it_was_seen_using(tmp_path, monkeypatch, children):
    """Regression: a peer's worker pool killed with its parent is reaped by init, so its time
    never reaches our tree's child times; the whole-run figure once came from the tree's
    start-to-end ticks alone and called the workers' 1.2 cores "others" (a Pong race)."""
    fake = FakeProc(tmp_path / "proc", children=children)
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


def test_only_the_cores_this_process_may_run_on_count(tmp_path, monkeypatch):
    """Under a cpuset of core 0, a neighbour spinning on core 1 takes nothing from us."""
    fake = FakeProc(tmp_path / "proc", children=True)
    fake.per_core = [(0, 0), (0, 0)]
    fake.advance(0, 0, p100=(1, 0, 0), p200=(1, 0, 0))
    monkeypatch.setattr(cpuload, "_mask", lambda: {0})
    s = CpuSampler(pid=100, proc=fake.root)
    assert s.cores == 1
    # Core 0: 100 busy (40 of them ours) of 200; core 1: 200 busy, all process 200's.
    fake.per_core = [(100, 100), (200, 0)]
    fake.advance(300, 100, p100=(1, 40, 0), p200=(1, 200, 0))
    others, own = s.sample()
    assert others == pytest.approx(0.3) and own == pytest.approx(0.2)
    monkeypatch.setattr(cpuload, "_mask", lambda: None)  # no mask known: every core's line
    fake.per_core = [(100, 100), (200, 0)]
    assert CpuSampler(pid=100, proc=fake.root).cores == 2


def test_load_watch_follows_others_not_its_own_workers(tmp_path, monkeypatch):
    """torch's pool shrinks for a neighbour's core, not for the run's own worker processes
    (``vector = "async"`` envs); it is resized only when the answer changes."""
    import os

    fake, me = FakeProc(tmp_path / "proc"), os.getpid()
    monkeypatch.setattr(cpuload.os, "cpu_count", lambda: fake.cores)
    fake.advance(0, 0, **{f"p{me}": (1, 0, 0), "p7": (me, 0, 0), "p9": (1, 0, 0)})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        plan = ThreadPlan(2, "test", 2, 2, 2, "PASSIVE")
        watch = LoadWatch(plan, interval=0.0, proc=fake.root)
        # 200 ticks a core: process 9, not ours, held one core.
        fake.advance(200, 200, p9=(1, 200, 0))
        assert watch.update() == 1 and torch.get_num_threads() == 1
        assert watch.others_busy == pytest.approx(1.0)
        # Then our env worker (7, our child) held that core: the whole budget again.
        fake.advance(200, 200, p7=(me, 200, 0))
        assert watch.update() == 2 and torch.get_num_threads() == 2
        assert watch.others_busy == pytest.approx(0.0)
        with pytest.MonkeyPatch.context() as m:  # an unchanged answer: torch is not called
            m.setattr(torch, "set_num_threads", lambda n: pytest.fail("resized again"))
            fake.advance(200, 200, p7=(me, 400, 0))
            assert watch.update() == 2
    finally:
        torch.set_num_threads(before)
