"""``python -m rlamd.train ENV``: train an agent with good defaults.

Example::

    python -m rlamd.train breakout                       # DQN, Atari defaults
    python -m rlamd.train cartpole --steps 50000 --device cpu
    python -m rlamd.train breakout --set dqn.lr=6.25e-5 --set atari.sticky=0.25
    python -m rlamd.train --resume runs/breakout_dqn_s1_20261130-101500

Settings come, later winning, from the defaults, the preset for the env family,
``--config FILE.toml``, the flags, and ``--set section.key=value``. The resolved
configuration is saved in the run folder (``config.toml``, readable with ``--config``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlamd.agents.dqn import DQNConfig
from rlamd.agents.ppo import PPOConfig
from rlamd.config import ConfigError, apply_overrides, field_docs, load_toml, parse_set, to_toml
from rlamd.device import parse_device_spec
from rlamd.distributed.config import RayConfig
from rlamd.envs import AtariConfig, parse_env_id
from rlamd.precision import PRECISIONS

__all__ = ["TrainConfig", "build_agent", "main", "resolve_config", "sections_from_dicts"]

ALGOS = ("dqn", "ppo")


@dataclass(frozen=True)
class TrainConfig:
    """What to train, for how long, where, and how the run is logged and saved."""

    env: str = "breakout"
    """Environment: an ALE game (breakout, BreakoutNoFrameskip-v4, ALE/Breakout-v5) or cartpole."""
    algo: str = "dqn"
    """Algorithm."""
    steps: int = 10_000_000
    """Total env steps (agent decisions summed over envs; 4 frames each on Atari)."""
    num_envs: int = 8
    """Environments stepped together."""
    device: str = "auto"
    """auto, cpu, cuda[:N], hip[:N] or rocm[:N] (hip/rocm map to torch's cuda on ROCm)."""
    precision: str = "auto"
    """auto, fp32, bf16 or fp16 (auto: bf16 where native, fp16 on other GPUs, else fp32)."""
    seed: int = 1
    """Seeds torch, the agent, the replay and the envs."""
    logdir: str = "runs"
    """Folder holding one sub-folder per run."""
    run_name: str | None = None
    """Run folder name (default: ENV_ALGO_sSEED_TIME)."""
    eval_every: int = 250_000
    """Env steps between evaluations of whole games (0: never)."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    checkpoint_every: int = 100_000
    """Env steps between checkpoints (one is also written on SIGINT/SIGTERM and at the end)."""
    log_every: int = 10_000
    """Env steps between progress lines and TensorBoard points."""
    compile: bool = False
    """torch.compile the networks."""
    save_replay: bool = False
    """Put the replay contents in checkpoints (large: ~7 GB per 1M Atari transitions)."""
    tensorboard: bool = True
    """Write TensorBoard event files in the run folder."""

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            import difflib

            close = difflib.get_close_matches(self.algo, ALGOS, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"algo={self.algo!r}; accepted: {', '.join(ALGOS)}.{hint}")
        parse_env_id(self.env)
        parse_device_spec(self.device)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}; accepted: {', '.join(PRECISIONS)}")
        for name in ("steps", "num_envs", "eval_episodes", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        if self.eval_every < 0:
            raise ValueError(f"eval_every={self.eval_every}; accepted: 0 (never) or more")


SECTION_TYPES: dict[str, type] = {
    "train": TrainConfig,
    "dqn": DQNConfig,
    "ppo": PPOConfig,
    "atari": AtariConfig,
    "ray": RayConfig,
}

# Per env family and algorithm: what differs from the dataclass defaults (which are Atari's).
PRESETS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    ("atari", "dqn"): {},
    ("classic", "dqn"): {
        "train": {"steps": 60_000, "num_envs": 4, "eval_every": 20_000, "checkpoint_every": 20_000,
                  "log_every": 2_000, "eval_episodes": 10},
        "dqn": {"buffer_size": 50_000, "batch_size": 64, "lr": 1e-3, "adam_eps": 1e-8,
                "learning_starts": 1_000, "train_frequency": 2, "target_update_interval": 250,
                "exploration_fraction": 0.2, "eps_end": 0.02, "eval_epsilon": 0.0, "n_step": 3,
                "alpha": 0.6},
    },
    ("atari", "ppo"): {},
    ("classic", "ppo"): {
        "train": {"steps": 150_000, "num_envs": 4, "eval_every": 50_000, "checkpoint_every": 50_000,
                  "log_every": 4_096, "eval_episodes": 10},
        "ppo": {"clip_coef": 0.2, "ent_coef": 0.0, "lr": 1e-3},
    },
}  # fmt: skip


def sections_from_dicts(data: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Rebuild the config dataclasses from their saved dicts (e.g. from a checkpoint)."""
    return {
        name: apply_overrides(cls(), name, data.get(name, {}))
        for name, cls in SECTION_TYPES.items()
    }


def _merge(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]) -> None:
    for section, values in extra.items():
        base.setdefault(section, {}).update(values)


FLAG_FIELDS = ("algo", "steps", "num_envs", "device", "precision", "seed", "logdir", "run_name",
               "eval_every", "eval_episodes", "checkpoint_every", "log_every", "compile", "save_replay")  # fmt: skip


# [ray] fields with their own flag (--ray sets ray.enabled, --ray-address ray.address, ...).
RAY_FLAGS = {"enabled": "--ray", "address": "--ray-address", "num_rollout_workers": "--num-rollout-workers",
             "envs_per_worker": "--envs-per-worker", "num_learners": "--num-learners",
             "gpus_per_learner": "--gpus-per-learner", "max_failures": "--max-failures"}  # fmt: skip


def resolve_config(
    args: argparse.Namespace, saved: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """All sections, from defaults (or a checkpoint's ``saved`` config) and the command line."""
    flags = {f: getattr(args, f) for f in FLAG_FIELDS if getattr(args, f, None) is not None}
    if getattr(args, "env", None):
        flags["env"] = args.env
    if args.no_tensorboard:
        flags["tensorboard"] = False
    defaults = {name: cls() for name, cls in SECTION_TYPES.items()}
    layers: dict[str, dict[str, Any]] = {}
    if saved is not None:
        _merge(layers, saved)
    else:
        env = flags.get("env", TrainConfig.env)
        algo = flags.get("algo", TrainConfig.algo)
        family = parse_env_id(env).family
        _merge(layers, PRESETS.get((family, algo), {}))
    if args.config:
        _merge(layers, load_toml(args.config, defaults))
    _merge(layers, {"train": flags})
    _merge(layers, {"ray": {f: getattr(args, f"ray_{f}") for f in RAY_FLAGS
                            if getattr(args, f"ray_{f}", None) is not None}})  # fmt: skip
    _merge(layers, parse_set(args.set or [], defaults))
    sections = {}
    for name, cls in SECTION_TYPES.items():
        sections[name] = apply_overrides(cls(), name, layers.get(name, {}))
    if saved is not None:
        old = saved["train"]
        now = sections["train"]
        for key in ("env", "algo", "num_envs"):
            if str(getattr(now, key)) != str(old[key]):
                raise ConfigError(
                    f"--resume cannot change {key} ({old[key]!r} -> {getattr(now, key)!r}); "
                    f"start a new run instead"
                )
    return sections


# ---------------------------------------------------------------------- building
def _obs_info(env) -> tuple[tuple[int, ...], torch.dtype, int]:
    space = env.single_observation_space
    shape = tuple(space.shape)
    dtype = torch.uint8 if str(space.dtype) == "uint8" else torch.float32
    stack = shape[0] if dtype == torch.uint8 and len(shape) == 3 else 1
    return shape, dtype, stack


def build_agent(sections: dict[str, Any], device: torch.device, agent_state: dict | None = None,
                env=None) -> tuple[Any, Callable[[float | None], Callable[[torch.Tensor], torch.Tensor]]]:  # fmt: skip
    """The agent for ``sections`` on ``device`` and a factory of greedy-ish policies."""
    from rlamd.agents.dqn import DQN
    from rlamd.device import describe_device
    from rlamd.envs import make_env
    from rlamd.precision import Precision, resolve_precision

    train: TrainConfig = sections["train"]
    own_env = env is None
    if own_env:
        env = make_env(train.env, num_envs=1, atari=sections["atari"])
    shape, _dtype, _stack = _obs_info(env)
    num_actions = env.num_actions
    if own_env:
        env.close()
    info = describe_device(device)
    mode = resolve_precision(train.precision, device, info.bf16)
    if train.algo == "ppo":
        from rlamd.agents.ppo import PPO

        pcfg: PPOConfig = sections["ppo"]
        precision = Precision(
            mode, device, max_grad_norm=pcfg.max_grad_norm, grad_clamp=pcfg.grad_clamp
        )
        ppo = PPO(
            pcfg, shape, num_actions, device, precision, seed=train.seed, compile=train.compile
        )
        if agent_state is not None:
            ppo.load_state_dict(agent_state)
        return ppo, lambda epsilon=None: lambda obs: ppo.act(obs)[0]
    cfg: DQNConfig = sections["dqn"]
    precision = Precision(mode, device, max_grad_norm=cfg.max_grad_norm, grad_clamp=cfg.grad_clamp)
    agent = DQN(cfg, shape, num_actions, device, precision, seed=train.seed, compile=train.compile)
    if agent_state is not None:
        agent.load_state_dict(agent_state)

    def policy(epsilon: float | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
        eps = cfg.eval_epsilon if epsilon is None else epsilon
        return lambda obs: agent.act(obs, eps)

    return agent, policy


def _fit_capacity(requested: int, per_transition: float, device: torch.device, log) -> int:
    """Shrink the replay if it cannot fit in 80% of the free memory, and say so."""
    try:
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
        else:
            with open("/proc/meminfo", encoding="utf-8") as f:
                info = dict(line.split(":", 1) for line in f)
            free = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, RuntimeError, ValueError):
        return requested
    fits = int(0.8 * free / per_transition)
    if requested <= fits:
        return requested
    log(
        f"warning: a replay of {requested:,} transitions needs {requested * per_transition / 2**30:.1f} GiB "
        f"but {free / 2**30:.1f} GiB is free on {device}; using {fits:,} transitions "
        f"(set dqn.buffer_size to choose)"
    )
    return fits


def build_replay(cfg: DQNConfig, env, device: torch.device, seed: int, log=print, *,
                 num_streams: int | None = None, capacity: int | None = None) -> Any:  # fmt: skip
    """The replay a DQN run uses for ``env`` (shrunk to fit the free memory, and said so).

    A Ray learner's shard passes its own ``num_streams`` (the envs of the rollout actors
    feeding it) and ``capacity`` (its share of ``cfg.buffer_size``).
    """
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer, TransitionStorage

    shape, obs_dtype, stack = _obs_info(env)
    # record + sum and min trees (4 bytes each, plus ~1/31 for their inner nodes)
    per_t = TransitionStorage.record_bytes(shape, obs_dtype, stack, env.num_actions) + 8.3
    capacity = _fit_capacity(capacity or cfg.buffer_size, per_t, device, log)
    cls, extra = ReplayBuffer, {}
    if cfg.prioritized:
        cls, extra = PrioritizedReplayBuffer, {"alpha": cfg.alpha, "epsilon": cfg.priority_eps}
    return cls(
        capacity, num_streams or env.num_envs, shape, obs_dtype, frame_stack=stack, num_actions=env.num_actions,
        n_step=cfg.n_step, gamma=cfg.gamma, device=device, seed=seed, **extra,
    )  # fmt: skip


# ---------------------------------------------------------------------- the run
class LocalEngine:
    """Collector, replay (or rollout) and learner in this process.

    An engine is what :func:`run` steps: ``iterate()`` returns ``(env steps, finished
    episodes)`` per vector step or chunk, and it hands out metrics, the agent's state
    and an evaluation policy. :class:`rlamd.distributed.driver.RayEngine` offers the
    same on a Ray cluster, so both share the loop, logs, checkpoints and resume.
    """

    def __init__(self, sections: dict[str, Any], start_step: int, resume_state: dict | None, log) -> None:  # fmt: skip
        from rlamd.collector import Collector
        from rlamd.device import describe_device, resolve_device
        from rlamd.envs import make_env
        from rlamd.loops import OffPolicyLoop, OnPolicyLoop

        train: TrainConfig = sections["train"]
        self.dqn: DQNConfig = sections["dqn"]
        self.train = train
        self.device = device = resolve_device(train.device)
        self.info = describe_device(device)
        env = make_env(train.env, num_envs=train.num_envs, atari=sections["atari"])
        self.agent, self._make_policy = build_agent(
            sections, device, resume_state["agent"] if resume_state else None, env=env
        )
        if resume_state and "torch_rng" in resume_state:
            torch.set_rng_state(resume_state["torch_rng"])
        self.collector = Collector(env, device, seed=train.seed + start_step)
        self.buffer = None
        self.num_envs = train.num_envs
        if train.algo == "dqn":
            self.buffer = build_replay(self.dqn, env, device, train.seed, log)
            if resume_state and "replay" in resume_state:
                self.buffer.load_state_dict(resume_state["replay"])
            self.loop: OffPolicyLoop | OnPolicyLoop = OffPolicyLoop(
                self.collector, self.buffer, self.agent, self.dqn, train.steps, start_step
            )
            what = f"replay {self.buffer.capacity:,}"
        else:
            self.loop = OnPolicyLoop(
                self.collector, self.agent, sections["ppo"], train.steps, start_step
            )
            what = f"rollout {sections['ppo'].num_steps} x {train.num_envs}"
        self.detail = f"rlamd: {self.info.summary()} | precision {self.agent.precision.mode}\n" + (
            f"rlamd: {train.algo} on {train.env} x{train.num_envs}, {what}")  # fmt: skip

    @property
    def updates(self) -> int:
        return self.agent.updates

    def iterate(self) -> list[tuple[int, list[tuple[float, int]]]]:
        result = self.loop.iterate()
        return [
            (self.num_envs, s.finished())
            for s in (result if isinstance(result, list) else [result])
        ]

    def metrics(self) -> dict[str, float]:
        values = {"charts/epsilon": self.loop.epsilon, "system/device_memory_mb": _memory_mb(self.device),
                  **self.agent.read_metrics()}  # fmt: skip
        if self.train.algo == "dqn" and self.dqn.prioritized:
            values["charts/beta"] = self.dqn.beta(self.loop.step, self.train.steps)
        return values

    def agent_state(self) -> dict:
        return self.agent.state_dict()

    def extra_state(self) -> dict:
        state: dict[str, Any] = {"torch_rng": torch.get_rng_state()}
        if self.buffer is not None:
            state["replay"] = self.buffer.state_dict(include_contents=self.train.save_replay)
        return state

    def eval_policy(self) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.device]:
        return self._make_policy(None), self.device

    def close(self) -> None:
        self.collector.close()


def _memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Stop:
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

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def _new_run_dir(train: TrainConfig) -> Path:
    from rlamd.checkpoint import FILENAME

    name = (
        train.run_name
        or f"{parse_env_id(train.env).game.lower()}_{train.algo}_s{train.seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    )
    run_dir = Path(train.logdir) / name
    if (run_dir / FILENAME).exists():
        raise ConfigError(
            f"run folder {run_dir} already holds a checkpoint; use --resume {run_dir} or another --run-name"
        )
    return run_dir


def run(
    sections: dict[str, Any], resume_state: dict | None = None, run_dir: Path | None = None
) -> int:
    """Train until ``train.steps`` or a stop signal; returns the exit status.

    With ``--ray``, a learner that dies (or rollout workers dying past their restart limit)
    stops the run, keeping its last checkpoint, or, up to ``ray.max_failures`` times,
    restarts it from that checkpoint.
    """
    from rlamd.checkpoint import FILENAME, CheckpointError, load_checkpoint
    from rlamd.distributed import RunFailed

    torch.manual_seed(sections["train"].seed)
    run_dir = run_dir or _new_run_dir(sections["train"])
    failures, allowed = 0, sections["ray"].max_failures
    while True:
        try:
            return _run(sections, resume_state, run_dir)
        except RunFailed as exc:
            path = run_dir / FILENAME
            try:
                resume_state = load_checkpoint(path) if path.exists() else None
            except CheckpointError:
                resume_state = None
            kept = (f"its last checkpoint ({path}, step {resume_state['step']:,}) is kept"
                    if resume_state else "no checkpoint had been written yet")  # fmt: skip
            if failures >= allowed:
                print(f"error: {exc}. The run stopped; {kept}. Continue with: python -m rlamd.train "
                      f"--resume {run_dir}" + (" --ray" if sections["ray"].enabled else "") +
                      " (ray.max_failures / --max-failures N restarts it automatically)", file=sys.stderr)  # fmt: skip
                return 1
            failures += 1
            print(f"rlamd: {exc}; restarting ({failures} of --max-failures {allowed}), {kept} and is "
                  "where training goes on", file=sys.stderr)  # fmt: skip


def _run(sections: dict[str, Any], resume_state: dict | None, run_dir: Path) -> int:
    from rlamd.checkpoint import FILENAME, save_checkpoint
    from rlamd.evaluate import evaluate_policy
    from rlamd.logger import RunLogger

    train: TrainConfig = sections["train"]
    start_step = int(resume_state["step"]) if resume_state else 0
    # The engine comes first: a device or cluster that cannot serve the run is reported
    # before a run folder exists. Its messages wait for the logger.
    early: list[str] = []
    sink: dict[str, Callable[[str], None]] = {"log": early.append}

    def log(text: str) -> None:
        sink["log"](text)

    if sections["ray"].enabled:
        from rlamd.distributed.driver import RayEngine

        engine: Any = RayEngine(
            sections, start_step, resume_state["agent"] if resume_state else None, log
        )
        about = ("cluster.txt", engine.detail + "\n")
    else:
        engine = LocalEngine(sections, start_step, resume_state, log)
        about = ("device.json", json.dumps(engine.info.to_dict(), indent=2))
    try:
        logger = RunLogger(run_dir, train.steps, start_step, tensorboard=train.tensorboard,
                           start_updates=engine.updates)  # fmt: skip
    except BaseException:
        engine.close()
        raise
    sink["log"] = logger.message
    for text in early:
        logger.message(text)
    (run_dir / "config.toml").write_text(to_toml(sections), encoding="utf-8")
    (run_dir / about[0]).write_text(about[1], encoding="utf-8")
    logger.message(engine.detail)
    if logger.writer is not None:
        logger.writer.add_text("config", "```\n" + to_toml(sections) + "\n```", start_step)
        logger.writer.add_text("layout", "```\n" + engine.detail + "\n```", start_step)
    logger.message(
        f"rlamd: {train.algo} on {train.env}, {train.steps:,} steps"
        f"{f', resuming at step {start_step:,}' if start_step else ''} -> {run_dir}"
    )
    stop = _Stop()
    step = start_step
    next_log = (step // train.log_every + 1) * train.log_every
    next_ckpt = (step // train.checkpoint_every + 1) * train.checkpoint_every
    next_eval = (step // train.eval_every + 1) * train.eval_every if train.eval_every else None
    logger.scores.extend(resume_state.get("scores", []) if resume_state else [])

    def checkpoint() -> None:
        extra = engine.extra_state() if hasattr(engine, "extra_state") else {}
        save_checkpoint(run_dir / FILENAME, {
            "config": {k: dataclasses.asdict(v) for k, v in sections.items()},
            "step": step,
            "agent": engine.agent_state(),
            **extra,
            "scores": [float(s) for s in logger.scores],
            "run_dir": str(run_dir),
        })  # fmt: skip

    status = 0
    try:
        while step < train.steps:
            for env_steps, episodes in engine.iterate():
                for score, length in episodes:
                    logger.episode(step, score, length)
                step += env_steps
            if step >= next_log or step >= train.steps:
                next_log = (step // train.log_every + 1) * train.log_every
                logger.log(step, engine.updates, engine.metrics())
            if next_eval is not None and step >= next_eval:
                next_eval = (step // train.eval_every + 1) * train.eval_every
                policy, device = engine.eval_policy()
                ev = evaluate_policy(policy, train.env, train.eval_episodes, device=device,
                                     seed=10_000 + step, atari=sections["atari"])  # fmt: skip
                logger.evaluation(step, ev)
            if step >= next_ckpt:
                next_ckpt = (step // train.checkpoint_every + 1) * train.checkpoint_every
                checkpoint()
            if stop.signal is not None:
                checkpoint()
                logger.message(f"rlamd: stopped by signal {stop.signal} at step {step:,}; checkpoint in {run_dir / FILENAME}. "
                               f"Resume with: python -m rlamd.train --resume {run_dir}")  # fmt: skip
                status = 128 + stop.signal
                break
        else:
            checkpoint()
            logger.message(f"rlamd: done, {step:,} steps; checkpoint in {run_dir / FILENAME}")
    finally:
        stop.restore()
        logger.close()
        engine.close()
    return status


# ---------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    docs = field_docs(TrainConfig)
    defaults = TrainConfig()
    epilog_lines = [
        "settings for --set SECTION.KEY=VALUE (and [SECTION] tables in --config), with defaults:"
    ]
    for name, cls in SECTION_TYPES.items():
        fdocs = field_docs(cls)
        obj = cls()
        epilog_lines.append(f"  [{name}]")
        for f in dataclasses.fields(cls):
            epilog_lines.append(
                f"    {name}.{f.name} = {getattr(obj, f.name)!r}: {fdocs.get(f.name, '')}"
            )
    classic = PRESETS[("classic", "dqn")]
    epilog_lines.append("classic-control preset (cartpole ...): " + ", ".join(
        f"{s}.{k}={v}" for s, vals in classic.items() for k, v in vals.items()))  # fmt: skip
    p = argparse.ArgumentParser(
        prog="python -m rlamd.train",
        description="Train an agent on ENV. " + (__doc__ or "").split("\n\n")[-1].strip(),
        epilog="\n".join(epilog_lines),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "env",
        nargs="?",
        help=f"{docs['env']} (default: {defaults.env}; taken from the checkpoint with --resume)",
    )

    def flag(name: str, **kw: Any) -> None:
        default = getattr(defaults, name)
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                       help=f"{docs[name]} (default: {default})", **kw)  # fmt: skip

    flag("algo", choices=ALGOS)
    flag("steps", type=int)
    flag("num_envs", type=int)
    flag("device")
    flag("precision", choices=PRECISIONS)
    flag("seed", type=int)
    flag("logdir")
    flag("run_name")
    flag("eval_every", type=int)
    flag("eval_episodes", type=int)
    flag("checkpoint_every", type=int)
    flag("log_every", type=int)
    p.add_argument(
        "--compile",
        action="store_const",
        const=True,
        default=None,
        help=f"{docs['compile']} (default: off)",
    )
    p.add_argument("--save-replay", dest="save_replay", action="store_const", const=True, default=None,
                   help=f"{docs['save_replay']} (default: off)")  # fmt: skip
    p.add_argument(
        "--no-tensorboard",
        action="store_true",
        help="do not write TensorBoard events (default: write them)",
    )
    ray_docs, ray_defaults = field_docs(RayConfig), RayConfig()
    cluster = p.add_argument_group(
        "distributed training on Ray (pip install -e .[ray]; README: Ray clusters)"
    )
    for field, option in RAY_FLAGS.items():
        kind = {"enabled": None, "address": str, "gpus_per_learner": float}.get(field, int)
        extra: dict[str, Any] = (
            {"action": "store_const", "const": True} if kind is None else {"type": kind}
        )
        cluster.add_argument(option, dest=f"ray_{field}", default=None,
                             help=f"{ray_docs[field]} (default: {getattr(ray_defaults, field)})", **extra)  # fmt: skip
    p.add_argument(
        "--config", metavar="FILE.toml", help="read settings from a TOML file (default: none)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="override any setting; repeatable (default: none)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_OR_CKPT",
        help="continue a run from its checkpoint (default: start a new run)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rlamd.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
    from rlamd.device import DeviceError
    from rlamd.hostalloc import tune_host_allocator

    tune_host_allocator()

    try:
        resume_state, run_dir = None, None
        if args.resume:
            path = find_checkpoint(args.resume, args.logdir or TrainConfig.logdir)
            resume_state = load_checkpoint(path)
            run_dir = Path(resume_state.get("run_dir") or path.parent)
            if not run_dir.is_dir():
                run_dir = path.parent
        elif not args.env:
            print(
                "error: give an environment (e.g. breakout, cartpole) or --resume RUN",
                file=sys.stderr,
            )
            return 2
        sections = resolve_config(args, resume_state["config"] if resume_state else None)
    except (ConfigError, CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(sections, resume_state, run_dir)
    except (ConfigError, DeviceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # GPU errors (torch.OutOfMemoryError is one too)
        from rlamd.doctor.known_errors import explain, format_explanation

        rows = explain(str(exc))
        if not rows:
            raise
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(
            f"error: training stopped by a GPU error: {first}\n{format_explanation(rows[0])}\n"
            "The last checkpoint was kept; continue with --resume RUN once fixed. Check the machine with "
            '`python -m rlamd.doctor`, or paste any error into `python -m rlamd.doctor --explain "..."`.',
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
