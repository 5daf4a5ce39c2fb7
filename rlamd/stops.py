"""How a run stops: signals, the lines a fault ends it with, and the resume command.

:class:`Stop` turns SIGINT/SIGTERM into a clean stop (a checkpoint after the iteration),
said at once; a second Ctrl-C stops at once. An env fault or a learner that keeps skipping
updates (:class:`SkipWatch`) ends a run with one line; :func:`save_traceback` keeps what
is behind it in the run folder. :func:`resume_command` is what every such line ends with.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import traceback
from pathlib import Path

from rlamd.checkpoint import FILENAME
from rlamd.config.sections import RunConfig
from rlamd.storage import write_text_atomic

__all__ = [
    "ERROR_LOG",
    "RunStopped",
    "SkipWatch",
    "Stop",
    "UpdatesSkipped",
    "early_fault",
    "resume_command",
    "save_traceback",
]

ERROR_LOG = "error.log"
"""Where a run folder keeps the traceback behind the one line a fault ended the run with."""


class Stop:
    """SIGINT/SIGTERM ask for a clean stop (checkpoint, then exit); a second SIGINT aborts."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in self._old:
            signal.signal(s, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signum
        # Said at once (an env that hangs would hold the stop line back): os.write, since a
        # print here could land inside another print of the main thread.
        os.write(
            sys.stderr.fileno(),
            f"\nrlamd: signal {signum}: stopping with a checkpoint after this iteration "
            "(Ctrl-C again stops at once, keeping the last checkpoint)\n".encode(),
        )

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


class RunStopped(Exception):
    """The run stopped on a storage or env fault; ``str()`` is the one line to print."""


class UpdatesSkipped(RuntimeError):
    """The learner skipped ``env.max_skipped_updates`` updates in a row (non-finite values)."""


def save_traceback(run_dir: Path, exc: BaseException, debug: bool) -> str:
    """Keep the traceback behind a fault in ``RUN/error.log`` (and print it with
    ``--debug``); returns the words that point to it."""
    text = "".join(traceback.format_exception(exc))
    if debug:
        print(text, file=sys.stderr, end="", flush=True)
    try:
        write_text_atomic(run_dir / ERROR_LOG, text)
    except OSError:
        return "the traceback could not be saved"
    return f"the traceback is in {run_dir / ERROR_LOG}"


def early_fault(run_dir: Path, cfg: RunConfig, exc: BaseException, debug: bool) -> str:
    """The line for an env that failed before training (as the engine first reset it)."""
    where = save_traceback(run_dir, exc, debug)
    kept = (
        f"its last checkpoint is kept; once the env is fixed, continue with: "
        f"{resume_command(run_dir, cfg)}"
        if (run_dir / FILENAME).exists()
        else "nothing was trained"
    )
    return f"{exc}. The run stopped before training; {kept} ({where})"


def resume_command(run_dir: Path, cfg: RunConfig) -> str:
    """The command that continues this run, runnable from a fresh shell in this folder.

    It names the interpreter that is running now (``.venv/bin/python`` when that is what
    ran: a bare ``python`` in a new shell is often another one, without torch), or the
    ``rlamd`` console script when that is what ran and it is on PATH.
    """
    ray = " --ray" if cfg.ray.enabled else ""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if script == "rlamd" and shutil.which("rlamd") == str(Path(sys.argv[0]).resolve()):
        return f"rlamd train --resume {shlex.quote(str(run_dir))}{ray}"
    exe = Path(sys.executable)
    if shutil.which("python") == str(exe):  # the same file, not a link to the same binary
        python = "python"
    else:
        try:
            python = str(exe.relative_to(Path.cwd()))
        except ValueError:
            python = str(exe)
    return f"{shlex.quote(python)} -m rlamd.train --resume {shlex.quote(str(run_dir))}{ray}"


class SkipWatch:
    """Stops a run whose learner keeps skipping updates for non-finite values (NaN from the
    env). Read once per log interval: it adds up the skipped updates of consecutive
    intervals in which most updates were skipped, and raises once ``limit`` of them came
    (0: never); an interval in which most updates were applied starts the count again."""

    def __init__(self, limit: int, updates: int, step: int) -> None:
        self.limit, self.updates, self.streak = limit, updates, 0
        # a resumed run counts from its first read (its skip counter came back with it)
        self.skipped: float | None = 0.0 if step == 0 else None

    def check(self, updates: int, values: dict[str, float]) -> None:
        """Raises:
        UpdatesSkipped: ``limit`` updates were skipped, in intervals of mostly skips."""
        skipped = values.get("losses/skipped_updates")
        if skipped is None:
            return
        new, self.updates = updates - self.updates, updates
        before, self.skipped = self.skipped, skipped
        if before is None or new <= 0:
            return
        now = skipped - before
        self.streak = self.streak + int(now) if 2 * now > new else 0
        if self.limit and self.streak >= self.limit:
            found = ", ".join(
                f"{values.get(f'env/nonfinite_{k}', 0):,.0f} {k}"
                for k in ("observations", "rewards")
            )
            raise UpdatesSkipped(
                f"{self.streak:,} learner updates were skipped for non-finite values, most "
                f"of the recent ones (env.max_skipped_updates={self.limit:,}); steps in which "
                f"the env returned non-finite values so far: {found} (the warnings above "
                "name the envs)"
            )
