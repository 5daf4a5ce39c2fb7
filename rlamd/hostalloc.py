"""Host memory: how much a new allocation may take, and glibc's allocator tuned for reuse.

:func:`host_free_bytes` is the least of what the machine has available (``MemAvailable``),
what the process's cgroup still allows (v2 ``memory.max``, v1 ``memory.limit_in_bytes``,
less what the cgroup uses) and what its address-space limit leaves (``RLIMIT_AS``, as
``ulimit -v`` sets it, less the process's ``VmSize``): a replay sized against
``MemAvailable`` alone dies in numpy's allocator under the other two.

Keep big CPU tensors off fresh mmap pages (glibc only).

glibc serves every allocation above its mmap threshold (128 KiB, adaptive up to 32 MiB)
with new pages and returns them on free, so each batch-sized activation of a CPU
training step page-faults anew. Measured on the development CPU: converting a batch of
128 uint8 Atari stacks to float took 19.6 ms with the default and 2.5 ms with the
threshold raised. Raising the mmap and trim thresholds keeps that memory in the heap for
reuse. The user's own ``MALLOC_*`` variables win; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from pathlib import Path

__all__ = ["host_free_bytes", "tune_host_allocator"]

UNLIMITED = 2**60
"""Limits at or above this are no limit (cgroup v1 writes 2**63 - 4096 for none)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_done = False


def tune_host_allocator() -> bool:
    """Raise glibc's mmap/trim thresholds once per process; True if it was done here."""
    global _done
    if _done or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    name = ctypes.util.find_library("c")
    if not name or "libc" not in name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, 32 * 2**20) == 1 and mallopt(_M_TRIM_THRESHOLD, 2**30) == 1
    _done = ok
    return ok


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _kib_field(text: str | None, key: str) -> int | None:
    """``key:   123 kB`` in a /proc file's text, in bytes."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(":")
        if name == key and value.split() and value.split()[0].isdigit():
            return int(value.split()[0]) * 1024
    return None


def _cgroup_room(proc: Path, root: Path) -> int | None:
    """What the process's memory cgroup still allows (limit less usage), None if no limit.
    The cgroup's folder is looked for under ``root`` at its path, then at ``root`` itself
    (inside a container the mount's root is the container's cgroup)."""
    rooms = []
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        v2 = parts[0] == "0" and parts[1] == ""
        if not v2 and "memory" not in parts[1].split(","):
            continue
        base = root if v2 else root / "memory"
        limit_file, usage_file = (
            ("memory.max", "memory.current")
            if v2
            else ("memory.limit_in_bytes", "memory.usage_in_bytes")
        )
        for folder in (base / parts[2].lstrip("/"), base):
            limit = _read(folder / limit_file)
            if limit is None:
                continue
            usage = _read(folder / usage_file)
            if limit.isdigit() and int(limit) < UNLIMITED:
                used = int(usage) if usage and usage.isdigit() else 0
                rooms.append(int(limit) - used)
            break
    return min(rooms) if rooms else None


def _address_room(proc: Path) -> int | None:
    """What ``RLIMIT_AS`` leaves beside the address space the process maps now."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft >= UNLIMITED:
        return None
    size = _kib_field(_read(proc / "self" / "status"), "VmSize")
    return soft - (size or 0)


def host_free_bytes(
    *, proc: str | Path = "/proc", cgroup_root: str | Path = "/sys/fs/cgroup"
) -> int | None:
    """Bytes a new host allocation may take: the least of ``MemAvailable``, the cgroup's
    room and the address-space limit's (see the module docstring); None if none is known."""
    proc, root = Path(proc), Path(cgroup_root)
    known = [
        v
        for v in (
            _kib_field(_read(proc / "meminfo"), "MemAvailable"),
            _cgroup_room(proc, root),
            _address_room(proc),
        )
        if v is not None
    ]
    return max(0, min(known)) if known else None
