"""The progress figures."""

from __future__ import annotations

import pytest

from rlamd.logger import EVALS_HEADER, RunLogger, csv_rows, eval_row, read_evals


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


@pytest.mark.parametrize(
    "rows",
    [
        "10;1;5\n20;2;7\n",  # re-saved with ';'
        "10,1,5,x\n20,2,7,y\n",  # an extra column
        "10.0,1,5\n20.0,2,7\n",  # steps written as 52.0
    ],
)
def test_a_resume_never_drops_a_row_without_keeping_the_original(tmp_path, capsys, rows):
    """Regression: --resume rewrote episodes.csv keeping only the rows it could parse, with
    no note and no copy: 108 rows became 0."""
    original = "step,score,length\n" + rows
    (tmp_path / "episodes.csv").write_text(original)
    logger = RunLogger(tmp_path, 100, 20, tensorboard=False, progress=False)
    logger.close()
    backup = tmp_path / "episodes.csv.before-resume-20"
    assert backup.read_text() == original
    out = capsys.readouterr().out
    assert "episodes.csv: 2 rows left out (first: line 2:" in out and str(backup) in out


def test_a_resume_keeps_the_rows_after_its_checkpoint_beside_the_log(tmp_path, capsys):
    original = "step,mean,std,episodes\n10,1,0,2\n30,2,0,2\n"
    (tmp_path / "evals.csv").write_text(original)
    RunLogger(tmp_path, 100, 20, tensorboard=False, progress=False).close()
    assert (tmp_path / "evals.csv").read_text() == "step,mean,std,episodes\n10,1,0,2\n"
    assert (tmp_path / "evals.csv.before-resume-20").read_text() == original
    assert "1 of them after the checkpoint's step 20" in capsys.readouterr().out


def test_a_clean_resume_leaves_no_copy(tmp_path):
    (tmp_path / "episodes.csv").write_text("step,score,length\n10,1,5\n20,2,7\n30,4")
    RunLogger(tmp_path, 100, 20, tensorboard=False, progress=False).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.csv", "evals.csv"]


def test_plain_lines_come_every_so_many_seconds_between_log_points(tmp_path, capsys, monkeypatch):
    """Regression: a CPU Breakout run with plain lines was silent for 77 s at a time."""
    import rlamd.logger as logger_module

    logger = RunLogger(tmp_path, 10_000, 0, tensorboard=False, progress=False)
    logger.progress(10, 0)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(logger_module, "PLAIN_EVERY_S", 0.0)
    logger.progress(20, 4)
    logger.close()
    assert "step 20/10,000" in capsys.readouterr().out


def test_the_bar_shows_one_eta_and_keeps_its_total_past_the_requested_steps(tmp_path):
    """Regression: on resume tqdm's own ETA stood beside rlamd's; a run of whole rollouts
    (150,016 steps for 150,000) lost its bar and percentage at the end."""
    import io

    logger = RunLogger(tmp_path, 150_000, 50_000, tensorboard=False, progress=True)
    logger.bar.fp = io.StringIO()
    logger.remaining = lambda step: 60.0
    logger.log(100_000, 10, {})
    text = str(logger.bar)
    assert "ETA 0:01:00" in text and "<" not in text
    logger.log(150_016, 20, {})
    text = str(logger.bar)
    assert logger.bar.total == 150_016 and "100%" in text and "|" in text
    logger.close()


def test_time_paused_for_evaluations_is_left_out_of_the_rates(tmp_path, monkeypatch):
    """Regression: a 3 s evaluation inside a 60 s log interval showed as a 5% slower
    training (the SB3 comparison's rates leave evaluations out)."""
    import rlamd.logger as logger_module

    clock = iter([0.0, 1.0, 10.0, 10.0, 12.0, 12.0])  # start; pause 1-10; logs at 10, 12
    monkeypatch.setattr(logger_module.time, "perf_counter", lambda: next(clock))
    logger = RunLogger(tmp_path, 1_000, 0, tensorboard=False, progress=False)
    with logger.paused():
        pass
    first = logger.log(100, 10, {})
    second = logger.log(300, 30, {})
    logger.close()
    assert first["charts/SPS"] == pytest.approx(100 / 1.0)  # 10 s less the 9 s pause
    assert first["charts/updates_per_s"] == pytest.approx(10 / 1.0)
    assert second["charts/SPS"] == pytest.approx(200 / 2.0)  # the pause counts once


def test_read_evals_gives_the_mean_by_step_and_nothing_for_a_missing_file(tmp_path):
    path = tmp_path / "evals.csv"
    path.write_text(
        EVALS_HEADER
        + "\n"
        + eval_row(1000, -2.5, 1.0, 10)
        + eval_row(2000, 7.25, 0.5, 10)
        + "3000,8.0,0.1",  # torn: a crash before the newline
        encoding="utf-8",
    )
    assert read_evals(path) == {1000: -2.5, 2000: 7.25}
    assert read_evals(tmp_path / "none.csv") == {}
