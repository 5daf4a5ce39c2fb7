"""The run: step an engine until the end or a signal, with logs, evaluations and checkpoints.

One code path for a single process and for Ray (:mod:`rlamd.engine`). A run folder holds
``config.toml``, ``checkpoint.pt``, ``episodes.csv``, ``evals.csv``, the TensorBoard
events, the engine's ``device.json`` or ``cluster.txt`` and ``.lock``.

A run holds its folder (:mod:`rlamd.rundir`) from before the engine is built until it
ends, however it ends; a new run gets a folder no other run has used. Nothing in a
checkpoint names its folder: a resumed run writes where it was pointed, so a run folder
may be moved or copied. A write that fails for the storage's sake (:mod:`rlamd.storage`)
stops the run with one line: what failed, the last good checkpoint, how to continue.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rlamd.checkpoint import FILENAME, CheckpointError, load_checkpoint, save_checkpoint
from rlamd.config import ConfigError, to_toml
from rlamd.config.sections import RunConfig, TrainConfig
from rlamd.device import amd_machine, ray_visibility_problem
from rlamd.distributed.plan import RunFailed
from rlamd.engine import Engine, LocalEngine
from rlamd.envs import EnvFault, EnvInterrupted, env_spaces, parse_env_id
from rlamd.evaluate import eval_seed, evaluate_episodes
from rlamd.logger import RunLogger
from rlamd.profiling import Profile
from rlamd.rundir import RunFolder, claim, hold
from rlamd.stops import (
    RunStopped,
    SkipWatch,
    Stop,
    UpdatesSkipped,
    early_fault,
    resume_command,
    save_traceback,
)
from rlamd.storage import (
    StorageError,
    check_room,
    storage_error,
    storage_fault,
    write_text_atomic,
)

__all__ = ["FORECAST_AFTER_S", "RunStopped", "resume_command", "run", "run_name"]

PROFILE_SKIP = 5
"""Iterations with updates that pass before ``--profile`` records (graph capture)."""
FORECAST_AFTER_S = 3.0
"""Seconds of training measured before the engine says what to expect (on a CPU)."""
MIN_ROOM = 2**20
"""Bytes a new run needs free to start (its settings, logs and a small first checkpoint)."""


def run_name(train: TrainConfig) -> str:
    """A new run's folder name: ``train.run_name``, else ``GAME_ALGO_sSEED_TIME``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (
        train.run_name
        or f"{parse_env_id(train.env, train.env_module).slug}_{train.algo}_s{train.seed}_{stamp}"
    )


def run(
    cfg: RunConfig,
    resume_state: dict | None = None,
    run_dir: Path | RunFolder | None = None,
    *,
    debug: bool = False,
) -> int:
    """Train until ``train.steps`` or a stop signal; returns the exit status.

    A new run (``run_dir`` None) claims ``logdir/NAME``, or ``NAME-2``... where another
    run has that name (:func:`rlamd.rundir.claim`); a resumed one holds ``run_dir``; a
    :class:`~rlamd.rundir.RunFolder` a caller claimed already (``rlamd.fit``) is used as it is. The
    folder is locked until this returns. A storage fault stops the run with one line on
    stderr (status 1), keeping the last good checkpoint; a second Ctrl-C aborts (130).
    With ``--ray``, a learner that dies (or rollout workers dying past their restart
    limit) stops the run, keeping its last checkpoint, or, up to ``ray.max_failures``
    times, restarts it from that checkpoint. An env that breaks its contract
    (:class:`rlamd.envs.EnvFault`) stops it with one line, the checkpoint of the last
    finished iteration and the resume command (status 1); ``debug`` prints the traceback,
    which ``RUN/error.log`` keeps either way.

    Raises:
        rlamd.rundir.RunBusy: another process trains in ``run_dir``.
        StorageError: the run folder cannot be created or written.
        ConfigError, CheckpointError: the engine refused the settings or the checkpoint.
    """
    torch.manual_seed(cfg.train.seed)
    if isinstance(run_dir, RunFolder):
        folder = run_dir
    elif run_dir is None:
        folder = claim(cfg.train.logdir, run_name(cfg.train))
    else:
        folder = hold(run_dir)
    try:
        last = folder.path / FILENAME
        if last.is_file():  # the next checkpoint is written beside this one, then renamed
            check_room(folder.path, max(MIN_ROOM, last.stat().st_size), "its next checkpoint")
        else:
            check_room(folder.path, MIN_ROOM, "a new run")
        return _attempts(cfg, resume_state, folder, debug)
    except RunStopped as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except EnvFault as exc:  # before training: the env failed as it was first reset
        print(f"error: {early_fault(folder.path, cfg, exc, debug)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before the first checkpoint, or a second Ctrl-C
        kept = (
            f"its last checkpoint is kept. Continue with: {resume_command(folder.path, cfg)}"
            if (folder.path / FILENAME).exists()
            else "no checkpoint had been written"
        )
        print(f"rlamd: interrupted in {folder.path}; {kept}", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT
    finally:
        folder.release()


def _attempts(cfg: RunConfig, resume_state: dict | None, folder: RunFolder, debug: bool) -> int:
    """Run, restarting a Ray run from its checkpoint up to ``ray.max_failures`` times."""
    run_dir = folder.path
    failures, allowed = 0, cfg.ray.max_failures
    while True:
        try:
            return _Run(cfg, resume_state, folder, debug).go()
        except RunFailed as exc:
            path = run_dir / FILENAME
            try:
                resume_state = load_checkpoint(path) if path.exists() else None
            except CheckpointError:
                resume_state = None
            kept = (
                f"its last checkpoint ({path}, step {resume_state['step']:,}) is kept"
                if resume_state
                else "no checkpoint had been written yet"
            )
            if failures >= allowed:
                print(
                    f"error: {exc}. The run stopped; {kept}. Continue with: "
                    f"{resume_command(run_dir, cfg)} (ray.max_failures / --max-failures N "
                    "restarts it automatically)",
                    file=sys.stderr,
                )
                return 1
            failures += 1
            print(
                f"rlamd: {exc}; restarting ({failures} of --max-failures {allowed}), {kept} "
                "and is where training goes on",
                file=sys.stderr,
            )


def _make_engine(cfg: RunConfig, start_step: int, agent_state: dict | None, log) -> Engine:
    if cfg.ray.enabled:
        if importlib.util.find_spec("ray") is None:
            raise ConfigError(
                "--ray needs Ray, which this Python does not have; install it with "
                "`bash scripts/setup.sh --ray` (or `pip install 'rlamd[ray]'` beside your torch)"
            )
        # On AMD nodes `import ray` itself refuses some GPU visibility settings: say why first.
        problem = ray_visibility_problem(os.environ, amd=amd_machine())
        if problem is not None:
            raise ConfigError(str(problem))
        from rlamd.distributed.driver import RayEngine  # Ray is optional: imported on use

        return RayEngine(cfg, start_step, agent_state, log)
    return LocalEngine(cfg, start_step, agent_state, log)


def _restore(engine: Engine, state: dict) -> list[str]:
    """The engine takes a checkpoint's non-agent parts (RNG, replay); one line if they do
    not fit this run (a replay saved with other settings)."""
    try:
        return engine.restore(state)
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"the checkpoint's saved state does not fit this run ({exc}); resume with the "
            "checkpoint's settings, or start a new run"
        ) from None


class _Run:
    """One attempt at a run (a Ray run that restarts itself makes a new one)."""

    def __init__(
        self, cfg: RunConfig, resume_state: dict | None, folder: RunFolder, debug: bool = False
    ) -> None:
        self.cfg, self.run_dir, self.state, self.debug = cfg, folder.path, resume_state or {}, debug
        self.step = int(self.state.get("step", 0))
        self.saved_step: int | None = self.step if resume_state else None
        """The step of the last good checkpoint in the folder (None: there is none)."""
        # The engine comes first: a device or cluster that cannot serve the run is reported
        # before anything is written. Its messages wait for the logger.
        early: list[str] = list(folder.notes)
        folder.notes.clear()  # said once, not again by a restarted attempt
        self._sink: Callable[[str], None] = early.append
        self._saved_at = time.monotonic()  # when the last checkpoint was written
        self.engine = _make_engine(cfg, self.step, self.state.get("agent"), self.log)
        self.device = self.engine.device
        try:
            restored = _restore(self.engine, self.state) if resume_state else []
            self.logger = RunLogger(
                self.run_dir,
                cfg.train.steps,
                self.step,
                tensorboard=cfg.train.tensorboard,
                start_updates=self.engine.updates,
            )
        except OSError as exc:
            self.engine.close()
            raise storage_error(exc) from None
        except BaseException:
            self.engine.close()
            raise
        self._sink = self.logger.message
        for text in early + restored:
            self.logger.message(text)
        self._skips = SkipWatch(cfg.env.max_skipped_updates, self.engine.updates, self.step)

    def log(self, text: str) -> None:
        self._sink(text)

    def _introduce(self) -> None:
        cfg, engine, logger, step = self.cfg, self.engine, self.logger, self.step
        write_text_atomic(self.run_dir / "config.toml", to_toml(cfg.run_sections()))
        write_text_atomic(self.run_dir / engine.about[0], engine.about[1])
        logger.message(engine.detail)
        if logger.writer is not None:
            logger.writer.add_text("config", "```\n" + to_toml(cfg.run_sections()) + "\n```", step)
            logger.writer.add_text("layout", "```\n" + engine.detail + "\n```", step)
        resuming = f", resuming at step {step:,}" if step else ""
        logger.message(
            f"rlamd: {cfg.train.algo} on {cfg.train.env}, {cfg.train.steps:,} steps"
            f"{resuming} -> {self.run_dir}"
        )
        if logger.writer is not None:
            logger.message(f"rlamd: watch it with: tensorboard --logdir {self.run_dir.parent}")
        logger.scores.extend(self.state.get("scores", []))

    def checkpoint(self) -> None:
        """Write the checkpoint (no path in it: the folder it lies in is the run's)."""
        save_checkpoint(
            self.run_dir / FILENAME,
            {
                "config": self.cfg.to_dict(),
                "step": self.step,
                "agent": self.engine.agent_state(),
                **self.engine.extra_state(),
                "scores": [float(s) for s in self.logger.scores],
                "env_spaces": env_spaces(self.cfg.train.env, self.cfg.train.env_module),
            },
        )
        self.saved_step = self.step
        self._saved_at = time.monotonic()  # from the write's end: a slow save saves once

    def _stopped(self, fault: StorageError) -> RunStopped:
        """The one line for a storage fault: what failed, what is kept, how to go on.

        Progress since the last checkpoint is saved first when the fault was elsewhere
        (a log file, TensorBoard) and a checkpoint can still be written.
        """
        path = self.run_dir / FILENAME
        if self.step > (self.saved_step or 0) and fault.path != path:
            self._salvage()
        return RunStopped(f"{fault}. Training stopped at step {self.step:,}; {self._kept()}")

    def _salvage(self) -> None:
        """Save the progress of the last finished iteration, if a checkpoint can be written."""
        try:
            self.checkpoint()
        except Exception:  # a salvage attempt: the fault is what to report
            pass

    def _kept(self) -> str:
        """What is kept of the run, and how to go on."""
        if self.saved_step is None:
            return "no checkpoint had been written yet; fix that and start the run again"
        return (
            f"the last good checkpoint ({self.run_dir / FILENAME}, step {self.saved_step:,}) "
            f"is kept. Once that is fixed, continue with: {resume_command(self.run_dir, self.cfg)}"
        )

    def _env_stopped(self, exc: Exception) -> RunStopped:
        """The one line for an env fault (or updates that keep being skipped): it, the
        checkpoint of the last finished iteration, the resume command, the traceback's file."""
        self._salvage()
        where = save_traceback(self.run_dir, exc, self.debug)
        return RunStopped(
            f"{exc}. Training stopped at step {self.step:,}; {self._kept()} ({where})"
        )

    def _interrupted(self) -> int:
        """Ctrl-C while the env stepped (a hung env): the checkpoint and the usual line."""
        self.checkpoint()
        return self._signal_line(signal.SIGINT)

    def _signal_line(self, signum: int) -> int:
        self.logger.message(
            f"rlamd: stopped by signal {signum} at step {self.step:,}; "
            f"checkpoint in {self.run_dir / FILENAME}. Resume with: "
            f"{resume_command(self.run_dir, self.cfg)}"
        )
        return 128 + signum

    def _evaluate(self) -> None:
        train = self.cfg.train
        policy, device = self.engine.eval_policy()
        played = evaluate_episodes(
            policy,
            train.env,
            train.eval_episodes,
            device=device,
            seed=eval_seed(train.seed, self.step),
            atari=self.cfg.atari,
            module=train.env_module,
            env_cfg=self.cfg.env,
            say=self.logger.message,
        )
        self.logger.evaluation(self.step, played.scores, played.note())

    def _periodic(self, due: dict[str, int], every: dict[str, int]) -> dict[str, int]:
        """Log, evaluate and checkpoint when due; returns the next due steps."""
        train, step = self.cfg.train, self.step
        if step >= due["log"] or step >= train.steps:
            values = self.engine.metrics()
            self.logger.log(step, self.engine.updates, values)
            self._skips.check(self.engine.updates, values)
        else:
            self.logger.progress(step, self.engine.updates)
        late = bool(m := train.checkpoint_minutes) and time.monotonic() - self._saved_at >= m * 60
        ckpt, evaluate = step >= due["ckpt"] or late, step >= due.get("eval", step + 1)
        # The checkpoint first: an evaluation that never ends must not cost the steps before.
        if ckpt or evaluate:
            with self.logger.paused():  # neither counts in the training's rates
                if ckpt:
                    self.checkpoint()
                if evaluate:
                    self._evaluate()
        return {k: (step // every[k] + 1) * every[k] if step >= d else d for k, d in due.items()}

    def _forecast(self, started: float, start: int) -> None:
        """Say what to expect, from the speed measured since ``started`` (step ``start``)."""
        sps = (self.step - start) / (time.monotonic() - started)
        forecast = self.engine.forecast(self.step, sps)
        if forecast is not None:
            self.logger.message(forecast.line)
            self.logger.remaining = forecast.remaining

    def _train(self, stop: Stop, prof: Profile) -> int:
        train, logger, engine = self.cfg.train, self.logger, self.engine
        every = {"log": train.log_every, "ckpt": train.checkpoint_every, "eval": train.eval_every}
        due = {k: (self.step // n + 1) * n for k, n in every.items() if n}
        started: float | None = None  # the clock starts after the first (warm-up) iteration
        start, forecast_pending = self.step, True
        while self.step < train.steps:
            if engine.updates > 0:
                prof.step()
            for env_steps, episodes in engine.iterate():
                for score, length in episodes:
                    logger.episode(self.step, score, length)
                self.step += env_steps
            if started is None:
                started, start = time.monotonic(), self.step
            elif forecast_pending and time.monotonic() - started >= FORECAST_AFTER_S:
                forecast_pending = False
                self._forecast(started, start)
            due = self._periodic(due, every)
            if stop.signal is not None:
                self.checkpoint()
                return self._signal_line(stop.signal)
        self.checkpoint()
        logger.message(f"rlamd: done, {self.step:,} steps; checkpoint in {self.run_dir / FILENAME}")
        return 0

    def go(self) -> int:
        """Train to the end or to a stop signal; returns the exit status.

        Raises:
            RunStopped: a storage fault stopped it (after closing everything).
        """
        stop = Stop()
        # Traced once updates run, after a few iterations (graph warm-up and capture).
        prof = Profile(
            self.run_dir / "profile",
            self.cfg.train.profile,
            self.device,
            skip=PROFILE_SKIP,
            log=self.logger.message,
        )
        try:
            self._introduce()
            status = self._train(stop, prof)
        except EnvInterrupted:
            status = self._interrupted()
        except Exception as exc:
            fault, env_fault = storage_fault(exc), isinstance(exc, EnvFault | UpdatesSkipped)
            stopped = self._stopped(fault) if fault is not None else None
            if env_fault:
                stopped = self._env_stopped(exc)
            self._finish(stop, prof, quiet=True)
            if stopped is None:
                raise
            raise stopped from None
        except BaseException:
            self._finish(stop, prof, quiet=True)
            raise
        try:
            self._finish(stop, prof, quiet=False)
        except OSError as exc:
            fault = storage_fault(exc) or storage_error(exc)
            raise self._stopped(fault) from None
        return status

    def _finish(self, stop: Stop, prof: Profile, *, quiet: bool) -> None:
        """Stop the profiler, put back the signal handlers, close the logs and the engine.

        ``quiet``: an error is already on its way; a log that fails to close adds nothing.
        """
        try:
            if prof.stop() is None and prof.steps:
                self.logger.message(
                    f"rlamd: --profile {prof.steps} wrote no trace: the run ended at step "
                    f"{self.step:,}, before {PROFILE_SKIP} iterations with updates had passed "
                    "(an off-policy run learns once its replay holds its learning_starts "
                    "transitions: lower that, or raise --steps)"
                )
        except OSError:
            if not quiet:
                raise
        finally:
            stop.restore()
            try:
                self.logger.close()
            except OSError:
                if not quiet:
                    raise
            finally:
                self.engine.close()
