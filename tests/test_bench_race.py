"""The race: its stopping rule, its clock, its results.json and chart, skipped peers, and
(slow) real races on CartPole. No timing is asserted beyond the race's own budgets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlamd.bench import race
from rlamd.bench.race_report import EvalPoint
from rlamd.evaluate import Evaluation

# A contender that writes one evaluation per PAUSE seconds, then (with "wait") idles until
# SIGINT; it records whether it was stopped. A fifth argument: a warning it writes first.
FAKE = """
import pathlib, signal, sys, time
out, scores, pause = pathlib.Path(sys.argv[1]), sys.argv[2].split(","), float(sys.argv[3])
if len(sys.argv) > 5:
    print(f"warning: {sys.argv[5]}", file=sys.stderr, flush=True)
stopped = []
signal.signal(signal.SIGINT, lambda *_: stopped.append(1))
out.mkdir(parents=True, exist_ok=True)
with open(out / "evals.csv", "w", buffering=1) as f:
    f.write("step,mean,std,episodes\\n")
    for i, s in enumerate(scores):
        time.sleep(pause)
        if stopped:
            break
        f.write(f"{(i + 1) * 1000},{s},0.5,10\\n")
    while len(sys.argv) > 4 and not stopped and sys.argv[4] == "wait":
        time.sleep(0.02)
(out / "stopped").write_text(str(bool(stopped)))
sys.exit(int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4].isdigit() else 0)
"""


def _fake(tmp_path: Path, scores: str, pause: float, *extra: str) -> tuple[list[str], Path]:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    folder = tmp_path / "run"
    return [sys.executable, str(script), str(folder), scores, str(pause), *extra], folder


def test_stopping_rule():
    curve = [EvalPoint(1000, 20.0, 1.0, 10, 3.0), EvalPoint(2000, 449.9, 1.0, 10, 6.0)]
    assert race.stop_reason(curve, 7.0, 450.0, 60.0) is None
    assert race.stop_reason(curve, 60.0, 450.0, 60.0) == "minutes"
    curve.append(EvalPoint(3000, 450.0, 0.0, 10, 9.0))  # at the target counts
    assert race.stop_reason(curve, 99.0, 450.0, 60.0) == "target"


def test_read_evals_leaves_a_half_written_row(tmp_path):
    path = tmp_path / "evals.csv"
    assert race.read_evals(path) == []
    path.write_text("step,mean,std,episodes\n2500,12.5000,1.0000,10\n5000,40.0")
    assert race.read_evals(path) == [(2500, 12.5, 1.0, 10)]


def test_a_contender_is_stopped_when_it_reaches_the_target(tmp_path):
    cmd, folder = _fake(tmp_path, "10,30,500,600", 0.4, "wait")
    reason, wall, curve, code = race.race_one(
        cmd, folder / "evals.csv", tmp_path / "log", 450.0, 60.0
    )
    assert reason == "target"
    assert [p.step for p in curve] == [1000, 2000, 3000]  # the 4th row was never written
    assert [p.mean for p in curve] == [10.0, 30.0, 500.0]
    seconds = [p.seconds for p in curve]
    assert seconds == sorted(seconds) and seconds[0] >= 0.4 and wall >= seconds[-1]
    assert (folder / "stopped").read_text() == "True" and code == 0


def test_a_contender_is_stopped_when_its_minutes_run_out(tmp_path):
    cmd, folder = _fake(tmp_path, "10,20", 0.2, "wait")
    reason, wall, curve, _ = race.race_one(cmd, folder / "evals.csv", tmp_path / "log", 450, 1.0)
    assert reason == "minutes" and 1.0 <= wall < 30 and len(curve) == 2
    assert (folder / "stopped").read_text() == "True"


def test_a_contender_that_ends_by_itself_finished_or_failed(tmp_path):
    cmd, folder = _fake(tmp_path, "10,20", 0.05)
    assert race.race_one(cmd, folder / "evals.csv", tmp_path / "a", 450, 60)[0] == "finished"
    cmd, folder = _fake(tmp_path, "10", 0.05, "3")
    reason, _, curve, code = race.race_one(cmd, folder / "evals.csv", tmp_path / "b", 450, 60)
    assert (reason, code, len(curve)) == ("failed", 3, 1)


def test_rllib_is_skipped_without_ray(monkeypatch, tmp_path, capsys):
    from rlamd.bench.race import child_main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, find_spec says None
    proto = race.RaceProtocol("cartpole", 450.0, ("ppo",), 1.0, 2500, 10, 1, "cpu")
    assert race._skip_reason("rllib", proto, "ppo").startswith(
        "ray.rllib.algorithms.ppo not importable"
    )
    args = ["rllib", "--env", "cartpole", "--algo", "ppo", "--eval-every", "100"]
    code = child_main([*args, "--eval-episodes", "1", "--threads", "1", "--dir", str(tmp_path)])
    assert (
        code == 3 and "skipped: ray.rllib.algorithms.ppo not importable" in capsys.readouterr().err
    )


def test_installed_peers_without_a_recipe_are_skipped(monkeypatch):
    from rlamd.bench.peer import get

    for name in ("sb3", "rllib", "samplefactory"):
        monkeypatch.setattr(get(name), "unavailable", lambda: None)  # installed
    acrobot = race.RaceProtocol("acrobot", -100.0, ("dqn",), 1.0, 2500, 10, 1, "cpu")
    assert race._skip_reason("sb3", acrobot, "dqn") == "no RL Zoo recipe for acrobot / dqn"
    pong = race.RaceProtocol("pong", -15.0, ("ppo",), 1.0, 50_000, 8, 1, "cpu")
    assert race._skip_reason("sb3", pong, "ppo") is None  # the Zoo's atari entry
    assert race._skip_reason("rllib", pong, "ppo").endswith("in this bench (CartPole only)")
    assert race._skip_reason("samplefactory", pong, "ppo") is None  # its Atari defaults
    assert "APPO" in race._skip_reason("samplefactory", pong, "dqn")
    assert race._skip_reason("rlamd", pong, "ppo") is None


def test_rlamd_runs_the_real_trainer_with_the_shared_protocol(tmp_path):
    proto = race.RaceProtocol("cartpole", 450.0, ("dqn",), 5.0, 2500, 10, 2, "cpu", steps=0)
    cmd, evals, settings = race.command("rlamd", proto, "dqn", 3, tmp_path / "runs" / "x")
    assert cmd[1:4] == ["-m", "rlamd.train", "cartpole"] and evals == tmp_path / "runs/x/evals.csv"
    flags = dict(zip(cmd[4::2], cmd[5::2], strict=False))
    assert flags["--eval-every"] == "2500" and flags["--eval-episodes"] == "10"
    assert flags["--threads"] == "2" and flags["--seed"] == "3" and flags["--run-name"] == "x"
    assert settings["steps"] == 60_000 and "preset" in settings["source"]  # rlamd's preset
    assert settings["tag"] == "rlamd preset"
    peer, _, rec = race.command("sb3", proto, "dqn", 3, tmp_path / "runs" / "y")
    assert peer[peer.index("--eval-epsilon") + 1] == "0.0"  # rlamd's CartPole eval epsilon
    assert rec["steps"] == 50_000 and "rl-baselines3-zoo" in rec["source"]


def test_results_json_table_and_chart(monkeypatch, tmp_path, capsys):
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    curves = {"rlamd": "100,460", "sb3": "50,120,300"}

    def fake_command(who, proto, algo, seed, folder):
        cmd = [sys.executable, str(script), str(folder), curves[who], "0.2", "wait"]
        cmd += ["export of checkpoint_2 failed"] if who == "sb3" else []
        return cmd, folder / "evals.csv", {"source": f"fake {who}"}

    def skip(who, proto, algo):
        return None if who in curves else f"{who} not installed (test)"

    monkeypatch.setattr(race, "command", fake_command)
    monkeypatch.setattr(race, "_skip_reason", skip)
    out = tmp_path / "out"
    args = ["cartpole", "--target", "450", "--algo", "dqn", "--minutes", "0.05"]
    assert race.main([*args, "--out", str(out), "--threads", "1"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert {
        "command",
        "machine",
        "protocol",
        "runs",
        "summary",
        "skipped",
        "notes",
        "charts",
    } <= set(doc)
    assert doc["protocol"]["target"] == 450.0 and doc["protocol"]["threads"] == 1
    assert doc["protocol"]["eval_epsilon_dqn"] == 0.0
    mine, sb3 = doc["runs"]
    assert (mine["contender"], mine["reached"], mine["steps_to_target"]) == ("rlamd", True, 2000)
    assert mine["seconds_to_target"] == mine["evaluations"][-1]["seconds"] > 0
    assert mine["stopped"] == "target" and mine["load"]["cores"] >= 1
    assert (sb3["reached"], sb3["stopped"], sb3["best_score"]) == (False, "minutes", 300.0)
    assert sb3["seconds_to_target"] is None and sb3["recipe"]["source"] == "fake sb3"
    assert doc["skipped"] == [
        {"contender": who, "algo": "dqn", "reason": f"{who} not installed (test)"}
        for who in ("rllib", "samplefactory")
    ]
    said = [n for n in doc["notes"] if "warnings in" in n]  # only the peer that wrote one
    assert len(said) == 1 and said[0].startswith("dqn sb3 seed 1: warnings in ")
    assert said[0].endswith(": 1, the last: warning: export of checkpoint_2 failed")
    assert doc["summary"][0] == {
        "algo": "dqn", "contender": "rlamd", "runs": 1, "reached": 1,
        "median_seconds": mine["seconds_to_target"], "median_steps": 2000,
    }  # fmt: skip
    assert (out / "race.png").stat().st_size > 5000 and doc["charts"] == [str(out / "race.png")]
    text = capsys.readouterr().out
    assert "not reached" in text and "300.0 at 3,000" in text and "2,000" in text


def test_bad_flags_say_what_is_accepted(capsys):
    with pytest.raises(SystemExit):
        race.main(["cartpole", "--target", "450", "--minutes", "0"])
    assert "--minutes 0.0; accepted: minutes > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        race.main(["cartpol", "--target", "450"])
    assert "Closest valid names: cartpole" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        race.main(["cartpole", "--target", "450", "--contenders", "rlamd,sb"])
    assert (
        "unknown 'sb'; accepted: rlamd, sb3, rllib, samplefactory. Did you mean 'sb3'?"
        in capsys.readouterr().err
    )


def test_contenders_run_in_race_order(monkeypatch, tmp_path):
    seen: list[str] = []

    def fake_run(proto, out, contenders, notes):
        seen.extend(contenders)
        return [], []

    monkeypatch.setattr(race, "run_race", fake_run)
    base = ["cartpole", "--target", "450", "--out", str(tmp_path)]
    assert race.main([*base, "--contenders", "rllib,rlamd"]) == 0
    assert seen == ["rlamd", "rllib"]


@pytest.mark.slow
def test_a_real_race_on_cartpole(tmp_path):
    """rlamd's trainer to a low target (random play scores about 22), peers as installed."""
    out = tmp_path / "race"
    assert (
        race.main(
            ["cartpole", "--target", "60", "--algo", "dqn", "--minutes", "2", "--out", str(out)]
        )
        == 0
    )
    doc = json.loads((out / "results.json").read_text())
    mine = next(r for r in doc["runs"] if r["contender"] == "rlamd")
    assert mine["reached"] and mine["stopped"] == "target" and mine["steps_to_target"] >= 2500
    assert mine["evaluations"][0]["episodes"] == 10
    assert (out / "runs" / "dqn_rlamd_s1" / "checkpoint.pt").exists()  # stopped cleanly
    contenders = {r["contender"] for r in doc["runs"]} | {s["contender"] for s in doc["skipped"]}
    assert contenders == {"rlamd", "sb3", "rllib", "samplefactory"}


@pytest.mark.slow
def test_the_sb3_child_evaluates_on_the_race_schedule(tmp_path):
    pytest.importorskip("stable_baselines3")
    from rlamd.bench.race import child_main

    args = ["sb3", "--env", "cartpole", "--algo", "ppo", "--steps", "3000", "--eval-every"]
    args += ["1000", "--eval-episodes", "3", "--threads", "1", "--dir", str(tmp_path)]
    assert child_main(args) == 0
    rows = race.read_evals(tmp_path / "evals.csv")
    assert [r[0] for r in rows] == [1000, 2000, 3000]  # after vector steps of 8 envs
    assert all(r[3] == 3 and 8 <= r[1] <= 500 for r in rows)


def test_the_table_needs_no_rlamd_row(capsys):
    from rlamd.bench.race_report import RaceRun, print_race

    curve = (EvalPoint(1000, 100.0, 1.0, 10, 4.0), EvalPoint(2000, 460.0, 1.0, 10, 9.0))
    peer = RaceRun("ppo", "rllib", 1, 450.0, "target", 9.5, curve)
    mine = RaceRun("ppo", "rlamd", 1, 450.0, "minutes", 60.0, curve[:1])
    print_race([peer], "head")  # a race of peers only: no comparison line, no error
    assert "RLlib" in capsys.readouterr().out
    print_race([mine, peer], "head")  # rlamd did not reach it: no comparison either
    text = capsys.readouterr().out
    assert "not reached" in text and "faster" not in text and "slower" not in text


def test_sample_factory_warnings_reach_the_race_log(monkeypatch, tmp_path, capsys):
    """Its child's failed exports (JSON lines) become 'warning:' lines in the race's log,
    which the race counts into its notes; progress lines are not warnings."""
    import threading
    from argparse import Namespace

    from rlamd.bench.child import Child
    from rlamd.bench.peers import samplefactory as sf

    says = '{"steps": 512}', '{"warning": "export of checkpoint_1.pth failed: boom"}'
    script = "".join(f"print({s!r}, flush=True)\n" for s in says) + "import time; time.sleep(1)"

    def start(rec, args, folder):
        return Child([sys.executable, "-c", script])

    monkeypatch.setattr(sf, "_start", start)
    args = Namespace(env="cartpole", algo="ppo", dir=str(tmp_path), seed=1)
    sf.PEER.race_train(args, threading.Event(), evals=None)
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: Sample Factory export of checkpoint_1.pth failed: boom"]


def test_a_peer_evaluation_in_which_no_episode_ends_writes_no_row(monkeypatch, tmp_path, capsys):
    played = Evaluation(scores=[], cut=0, cap=None, steps=2_000_000, asked=3)
    monkeypatch.setattr(race, "evaluate_episodes", lambda *a, **k: played)
    args = race.argparse.Namespace(
        env="cartpole", eval_every=100, eval_episodes=3, eval_epsilon=0.0, seed=1, dir=tmp_path
    )
    evals = race.Evaluations(args)
    assert evals.maybe(150, lambda obs: obs) is True
    evals.csv.close()
    assert race.read_evals(tmp_path / "evals.csv") == []
    assert "eval at 150: no evaluation episode finished" in capsys.readouterr().err
    assert evals.due_at == 200
