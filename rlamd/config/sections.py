"""The run's configuration: one frozen, typed :class:`RunConfig` of sections.

``RunConfig.train`` (:class:`TrainConfig`) says what to train, for how long and where;
``atari`` holds the Atari preprocessing (``AtariConfig``, beside the envs), ``env`` how any
other gymnasium env is built (``EnvConfig``, beside the envs) and ``ray`` the cluster layout
(:class:`RayConfig`). Each algorithm brings a section of its own (``cfg.dqn``, ``cfg.ppo``,
a plugin's), registered with it: :func:`rlamd.algos.register` calls
:func:`register_section`, so this module names no algorithm, and the registered sections
exist once ``rlamd.algos`` (or a plugin) is imported. Every section is a frozen dataclass
with a docstring under each field; the command line, TOML files and ``--set
section.key=value`` all fill the same objects (:mod:`rlamd.config.layers` layers them). A
``RunConfig`` is what every part of a run receives, Ray actors included, and what a
checkpoint stores (as plain dicts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlamd.device import parse_device_spec
from rlamd.envs import AtariConfig, EnvConfig, env_family, parse_env_id
from rlamd.graphs import GRAPH_MODES
from rlamd.precision import PRECISIONS

from .errors import ConfigError
from .values import apply_overrides

__all__ = [
    "ALGORITHM_SECTIONS",
    "CORE_SECTIONS",
    "MOVED_KEYS",
    "SECTION_TYPES",
    "RayConfig",
    "RunConfig",
    "TrainConfig",
    "move_keys",
    "moved_note",
    "register_section",
    "unregister_section",
]


@dataclass(frozen=True)
class TrainConfig:
    """What to train, for how long, where, and how the run is logged and saved."""

    env: str = "breakout"
    """Environment: an ALE game (breakout, BreakoutNoFrameskip-v4, ALE/Breakout-v5), a
    classic-control task (cartpole, acrobot, mountaincar), any gymnasium id (Pendulum-v1)
    or a factory entry point (package.module:make_env)."""
    env_module: str | None = None
    """Modules (comma-separated) imported before the env is made, so that they can
    register gymnasium envs (--env-module)."""
    algo: str = "dqn"
    """Algorithm: a name registered in rlamd.algos.ALGORITHMS (the choices of --algo)."""
    steps: int = 10_000_000
    """Total env steps (agent decisions summed over envs; 4 frames each on Atari)."""
    num_envs: int = 8
    """Environments stepped together."""
    device: str = "auto"
    """auto, cpu, cuda[:N], hip[:N] or rocm[:N] (hip/rocm map to torch's cuda on ROCm)."""
    precision: str = "auto"
    """auto, fp32, bf16 or fp16 (auto: bf16 where native, fp16 on other GPUs, else fp32;
    networks without a CNN: fp32)."""
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
    checkpoint_minutes: float = 10.0
    """Also checkpoint after this many minutes without one, so a killed slow run loses
    little (0: by steps only)."""
    log_every: int = 10_000
    """Env steps between progress lines and TensorBoard points."""
    compile: bool = False
    """torch.compile the networks."""
    graph: str = "auto"
    """Capture the learner step as a CUDA/HIP graph: auto (on GPUs), on, or off."""
    tf32: bool = True
    """Let fp32 matmuls and convolutions use TF32 where the GPU has it (Ampere+, MI300)."""
    threads: int | None = None
    """CPU cores rlamd may use, split between envs, torch and numba (default: the affinity mask)."""
    profile: int = 0
    """Iterations to trace with torch.profiler once learning runs, into the run's profile/ (0: off)."""
    save_replay: bool = False
    """Put the replay contents in checkpoints (large: ~7 GB per 1M Atari transitions)."""
    tensorboard: bool = True
    """Write TensorBoard event files in the run folder."""

    def __post_init__(self) -> None:
        parse_env_id(self.env, self.env_module)
        parse_device_spec(self.device)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}; accepted: {', '.join(PRECISIONS)}")
        if self.graph not in GRAPH_MODES:
            raise ValueError(f"graph={self.graph!r}; accepted: {', '.join(GRAPH_MODES)}")
        for name in ("steps", "num_envs", "eval_episodes", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        if self.checkpoint_minutes < 0:
            raise ValueError(
                f"checkpoint_minutes={self.checkpoint_minutes}; accepted: 0 (by steps only) or more"
            )
        if self.eval_every < 0:
            raise ValueError(f"eval_every={self.eval_every}; accepted: 0 (never) or more")
        if self.profile < 0:
            raise ValueError(f"profile={self.profile}; accepted: 0 (off) or a number of env steps")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads={self.threads}; accepted: an integer >= 1, or none")
        name = self.run_name
        if name and (name.strip(".") == "" or "/" in name or "\\" in name or "\0" in name):
            near = name.replace("/", "_").replace("\\", "_").replace("\0", "").strip(".")
            raise ValueError(
                f"run_name={name!r} (it names one folder inside train.logdir); accepted: a "
                f"folder name without / or \\, or none for ENV_ALGO_sSEED_TIME. Did you mean "
                f"{near or 'run'!r}?"
            )

    @property
    def family(self) -> str:
        """``atari``, ``classic``, ``continuous`` or ``pixels``: which preset the env takes
        (:func:`rlamd.envs.env_family`; an env that is not Atari is made once to tell)."""
        return env_family(self.env, self.env_module)


@dataclass(frozen=True)
class RayConfig:
    """How a ``--ray`` run is spread over a Ray cluster (what every algorithm's Ray split
    shares; a setting only one algorithm reads lives in its own section, e.g. DQN's Ape-X
    ``dqn.chunk_steps``)."""

    enabled: bool = False
    """Train on Ray: rollout actors feed one learner per GPU (--ray)."""
    address: str | None = None
    """Cluster to join: host:port, 'auto', or 'local' for a new one (default: RAY_ADDRESS or a running cluster, else a new local one)."""
    num_rollout_workers: int = 2
    """Rollout actors, each with its own vector env and policy copy on the CPU."""
    envs_per_worker: int = 4
    """Envs stepped together by each rollout actor."""
    num_learners: int = 1
    """Learner actors; more than one all-reduce their gradients every update."""
    gpus_per_learner: float | None = None
    """GPUs per learner, fractions allowed (default: 1 where the cluster has GPUs, else 0)."""
    cpus_per_worker: float = 1.0
    """CPUs reserved for each rollout actor."""
    cpus_per_learner: float = 1.0
    """CPUs reserved for each learner actor."""
    max_worker_restarts: int = 20
    """Times Ray restarts each dead rollout actor (-1: always)."""
    max_failures: int = 0
    """Times the run restarts itself from its last checkpoint after a learner died (0: stop and say how to resume)."""
    placement_timeout_s: float = 60.0
    """Seconds to wait for the cluster to place every actor before giving up with a report."""
    group_timeout_s: float = 300.0
    """Seconds a learner waits on the others (process-group setup, each all-reduce)."""
    stall_timeout_s: float = 600.0
    """Seconds the driver waits for any rollout worker's data (restarts on other nodes included) before it stops the run with a report."""

    def __post_init__(self) -> None:
        for name in (
            "num_rollout_workers",
            "envs_per_worker",
            "num_learners",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in (
            "cpus_per_worker",
            "cpus_per_learner",
            "placement_timeout_s",
            "group_timeout_s",
            "stall_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: a number > 0")
        if self.gpus_per_learner is not None and self.gpus_per_learner < 0:
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; accepted: 0, a fraction such as "
                "0.5, or a whole number of GPUs"
            )
        if (
            self.gpus_per_learner is not None
            and self.gpus_per_learner > 1
            and self.gpus_per_learner % 1
        ):
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; above 1 Ray accepts only whole GPUs"
            )
        if self.max_worker_restarts < -1:
            raise ValueError(
                f"ray.max_worker_restarts={self.max_worker_restarts}; accepted: -1 (always) or an integer >= 0"
            )
        if self.max_failures < 0:
            raise ValueError(f"ray.max_failures={self.max_failures}; accepted: an integer >= 0")


CORE_SECTIONS: dict[str, type] = {
    "train": TrainConfig,
    "atari": AtariConfig,
    "env": EnvConfig,
    "ray": RayConfig,
}
"""The sections every run has, whatever its algorithm."""

ALGORITHM_SECTIONS: dict[str, type] = {}
"""Each registered algorithm's section type, by the algorithm's name, in the order they
were registered (:func:`register_section`, called by :func:`rlamd.algos.register`)."""

SECTION_TYPES: dict[str, type] = {}
"""Every section of a :class:`RunConfig`, in order: ``train``, the algorithms' sections,
``atari``, ``env``, ``ray``. The same dict is kept current as algorithms register."""

MOVED_KEYS: dict[str, str] = {}
"""``section.key`` a setting was read from before -> ``section.key`` it is read from now
(each algorithm's ``moved_keys``): old config files, ``--set`` items and checkpoints that
name the old place still work (:func:`move_keys`)."""


def _order_sections() -> None:
    SECTION_TYPES.clear()
    SECTION_TYPES["train"] = TrainConfig
    SECTION_TYPES.update(ALGORITHM_SECTIONS)
    SECTION_TYPES.update({k: v for k, v in CORE_SECTIONS.items() if k != "train"})


def register_section(name: str, kind: type, moved: dict[str, str] | None = None) -> None:
    """Give every :class:`RunConfig` the section ``name`` of type ``kind`` (a frozen
    dataclass whose defaults build it): ``cfg.NAME``, ``[NAME]`` tables, ``--set NAME.KEY``,
    ``--help`` and checkpoints then hold it. ``moved`` maps old ``section.key`` places of
    settings now in this section to their new ones (:data:`MOVED_KEYS`).

    Raises:
        ValueError: ``name`` is a core section, not an identifier, or taken by another type.
        TypeError: ``kind`` is not a frozen dataclass.
    """
    if name in CORE_SECTIONS or not name.isidentifier() or name.startswith("_"):
        raise ValueError(
            f"algorithm section {name!r}; accepted: a lowercase identifier other than "
            f"{', '.join(CORE_SECTIONS)}"
        )
    if name in vars(RunConfig) or name == "algorithms":
        raise ValueError(f"algorithm section {name!r} would hide RunConfig.{name}")
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"section {name!r}: {kind!r} is not a frozen dataclass")
    taken = ALGORITHM_SECTIONS.get(name)
    if taken is not None and taken is not kind:
        raise ValueError(f"section {name!r} is registered already, as {taken.__qualname__}")
    _check_moved(name, moved or {})
    ALGORITHM_SECTIONS[name] = kind
    MOVED_KEYS.update(moved or {})
    _order_sections()


def _check_moved(name: str, moved: dict[str, str]) -> None:
    """Refuse an old place that another section reads already, or that is a setting of
    a section today: taking it would change what old files and checkpoints mean."""
    accepted = f"; accepted: an old SECTION.KEY no section has or reads, moved to {name}.KEY"
    for old, new in moved.items():
        section, key = old.split(".", 1)
        if new.split(".", 1)[0] != name:
            raise ValueError(
                f"section {name!r}: moved key {old} -> {new} points outside {name}{accepted}"
            )
        if MOVED_KEYS.get(old, new) != new:
            raise ValueError(
                f"section {name!r}: moved key {old} is read as {MOVED_KEYS[old]} already{accepted}"
            )
        live = SECTION_TYPES.get(section)
        if live is not None and key in {f.name for f in dataclasses.fields(live)}:
            raise ValueError(
                f"section {name!r}: moved key {old} is a setting of [{section}]{accepted}"
            )


def unregister_section(name: str) -> None:
    """Take back :func:`register_section` (a plugin reloaded, a test cleaning up)."""
    ALGORITHM_SECTIONS.pop(name, None)
    for old, new in list(MOVED_KEYS.items()):
        if new.split(".", 1)[0] == name:
            del MOVED_KEYS[old]
    _order_sections()


_order_sections()


def move_keys(layers: dict[str, dict[str, Any]]) -> list[str]:
    """Read settings given at their old place (:data:`MOVED_KEYS`) at their new one.

    ``layers`` (``{section: {key: value}}``) is changed in place; a value given at the new
    place as well wins. Returns ``OLD is now NEW`` for each moved setting found.
    """
    found = []
    for old, new in MOVED_KEYS.items():
        section, key = old.split(".", 1)
        if key not in layers.get(section, {}):
            continue
        value = layers[section].pop(key)
        to_section, to_key = new.split(".", 1)
        layers.setdefault(to_section, {}).setdefault(to_key, value)
        found.append(f"{old} is now {new}")
    return found


def moved_note(where: str, found: list[str]) -> str:
    """The one line saying that ``where`` named settings at their old place."""
    return f"rlamd: note: {where}: {', '.join(found)} (read there)"


@dataclass(frozen=True, init=False)
class RunConfig:
    """Every setting of one run, by section (``cfg.train.steps``, ``cfg.dqn.lr``, ...).

    The core sections are fields; each registered algorithm's section
    (:data:`ALGORITHM_SECTIONS`) is held in :attr:`algorithms` and read as an attribute of
    its name (``cfg.dqn``) or keyword (``RunConfig(dqn=DQNConfig(...))``,
    ``dataclasses.replace(cfg, ppo=...)``). A section not given takes its defaults.
    """

    train: TrainConfig
    atari: AtariConfig
    env: EnvConfig
    ray: RayConfig
    algorithms: tuple[tuple[str, Any], ...]
    """``(name, section)`` of every registered algorithm, in registration order."""

    def __init__(
        self,
        train: TrainConfig | None = None,
        atari: AtariConfig | None = None,
        env: EnvConfig | None = None,
        ray: RayConfig | None = None,
        algorithms: tuple[tuple[str, Any], ...] = (),
        **sections: Any,
    ) -> None:
        given = {**dict(algorithms), **sections}
        unknown = sorted(set(given) - set(ALGORITHM_SECTIONS))
        if unknown:
            raise TypeError(
                f"RunConfig: no section {', '.join(unknown)}; sections: {', '.join(SECTION_TYPES)}"
                " (an algorithm's section exists once rlamd.algos.register has registered it)"
            )
        put = object.__setattr__
        put(self, "train", TrainConfig() if train is None else train)
        put(self, "atari", AtariConfig() if atari is None else atari)
        put(self, "env", EnvConfig() if env is None else env)
        put(self, "ray", RayConfig() if ray is None else ray)
        held = tuple((n, given[n] if n in given else k()) for n, k in ALGORITHM_SECTIONS.items())
        put(self, "algorithms", held)

    def __getattr__(self, name: str) -> Any:
        """An algorithm's section by its name (``cfg.dqn``); one registered after this
        object was made gives its defaults."""
        if name.startswith("__") or name == "algorithms":  # copy and pickle probes
            raise AttributeError(name)
        for key, section in self.__dict__.get("algorithms", ()):
            if key == name:
                return section
        if name in ALGORITHM_SECTIONS:
            return ALGORITHM_SECTIONS[name]()
        raise AttributeError(
            f"RunConfig has no section {name!r}; sections: {', '.join(SECTION_TYPES)}"
        )

    def sections(self) -> dict[str, Any]:
        """``{"train": TrainConfig(...), ...}`` in the order of ``SECTION_TYPES``."""
        return {name: getattr(self, name) for name in SECTION_TYPES}

    def run_sections(self) -> dict[str, Any]:
        """:meth:`sections` less the algorithm sections this run does not read: what a
        run's ``config.toml`` holds, so that the file loads where another algorithm's
        plugin (loaded when the run was made) is not."""
        return {
            name: section
            for name, section in self.sections().items()
            if name not in ALGORITHM_SECTIONS or name == self.train.algo
        }

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain dicts (what a checkpoint stores)."""
        return {name: dataclasses.asdict(obj) for name, obj in self.sections().items()}

    @classmethod
    def from_dict(
        cls, data: dict[str, dict[str, Any]], note: Callable[[str], None] | None = None
    ) -> RunConfig:
        """Rebuild from :meth:`to_dict` output; missing sections and keys take defaults,
        settings at their old place are read at the new one (``note`` hears a line saying
        so), sections of algorithms not registered are left out.

        Raises:
            rlamd.config.errors.ConfigError: an unknown key or an invalid value, named.
        """
        data = {name: dict(values or {}) for name, values in data.items()}
        found = move_keys(data)
        if found and note is not None:
            note(moved_note("the saved settings", found))
        return cls(
            **{
                name: apply_overrides(kind(), name, data.get(name) or {})
                for name, kind in SECTION_TYPES.items()
            }
        )

    @property
    def agent(self) -> Any:
        """The chosen algorithm's own section (``cfg.train.algo`` names it)."""
        for key, section in self.algorithms:
            if key == self.train.algo:
                return section
        raise ConfigError(
            f"train.algo={self.train.algo!r} is not a registered algorithm; registered: "
            f"{', '.join(ALGORITHM_SECTIONS)}"
        )
