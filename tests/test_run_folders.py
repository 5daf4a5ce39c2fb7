"""Run folders never lose work (issue #24): resume where pointed, one process per folder,
storage faults as one line, no orphan temp files, settings a checkpoint cannot take.

Full-disk and read-only cases use a small tmpfs where this user may mount one, and an
injected ``OSError`` everywhere (both run where both can)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from rlamd import runner
from rlamd.rundir import LOCK_NAME, hold, holder
from rlamd.train import main

COMMON = ["--device", "cpu", "--eval-every", "0", "--no-tensorboard", "--log-every", "400"]


def _new(logdir, name, steps=800, *extra):
    args = ["cartpole", "--steps", str(steps), "--logdir", str(logdir), "--run-name", name]
    return main([*args, "--checkpoint-every", "400", *COMMON, *extra])


def _resume(run_dir, steps, *extra):
    return main(["--resume", str(run_dir), "--steps", str(steps), *COMMON, *extra])


def _step(run_dir):
    return torch.load(run_dir / "checkpoint.pt", weights_only=True)["step"]


def _last_error(err: str) -> str:
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs where this user may mount one (root in most containers), else None."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = (
        os.geteuid() == 0
        and shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        == 0
    )
    try:
        yield mnt if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(folder) -> None:
    """Write into ``folder`` until its filesystem is full."""
    with open(folder / "filler", "ab") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_resuming_a_copy_writes_into_the_copy(tmp_path, capsys):
    """Regression: `--resume runs/branch` of a copied run wrote into runs/orig (the path
    saved in the checkpoint) and replaced its checkpoint; the copy never advanced."""
    assert _new(tmp_path, "orig", 400) == 0
    shutil.copytree(tmp_path / "orig", tmp_path / "branch")
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(tmp_path / "orig", moved)
    capsys.readouterr()
    assert _resume(tmp_path / "branch", 800) == 0
    assert _resume(moved / "checkpoint.pt", 1200) == 0  # a checkpoint file: its folder
    out = capsys.readouterr().out
    assert f"-> {tmp_path / 'branch'}" in out and f"-> {moved}" in out
    assert (_step(tmp_path / "orig"), _step(tmp_path / "branch"), _step(moved)) == (400, 800, 1200)
    assert "run_dir" not in torch.load(moved / "checkpoint.pt", weights_only=True)


def test_a_second_process_on_a_run_is_refused_with_the_holders_pid(tmp_path, capsys):
    """Regression: two processes resuming one run both trained; the last checkpoint won."""
    assert _new(tmp_path, "r", 400) == 0
    before = (tmp_path / "r" / "checkpoint.pt").read_bytes()
    with hold(tmp_path / "r"):  # as a training process would
        capsys.readouterr()
        assert _resume(tmp_path / "r", 800) == 2
        err = _last_error(capsys.readouterr().err)
        assert err.startswith(f"error: {tmp_path / 'r'} is in use by process {os.getpid()}")
        assert (tmp_path / "r" / "checkpoint.pt").read_bytes() == before
    assert _resume(tmp_path / "r", 800) == 0  # released: it goes on
    assert holder(tmp_path / "r") is None and (tmp_path / "r" / LOCK_NAME).read_text() == ""


def test_a_taken_run_name_never_mixes_two_runs(tmp_path, capsys):
    """Regression: two new runs with one --run-name left a DQN checkpoint.pt beside a PPO
    config.toml. A taken name now gets a suffix, which keeps `--config RUN/config.toml`
    working for a run that names itself."""
    assert _new(tmp_path, "x", 400) == 0
    dqn = (tmp_path / "x" / "checkpoint.pt").read_bytes()
    assert _new(tmp_path, "x", 512, "--algo", "ppo", "--set", "ppo.num_steps=128") == 0
    assert main(["--config", str(tmp_path / "x" / "config.toml"), *COMMON]) == 0
    assert (tmp_path / "x" / "checkpoint.pt").read_bytes() == dqn
    text = (tmp_path / "x" / "config.toml").read_text()
    assert 'algo = "dqn"' in text and "[dqn]" in text and "[ppo]" not in text  # its own only
    ppo = torch.load(tmp_path / "x-2" / "checkpoint.pt", weights_only=True)
    assert ppo["config"]["train"]["algo"] == "ppo"
    assert _step(tmp_path / "x-3") == 400
    assert f"already holds a run (continue that one with --resume {tmp_path / 'x'})" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("disk", ["tmpfs", "injected"])
def test_a_read_only_or_file_logdir_is_one_line_before_anything_is_built(
    tmp_path, small_disk, monkeypatch, capsys, disk
):
    """Regression: a read-only logdir, or one that is a file, failed with a traceback
    after the engine was built."""
    (tmp_path / "afile").write_text("x")
    assert _new(tmp_path / "afile", "r") == 2
    assert _last_error(capsys.readouterr().err) == (
        f"error: cannot write {tmp_path / 'afile'}: {tmp_path / 'afile'} is a file, not a folder"
    )
    if disk == "tmpfs":
        if small_disk is None:
            pytest.skip("no tmpfs can be mounted here")
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        logdir = small_disk
    else:
        real_mkdir = os.mkdir

        def read_only(path, *args, **kwargs):
            if str(path).startswith(str(tmp_path / "ro")):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_mkdir(path, *args, **kwargs)

        monkeypatch.setattr(os, "mkdir", read_only)
        logdir = tmp_path / "ro"
    built = []
    monkeypatch.setattr(runner, "LocalEngine", lambda *a: built.append(a))
    assert _new(logdir, "r") == 2
    err = _last_error(capsys.readouterr().err)
    assert err.startswith(f"error: cannot write {logdir}") and "read-only" in err
    assert built == []


@pytest.mark.parametrize("disk", ["tmpfs", "injected"])
def test_a_full_disk_at_the_start_is_one_line_before_anything_is_built(
    tmp_path, small_disk, monkeypatch, capsys, disk
):
    from rlamd import storage

    if disk == "tmpfs":
        if small_disk is None:
            pytest.skip("no tmpfs can be mounted here")
        _fill(small_disk)
        logdir = small_disk
    else:
        logdir = tmp_path / "runs"
        assert _new(logdir, "old", 400) == 0  # then the disk fills up
        monkeypatch.setattr(storage, "free_bytes", lambda path: 4096)
    built = []
    monkeypatch.setattr(runner, "LocalEngine", lambda *a: built.append(a))
    capsys.readouterr()
    assert _new(logdir, "r") == 2
    err = _last_error(capsys.readouterr().err)
    assert err.startswith(f"error: cannot write {logdir}") and "no space left on the device" in err
    assert built == [] and not (logdir / "r").exists()
    if disk == "injected":
        assert _resume(logdir / "old", 800) == 2
        err = _last_error(capsys.readouterr().err)
        assert err.startswith(f"error: cannot write {logdir / 'old'}: no space left")
        assert "4.0 KiB free there; its next checkpoint needs about 1.0 MiB" in err
        assert built == [] and _step(logdir / "old") == 400


@pytest.mark.parametrize("disk", ["tmpfs", "injected"])
def test_a_full_disk_during_a_checkpoint_keeps_the_last_one_and_says_how_to_resume(
    tmp_path, small_disk, monkeypatch, capsys, disk
):
    """Regression: a full disk during a checkpoint write ended in chained tracebacks."""
    import builtins

    import rlamd.checkpoint as checkpoint_module

    if disk == "tmpfs" and small_disk is None:
        pytest.skip("no tmpfs can be mounted here")
    logdir = small_disk if disk == "tmpfs" else tmp_path / "runs"
    real, calls = runner._Run.checkpoint, []

    def fill_before_the_second(self):
        calls.append(self.step)
        if len(calls) == 2 and disk == "tmpfs":
            _fill(logdir)
        elif len(calls) == 2:
            monkeypatch.setattr(checkpoint_module, "open", _full_open, raising=False)
        real(self)

    def _full_open(path, mode="r"):
        if "w" in mode:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return builtins.open(path, mode)

    monkeypatch.setattr(runner._Run, "checkpoint", fill_before_the_second)
    assert _new(logdir, "r", 1200) == 1
    err = _last_error(capsys.readouterr().err)
    run_dir = logdir / "r"
    assert err.startswith(f"error: cannot write {run_dir / 'checkpoint.pt'}: no space left")
    assert f"the last good checkpoint ({run_dir / 'checkpoint.pt'}, step 400) is kept" in err
    assert "--resume" in err and str(run_dir) in err
    assert _step(run_dir) == 400
    assert not [p for p in run_dir.iterdir() if ".tmp-" in p.name]
    assert holder(run_dir) is None
    monkeypatch.undo()
    (logdir / "filler").unlink(missing_ok=True)
    assert _resume(run_dir, 1200) == 0 and _step(run_dir) == 1200


def test_a_full_disk_in_the_episode_log_stops_cleanly_and_saves_progress(
    tmp_path, monkeypatch, capsys
):
    import builtins

    import rlamd.logger as logger_module

    full = {"now": False}

    class Csv:
        def __init__(self, f):
            self._f = f

        def write(self, text):
            # Full for the first episode that ends after the checkpoint at step 400 (one
            # ending at step 400 itself is written), so there is progress to keep.
            if full["now"] and int(text.split(",")[0]) > 400:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._f.name)
            return self._f.write(text)

        def __getattr__(self, name):
            return getattr(self._f, name)

    monkeypatch.setattr(
        logger_module, "open", lambda *a, **k: Csv(builtins.open(*a, **k)), raising=False
    )
    real = runner._Run.checkpoint

    def then_full(self):
        real(self)
        full["now"] = True

    monkeypatch.setattr(runner._Run, "checkpoint", then_full)
    assert _new(tmp_path, "r", 2000) == 1
    err = _last_error(capsys.readouterr().err)
    run_dir = tmp_path / "r"
    assert err.startswith(f"error: cannot write {run_dir / 'episodes.csv'}: no space left")
    stopped = int(err.split("Training stopped at step ")[1].split(";")[0].replace(",", ""))
    assert 400 < stopped < 2000
    # The checkpoint could still be written: the progress since step 400 is kept.
    assert f"the last good checkpoint ({run_dir / 'checkpoint.pt'}, step {stopped:,})" in err
    assert _step(run_dir) == stopped


def test_a_full_disk_under_tensorboard_is_one_line(tmp_path, monkeypatch, capsys):
    from tensorboard.compat.tensorflow_stub.io import gfile

    real = runner._Run.checkpoint

    def then_full(self):
        real(self)

        def full(fs, filename, content, binary_mode=False):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

        monkeypatch.setattr(gfile.LocalFileSystem, "append", full)

    monkeypatch.setattr(runner._Run, "checkpoint", then_full)
    args = ["cartpole", "--steps", "4000", "--logdir", str(tmp_path), "--run-name", "tb"]
    args += ["--checkpoint-every", "400", "--device", "cpu", "--eval-every", "0"]
    assert main([*args, "--log-every", "400"]) == 1
    err = _last_error(capsys.readouterr().err)
    assert err.startswith(f"error: cannot write {tmp_path / 'tb'}/events.out.tfevents")
    assert "no space left" in err and "--resume" in err
    assert "Exception in thread" not in err


_KILLED_CHILD = """
import sys, time
import torch
real_save, calls = torch.save, []

def slow_save(obj, f, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:  # inside the second checkpoint's write: stall there
        f.write(b"partial checkpoint")
        f.flush()
        open(sys.argv[1], "w").close()
        time.sleep(600)
    return real_save(obj, f, *args, **kwargs)

torch.save = slow_save
from rlamd.train import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_writer_killed_mid_checkpoint_resumes_from_the_last_good_one(tmp_path, capsys):
    """Regression: each kill during a write left `.checkpoint.pt.tmp-PID` (7 GB at Atari
    scale), never cleaned. The kill keeps the last good checkpoint; resume goes on from
    it and removes the dead writer's temp file."""
    marker, run_dir = tmp_path / "inside-write", tmp_path / "k"
    args = ["cartpole", "--steps", "1600", "--logdir", str(tmp_path), "--run-name", "k"]
    args += ["--checkpoint-every", "400", *COMMON]
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD, str(marker), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert child.poll() is None, child.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    temp = run_dir / f".checkpoint.pt.tmp-{child.pid}"
    assert temp.read_bytes() == b"partial checkpoint"
    assert _step(run_dir) == 400

    assert _resume(run_dir, 1600) == 0
    out = capsys.readouterr().out
    assert f"removed {temp.name}" in out and f"process {child.pid}, which last trained" in out
    assert "resuming at step 400" in out
    assert not temp.exists() and _step(run_dir) == 1600
    rows = (run_dir / "episodes.csv").read_text().splitlines()[1:]
    steps = [int(r.split(",")[0]) for r in rows]
    assert steps == sorted(steps) and steps[-1] <= 1600  # no rows of the dead run after 400


def test_a_second_ctrl_c_inside_a_checkpoint_keeps_the_last_one(tmp_path, monkeypatch, capsys):
    real, calls = runner._Run.checkpoint, []

    def interrupted(self):
        calls.append(self.step)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(runner._Run, "checkpoint", interrupted)
    assert _new(tmp_path, "c", 1200) == 128 + signal.SIGINT
    err = _last_error(capsys.readouterr().err)
    assert err.startswith(f"rlamd: interrupted in {tmp_path / 'c'}; its last checkpoint is kept")
    assert _step(tmp_path / "c") == 400 and holder(tmp_path / "c") is None


def test_resume_says_what_it_keeps_and_refuses_what_the_checkpoint_cannot_take(tmp_path, capsys):
    """Regression: settings that change the network or replay's shape ended in `size
    mismatch` / `replay state has capacity=...` tracebacks; a new --seed passed silently."""
    assert _new(tmp_path, "s", 400, "--save-replay", "--set", "dqn.buffer_size=4000") == 0
    run_dir = tmp_path / "s"
    before = (run_dir / "checkpoint.pt").read_bytes()
    cases = {
        ("--set", "dqn.hidden=64,64"): "dqn.hidden=(64, 64) (the checkpoint's network was "
        "built with (128, 128)); accepted: (128, 128), the checkpoint's, or a new run",
        ("--set", "dqn.dueling=false"): "dqn.dueling=False (the checkpoint's network",
        ("--set", "dqn.buffer_size=8000"): "dqn.buffer_size=8000 (the checkpoint's saved "
        "replay (--save-replay) was built with 4000)",
        ("--set", "dqn.n_step=1"): "dqn.n_step=1 (the checkpoint's saved replay",
        ("--seed", "7"): "train.seed=7 (--resume cannot change it); accepted: 1",
    }
    for extra, message in cases.items():
        capsys.readouterr()
        assert _resume(run_dir, 800, *extra) == 2, extra
        assert _last_error(capsys.readouterr().err).startswith(f"error: {message}"), extra
    assert (run_dir / "checkpoint.pt").read_bytes() == before
    capsys.readouterr()
    assert _resume(run_dir, 800, "--set", "dqn.lr=0.0005") == 0
    assert (
        f"rlamd: resuming {run_dir} at step 400 with its saved settings, except "
        "train.steps 400 -> 800, dqn.lr 0.001 -> 0.0005" in capsys.readouterr().out
    )


def test_without_a_saved_replay_the_replay_may_be_resized(tmp_path, capsys):
    assert _new(tmp_path, "b", 400) == 0
    assert _resume(tmp_path / "b", 800, "--set", "dqn.buffer_size=20000") == 0
    assert "dqn.buffer_size 50000 -> 20000" in capsys.readouterr().out


def test_resume_of_a_stray_checkpoint_file_never_replaces_the_runs_own(tmp_path, capsys):
    assert _new(tmp_path, "f", 400) == 0
    shutil.copy(tmp_path / "f" / "checkpoint.pt", tmp_path / "f" / "old.pt")
    own = (tmp_path / "f" / "checkpoint.pt").read_bytes()
    assert main(["--resume", str(tmp_path / "f" / "old.pt"), *COMMON]) == 2
    assert "is not its folder's checkpoint: resuming it would replace" in (capsys.readouterr().err)
    assert (tmp_path / "f" / "checkpoint.pt").read_bytes() == own


def test_a_run_that_fails_before_writing_leaves_no_folder(tmp_path, monkeypatch, capsys):
    from rlamd.config import ConfigError

    def refuse(*args):
        raise ConfigError("train.device='cpu' (test); accepted: nothing")

    monkeypatch.setattr(runner, "LocalEngine", refuse)
    assert _new(tmp_path, "gone") == 2
    assert "accepted: nothing" in capsys.readouterr().err
    assert not (tmp_path / "gone").exists()


def test_spaces_and_unicode_in_the_path_resume_with_a_quoted_command(tmp_path, monkeypatch, capsys):
    logdir = tmp_path / "my runs" / "ünï"
    assert _new(logdir, "r w", 400) == 0
    capsys.readouterr()

    def stop(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner._Run, "checkpoint", stop)
    assert _resume(logdir / "r w", 800) == 130
    err = _last_error(capsys.readouterr().err)
    assert err.endswith(f"--resume '{logdir / 'r w'}'")
