"""The bench's child processes (race contenders, contention conditions, peers under their
own interpreter: their OpenMP policy, threads and versions are their own): a thread budget,
JSON lines back, and a sure stop (:func:`rlamd.children.stop`: SIGINT, then SIGKILL)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from rlamd.children import send, stop

__all__ = ["Child", "thread_env"]


def thread_env(threads: int | str | None, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with OpenMP and MKL held to ``threads``."""
    env = dict(os.environ if env is None else env)
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


class Child:
    """``cmd`` with its JSON stdout lines queued as (monotonic time, dict); ``group``: in its
    own process group (:meth:`signal` reaches its workers), else the caller's (a race's)."""

    def __init__(
        self,
        cmd: list[str],
        log: Path | None = None,
        *,
        group: bool = False,
        stdin: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.log_path = log or Path(tempfile.mkstemp(prefix="rlamd-child-", suffix=".log")[1])
        self.log = open(self.log_path, "w", encoding="utf-8", buffering=1)
        pipes = {"stdin": subprocess.PIPE if stdin else None, "stdout": subprocess.PIPE}
        opts = {"stderr": self.log, "text": True, "env": env, "start_new_session": group}
        self.proc = subprocess.Popen(cmd, **pipes, **opts)
        self.group, self.lines = group, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            got = None
            with suppress(ValueError):
                got = json.loads(line) if line.startswith("{") else None
            if isinstance(got, dict):
                self.lines.put((time.monotonic(), got))
            else:
                self.log.write(line)
        self.lines.put(None)  # the child closed its stdout: it ended

    def ask(self, command: str | None, timeout: float) -> dict[str, Any]:
        """Send ``command`` (a line), return its next JSON line; RuntimeError, with the last
        line of its log, when none comes in ``timeout`` seconds or it ends."""
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        got = None
        with suppress(queue.Empty):
            got = self.lines.get(timeout=timeout)
        if got is None:
            self.close()
            tail = self.log_path.read_text(encoding="utf-8", errors="replace").strip()
            last = (tail.splitlines() or ["no output"])[-1]
            raise RuntimeError(f"child failed (exit {self.proc.returncode}): {last}")
        return got[1]

    def drain(self) -> list[tuple[float, dict[str, Any]]]:
        """Every JSON line that came since the last call."""
        out = []
        with suppress(queue.Empty):
            while True:
                if (got := self.lines.get_nowait()) is not None:
                    out.append(got)
        return out

    def signal(self, sig: int) -> None:
        send(self.proc, sig, self.group)

    def close(self, grace: float = 60.0) -> None:
        if self.proc.poll() is None:
            stop(self.proc, grace, self.group)
        self.log.close()
