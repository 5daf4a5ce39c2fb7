"""Storage faults as one line: which errors count, what the line says, atomic small writes."""

from __future__ import annotations

import errno
import os

import pytest

from rlamd.storage import (
    StorageError,
    free_bytes,
    make_folder,
    storage_error,
    storage_fault,
    temp_name,
    temp_owner,
    write_text_atomic,
)


def _oserror(code: int, path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device ("),
        (errno.EROFS, "mounted read-only"),
        (errno.EACCES, "permission denied (give a folder you may write to"),
        (errno.EIO, "input/output error"),
    ],
)
def test_each_fault_is_one_line_naming_the_path(tmp_path, code, words):
    err = storage_error(_oserror(code, tmp_path / "run" / "checkpoint.pt"))
    text = str(err)
    assert text.startswith(f"cannot write {tmp_path / 'run' / 'checkpoint.pt'}: ")
    assert words in text and "\n" not in text
    assert err.errno == code


def test_a_full_disk_says_how_much_is_free(tmp_path):
    free = free_bytes(tmp_path / "not" / "made" / "yet")  # the nearest existing folder
    assert free is not None and free > 0
    text = str(storage_error(_oserror(errno.ENOSPC, tmp_path / "x")))
    assert " free there)" in text


def test_a_path_through_a_file_names_the_file(tmp_path):
    (tmp_path / "logs").write_text("I am a file")
    with pytest.raises(StorageError, match=r"logs is a file, not a folder"):
        make_folder(tmp_path / "logs" / "run")
    with pytest.raises(StorageError, match=r"logs is a file, not a folder"):
        make_folder(tmp_path / "logs")


def test_storage_fault_finds_the_oserror_behind_a_torch_error(tmp_path):
    try:
        try:
            raise _oserror(errno.ENOSPC, tmp_path / "f")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] unexpected pos") from None
    except RuntimeError as exc:
        # `from None` hides the cause from tracebacks but keeps the context.
        found = storage_fault(exc)
    assert found is not None and "no space left" in str(found)
    assert storage_fault(RuntimeError("a plain bug")) is None
    assert storage_fault(FileNotFoundError(errno.ENOENT, "no such file", "rom.bin")) is None


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = write_text_atomic(tmp_path / "config.toml", "old = 1\n")

    def full(fd, *args):
        raise _oserror(errno.ENOSPC, temp_name(path))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match="config.toml: no space left"):
        write_text_atomic(path, "new = 2\n")
    assert path.read_text() == "old = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no temp file left


def test_temp_names_carry_their_writers_pid(tmp_path):
    tmp = temp_name(tmp_path / "checkpoint.pt", pid=4242)
    assert tmp.name == ".checkpoint.pt.tmp-4242" and temp_owner(tmp.name) == 4242
    for other in ("checkpoint.pt", ".lock", ".x.tmp-", "a.tmp-12", ".x.tmp-12a"):
        assert temp_owner(other) is None, other
