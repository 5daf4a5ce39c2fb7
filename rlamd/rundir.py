"""Run folders: one process per folder, a fresh folder per new run, no stale temp files.

A training process holds its run folder through an OS lock (``flock``) on ``RUN/.lock``
for as long as it trains; a second process that asks for the folder is refused with the
holder's PID. The OS drops the lock when its holder dies, however it dies (``kill -9``
included), so a lock file whose writer is gone is simply taken over, with a note. The
file is never deleted (a deleted lock file lets two processes lock two different files
of one name); its holder writes ``PID HOST`` into it and empties it when done.

Evaluation and other readers never take the lock: checkpoints are replaced by a rename,
so a reader always sees a whole file.

Example::

    folder = claim(Path("runs"), "breakout_dqn_s1")   # a new run: runs/breakout_dqn_s1[-N]
    try:
        ...train, writing into folder.path...
    finally:
        folder.release()
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from rlamd.storage import StorageError, make_folder, storage_error, temp_owner

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "RunBusy", "RunFolder", "claim", "hold", "holder", "remove_stale_temps"]

LOCK_NAME = ".lock"
"""The lock file in every run folder a training process has held."""

_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
"""``flock`` errors that mean the filesystem keeps no locks (some network mounts)."""
_MOST_SUFFIXES = 1000


class RunBusy(Exception):
    """Another live process holds the run folder; ``str()`` is one line naming it."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except OSError:
        return False
    return True


def _parse_holder(text: str) -> tuple[int, str] | None:
    parts = text.split()
    if len(parts) >= 1 and parts[0].isdigit():
        return int(parts[0]), parts[1] if len(parts) > 1 else ""
    return None


class RunFolder:
    """A run folder this process holds (see :func:`hold` and :func:`claim`).

    Attributes:
        path: the folder.
        notes: lines for the run's log (a lock taken over, temp files removed, a suffix).
        locked: False where the filesystem keeps no locks (then a note says so).
    """

    def __init__(self, path: Path, fd: int | None, notes: list[str], created: bool) -> None:
        self.path, self._fd, self.notes, self._created = path, fd, notes, created
        self.locked = fd is not None

    def release(self) -> None:
        """Let the folder go (idempotent): empty the lock file and unlock it. A folder
        :func:`claim` created that holds nothing but the lock file is removed again."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor drops the flock
        if self._created and _unused(self.path):
            try:
                (self.path / LOCK_NAME).unlink(missing_ok=True)
                self.path.rmdir()
            except OSError:
                pass

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _unused(path: Path) -> bool:
    """A folder holding nothing, or nothing but a lock file (a run that never started)."""
    try:
        return path.is_dir() and all(p.name == LOCK_NAME for p in path.iterdir())
    except OSError:
        return False


def _lock(path: Path) -> tuple[int | None, str]:
    """Open and lock ``path/.lock``; returns (fd or None where locks are unsupported, the
    previous holder's text).

    Raises:
        RunBusy: a live process holds it.
        StorageError: the lock file cannot be created (read-only, permissions...).
    """
    lock = path / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise storage_error(exc, lock) from None
    try:
        previous = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
        if fcntl is None:
            return _unlocked(fd, previous)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunBusy(_busy_message(path, previous)) from None
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            return _unlocked(fd, previous)
        os.close(fd)
        raise storage_error(exc, lock) from None
    previous = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()  # now it is stable
    return fd, previous


def _unlocked(fd: int, previous: str) -> tuple[None, str]:
    os.close(fd)
    return None, previous


def _busy_message(path: Path, text: str) -> str:
    found = _parse_holder(text)
    who = "another process"
    if found is not None:
        pid, host = found
        here = not host or host == socket.gethostname()
        who = f"process {pid}" + ("" if here else f" on {host}")
        if here and not _alive(pid):  # a child it forked still holds the lock
            who = f"a process that process {pid} (now gone) started"
    return (
        f"{path} is in use by {who}, which is training in it (it holds {path / LOCK_NAME}); "
        "stop that run first (Ctrl-C checkpoints it), or copy the folder and resume the copy"
    )


def holder(path: str | Path) -> str | None:
    """Who holds run folder ``path`` now, as :class:`RunBusy` would say it; None if nobody
    does (or the folder has no lock file). Takes and drops the lock; writes nothing."""
    lock = Path(path) / LOCK_NAME
    if fcntl is None or not lock.is_file():
        return None
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _busy_message(Path(path), os.pread(fd, 256, 0).decode("utf-8", "replace"))
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def remove_stale_temps(path: Path, *, locked: bool) -> list[str]:
    """Delete temporary files that writers died with (``.checkpoint.pt.tmp-PID``...).

    With the folder's lock held, every temp file of another PID is stale (only the lock's
    holder writes); without a lock, only those whose PID is no longer running. Returns a
    note per file removed.
    """
    notes = []
    try:
        entries = list(path.iterdir())
    except OSError:
        return notes
    for entry in entries:
        pid = temp_owner(entry.name)
        if pid is None or pid == os.getpid() or (not locked and _alive(pid)):
            continue
        try:
            size = entry.stat().st_size
            entry.unlink()
        except OSError:
            continue
        notes.append(
            f"rlamd: removed {entry.name} ({size / 2**20:,.1f} MiB), left by process {pid}, "
            "whose write was interrupted"
        )
    return notes


def hold(path: str | Path, *, created: bool = False) -> RunFolder:
    """Take run folder ``path`` (existing) for this process: lock it, note a holder that
    died, remove temp files of dead writers.

    Raises:
        RunBusy: another live process holds it.
        StorageError: the folder cannot be written (its lock file cannot be created).
    """
    path = Path(path)
    fd, previous = _lock(path)
    notes: list[str] = []
    found = _parse_holder(previous)
    if found is not None and found[0] != os.getpid():
        pid, host = found
        if (not host or host == socket.gethostname()) and not _alive(pid):
            notes.append(
                f"rlamd: process {pid}, which last trained in {path}, is gone; taking over"
            )
    if fd is None:
        notes.append(
            f"rlamd: the filesystem of {path} keeps no file locks: nothing stops a second "
            "process from training in this folder, so start only one"
        )
    else:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise storage_error(exc, path / LOCK_NAME) from None
    notes += remove_stale_temps(path, locked=fd is not None)
    return RunFolder(path, fd, notes, created)


def claim(logdir: str | Path, name: str) -> RunFolder:
    """A new run's folder ``logdir/name``, created and held before anything is written.

    A name taken by another run (a folder holding anything but a lock file, or held by a
    live process) is never reused: the run goes to ``name-2``, ``name-3``... and a note
    says so. Creating the folder is the claim (``mkdir`` fails for all but one of two
    processes that race for a name).

    Raises:
        StorageError: ``logdir`` cannot be created or written.
    """
    logdir = make_folder(logdir)
    for n in range(1, _MOST_SUFFIXES + 1):
        path = logdir / (name if n == 1 else f"{name}-{n}")
        created = True
        try:
            path.mkdir()
        except FileExistsError:
            if not _unused(path):
                continue
            created = False
        except OSError as exc:
            raise storage_error(exc, path) from None
        try:
            folder = hold(path, created=created)
        except RunBusy:
            continue
        except StorageError:
            if created:  # leave no half-made folder behind (a full disk, say)
                RunFolder(path, None, [], created=True).release()
            raise
        if not _unused(path):  # filled between the look and the lock
            folder.release()
            continue
        if n > 1:
            folder.notes.insert(
                0,
                f"rlamd: {logdir / name} already holds a run (continue that one with --resume "
                f"{logdir / name}); this new run writes to {path}",
            )
        return folder
    raise StorageError(
        f"cannot create a run folder for {name} in {logdir}: {name} to {name}-{_MOST_SUFFIXES} "
        "are all taken; give another --run-name",
        logdir,
        errno.EEXIST,
    )
