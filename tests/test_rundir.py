"""One process per run folder: the lock, taking over a dead holder's, new-run folders, and
the temp files that interrupted writers leave."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys

import pytest

from rlamd import rundir
from rlamd.rundir import LOCK_NAME, RunBusy, claim, hold, holder, remove_stale_temps


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(proc.stdout)


def test_a_held_folder_refuses_a_second_holder_and_names_the_pid(tmp_path):
    with hold(tmp_path) as first:
        assert first.locked
        assert (tmp_path / LOCK_NAME).read_text().split() == [
            str(os.getpid()),
            socket.gethostname(),
        ]
        with pytest.raises(RunBusy, match=rf"in use by process {os.getpid()}\b"):
            hold(tmp_path)  # another open file description: flock refuses it
        assert f"process {os.getpid()}" in holder(tmp_path)
    assert holder(tmp_path) is None
    assert (tmp_path / LOCK_NAME).read_text() == ""  # released: emptied, not deleted
    hold(tmp_path).release()


def test_the_lock_of_a_dead_process_is_taken_over_with_a_note(tmp_path):
    pid = _dead_pid()
    (tmp_path / LOCK_NAME).write_text(f"{pid} {socket.gethostname()}\n")
    with hold(tmp_path) as folder:
        assert any(f"process {pid}" in n and "is gone" in n for n in folder.notes)
        assert (tmp_path / LOCK_NAME).read_text().split()[0] == str(os.getpid())


def test_a_filesystem_without_locks_gets_a_note_not_a_crash(tmp_path, monkeypatch):
    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(rundir.fcntl, "flock", no_locks)
    with hold(tmp_path) as folder:
        assert not folder.locked
        assert any("keeps no file locks" in n for n in folder.notes)


def test_stale_temp_files_are_removed_but_not_our_own(tmp_path):
    dead = _dead_pid()
    (tmp_path / f".checkpoint.pt.tmp-{dead}").write_bytes(b"x" * 1000)
    (tmp_path / f".checkpoint.pt.tmp-{os.getpid()}").write_bytes(b"mine")
    (tmp_path / "checkpoint.pt").write_bytes(b"keep")
    notes = remove_stale_temps(tmp_path, locked=False)
    assert len(notes) == 1 and f"tmp-{dead}" in notes[0] and f"process {dead}" in notes[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".checkpoint.pt.tmp-{os.getpid()}",
        "checkpoint.pt",
    ]
    # Without a lock, a temp file of a live process (here: the parent) is someone's write.
    (tmp_path / f".checkpoint.pt.tmp-{os.getppid()}").write_bytes(b"live")
    assert remove_stale_temps(tmp_path, locked=False) == []
    assert len(remove_stale_temps(tmp_path, locked=True)) == 1  # the lock says it is stale


def test_a_taken_run_name_gets_a_suffix_and_a_note(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text("[train]\n")
    with claim(tmp_path, "run") as second:
        assert second.path == tmp_path / "run-2"
        assert "already holds a run" in second.notes[0] and "--resume" in second.notes[0]
        with claim(tmp_path, "run") as third:  # run-2 is held, though still empty
            assert third.path == tmp_path / "run-3"


def test_an_unused_folder_is_claimed_and_left_as_found(tmp_path):
    (tmp_path / "fresh").mkdir()
    with claim(tmp_path, "fresh") as folder:
        assert folder.path == tmp_path / "fresh" and folder.notes == []
    assert (tmp_path / "fresh").is_dir()  # it was there before: not removed
    with claim(tmp_path, "new") as folder:
        assert folder.path.is_dir()
    assert not (tmp_path / "new").exists()  # made by the claim, never written: removed


def test_a_claimed_folder_that_got_files_is_kept(tmp_path):
    with claim(tmp_path / "logs", "r") as folder:
        (folder.path / "config.toml").write_text("x")
    assert (tmp_path / "logs" / "r" / "config.toml").exists()
