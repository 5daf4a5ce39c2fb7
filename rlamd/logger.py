"""Progress on the terminal and scalars in TensorBoard.

On a terminal a live bar shows steps, SPS, updates/s, the recent mean score and the ETA;
elsewhere (CI, a log file, ``ray job``) the same figures come as plain periodic lines.
TensorBoard keys carry prefixes: ``charts/``, ``losses/``, ``eval/``, ``system/``.

Writes that fail (a full disk, a read-only folder) raise their ``OSError`` in the caller's
thread, TensorBoard's included (its background writer thread keeps the error and the
next call raises it; the thread's own traceback is silenced), so the run loop can stop
with one line (:mod:`rlamd.storage`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rlamd.storage import write_text_atomic

__all__ = ["RunLogger", "csv_rows"]

_WRITER_THREAD = "_AsyncWriterThread"
"""TensorBoard's event writer thread (``tensorboard.summary.writer.event_file_writer``)."""
_previous_hook = threading.excepthook


def _writer_fault_hook(args: threading.ExceptHookArgs) -> None:
    """Say nothing of a failed write on TensorBoard's writer thread: the writer raises the
    same error at its next call in the run loop, which reports it in one line."""
    if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == _WRITER_THREAD:
        return
    _previous_hook(args)


def _quiet_writer_faults() -> None:
    """Put :func:`_writer_fault_hook` in front of ``threading.excepthook`` (once)."""
    global _previous_hook
    if threading.excepthook is not _writer_fault_hook:
        _previous_hook = threading.excepthook
        threading.excepthook = _writer_fault_hook


def csv_rows(text: str, header: str, last_step: int) -> list[str]:
    """The whole rows of a log CSV's ``text`` with a step <= ``last_step``.

    A torn last line (a crash in the middle of a write leaves no newline after it), blank
    lines and rows that do not parse as numbers (``header``'s number of fields) are
    dropped; so are rows after ``last_step`` (written after the checkpoint resumed from).
    """
    width = header.count(",") + 1
    kept = []
    for row in text.split("\n")[1:-1]:  # the last piece is "" or a torn line
        fields = row.split(",")
        if len(fields) != width or not fields[0].isdigit():
            continue
        try:
            [float(f) for f in fields[1:]]
        except ValueError:
            continue
        if int(fields[0]) <= last_step:
            kept.append(row)
    return kept


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _live_terminal() -> bool:
    """A terminal that reports a width: a live bar can be drawn there.

    Some container and CI pseudo-terminals report 0x0; tqdm's dynamic width then draws
    nothing at all, so those get the plain lines, as a pipe or a file does.
    """
    if not sys.stderr.isatty():
        return False
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except OSError:
        return False


class RunLogger:
    """Episode statistics, rates, a progress display and a TensorBoard writer."""

    def __init__(
        self,
        logdir: Path,
        total_steps: int,
        start_step: int = 0,
        *,
        tensorboard: bool = True,
        progress: bool | None = None,
        start_updates: int = 0,
    ) -> None:
        self.total, self.start_step = total_steps, start_step
        self.scores: deque[float] = deque(maxlen=100)
        self.lengths: deque[int] = deque(maxlen=100)
        self.episodes = 0
        self.writer = None
        logdir.mkdir(parents=True, exist_ok=True)
        self._episodes_csv = self._open_csv(
            logdir / "episodes.csv", "step,score,length", start_step
        )
        self._evals_csv = self._open_csv(logdir / "evals.csv", "step,mean,std,episodes", start_step)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            _quiet_writer_faults()
            self.writer = SummaryWriter(log_dir=str(logdir), purge_step=start_step or None)
        tty = _live_terminal() if progress is None else progress
        self.bar = None
        if tty:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total_steps,
                initial=start_step,
                unit="step",
                unit_scale=True,
                dynamic_ncols=True,
                smoothing=0.05,
            )
        self.remaining: Callable[[int], float] | None = None
        """Seconds left at a step, from a measured forecast; the plain ETA otherwise."""
        self._t0 = time.perf_counter()
        self._last_t, self._last_step, self._last_updates = self._t0, start_step, start_updates

    @staticmethod
    def _open_csv(path: Path, header: str, start_step: int):
        """Append to a CSV; on resume keep its whole rows up to the checkpoint's step
        (:func:`csv_rows`), rewritten atomically where anything was dropped."""
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        fresh = "\n".join([header, *csv_rows(text, header, start_step)]) + "\n"
        if text != fresh:
            write_text_atomic(path, fresh)
        return open(path, "a", encoding="utf-8", buffering=1)

    def evaluation(self, step: int, scores: list[float]) -> None:
        """Scores of whole evaluation games: TensorBoard, evals.csv and one line."""
        n = len(scores)
        mean = sum(scores) / n
        std = (sum((x - mean) ** 2 for x in scores) / n) ** 0.5
        self.scalars(step, {"eval/score_mean": mean, "eval/score_std": std})
        self._evals_csv.write(f"{step},{mean:.4f},{std:.4f},{n}\n")
        self.message(f"eval at {step:,}: {mean:.2f} +/- {std:.2f} over {n} games")

    def episode(self, step: int, score: float, length: int) -> None:
        self._episodes_csv.write(f"{step},{score:g},{length}\n")
        self.scores.append(score)
        self.lengths.append(length)
        self.episodes += 1
        if self.writer:
            self.writer.add_scalar("charts/episode_score", score, step)
            self.writer.add_scalar("charts/episode_length", length, step)

    @property
    def mean_score(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self.writer:
            for k, v in values.items():
                self.writer.add_scalar(k, v, step)

    def log(self, step: int, updates: int, values: dict[str, float]) -> dict[str, float]:
        """Rates since the last call, shown and written with ``values``."""
        now = time.perf_counter()
        dt = max(now - self._last_t, 1e-9)
        sps = (step - self._last_step) / dt
        ups = (updates - self._last_updates) / dt
        self._last_t, self._last_step, self._last_updates = now, step, updates
        rates = {"charts/SPS": sps, "charts/updates_per_s": ups}
        self.scalars(step, {**rates, **values})
        score = self.mean_score
        score_txt = f"{score:.2f}" if score is not None else "-"
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            expected = (
                f" | expected {_fmt_eta(self.remaining(step))} left" if self.remaining else ""
            )
            self.bar.set_postfix_str(
                f"SPS {sps:,.0f} | upd/s {ups:,.1f} | score {score_txt} (n={len(self.scores)})"
                f"{expected}"
            )
        else:
            elapsed = now - self._t0
            done = step - self.start_step
            eta = (self.total - step) * elapsed / done if done > 0 else float("nan")
            if self.remaining is not None:
                eta = self.remaining(step)
            print(
                f"step {step:,}/{self.total:,} | SPS {sps:,.0f} | upd/s {ups:,.1f} | "
                f"score {score_txt} (n={len(self.scores)}) | ETA {_fmt_eta(eta)}",
                flush=True,
            )
        return rates

    def message(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        """Close every file, even where one fails; then raise the first ``OSError``."""
        first: OSError | None = None
        closers = [self._episodes_csv.close, self._evals_csv.close]
        if self.bar is not None:
            closers.append(self.bar.close)
        if self.writer:
            closers += [self.writer.flush, self.writer.close]
        for close in closers:
            try:
                close()
            except OSError as exc:
                first = first or exc
        if first is not None:
            raise first
