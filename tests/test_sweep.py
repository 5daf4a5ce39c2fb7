"""The sweep without Ray: its checks, its refusals and its report (rlamd/sweep/)."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import rlamd
from rlamd.config import ConfigError, to_toml
from rlamd.config.layers import resolve
from rlamd.sweep import __main__ as cli
from rlamd.sweep.driver import plan
from rlamd.sweep.space import Base, parse_grid, parse_sample, parse_seeds, split_values

CARTPOLE = Base({"train": {"env": "cartpole", "algo": "ppo", "steps": 4096}})


def test_rlamd_sweep_is_the_callable_package():
    import rlamd.sweep as package

    assert rlamd.sweep is package and callable(package)
    from rlamd.sweep.api import sweep

    assert package.sweep is sweep


@pytest.mark.parametrize(
    ("grid", "words"),
    [
        (["ppo.lrr=1e-4,3e-4"], ["ppo.lrr", "no such setting", "Did you mean ppo.lr?"]),
        (["ppoo.lr=1e-4"], ["no section 'ppoo'", "Did you mean ppo.lr?"]),
        (["lr=1e-4"], ["say which", "dqn.lr or ppo.lr"]),
        (["ppo.lr=1e-4,fast"], ["--grid ppo.lr=fast", "accepted: a number"]),
        (["ppo.num_minibatches=4,3.5"], ["ppo.num_minibatches='3.5'", "a whole number"]),
        (["train.seed=1,2"], ["--grid train.seed", "accepted: --seeds"]),
        (["ppo.lr"], ["accepted: SECTION.KEY=V1,V2"]),
    ],
)
def test_a_bad_grid_is_refused_naming_the_key(grid, words):
    with pytest.raises(ConfigError) as info:
        plan(["cartpole"], CARTPOLE, grid=parse_grid(grid))
    text = str(info.value)
    assert "\n" not in text
    for w in words:
        assert w in text, text


def test_a_bad_combination_is_refused_before_any_trial():
    # 4 envs x 128 steps = 512 rows: 3 minibatches do not split them (PPO's own check)
    with pytest.raises(ConfigError, match="num_minibatches"):
        plan(["cartpole"], CARTPOLE, grid=parse_grid(["ppo.num_minibatches=4,3"]))


def test_the_cli_refuses_a_bad_key_before_ray_or_a_folder(tmp_path, capsys):
    status = cli.main(
        ["cartpole", "--algo", "ppo", "--logdir", str(tmp_path), "--grid", "ppo.lrr=1e-4,3e-4"]
    )
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Did you mean ppo.lr?" in err
    assert list(tmp_path.iterdir()) == []


def test_bad_samples_seeds_and_options():
    with pytest.raises(ConfigError, match="Did you mean loguniform"):
        parse_sample(["ppo.lr=logunifrm:1e-4:1e-3"])
    with pytest.raises(ConfigError, match="0 < LOW"):
        parse_sample(["ppo.lr=loguniform:0:1e-3"])
    with pytest.raises(ConfigError, match="repeats a seed"):
        parse_seeds("1,2,1", 1)
    with pytest.raises(ConfigError, match="Did you mean asha"):
        plan(["cartpole"], CARTPOLE, scheduler="ashaa")
    with pytest.raises(ConfigError, match="Did you mean eval_score"):
        plan(["cartpole"], CARTPOLE, metric="eval_scor")
    with pytest.raises(ConfigError, match="accepted: --seeds"):
        plan(["cartpole"], Base(CARTPOLE.flags, sets=("train.seed=3",)))


def test_seeds_values_and_the_plan():
    assert parse_seeds("3", 1) == [1, 2, 3] and parse_seeds("4,9", 1) == [4, 9]
    assert split_values("(64,64),(128,128)") == ["(64,64)", "(128,128)"]
    p = plan(["cartpole"], CARTPOLE, seeds=2, grid=parse_grid(["ppo.lr=1e-4,3e-4"]))
    assert p.trials == 4 and p.job["seeds"] == [1, 2]
    assert [c["settings"] for c in p.job["configurations"]] == [
        {"ppo.lr": "1e-4"},
        {"ppo.lr": "3e-4"},
    ]
    # a quarter of a CPU each still runs one thread, and the budget is the share
    assert plan(["cartpole"], CARTPOLE, cpus_per_trial=0.25).job["threads"] == 1
    assert plan(["cartpole"], CARTPOLE, cpus_per_trial=2).job["threads"] == 2


def test_random_draws_are_checked_and_repeatable():
    sample = parse_sample(["ppo.clip_coef=uniform:0.1:0.3", "ppo.update_epochs=int:2:4"])
    a = plan(["cartpole"], CARTPOLE, sample=sample, samples=5, sample_seed=7)
    b = plan(["cartpole"], CARTPOLE, sample=sample, samples=5, sample_seed=7)
    assert a.search == "random" and a.job["configurations"] == b.job["configurations"]
    for c in a.job["configurations"]:
        assert 0.1 <= float(c["settings"]["ppo.clip_coef"]) <= 0.3
        assert c["settings"]["ppo.update_epochs"] in {"2", "3", "4"}


def test_without_ray_the_sweep_says_how_to_install(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n.startswith("ray") else real(n, *a)
    )
    status = cli.main(["cartpole", "--algo", "ppo", "--logdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and "bash scripts/setup.sh --ray" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def _fake_trial(sweep: Path, cid: str, lr: str, seed: int, final: float, status="done"):
    run = sweep / f"{cid}_s{seed}"
    run.mkdir()
    cfg = resolve(
        {"train": {"env": "cartpole", "algo": "ppo", "seed": seed, "threads": 1}},
        sets=[f"ppo.lr={lr}", f"train.logdir={sweep}", f"train.run_name={run.name}"],
    )
    (run / "config.toml").write_text(to_toml(cfg.sections()))
    record = {
        "name": run.name,
        "config_id": cid,
        "settings": {"ppo.lr": lr},
        "seed": seed,
        "status": status,
        "env_steps": 4096,
        "wall_s": 10.0 + seed,
    }
    if status == "done":
        record["final"] = {"mean": final, "std": 0.0, "step": 4096, "scores": [final]}
    else:
        record["error"] = ["Traceback...", "RuntimeError: boom"]
    (run / "trial.json").write_text(json.dumps(record))
    rows = ["step,wall_s,score,eval_score"]
    rows += [f"{s},{s / 400:.2f},{final * s / 4096:.2f},{final:.2f}" for s in range(512, 4097, 512)]
    rows.insert(4, "1024,4.0,1.0,1.0")  # a resume rewound to step 1024: later rows replace it
    (run / "progress.csv").write_text("\n".join(rows) + "\n")


def test_the_report_reads_the_folder_alone(tmp_path):
    pytest.importorskip("scipy")  # the IQM and its interval (scripts/setup.sh --dev has it)
    p = plan(["cartpole"], CARTPOLE, seeds=3, grid=parse_grid(["ppo.lr=1e-4,1e-3"]), name="s")
    sweep = tmp_path / "s"
    sweep.mkdir()
    p.job["sweep_dir"] = str(sweep)
    (sweep / "sweep.json").write_text(json.dumps(p.__dict__))
    for seed, score in zip((1, 2, 3), (100.0, 120.0, 90.0), strict=True):
        _fake_trial(sweep, "c00", "1e-4", seed, score)
    for seed, score in zip((1, 2), (480.0, 500.0), strict=True):
        _fake_trial(sweep, "c01", "1e-3", seed, score)
    _fake_trial(sweep, "c01", "1e-3", 3, 0.0, status="failed")
    from rlamd.sweep.report import write_report

    assert write_report(sweep) == 5
    text = (sweep / "results.md").read_text()
    # the mean with Student's t interval: 103.3 +- 4.3027 * 15.275 / sqrt(3); 490 +- 12.706 * 14.142
    # / sqrt(2); the IQM without one below BOOTSTRAP_RUNS seeds, and a line saying why
    assert "| c00 | ppo.lr=1e-4 | 3/3 | 103.3 [65.4, 141.3] | 103.3 | 90.0 | 120.0 |" in text
    assert "| c01 | ppo.lr=1e-3 | 2/3 | 490.0 [362.9, 617.1] | 490.0 | 480.0 | 500.0 |" in text
    assert "The IQM gets a bootstrap interval from 7 seeds" in text
    assert "c01_s3: failed at step 4,096: RuntimeError: boom" in text
    assert "Best: c01" in text
    best = (sweep / "best.toml").read_text()
    assert "IQM 490.0, mean 490.0 [362.9, 617.1]" in best
    assert "lr = 0.001" in best and 'logdir = "runs"' in best and 'threads = "none"' in best
    cfg = resolve({}, config_file=str(sweep / "best.toml"))  # runs on its own
    assert cfg.ppo.lr == 1e-3 and cfg.train.env == "cartpole" and cfg.train.threads is None
    if importlib.util.find_spec("matplotlib"):
        assert (sweep / "curves.png").stat().st_size > 10_000


def test_from_enough_seeds_the_iqm_gets_its_bootstrap_interval(tmp_path):
    pytest.importorskip("scipy")
    from rlamd.sweep.report import groups, table
    from rlamd.sweep.stats import BOOTSTRAP_RUNS, interval

    sweep = tmp_path / "s"
    sweep.mkdir()
    finals = [100.0 + 10 * k for k in range(BOOTSTRAP_RUNS)]
    for seed, score in enumerate(finals, 1):
        _fake_trial(sweep, "c00", "1e-4", seed, score)
    text = table(groups(sweep), BOOTSTRAP_RUNS)
    low, high = interval([finals])
    assert (
        f"| {min(finals) + (max(finals) - min(finals)) / 2:.1f} [{low:,.1f}, {high:,.1f}] |" in text
    )
    assert "bootstrap interval from" not in text  # the line on too few seeds is left out


def test_progress_rows_rewound_by_a_resume_are_dropped(tmp_path):
    from rlamd.sweep.trial import read_progress

    (tmp_path / "progress.csv").write_text(
        "step,wall_s,score,eval_score\n100,1,5,5\n200,2,6,6\n300,3,7,7\n150,4,6.5,6.5\n250,5,8,8\n"
    )
    rows = read_progress(tmp_path)
    assert rows[:, 0].tolist() == [100, 150, 250] and rows[:, 1].tolist() == [1, 4, 5]


def test_resume_refuses_new_settings_and_a_folder_that_is_no_sweep(tmp_path, capsys):
    assert cli.main(["--resume", str(tmp_path)]) == 2
    assert "is not a sweep folder" in capsys.readouterr().err
    assert cli.main(["--resume", str(tmp_path), "--grid", "ppo.lr=1e-3"]) == 2
    assert "--resume DIR alone" in capsys.readouterr().err


def test_the_cli_explains_itself_and_import_rlamd_stays_light():
    out = subprocess.run(
        [sys.executable, "-m", "rlamd.sweep", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "--seeds" in out.stdout and "--gpus-per-trial" in out.stdout
    code = "import sys, rlamd; print('rlamd.sweep' in sys.modules, callable(rlamd.sweep))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("ray_address", [None, "10.0.0.5:6379"])
def test_a_sweep_joins_ray_address_or_starts_its_own_ray(
    tmp_path, capsys, monkeypatch, ray_address
):
    """Never a Ray that merely runs on this node (another user's, a killed sweep's)."""
    from rlamd.sweep import driver

    asked = []

    class FakeRay:
        def is_initialized(self):
            return False

        def init(self, **kw):
            asked.append(kw)
            raise RuntimeError("no Ray in this test")

    if ray_address:
        monkeypatch.setenv("RAY_ADDRESS", ray_address)
    else:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(driver, "_ray", lambda: (FakeRay(), None))
    status = cli.main(["cartpole", "--algo", "ppo", "--logdir", str(tmp_path), "--name", "s"])
    err = capsys.readouterr().err
    assert status == 2 and "Ray did not start: no Ray in this test" in err
    assert f"python -m rlamd.sweep --resume {tmp_path / 's'}" in err
    assert [kw.get("address") for kw in asked] == [None if ray_address else "local"]


class _SlowRay:
    """A Ray whose first start times out as Ray's does on a busy machine."""

    def __init__(self, fails: int) -> None:
        self.fails, self.calls = fails, []

    def init(self, **kw):
        self.calls.append(("init", kw))
        if sum(c[0] == "init" for c in self.calls) <= self.fails:
            raise Exception("The current node timed out during startup. This could happen ...")

    def shutdown(self):
        self.calls.append(("shutdown", {}))


def test_a_ray_start_that_timed_out_ends_what_it_left_and_tries_once_more(tmp_path):
    from rlamd.distributed.local import own_ray_processes, start_local

    program = tmp_path / "ray" / "core" / "raylet.py"  # stands for Ray's raylet
    program.parent.mkdir(parents=True)
    program.write_text("import time\ntime.sleep(120)\n")
    left = subprocess.Popen([sys.executable, str(program)])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        deadline = time.monotonic() + 10
        while left.pid not in own_ray_processes() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the child has exec'd its program
        assert left.pid in own_ray_processes() and other.pid not in own_ray_processes()
        fake = _SlowRay(fails=1)
        start_local(fake, num_cpus=2)
        assert [c[0] for c in fake.calls] == ["init", "shutdown", "init"]
        assert fake.calls[-1][1] == {"address": "local", "num_cpus": 2}
        assert left.wait(timeout=10) == -signal.SIGKILL  # the failed start's leftovers
        assert other.poll() is None  # not Ray's: left alone
    finally:
        for p in (left, other):
            p.kill()
            p.wait()
    with pytest.raises(Exception, match="timed out during startup"):
        start_local(_SlowRay(fails=2))  # twice: the error, as Ray gave it

    class NoRay(_SlowRay):
        def init(self, **kw):
            self.calls.append(("init", kw))
            raise RuntimeError("no Ray")

    refused = NoRay(0)
    with pytest.raises(RuntimeError, match="no Ray"):
        start_local(refused)
    assert len(refused.calls) == 1  # any other error: no second try


def test_trials_an_early_stopping_scheduler_ended_are_reported_as_stopped_early(tmp_path):
    pytest.importorskip("scipy")
    from rlamd.sweep.report import mark_stopped_early, write_report
    from rlamd.sweep.trial import read_record, save_record

    p = plan(["cartpole"], CARTPOLE, seeds=2, grid=parse_grid(["ppo.lr=1e-4,1e-3"]), name="s")
    sweep = tmp_path / "s"
    sweep.mkdir()
    p.job["sweep_dir"] = str(sweep)
    (sweep / "sweep.json").write_text(json.dumps(p.__dict__))
    _fake_trial(sweep, "c00", "1e-4", 1, 100.0)
    _fake_trial(sweep, "c00", "1e-4", 2, 0.0, status="failed")
    for seed in (1, 2):  # Tune ended their workers at a rung: their records say "running"
        _fake_trial(sweep, "c01", "1e-3", seed, 0.0, status="running")

    # ... and one worker writes "stopped" a moment after Tune returned (its run's SIGTERM
    # checkpoint first); the other never does (killed)
    def worker_writes_stopped():
        save_record(sweep / "c01_s2", {**read_record(sweep / "c01_s2"), "status": "stopped"})

    late = threading.Timer(0.5, worker_writes_stopped)
    late.start()
    assert mark_stopped_early(sweep, "asha", settle_s=3.0) == 2
    late.join()
    assert read_record(sweep / "c01_s2")["status"] == "stopped early"  # not undone
    assert read_record(sweep / "c00_s1")["status"] == "done"
    assert read_record(sweep / "c00_s2")["status"] == "failed"
    write_report(sweep)
    text = (sweep / "results.md").read_text()
    assert "c01_s1: stopped early by ASHA at step 4,096" in text
    assert "c01_s2: stopped early by ASHA" in text and "not finished" not in text
    assert "c00_s2: failed at step 4,096" in text and "| c01 | ppo.lr=1e-3 | 0/2 |" in text
    assert mark_stopped_early(sweep, "asha", settle_s=0.0) == 0  # once


def test_a_moved_sweep_sets_tunes_old_state_aside_and_an_optuna_one_says_where_it_was(
    tmp_path, capsys
):
    from rlamd.sweep.driver import _moved_here
    from rlamd.sweep.plan import SweepError, load_plan

    p = plan(["cartpole"], CARTPOLE, seeds=2, name="s")
    p.job["sweep_dir"] = str(tmp_path / "old" / "s")
    here = tmp_path / "new" / "s"
    (here / "tune").mkdir(parents=True)
    (here / "tune" / "tuner.pkl").write_text("old state")
    (here / "sweep.json").write_text(json.dumps(p.__dict__))
    _moved_here(load_plan(here), here)
    assert (here / "tune.moved-1" / "tuner.pkl").read_text() == "old state"
    assert not (here / "tune").exists()
    assert load_plan(here).job["sweep_dir"] == str(here.resolve())  # here from now on
    assert f"made in {tmp_path / 'old' / 's'}; it goes on here" in capsys.readouterr().out

    p.search = "optuna"
    with pytest.raises(SweepError, match=r"resumes only there: move it back, then python -m"):
        _moved_here(p, here)


def test_a_trial_stopped_after_training_only_evaluates_when_it_resumes(tmp_path):
    """Stopped (Ctrl-C, an early stop) between its last step and its evaluation: the
    resumed trial evaluates instead of asking ``rlamd.train`` for steps it has done."""
    from rlamd.train import main as train

    common = ["--logdir", str(tmp_path), "--run-name", "r", "--no-tensorboard"]
    assert train(["cartpole", "--steps", "256", "--eval-every", "0", *common]) == 0
    run = tmp_path / "r"
    args = ["-m", "rlamd.sweep.child", "rlamd.train", "--resume", str(run)]
    args += ["--then", "rlamd.evaluate", str(run), "--json", "--episodes", "1"]
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"rlamd: {run} has trained all of its 256 steps" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1])["step"] == 256
    again = [*args[:5], "--steps", "128"]  # --steps given: rlamd.train itself decides
    more = subprocess.run([sys.executable, *again], capture_output=True, text=True, timeout=300)
    assert more.returncode == 2 and "nothing is left to train" in more.stderr


def test_a_note_on_the_base_settings_is_said_once_and_the_plugin_variable_goes_to_trials(
    capsys, monkeypatch
):
    from rlamd.algos import PLUGINS_VARIABLE

    monkeypatch.delenv(PLUGINS_VARIABLE, raising=False)
    base = Base({"train": {"env": "cartpole", "algo": "ppo", "steps": 4096}}, sets=("dqn.lr=1",))
    p = plan(["cartpole"], base, grid=parse_grid(["ppo.lr=1e-4,3e-4,1e-3"]))
    assert capsys.readouterr().err.count("dqn.lr ignored: this run trains ppo") == 1
    assert p.job["env_vars"] == {}
    monkeypatch.setenv(PLUGINS_VARIABLE, "my_algos")
    assert plan(["cartpole"], CARTPOLE).job["env_vars"] == {PLUGINS_VARIABLE: "my_algos"}
