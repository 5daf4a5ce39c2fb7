"""Progress on the terminal and scalars in TensorBoard.

On a terminal a live bar shows steps, SPS, updates/s, the recent mean score and one ETA
(rlamd's: the measured forecast where there is one; tqdm's own is left out); it moves
every iteration, and grows its total when a run of whole rollouts ends past
``train.steps``. Elsewhere (CI, a log file, ``ray job``) the same figures come as plain
lines at every log point and at least every :data:`PLAIN_EVERY_S` seconds.
TensorBoard keys carry prefixes: ``charts/``, ``losses/``, ``eval/``, ``system/``.

Writes that fail (a full disk, a read-only folder) raise their ``OSError`` in the caller's
thread, TensorBoard's included (its background writer thread keeps the error and the
next call raises it; the thread's own traceback is silenced), so the run loop can stop
with one line (:mod:`rlamd.storage`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from rlamd.storage import write_bytes_atomic, write_text_atomic

__all__ = [
    "EVALS_HEADER",
    "PLAIN_EVERY_S",
    "RunLogger",
    "csv_rows",
    "eval_row",
    "read_evals",
    "read_rows",
    "split_rows",
]

PLAIN_EVERY_S = 30.0
"""Plain progress lines come at least this often, between the log points' lines."""
_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
"""tqdm's default without its own ETA (``<remaining``) and rate, which count evaluations:
the postfix carries rlamd's."""

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


EVALS_HEADER = "step,mean,std,episodes"
"""``evals.csv``'s header; rlamd's runs, a race's peers and the comparison scripts write it."""


def eval_row(step: int, mean: float, std: float, episodes: int) -> str:
    """One ``evals.csv`` row (:data:`EVALS_HEADER`), newline included."""
    return f"{step},{mean:.4f},{std:.4f},{episodes}\n"


def read_rows(path: Path, header: str) -> list[list[str]]:
    """A log CSV's whole rows (:func:`split_rows`), split into fields; none if unreadable."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [r.split(",") for r in csv_rows(text, header, 2**62)]


def read_evals(path: Path) -> dict[int, float]:
    """An ``evals.csv``'s mean return by step (:data:`EVALS_HEADER`); empty if unreadable."""
    return {int(r[0]): float(r[1]) for r in read_rows(path, EVALS_HEADER)}


def csv_rows(text: str, header: str, last_step: int) -> list[str]:
    """The whole rows of a log CSV's ``text`` with a step <= ``last_step`` (:func:`split_rows`)."""
    return split_rows(text, header, last_step)[0]


def split_rows(text: str, header: str, last_step: int) -> tuple[list[str], list[tuple[int, str]]]:
    """A log CSV's ``text`` as ``(kept rows, dropped rows)``; dropped rows come as
    ``(line number, row)``.

    Kept: whole rows of ``header``'s fields, a whole-number step <= ``last_step``, numbers
    in the other fields. Dropped: rows that do not parse so (another separator, an extra
    column, a step written ``52.0``) and rows after ``last_step`` (written after the
    checkpoint resumed from). Blank lines and a torn last line (a crash in the middle of a
    write leaves no newline after it) are neither: they held no row.
    """
    width = header.count(",") + 1
    kept: list[str] = []
    dropped: list[tuple[int, str]] = []
    for number, row in enumerate(text.split("\n")[1:-1], start=2):  # last: "" or torn
        if not row.strip("\x00 \r"):
            continue
        fields = row.split(",")
        try:
            if len(fields) != width or not fields[0].isdigit():
                raise ValueError
            [float(f) for f in fields[1:]]
        except ValueError:
            dropped.append((number, row))
            continue
        if int(fields[0]) <= last_step:
            kept.append(row)
        else:
            dropped.append((number, row))
    return kept, dropped


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
        self._notes: list[str] = []
        logdir.mkdir(parents=True, exist_ok=True)
        self._episodes_csv = self._open_csv(
            logdir / "episodes.csv", "step,score,length", start_step
        )
        self._evals_csv = self._open_csv(logdir / "evals.csv", EVALS_HEADER, start_step)
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
                bar_format=_BAR_FORMAT,
            )
        self.remaining: Callable[[int], float] | None = None
        """Seconds left at a step, from a measured forecast; the plain ETA otherwise."""
        self._t0 = time.perf_counter()
        self._last_t, self._last_step, self._last_updates = self._t0, start_step, start_updates
        self._shown_t = self._t0
        for note in self._notes:
            self.message(note)

    def _open_csv(self, path: Path, header: str, start_step: int):
        """Append to a CSV; on resume keep its whole rows up to the checkpoint's step
        (:func:`split_rows`), rewritten atomically where anything was left out. A row left
        out (or another header, or bytes that are not UTF-8) keeps the original file beside
        it, and a line says so: nothing a user had is lost."""
        raw = path.read_bytes() if path.exists() else b""
        text = raw.decode("utf-8", errors="replace")
        kept, dropped = split_rows(text, header, start_step)
        fresh = "\n".join([header, *kept]) + "\n"
        if text != fresh:
            changed = text.split("\n", 1)[0] != header or "\ufffd" in text
            if dropped or (changed and raw):
                self._keep_original(path, raw, dropped, start_step)
            write_text_atomic(path, fresh)
        return open(path, "a", encoding="utf-8", buffering=1)

    def _keep_original(
        self, path: Path, raw: bytes, dropped: list[tuple[int, str]], start_step: int
    ) -> None:
        backup, n = path.with_name(f"{path.name}.before-resume-{start_step}"), 1
        while backup.exists() and backup.read_bytes() != raw:
            n += 1
            backup = path.with_name(f"{path.name}.before-resume-{start_step}-{n}")
        write_bytes_atomic(backup, raw)
        after = sum(1 for _, row in dropped if row.split(",")[0].isdigit())
        why = f"{len(dropped):,} rows left out" if dropped else "its header or encoding rewritten"
        first = f" (first: line {dropped[0][0]}: {dropped[0][1][:60]!r})" if dropped else ""
        self._notes.append(
            f"rlamd: {path.name}: {why}{first}"
            + (f", {after:,} of them after the checkpoint's step {start_step:,}" if after else "")
            + f"; the original is kept as {backup}"
        )

    def evaluation(self, step: int, scores: list[float], note: str = "") -> None:
        """Scores of whole evaluation games: TensorBoard, evals.csv and one line (``note``:
        what else to say, e.g. episodes a step cap cut)."""
        n = len(scores)
        if n == 0:
            self.message(f"eval at {step:,}: no evaluation episode finished{note}")
            return
        mean = sum(scores) / n
        std = (sum((x - mean) ** 2 for x in scores) / n) ** 0.5
        self.scalars(step, {"eval/score_mean": mean, "eval/score_std": std})
        self._evals_csv.write(eval_row(step, mean, std, n))
        self.message(f"eval at {step:,}: {mean:.2f} +/- {std:.2f} over {n} games{note}")

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
        sps, ups = self._rates(step, updates, now)
        self._last_t, self._last_step, self._last_updates = now, step, updates
        rates = {"charts/SPS": sps, "charts/updates_per_s": ups}
        self.scalars(step, {**rates, **values})
        self._show(step, sps, ups, now)
        return rates

    def progress(self, step: int, updates: int) -> None:
        """Between log points: the bar moves (tqdm redraws at most 10 times a second); plain
        lines come when :data:`PLAIN_EVERY_S` seconds passed without one."""
        if self.bar is not None:
            self._fit_total(step)
            self.bar.update(step - self.bar.n)
            return
        now = time.perf_counter()
        if now - self._shown_t >= PLAIN_EVERY_S:
            self._show(step, *self._rates(step, updates, now), now)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside (evaluations, checkpoints) is left out of the next SPS and
        upd/s: they are the training's rates. The ETA still counts it."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._last_t += time.perf_counter() - start

    def _rates(self, step: int, updates: int, now: float) -> tuple[float, float]:
        dt = max(now - self._last_t, 1e-9)
        return (step - self._last_step) / dt, (updates - self._last_updates) / dt

    def _fit_total(self, step: int) -> None:
        """A run of whole rollouts ends past ``train.steps``: the bar's total follows, so
        the bar and its percentage stay to the end."""
        if step > self.bar.total:
            self.bar.total = step
            self.bar.refresh()

    def _eta(self, step: int, now: float) -> float:
        if self.remaining is not None:
            return self.remaining(step)
        done = step - self.start_step
        return max(0, self.total - step) * (now - self._t0) / done if done > 0 else float("nan")

    def _show(self, step: int, sps: float, ups: float, now: float) -> None:
        self._shown_t = now
        score = self.mean_score
        score_txt = f"{score:.2f}" if score is not None else "-"
        figures = f"SPS {sps:,.0f} | upd/s {ups:,.1f} | score {score_txt} (n={len(self.scores)})"
        eta = _fmt_eta(self._eta(step, now))
        if self.bar is not None:
            self._fit_total(step)
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix_str(f"{figures} | ETA {eta}")
        else:
            print(f"step {step:,}/{self.total:,} | {figures} | ETA {eta}", flush=True)

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
