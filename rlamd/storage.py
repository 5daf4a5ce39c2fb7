"""Storage faults in one line, and the small file writes a run folder needs.

A full disk, a read-only mount, a path through a file, a folder without permission: each
reaches rlamd as an ``OSError`` somewhere deep in a write (inside ``torch.save`` it even
comes back as a ``RuntimeError`` whose context is the ``OSError``). :func:`storage_fault`
finds that ``OSError``; :func:`storage_error` turns it into a :class:`StorageError`
whose text is one line that names the path and what is wrong (with the free space for a
full disk). The run loop stops on one, keeps the last good checkpoint and says how to
resume (:mod:`rlamd.runner`).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = [
    "FAULTS",
    "StorageError",
    "check_room",
    "free_bytes",
    "make_folder",
    "storage_error",
    "storage_fault",
    "sync_folder",
    "temp_name",
    "temp_owner",
    "write_bytes_atomic",
    "write_text_atomic",
]

FAULTS: dict[int, str] = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the filesystem is mounted read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.EEXIST: "a file of that name is in the way",
    errno.ENOENT: "its folder no longer exists",
    errno.EIO: "input/output error (a failing disk, or a network filesystem that went away)",
    errno.ENAMETOOLONG: "the name is too long for the filesystem",
    errno.EFBIG: "the file is larger than the filesystem allows",
}
"""What each ``errno`` of a failed write means, in words."""

_ANYWHERE = frozenset(FAULTS) - {errno.ENOENT, errno.EEXIST, errno.EISDIR}
"""The ``errno`` values that mean the storage is at fault wherever they come from (a
missing file, say, is a storage fault only where rlamd writes it)."""

_TEMP_MARK = ".tmp-"


class StorageError(Exception):
    """A file or folder rlamd could not write; ``str()`` is one line naming the path.

    Attributes:
        path: the file or folder that could not be written.
        errno: the ``errno`` of the underlying ``OSError``.
    """

    def __init__(self, message: str, path: Path, code: int) -> None:
        super().__init__(message)
        self.path, self.errno = path, code


def free_bytes(path: str | Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding ``path`` (its
    nearest existing folder); None where that cannot be read."""
    here = Path(path)
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        st = os.statvfs(here)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_room(path: str | Path, need: int, what: str) -> None:
    """Refuse to start where ``what`` (``need`` bytes) cannot be written: a run on a full
    disk is stopped before anything is built, not at its first checkpoint.

    Raises:
        StorageError: fewer than ``need`` bytes free on the filesystem of ``path``.
    """
    free = free_bytes(path)
    if free is not None and free < need:
        raise StorageError(
            f"cannot write {path}: no space left on the device ({_size(free)} free there; "
            f"{what} needs about {_size(need)})",
            Path(path),
            errno.ENOSPC,
        )


def storage_fault(exc: BaseException) -> StorageError | None:
    """The storage fault behind ``exc`` as a :class:`StorageError`: ``exc`` itself, or an
    error in its ``__cause__`` / ``__context__`` chain (``torch.save`` raises a
    ``RuntimeError`` whose context is the failed write); None when it is not a storage
    fault (a full disk, a read-only filesystem, a path through a file, permissions, I/O).
    """
    seen: set[int] = set()
    here: BaseException | None = exc
    while here is not None and id(here) not in seen:
        seen.add(id(here))
        if isinstance(here, StorageError):
            return here
        if isinstance(here, OSError) and here.errno in _ANYWHERE:
            return storage_error(here)
        here = here.__cause__ or here.__context__
    return None


def _file_in_the_way(path: Path) -> Path | None:
    """The first existing part of ``path`` that is a file, not a folder (ENOTDIR)."""
    for part in reversed([path, *path.parents]):
        if part.exists() and not part.is_dir():
            return part
    return None


def storage_error(exc: OSError, path: str | Path | None = None) -> StorageError:
    """One line for a failed write of ``path`` (default: the error's own file name).

    ``cannot write runs/a/checkpoint.pt: no space left on the device (12.0 MiB free
    there)``; a path through a file names that file.
    """
    name = path if path is not None else exc.filename
    where = Path(os.fsdecode(name)) if isinstance(name, (str, bytes, os.PathLike)) else None
    code = exc.errno if exc.errno is not None else errno.EIO
    what = FAULTS.get(code, exc.strerror or str(exc))
    if code in (errno.ENOSPC, errno.EDQUOT):
        free = free_bytes(where or ".")
        what += f" ({_size(free)} free there)" if free is not None else ""
    elif code in (errno.ENOTDIR, errno.EEXIST) and where is not None:
        blocker = _file_in_the_way(where)
        if blocker is not None:
            what = f"{blocker} is a file, not a folder"
    elif code in (errno.EACCES, errno.EPERM):
        what += " (give a folder you may write to, e.g. --logdir ~/runs)"
    head = f"cannot write {where}" if where is not None else "a write failed"
    return StorageError(f"{head}: {what}", where or Path("."), code)


def temp_name(path: Path, pid: int | None = None) -> Path:
    """``FOLDER/.NAME.tmp-PID``: where ``path`` is written before it is renamed into place
    (:func:`rlamd.rundir.remove_stale_temps` knows the pattern)."""
    return path.with_name(f".{path.name}{_TEMP_MARK}{os.getpid() if pid is None else pid}")


def temp_owner(name: str) -> int | None:
    """The writer's PID in a :func:`temp_name`, or None for any other file name."""
    if not name.startswith("."):
        return None
    head, mark, pid = name.rpartition(_TEMP_MARK)
    return int(pid) if mark and head and pid.isdigit() else None


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename into it) to disk, where the filesystem can."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot fsync a folder: the rename still happened
        pass
    finally:
        os.close(fd)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (as UTF-8) to ``path`` through a temporary file and a rename: a reader
    sees the old file or the new one, never half of one.

    Raises:
        StorageError: the write failed (the old file is left as it was).
    """
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """:func:`write_text_atomic` for bytes (a copy of a file as it was)."""
    path = Path(path)
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise storage_error(exc, path) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def make_folder(path: str | Path) -> Path:
    """Create ``path`` and its parents (nothing if it is a folder already).

    Raises:
        StorageError: it cannot be created (read-only, a file in the way, permissions).
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, path) from None
    return path
