"""Progress on the terminal and scalars in TensorBoard.

On a terminal a live bar shows steps, SPS, updates/s, the recent mean score and the ETA;
elsewhere (CI, a log file, ``ray job``) the same figures come as plain periodic lines.
TensorBoard keys carry prefixes: ``charts/``, ``losses/``, ``eval/``, ``system/``.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path

__all__ = ["RunLogger"]


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class RunLogger:
    """Episode statistics, rates, a progress display and a TensorBoard writer."""

    def __init__(self, logdir: Path, total_steps: int, start_step: int = 0, *,
                 tensorboard: bool = True, progress: bool | None = None) -> None:  # fmt: skip
        self.total, self.start_step = total_steps, start_step
        self.scores: deque[float] = deque(maxlen=100)
        self.lengths: deque[int] = deque(maxlen=100)
        self.episodes = 0
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(logdir), purge_step=start_step or None)
        tty = sys.stderr.isatty() if progress is None else progress
        self.bar = None
        if tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, unit="step", unit_scale=True,
                            dynamic_ncols=True, smoothing=0.05)  # fmt: skip
        self._t0 = time.perf_counter()
        self._last_t, self._last_step, self._last_updates = self._t0, start_step, 0

    def episode(self, step: int, score: float, length: int) -> None:
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
            self.bar.set_postfix_str(
                f"SPS {sps:,.0f} | upd/s {ups:,.1f} | score {score_txt} (n={len(self.scores)})"
            )
        else:
            elapsed = now - self._t0
            done = step - self.start_step
            eta = (self.total - step) * elapsed / done if done > 0 else float("nan")
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
        if self.bar is not None:
            self.bar.close()
        if self.writer:
            self.writer.flush()
            self.writer.close()
