"""The progress figures."""

from __future__ import annotations

import pytest

from rlamd.logger import RunLogger


def test_updates_per_second_after_resume_count_only_new_updates(tmp_path, capsys):
    """Regression: a resumed run showed the checkpoint's whole update count as the first
    interval's updates/s (e.g. 16,039 upd/s)."""
    logger = RunLogger(
        tmp_path, 2_000, 1_000, tensorboard=False, progress=False, start_updates=50_000
    )
    rates = logger.log(1_100, 50_010, {})
    logger.close()
    # Same interval for both rates: 10 updates per 100 steps, not 50,010.
    assert rates["charts/updates_per_s"] / rates["charts/SPS"] == pytest.approx(0.1)
    assert "step 1,100/2,000" in capsys.readouterr().out


def test_a_terminal_without_a_width_gets_plain_lines(monkeypatch):
    """Regression: a 0x0 pseudo-terminal showed nothing for minutes (tqdm's dynamic width)."""
    import os
    import sys

    import rlamd.logger as logger_module

    class Tty:
        def isatty(self):
            return True

        def fileno(self):
            return 2

    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    assert logger_module._live_terminal() is False
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((120, 40)))
    assert logger_module._live_terminal() is True


def test_progress_eta_follows_the_measured_forecast(tmp_path, capsys):
    """Regression: before learning started the ETA said 3 h while the run needed 46 h."""
    logger = RunLogger(tmp_path, 10_000, 0, tensorboard=False, progress=False)
    logger.remaining = lambda step: 7_200.0 * (10_000 - step) / 9_000
    logger.log(1_000, 0, {})
    logger.close()
    assert "ETA 2:00:00" in capsys.readouterr().out
