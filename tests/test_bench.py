"""Benchmark plumbing: the results.json schema and skipping a missing peer (no timings asserted)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import rlamd.bench
from rlamd.bench.__main__ import main
from rlamd.bench.peer import get


@pytest.mark.slow
def test_results_json_schema(tmp_path, capsys):
    assert (
        main(
            [
                "device",
                "learner",
                "--quick",
                "--no-peers",
                "--device",
                "cpu",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {
        "machine",
        "suites",
        "published",
        "notes",
        "command",
        "quick",
        "seconds",
        "charts",
    } <= set(doc)
    assert doc["machine"]["torch"] and doc["machine"]["device"]["backend"] == "cpu"
    figures = [f for suite in doc["suites"].values() for f in suite]
    assert {f["name"].split("/")[0] for f in figures} == {"device", "learner"}
    for f in figures:
        assert {"name", "unit", "median", "min", "max", "repeats", "meta"} <= set(f)
        assert f["min"] <= f["median"] <= f["max"] and len(f["repeats"]) >= 2
    assert {p["hardware"] for p in doc["published"]} == {
        "AMD Radeon RX 6800 XT",
        "NVIDIA GeForce RTX 3080",
    }
    assert all("source" in p for p in doc["published"])
    for chart in doc["charts"]:
        assert (tmp_path / chart.rsplit("/", 1)[-1]).stat().st_size > 1000


@pytest.mark.slow
def test_missing_peer_is_skipped_with_a_note(monkeypatch):
    import rlamd.bench.dqn as dqn_bench

    sb3 = get("sb3")
    monkeypatch.setattr(sb3, "unavailable", lambda: "stable_baselines3 not importable (test)")
    notes: list[str] = []
    figures = dqn_bench.run_dqn_suite(
        batches=(32,), iters=2, repeats=1, precisions=("fp32",), warm=64, notes=notes
    )
    assert "Stable-Baselines3 skipped: stable_baselines3 not importable (test)" in notes
    assert figures and not any("sb3" in f.name for f in figures)


def test_missing_torchrl_is_skipped_with_a_note(monkeypatch):
    import rlamd.bench.replay as replay_bench

    monkeypatch.setattr(get("torchrl"), "unavailable", lambda: "torchrl not importable")
    notes: list[str] = []
    figures = replay_bench.run_replay_suite(capacity=2**12, iters=3, repeats=1, notes=notes)
    assert "TorchRL skipped: torchrl not importable" in notes
    assert not any("torchrl" in f.name for f in figures)
    assert any(f.name == "replay/bytes_per_atari_transition" for f in figures)


def test_unknown_suite_names_the_nearest(capsys):
    with pytest.raises(SystemExit):
        main(["replya"])
    assert "Did you mean 'replay'" in capsys.readouterr().err


@pytest.mark.slow  # a bench suite's smoke run: Breakout actors, two processes
def test_without_ray_rollout_runs_in_process_and_allreduce_between_processes(monkeypatch):
    import sys

    from rlamd.bench.distributed import run_allreduce_suite, run_rollout_suite

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    notes: list[str] = []
    by = {f.name: f for f in run_rollout_suite(rounds=1, repeats=1, notes=notes)}
    assert notes == ["rollout: Ray not installed, its actors skipped (setup.sh --ray)"]
    assert sorted(by) == [
        f"rollout/{e}/{k}"
        for e in ("frames", "stacks")
        for k in ("bytes_per_transition", "in_process/4envs")
    ]
    # dqn.ship_frames reached the workers: frames ship under half the stacks' bytes
    assert by["rollout/frames/bytes_per_transition"].meta["ratio_to_stacks"] < 0.5
    assert by["rollout/stacks/in_process/4envs"].median > 0
    figures = run_allreduce_suite(max_bytes=64, iters=2, notes=notes)
    assert [f.meta["bytes"] for f in figures] == [8, 16, 32, 64]
    assert all(f.meta["between"] == "two processes" and f.median > 0 for f in figures)
    assert "measured between two local processes (gloo)" in notes[1]


def test_contention_neighbour_is_always_killed():
    from rlamd.bench.contention import busy_neighbour

    with pytest.raises(KeyError), busy_neighbour() as proc:
        assert proc is not None and proc.poll() is None  # it runs inside the block
        raise KeyError("a failed measurement")
    assert proc.poll() is not None  # killed and reaped on the way out
    with busy_neighbour(False) as idle:
        assert idle is None


@pytest.mark.slow  # the contention bench's child: two training loops timed
def test_contention_child_measures_the_training_loop():
    """What a condition's child builds and times (``--serve``): rlamd's loop, in windows."""
    import torch

    from rlamd.bench.contention import _build, _window
    from rlamd.cpuload import cores_available

    threads = torch.get_num_threads()
    rates = {}
    try:
        for algo, mode, warm in (("ppo", "budget", 1000), ("dqn", "untuned", 64)):
            iterate, close, line = _build(algo, mode, "cartpole", num_envs=2, warm=warm)
            try:
                rates[algo] = [_window(iterate, 0.15) for _ in range(2)]
            finally:
                close()
            if mode == "budget":
                envs = min(2, cores_available())  # one env thread a core, up to the envs
                assert line.startswith("threads ") and f"envs {envs}," in line
    finally:
        torch.set_num_threads(threads)
    assert all(len(r) == 2 and min(r) > 0 for r in rates.values()), rates


_NEIGHBOUR = {"on": False}
_SEEN: list[tuple[str, str, bool]] = []


class _FakeChild:
    """Alone 100/120/80 by round, beside the neighbour 50/40/60; dqn/untuned fails."""

    def __init__(self, algo, mode, env_name, timeout):
        if mode == "untuned" and algo == "dqn":
            raise RuntimeError("dqn/untuned child failed (exit 1): boom")
        self.algo, self.mode, self.threads, self.calls = algo, mode, f"{mode} threads", 0

    def measure(self, seconds):
        busy = _NEIGHBOUR["on"]
        _SEEN.append((self.algo, self.mode, busy))
        rates = [50.0, 40.0, 60.0] if busy else [100.0, 120.0, 80.0]
        self.calls += 1
        return rates[(self.calls - 1) // 2]

    def close(self):
        pass


class _FakeNeighbour:
    def __init__(self, active=True):
        self.active = active

    def __enter__(self):
        _NEIGHBOUR["on"] = self.active

    def __exit__(self, *exc):
        _NEIGHBOUR["on"] = False


def test_contention_suite_interleaves_alone_and_busy(monkeypatch):
    import rlamd.bench.contention as contention

    _SEEN.clear()
    seen = _SEEN
    monkeypatch.setattr(contention, "_Child", _FakeChild)
    monkeypatch.setattr(contention, "busy_neighbour", _FakeNeighbour)
    notes: list[str] = []
    figures = contention.run_contention_suite(
        seconds=3.0, peers=False, env_name="cartpole", notes=notes
    )
    # Interleaved: every ppo condition once per round, A B A B ..., three rounds.
    ppo = [s for s in seen if s[0] == "ppo"]
    assert ppo[:4] == [
        ("ppo", "budget", False),
        ("ppo", "budget", True),
        ("ppo", "untuned", False),
        ("ppo", "untuned", True),
    ]
    assert ppo[4:8] == ppo[:4] and len(ppo) == 12
    names = {f.name for f in figures}
    assert {
        "contention/budget/ppo/alone",
        "contention/budget/ppo/busy",
        "contention/untuned/ppo/busy",
        "contention/budget/dqn/busy",
    } <= names
    busy = next(f for f in figures if f.name == "contention/budget/ppo/busy")
    alone = next(f for f in figures if f.name == "contention/budget/ppo/alone")
    assert alone.repeats == [100.0, 120.0, 80.0] and busy.repeats == [50.0, 40.0, 60.0]
    # The ratio is taken per round: 0.5, 1/3, 0.75 -> median 0.5, range 1/3-0.75.
    assert busy.meta["ratio"] == pytest.approx(0.5)
    assert busy.meta["ratio_range"] == pytest.approx([1 / 3, 0.75])
    assert busy.meta["seconds"] == pytest.approx(1.0)
    assert not any(f.name.startswith("contention/untuned/dqn") for f in figures)
    assert notes == ["contention dqn/untuned: dqn/untuned child failed (exit 1): boom"]


@pytest.mark.slow
def test_contention_suite_end_to_end_on_cartpole():
    from rlamd.bench.contention import run_contention_suite

    notes: list[str] = []
    figures = run_contention_suite(seconds=1.5, algos=("ppo",), env_name="cartpole", notes=notes)
    assert {f.meta["mode"] for f in figures} == {"budget", "untuned"}
    assert all(f.median > 0 for f in figures)
    # The peers play only Breakout here (or, without the bench extra, are not installed).
    assert any("Stable-Baselines3 skipped" in n for n in notes), notes


def test_the_like_for_like_row_runs_sb3s_algorithm():
    """The 'SB3's algorithm' row must really drop PER, n-step, double Q and dueling."""
    from rlamd.bench.common import rlamd_loop
    from rlamd.replay import PrioritizedSampler, UniformSampler

    train = {"env": "breakout", "num_envs": 1, "precision": "fp32", "device": "cpu"}
    loop, agent = rlamd_loop(train, 64, batch_size=32, **get("sb3").dqn_algorithm)
    try:
        sampler = loop.buffer.sampler  # the replay's sampler is uniform, not prioritized
        assert isinstance(sampler, UniformSampler)
        assert not isinstance(sampler, PrioritizedSampler)
        assert (agent.cfg.n_step, agent.cfg.double_q, agent.cfg.dueling) == (1, False, False)
        assert loop.step >= 64
    finally:
        loop.collector.close()


def test_interleave_times_contenders_in_rounds_and_ratios_per_round():
    from rlamd.bench.common import Contender, interleave, ratio

    calls: list[str] = []
    values = {"a": iter([10.0, 30.0, 20.0]), "b": iter([5.0, 10.0, 20.0])}

    def run(name):
        def once():
            calls.append(name)
            return next(values[name])

        return once

    def warm(name):
        return lambda: calls.append(f"warm {name}")

    a, b = interleave(
        [
            Contender("x/a", "u", run("a"), {"k": 1}, warm("a")),
            Contender("x/b", "u", run("b"), {}, warm("b")),
        ],
        repeats=3,
    )
    assert calls == ["warm a", "warm b", "a", "b", "a", "b", "a", "b"]
    assert a.repeats == [10.0, 30.0, 20.0] and a.median == 20.0 and (a.min, a.max) == (10.0, 30.0)
    assert a.meta == {"repeats": 3, "k": 1, "interleaved_with": ["x/b"]}
    r = ratio(a, b)  # per round: 2, 3, 1
    assert (r.median, r.low, r.high) == (2.0, 1.0, 3.0) and r.text() == "2.00x (1.00-3.00)"
    with pytest.raises(ValueError, match="contender names must differ"):
        interleave([Contender("same", "u", run("a")), Contender("same", "u", run("b"))], repeats=1)
    short = interleave([Contender("c", "u", lambda: 1.0)], repeats=2)[0]
    with pytest.raises(ValueError, match="one interleave"):
        ratio(a, short)
    b.repeats[1] = 0.0  # a starved peer did nothing in round 2: that round has no ratio
    r = ratio(a, b, "ratio_to_b")
    assert (r.median, r.low, r.high) == (1.5, 1.0, 2.0) and a.meta["ratio_to_b_range"] == [1.0, 2.0]


@pytest.mark.parametrize("quick", [True, False])
def test_every_suite_on_the_command_line_gets_at_least_three_repeats(monkeypatch, quick):
    import importlib

    from rlamd.bench.__main__ import _MODULES, _RUNNERS, _run
    from rlamd.bench.common import MIN_REPEATS

    seen: dict[str, int] = {}
    for suite in _RUNNERS:
        module = f"rlamd.bench.{_MODULES.get(suite, suite)}"
        func = f"run_{suite}_suite"

        def fake(*args, _suite=suite, **kwargs):
            seen[_suite] = kwargs.get("repeats", kwargs.get("iters"))
            return [object()]

        monkeypatch.setattr(importlib.import_module(module), func, fake)
        _run(suite, torch.device("cpu"), quick, False, [])
    assert set(seen) == set(_RUNNERS)
    seen.pop("allreduce")  # no repeats: one timing per message size, median of iters
    assert all(r >= MIN_REPEATS for r in seen.values()), seen


def test_a_child_answers_in_json_lines_and_its_failure_names_its_last_words(tmp_path):
    import sys

    from rlamd.bench.child import Child

    script = "import sys; print('{\"ready\": 1}', flush=True); sys.stdin.readline(); "
    script += "print('not json', flush=True); sys.exit('boom')"
    child = Child([sys.executable, "-c", script], tmp_path / "log", stdin=True)
    assert child.ask(None, 30) == {"ready": 1}
    with pytest.raises(RuntimeError, match=r"child failed \(exit 1\): (boom|not json)"):
        child.ask("go", 30)
    log = (tmp_path / "log").read_text()
    assert "not json" in log and "boom" in log  # other lines and stderr go to the log
    assert child.proc.poll() == 1


def test_the_rollout_table_compares_encodings_without_ray(capsys):
    from rlamd.bench.common import Figure
    from rlamd.bench.distributed import _table

    figs = []
    for enc, size, rate in (("stacks", 28_000.0, 100.0), ("frames", 7_000.0, 120.0)):
        figs.append(Figure.of(f"rollout/{enc}/bytes_per_transition", "bytes", [size]))
        figs.append(Figure.of(f"rollout/{enc}/in_process/4envs", "env steps/s", [rate]))
        figs.append(Figure.of(f"rollout/{enc}/ray/2actors", "env steps/s", [rate / 2]))
    _table(figs, (2,), 1)
    by = {f.name: f.meta for f in figs}
    assert by["rollout/frames/bytes_per_transition"]["ratio_to_stacks"] == 0.25
    assert by["rollout/frames/ray/2actors"]["ratio_to_in_process_stacks"] == 0.6
    assert "ratio_to_stacks" not in by["rollout/stacks/ray/2actors"]
    row = "2 Ray actor(s) x 4 envs: env steps/s"
    assert re.search(rf"{re.escape(row)}\s+100\s+50\s+60\s+1.20", capsys.readouterr().out)


def test_the_raw_env_ceiling_gets_rlamds_emulator_threads(monkeypatch):
    """ale-py's own 0 would count every core of the machine; both envs use env_threads."""
    import ale_py.vector_env

    from rlamd.bench.device import raw_env
    from rlamd.cpuload import cores_available
    from rlamd.envs.atari import env_threads

    assert env_threads(8) == min(8, cores_available()) and env_threads(1) == 1
    assert env_threads(8, 3) == 3
    seen = {}
    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", lambda *a, **kw: seen.update(kw))
    raw_env("breakout", 16)
    assert seen["num_threads"] == env_threads(16) >= 1


@pytest.mark.ray
def test_the_rollout_suite_runs_ray_actors_with_both_encodings():
    """The Ray half of the suite: every actor count, both encodings, frames the smaller."""
    pytest.importorskip("ray")
    from rlamd.bench.distributed import ACTORS, run_rollout_suite

    by = {f.name: f for f in run_rollout_suite(rounds=1, repeats=1)}
    for enc in ("stacks", "frames"):
        assert all(by[f"rollout/{enc}/ray/{n}actors"].median > 0 for n in ACTORS)
    stacks, frames = (by[f"rollout/{e}/bytes_per_transition"] for e in ("stacks", "frames"))
    assert frames.median < stacks.median / 2


def test_the_rollout_suite_names_the_apex_settings_at_their_place():
    """Regression: the suite named ``chunk_steps`` and ``ship_frames`` under [ray] after they
    moved to [dqn], read only through the moved-key path."""
    from rlamd.bench.distributed import CHUNK, rollout_sections

    heard: list[str] = []
    sections = rollout_sections(heard.append)
    assert heard == []
    assert [(s.dqn.chunk_steps, s.dqn.ship_frames) for s in sections.values()] == [
        (CHUNK, False),
        (CHUNK, True),
    ]


def test_the_bench_stays_sized_to_the_product():
    """At most 3,000 lines in ``rlamd/bench/`` and 350 in any one of its files: the tool
    stays small beside the library it measures."""
    bench = Path(rlamd.bench.__file__).parent
    sizes = {
        p.relative_to(bench): p.read_text(encoding="utf-8").count("\n") for p in bench.rglob("*.py")
    }
    assert sum(sizes.values()) <= 3000, sum(sizes.values())
    assert max(sizes.values()) <= 350, max(sizes.items(), key=lambda kv: kv[1])
