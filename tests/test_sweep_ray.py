"""Sweeps on a real local Ray (marker ``ray``): small PPO CartPole runs, 2 CPUs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
pytest.importorskip("ray.tune")

import rlamd  # noqa: E402
from rlamd.config.layers import resolve  # noqa: E402

SMALL = {
    "train.eval_every": 0,
    "train.eval_episodes": 2,
    "train.log_every": 512,
    "train.checkpoint_every": 512,
    "train.tensorboard": False,
}


STEPS = 32_768
"""Long enough (several seconds a trial here) that a Ctrl-C sent at the second trial's first
checkpoint (512 steps in) reaches it before it ends: a trial hears it at its next report."""


def _done(sweep: Path) -> list[str]:
    names = []
    for record in sorted(sweep.glob("c*_s*/trial.json")):
        if json.loads(record.read_text()).get("status") == "done":
            names.append(record.parent.name)
    return names


def test_two_configurations_two_seeds_end_with_the_table_toml_and_chart(tmp_path):
    result = rlamd.sweep(
        "cartpole",
        algo="ppo",
        steps=1024,
        seeds=2,
        grid={"ppo.lr": [3e-4, 1e-3]},
        settings=SMALL,
        logdir=str(tmp_path),
        name="s",
        verbose=0,
    )
    assert result.status == 0 and result.path == tmp_path / "s"
    assert "| c00 | ppo.lr=0.0003 | 2/2 |" in result.table
    assert "| c01 | ppo.lr=0.001 | 2/2 |" in result.table
    assert sorted(_done(result.path)) == ["c00_s1", "c00_s2", "c01_s1", "c01_s2"]
    for run in ("c00_s1", "c01_s2"):  # ordinary run folders, with the sweep's settings
        folder = result.path / run
        assert (folder / "checkpoint.pt").is_file() and (folder / "episodes.csv").is_file()
        cfg = resolve({}, config_file=str(folder / "config.toml"))
        assert cfg.train.seed == int(run[-1]) and cfg.train.threads == 1
        assert cfg.ppo.lr == (3e-4 if run.startswith("c00") else 1e-3)
    best = resolve({}, config_file=str(result.best_toml))
    assert best.train.logdir == "runs" and best.train.threads is None and best.train.steps == 1024
    assert (result.path / "curves.png").stat().st_size > 10_000
    assert (result.path / "results.md").read_text().startswith("# Sweep s")


def test_an_interrupted_sweep_resumes_and_ends_with_all_four(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "rlamd.sweep",
        "cartpole",
        "--algo",
        "ppo",
        "--steps",
        str(STEPS),
        "--seeds",
        "2",
        "--grid",
        "ppo.lr=3e-4,1e-3",
        "--logdir",
        str(tmp_path),
        "--name",
        "s",
        "--max-concurrent",
        "1",
        "--quiet",
    ]
    cmd += [x for k, v in SMALL.items() for x in ("--set", f"{k}={v}")]
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sweep = tmp_path / "s"
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)  # the first trial done, the second one checkpointed
        if _done(sweep) and len(list(sweep.glob("c*_s*/checkpoint.pt"))) >= 2:
            break
    first = _done(sweep)
    assert len(first) == 1, driver.communicate()[0]
    kept = (sweep / first[0] / "checkpoint.pt").stat().st_mtime_ns
    driver.send_signal(signal.SIGINT)  # Ctrl-C
    out, _ = driver.communicate(timeout=180)
    assert driver.returncode == 130, out
    assert f"python -m rlamd.sweep --resume {sweep}" in out
    interrupted = sorted(
        {p.parent.name for p in sweep.glob("c*_s*/checkpoint.pt")} - {*_done(sweep)}
    )
    assert interrupted, "the trial the Ctrl-C meant to stop had ended first:\n" + out

    moved = tmp_path / "elsewhere" / "s"  # a sweep folder resumes where it lies now
    moved.parent.mkdir()
    shutil.move(sweep, moved)
    sweep_was, sweep = sweep, moved
    env = {**os.environ}
    resumed = subprocess.run(
        [sys.executable, "-m", "rlamd.sweep", "--resume", str(sweep), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(_done(sweep)) == ["c00_s1", "c00_s2", "c01_s1", "c01_s2"]
    assert (sweep / first[0] / "checkpoint.pt").stat().st_mtime_ns == kept  # not run again
    for name in interrupted:  # it went on from its checkpoint or, stopped after its last
        log = (sweep / "logs" / f"{name}.log").read_text()  # step, only evaluated
        assert "rlamd: resuming" in log or f"has trained all of its {STEPS:,} steps" in log, log
    assert "2/2" in (sweep / "results.md").read_text()
    assert not sweep_was.exists()  # nothing went back to the old place
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir() and p.name.startswith("c0")) == [
        "c00_s1",
        "c00_s2",
        "c01_s1",
        "c01_s2",
    ]


@pytest.mark.parametrize("steps", [2048, 1024])
def test_asha_never_stops_a_trial_at_its_last_step(steps):
    """Its last report comes while the run evaluates: a stop there would leave a finished
    trial without its result (ASHA's rungs of 256 x 4^k would put one at 1,024)."""
    from ray.tune.experiment import Trial

    from rlamd.sweep.driver import scheduler
    from rlamd.sweep.plan import Plan

    asha = scheduler(Plan(job={}, scheduler="asha", grace_steps=256, steps=steps))
    asha.set_search_properties("score", "max")
    trials = [Trial("__fake", trial_id=f"t{i}", stub=True) for i in range(3)]
    for t in trials:
        asha.on_trial_add(None, t)
    good, bad, last = trials
    assert asha.on_trial_result(None, good, {"env_steps": 256, "score": 50.0}) == "CONTINUE"
    assert asha.on_trial_result(None, bad, {"env_steps": 256, "score": 10.0}) == "STOP"
    assert asha.on_trial_result(None, last, {"env_steps": 256, "score": 60.0}) == "CONTINUE"
    for t, score in ((good, 40.0), (last, 90.0), (good, 30.0)):  # the end, worse than last
        assert asha.on_trial_result(None, t, {"env_steps": steps, "score": score}) == "CONTINUE"


def test_optuna_draws_and_asha_stops_the_worst_trials_early(tmp_path):
    """Optuna's sampler through Tune suggests the values; ASHA ends trials at its rungs and
    the report says which (``bash scripts/setup.sh --dev --ray --tune`` brings Optuna)."""
    pytest.importorskip("optuna")
    result = rlamd.sweep(
        "cartpole",
        algo="ppo",
        steps=2048,
        sample={"ppo.lr": "loguniform:1e-5:3e-2"},
        samples=6,
        search="optuna",
        scheduler="asha",
        metric="score",
        grace_steps=256,
        settings=SMALL,
        logdir=str(tmp_path),
        name="a",
        verbose=0,
    )
    assert result.status == 0, result.table
    records = [json.loads(p.read_text()) for p in sorted(result.path.glob("*_s1/trial.json"))]
    assert len(records) == 6
    lrs = {float(r["settings"]["ppo.lr"]) for r in records}
    assert len(lrs) == 6 and all(1e-5 <= lr <= 3e-2 for lr in lrs)  # six suggestions
    done = [r for r in records if r["status"] == "done"]
    early = [r for r in records if r["status"] == "stopped early"]
    assert len(done) + len(early) == 6 and done and early
    assert all(r["env_steps"] >= 2048 for r in done)
    assert all(r["env_steps"] < 2048 and r["stopped_by"] == "asha" for r in early)
    text = (result.path / "results.md").read_text()
    for r in early:
        assert f"{r['name']}: stopped early by ASHA at step" in text
    assert "not finished" not in text and (result.path / "best.toml").is_file()
