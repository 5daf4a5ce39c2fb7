"""A peer is a plugin: one registered from this file, with no library file changed, shows
up in a suite's table and in a race; and no library module outside a peer's own names it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import rlamd.bench.peer as peer_mod
from rlamd.bench.peer import BasePeer, PPOSettings, Throughput, peers, register

# Writes one evaluation above any CartPole target, then waits for the race's SIGINT.
_CHILD = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
(out / "evals.csv").write_text("step,mean,std,episodes\\n1234,500.0,0.0,10\\n")
time.sleep(60)
"""


class FakePeer(BasePeer):
    name, label, colour = "fakepeer", "Fake Peer", "#123456"
    measurements = frozenset({"ppo", "race"})

    def __init__(self) -> None:
        self.given: list[PPOSettings] = []

    def ppo(self, settings: PPOSettings, device, iters: int) -> Throughput:
        self.given.append(settings)
        return Throughput("Fake PPO (its own)", lambda: iters * settings.per_rollout, lambda: None,
                          {"num_envs": settings.num_envs})  # fmt: skip

    def race_command(self, proto, algo: str, seed: int, folder: Path):
        return [sys.executable, "-c", _CHILD, str(folder)], {
            "source": "this test",
            "tag": "own defaults",
        }


@pytest.fixture
def fake(monkeypatch) -> FakePeer:
    peers()  # the shipped peers registered first, so the patched registry does not lose them
    monkeypatch.setattr(peer_mod, "_PEERS", {})  # only the fake: no real peer starts here
    return register(FakePeer())  # type: ignore[return-value]


def test_a_registered_peer_is_in_the_suite_table_with_rlamds_settings(fake, capsys):
    from rlamd.bench.ppo import run_classic_suite

    notes: list[str] = []
    figures = run_classic_suite(iters=1, repeats=1, precisions=("fp32",), notes=notes)
    assert [s.gym_id for s in fake.given] == ["CartPole-v1"]  # the settings rlamd ran with
    s = fake.given[0]
    assert (s.num_envs, s.num_steps, s.epochs, s.minibatches, s.lr, s.clip) == (
        8,
        128,
        4,
        4,
        1e-3,
        0.2,
    )
    names = [f.name for f in figures]
    assert names == ["classic/rlamd_fp32/8envs", "classic/fakepeer_fp32/8envs"]
    assert "ratio_to_fakepeer" in figures[0].meta and not notes
    out = capsys.readouterr().out
    assert re.search(r"Fake PPO \(its own\)\s+8\s+[\d,]+", out)
    assert "x Fake Peer's env steps/s" in out


def test_a_registered_peer_races(fake, tmp_path, capsys):
    from rlamd.bench import race

    args = ["cartpole", "--target", "450", "--algo", "ppo", "--minutes", "0.5"]
    assert race.main([*args, "--contenders", "fakepeer", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    (run,) = doc["runs"]
    assert (run["contender"], run["reached"], run["steps_to_target"]) == ("fakepeer", True, 1234)
    assert run["stopped"] == "target" and run["recipe"]["tag"] == "own defaults"
    table = capsys.readouterr().out
    assert re.search(r"ppo\s+Fake Peer\s+own defaults\s+1\s+\d", table)
    with pytest.raises(SystemExit):
        race.main(["cartpole", "--target", "450", "--contenders", "fakeper"])
    assert "accepted: rlamd, fakepeer. Did you mean 'fakepeer'?" in capsys.readouterr().err


def test_no_library_module_outside_a_peers_own_names_it():
    """Every peer's name and label appear only in its own modules (and sf_child, Sample
    Factory's own process), so adding a peer touches no other file."""
    bench = Path(peer_mod.__file__).parent
    words = {w.lower() for p in peers() for w in (p.name, p.label)} | {
        "stable_baselines",
        "sample_factory",
    }
    offenders = [
        f"{path.name}: {w}"
        for path in bench.glob("*.py")
        for w in words
        if w in path.read_text(encoding="utf-8").lower()
    ]
    assert not offenders
    assert {p.name for p in peers()} >= {"sb3", "rllib", "torchrl", "samplefactory"}


def test_peer_python_is_checked_and_names_the_nearest_peer(monkeypatch, tmp_path):
    from rlamd.bench.peer import get, peer_python, set_python

    monkeypatch.setattr(peer_mod, "_PYTHON", {})
    with pytest.raises(ValueError, match="accepted: NAME=PATH"):
        set_python("samplefactory")
    with pytest.raises(ValueError, match="Did you mean 'samplefactory'"):
        set_python(f"samplefactoyr={sys.executable}")
    with pytest.raises(ValueError, match="is not an executable"):
        set_python(f"samplefactory={tmp_path / 'python'}")
    set_python(f"samplefactory={sys.executable}")  # rlamd's own: Sample Factory is not here
    assert peer_python("samplefactory") == sys.executable
    reason = get("samplefactory").unavailable()
    assert reason.startswith("sample_factory not importable") and "--bench-peers" in reason
