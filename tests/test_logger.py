"""The progress figures."""

from __future__ import annotations

import pytest

from rlamd.logger import RunLogger, csv_rows


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


@pytest.mark.parametrize(
    "tail",
    ["\n", "\n\n", "30,4", "30,4,", "\n30,4.5,1", "30,4,12\n\x00\x00", "junk,1,2\n"],
)
def test_a_torn_last_line_never_blocks_a_resume(tmp_path, tail):
    """Regression: a blank or torn last line in episodes.csv (a kill in the middle of a
    write) made every resume fail with a ValueError traceback."""
    (tmp_path / "episodes.csv").write_text("step,score,length\n10,1,5\n20,2.5,7\n" + tail)
    logger = RunLogger(tmp_path, 100, 20, tensorboard=False, progress=False)
    logger.episode(40, 3.0, 9)
    logger.close()
    assert (tmp_path / "episodes.csv").read_text() == (
        "step,score,length\n10,1,5\n20,2.5,7\n40,3,9\n"
    )


def test_rows_after_the_resumed_step_are_dropped():
    text = "step,score,length\n10,1,5\n20,2,7\n30,3,9\n"
    assert csv_rows(text, "step,score,length", 20) == ["10,1,5", "20,2,7"]
    assert csv_rows("", "step,score,length", 20) == []


_TB_FULL = """
import errno, sys, time
from pathlib import Path
from tensorboard.compat.tensorflow_stub.io import gfile
from rlamd.logger import RunLogger

logger = RunLogger(Path(sys.argv[1]), 100, 0, tensorboard=True, progress=False)

def full(self, filename, file_content, binary_mode=False):
    raise OSError(errno.ENOSPC, "No space left on device", filename)

gfile.LocalFileSystem.append = full
try:
    for step in range(300):
        logger.scalars(step, {"charts/x": float(step)})
        time.sleep(0.01)
except OSError as exc:
    print("caller saw errno", exc.errno)
try:
    logger.close()
except OSError as exc:
    print("close saw errno", exc.errno, logger._episodes_csv.closed)
"""


def test_a_failed_tensorboard_write_reaches_the_caller_without_a_thread_traceback(tmp_path):
    """TensorBoard writes events on a thread; a full disk there printed that thread's
    traceback. Now the run loop's next call raises the OSError, and nothing else is said."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _TB_FULL, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["caller saw errno 28", "close saw errno 28 True"]
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr
