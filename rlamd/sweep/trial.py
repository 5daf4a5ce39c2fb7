"""One sweep trial: an ordinary ``python -m rlamd.train`` run, watched and reported to Tune.

The trial starts ``rlamd.train`` as a child process (:mod:`rlamd.sweep.child`) in its own
run folder, ``SWEEP/TRIAL/``, with the sweep's flags plus its configuration, seed and
thread share. The run folder is an ordinary one (``config.toml``, ``checkpoint.pt``,
``episodes.csv``, ``evals.csv``, TensorBoard events): ``rlamd.train --resume``,
``rlamd.evaluate`` and TensorBoard read it as any other. Beside rlamd's files the trial
keeps ``trial.json`` (its configuration, seed, status, env steps, wall time of training
and final evaluation, the final evaluation or the last output lines) and ``progress.csv``
(what it reported, with the wall clock); the run's output goes to ``SWEEP/logs/TRIAL.log``.

While the run trains, the trial reads its CSVs every :data:`POLL_S` seconds and reports
``env_steps``, ``score`` (the mean of the last 100 training episodes) and
``eval_score`` (the last evaluation) to Tune, with a small Tune checkpoint that points at
the run whenever rlamd wrote a new ``checkpoint.pt``. A trial that starts where a
checkpoint lies (a resumed sweep) continues it with ``--resume``. At the end it
evaluates the final policy (``rlamd.evaluate``, ``train.eval_episodes`` episodes; the
same child runs it after training, so torch is imported once) and reports that as
``eval_score``. A run that fails raises :class:`TrialFailed` with its last lines; Tune
marks that trial errored and goes on with the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlamd.children import stop
from rlamd.logger import EVALS_HEADER, read_rows
from rlamd.storage import write_text_atomic

from .child import PARENT_VAR, THEN

__all__ = ["METRICS", "TrialFailed", "read_progress", "read_record", "run_trial", "trial_name"]

METRICS = ("score", "eval_score")
"""What a trial reports that ``--metric`` may name (``env_steps`` is ASHA's clock)."""
POLL_S = 1.0
REPORT_S = 2.0
LAST_LINES = 20
RECORD = "trial.json"
PROGRESS = "progress.csv"
PROGRESS_HEADER = "step,wall_s,score,eval_score"
STOP_WAIT_S = 60.0
"""How long a stopped trial waits for its run to write its checkpoint and exit."""


class TrialFailed(RuntimeError):
    """A trial's run exited with an error; ``str()`` holds its last output lines."""


def trial_name(config: dict[str, Any]) -> str:
    """``c03_s2``: the configuration's id and the seed (the run folder's name)."""
    return f"{config_id(config)}_s{trial_seed(config)}"


def config_id(config: dict[str, Any]) -> str:
    job = config["job"]
    if "configuration" in config:
        return job["configurations"][config["configuration"]]["id"]
    import hashlib

    text = json.dumps(settings_of(config), sort_keys=True)
    return "o" + hashlib.sha1(text.encode()).hexdigest()[:6]


def trial_seed(config: dict[str, Any]) -> int:
    if "seed" in config:
        return int(config["seed"])
    return int(config["job"]["seeds"][int(config.get("__trial_index__", 0))])


def settings_of(config: dict[str, Any]) -> dict[str, str]:
    """The ``--set`` items (as text) this trial's configuration adds."""
    if "configuration" in config:
        return dict(config["job"]["configurations"][config["configuration"]]["settings"])
    return {k: v if isinstance(v, str) else repr(v) for k, v in config["settings"].items()}


def read_record(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def log_path(run_dir: Path) -> Path:
    """Where a trial's run output goes: ``SWEEP/logs/TRIAL.log`` (a file, not a pipe, so
    the run can still write, and checkpoint, when its trial's worker is gone)."""
    return run_dir.parent / "logs" / f"{run_dir.name}.log"


def last_lines(path: Path, n: int = LAST_LINES) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16_384))
            return f.read().decode("utf-8", "replace").splitlines()[-n:]
    except OSError:
        return []


def _tune():
    """Tune's session calls for the installed Ray (``ray.tune`` since 2.41, ``ray.train``
    before)."""
    from ray import tune

    if hasattr(tune, "get_checkpoint"):
        return tune.report, tune.get_checkpoint, tune.Checkpoint
    from ray import train

    return train.report, train.get_checkpoint, train.Checkpoint


class _Watch:
    """Reads a run folder's CSVs and turns new rows into a report."""

    def __init__(self, run_dir: Path, wall0: float) -> None:
        self.run_dir, self.wall0, self.started = run_dir, wall0, time.monotonic()
        self.step, self.score, self.eval_score = 0, None, None
        self._seen = (0, 0)
        self._ckpt_mtime = self._mtime()

    def _mtime(self) -> float:
        try:
            return (self.run_dir / "checkpoint.pt").stat().st_mtime
        except OSError:
            return 0.0

    def wall(self) -> float:
        return self.wall0 + time.monotonic() - self.started

    def poll(self) -> bool:
        """Read the CSVs; True when there is something new to report."""
        episodes = read_rows(self.run_dir / "episodes.csv", "step,score,length")
        evals = read_rows(self.run_dir / "evals.csv", EVALS_HEADER)
        if (len(episodes), len(evals)) == self._seen or not episodes:
            return False
        self._seen = (len(episodes), len(evals))
        recent = [float(r[1]) for r in episodes[-100:]]
        self.score = sum(recent) / len(recent)
        self.step = max(int(episodes[-1][0]), int(evals[-1][0]) if evals else 0)
        if evals:
            self.eval_score = float(evals[-1][1])
        return True

    def new_checkpoint(self) -> bool:
        mtime = self._mtime()
        changed, self._ckpt_mtime = mtime != self._ckpt_mtime, mtime
        return changed

    def metrics(self) -> dict[str, float]:
        ev = self.eval_score if self.eval_score is not None else self.score
        return {
            "env_steps": self.step,
            "score": self.score,
            "eval_score": ev,
            "wall_s": self.wall(),
        }


def read_progress(run_dir: Path) -> np.ndarray:
    """A trial's reported ``(step, wall_s, score)`` rows; rows a resume rewound are dropped
    (a run resumed from a checkpoint at step S repeats what followed S)."""
    try:
        lines = (run_dir / PROGRESS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return np.zeros((0, 3))
    width = PROGRESS_HEADER.count(",") + 1
    kept: list[tuple[float, float, float]] = []
    for line in lines[1:]:
        fields = line.split(",")
        if len(fields) != width:
            continue
        try:
            step, wall, score = float(fields[0]), float(fields[1]), float(fields[2])
        except ValueError:
            continue
        while kept and kept[-1][0] >= step:
            kept.pop()
        kept.append((step, wall, score))
    return np.asarray(kept, dtype=np.float64).reshape(-1, 3)


def _append_progress(run_dir: Path, m: dict[str, float]) -> None:
    path = run_dir / PROGRESS
    new = not path.exists()
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write(PROGRESS_HEADER + "\n")
        f.write(f"{m['env_steps']},{m['wall_s']:.3f},{m['score']:.4f},{m['eval_score']:.4f}\n")


def _report_with_pointer(report, checkpoint_cls, run_dir: Path, m: dict[str, float]) -> None:
    """Report ``m`` with a Tune checkpoint that names the run (rlamd's own checkpoint stays
    in the run folder; Tune copies this folder of a few bytes into its storage)."""
    with tempfile.TemporaryDirectory(prefix="rlamd-trial-") as folder:
        (Path(folder) / "run.json").write_text(
            json.dumps({"run": run_dir.name, "step": m["env_steps"]})
        )
        report(m, checkpoint=checkpoint_cls.from_directory(folder))


def _command(config: dict[str, Any], run_dir: Path) -> list[str]:
    """``rlamd.train``'s arguments: a new run, or ``--resume`` where a checkpoint lies."""
    job = config["job"]
    threads = [] if job.get("threads") is None else ["--threads", str(job["threads"])]
    evaluate = [
        THEN,
        "rlamd.evaluate",
        str(run_dir),
        "--json",
        "--episodes",
        str(job["eval_episodes"]),
    ]
    if (run_dir / "checkpoint.pt").is_file():
        return ["rlamd.train", "--resume", str(run_dir), *threads, *evaluate]
    if run_dir.exists():  # a start killed before its first checkpoint: nothing to resume
        n = 1
        while (aside := run_dir.with_name(f".{run_dir.name}.dead-{n}")).exists():
            n += 1
        run_dir.rename(aside)
    sets = [f"{k}={v}" for k, v in settings_of(config).items()]
    sets += [
        f"train.seed={trial_seed(config)}",
        f"train.logdir={run_dir.parent}",
        f"train.run_name={run_dir.name}",
    ]
    train = ["rlamd.train", *job["argv"], *threads, *(x for s in sets for x in ("--set", s))]
    return [*train, *evaluate]


def _start(job: dict[str, Any], args: list[str], log: Path) -> subprocess.Popen:
    """The child, its output appended to ``log``."""
    # the driver's plugin variable, for trials on other nodes (rlamd.sweep.driver.plan)
    env = {**os.environ, **job.get("env_vars", {})}
    env.update({"PYTHONUNBUFFERED": "1", PARENT_VAR: str(os.getpid())})
    log.parent.mkdir(parents=True, exist_ok=True)
    # On another node of a cluster the driver's folder and interpreter may not exist.
    python = job.get("python") if Path(job.get("python") or "").is_file() else None
    with open(log, "a", encoding="utf-8") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [python or sys.executable, "-m", "rlamd.sweep.child", *args],
            cwd=job["cwd"] if Path(job["cwd"]).is_dir() else None,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C is the driver's to handle
        )


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the run checkpoints and exits), then SIGKILL after :data:`STOP_WAIT_S`."""
    stop(proc, STOP_WAIT_S, sig=signal.SIGTERM)


def save_record(run_dir: Path, record: dict[str, Any]) -> None:
    if run_dir.is_dir():
        write_text_atomic(run_dir / RECORD, json.dumps(record, indent=1) + "\n")


def _final_eval(run_dir: Path) -> dict[str, Any]:
    """The final evaluation's ``--json`` line, the last the child wrote to the log."""
    for line in reversed(last_lines(log_path(run_dir), 50)):
        if line.startswith('{"checkpoint"'):
            return json.loads(line)
    raise TrialFailed(f"{run_dir.name}: no final evaluation in {log_path(run_dir)}")


def _watch(proc, watch, record, run_dir, tune_calls) -> None:
    """Report new rows (and pointer checkpoints) to Tune until the run exits."""
    report, _, checkpoint_cls = tune_calls
    last_report = 0.0
    while proc.poll() is None:
        time.sleep(POLL_S)
        if time.monotonic() - last_report < REPORT_S or not watch.poll():
            continue
        last_report = time.monotonic()
        m = watch.metrics()
        _append_progress(run_dir, m)
        record.update(status="running", env_steps=m["env_steps"], wall_s=round(m["wall_s"], 3))
        save_record(run_dir, record)
        if watch.new_checkpoint():
            _report_with_pointer(report, checkpoint_cls, run_dir, m)
        else:
            report(m)


def _stopped(proc, watch, record, run_dir) -> None:
    """Stop the run (it checkpoints) and record where; a mark the sweep already wrote
    (``stopped early``) stays."""
    _stop(proc)
    watch.poll()
    record.update(status="stopped", env_steps=watch.step, wall_s=round(watch.wall(), 3))
    if read_record(run_dir).get("status") != "stopped early":
        save_record(run_dir, record)


def run_trial(config: dict[str, Any]) -> None:
    """The Tune function trainable: train, report as it goes, evaluate at the end."""
    job = config["job"]
    run_dir = Path(job["sweep_dir"]) / trial_name(config)
    tune_calls = _tune()
    record = read_record(run_dir) if (run_dir / "checkpoint.pt").is_file() else {}
    if record.get("status") == "done" and "final" in record:
        mean = record["final"]["mean"]
        tune_calls[0](
            {
                "env_steps": record["env_steps"],
                "score": mean,
                "eval_score": mean,
                "wall_s": record["wall_s"],
            }
        )
        return
    rows = read_progress(run_dir) if record.get("status") == "stopped early" else None
    if rows is not None and len(rows):  # a scheduler ended it: its last report again
        step, wall, score = (float(x) for x in rows[-1][:3])
        tune_calls[0]({"env_steps": int(step), "score": score, "eval_score": score, "wall_s": wall})
        return
    record.update(
        name=run_dir.name,
        config_id=config_id(config),
        settings=settings_of(config),
        seed=trial_seed(config),
        status="starting",
    )
    watch = _Watch(run_dir, float(record.get("wall_s", 0.0)))
    proc = _start(job, _command(config, run_dir), log_path(run_dir))
    try:
        _watch(proc, watch, record, run_dir, tune_calls)
    except BaseException:  # stopped by Tune (an early stop, the sweep interrupted)
        _stopped(proc, watch, record, run_dir)
        raise
    finally:
        _stop(proc)
    watch.poll()
    record.update(rc=proc.returncode, env_steps=watch.step, wall_s=round(watch.wall(), 3))
    if proc.returncode != 0:
        lines = last_lines(log_path(run_dir))
        record.update(status="failed", error=lines)
        save_record(run_dir, record)
        raise TrialFailed(
            f"{run_dir.name} exited with status {proc.returncode}; the last lines of "
            f"{log_path(run_dir)}:\n" + "\n".join(lines)
        )
    final = _final_eval(run_dir)
    record.update(status="done", final={k: final[k] for k in ("mean", "std", "step", "scores")})
    record["env_steps"] = int(final["step"])
    save_record(run_dir, record)
    m = {**watch.metrics(), "env_steps": int(final["step"]), "eval_score": final["mean"]}
    if m["score"] is None:
        m["score"] = final["mean"]
    _append_progress(run_dir, m)
    tune_calls[0](m)
