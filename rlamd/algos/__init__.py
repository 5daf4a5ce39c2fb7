"""The training algorithms, chosen once by name from :data:`ALGORITHMS`.

Adding one: write ``rlamd/algos/NAME.py`` with an object that satisfies
:class:`rlamd.algos.base.Algorithm` and add it below (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import difflib

from rlamd.checkpoint import CheckpointError
from rlamd.config import bad_setting
from rlamd.envs import make_env

from .base import Algorithm
from .dqn import DQN_ALGORITHM
from .ppo import PPO_ALGORITHM

__all__ = ["ALGORITHMS", "Algorithm", "build_agent", "get_algorithm"]

ALGORITHMS: dict[str, Algorithm] = {
    "dqn": DQN_ALGORITHM,
    "ppo": PPO_ALGORITHM,
}


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name``, or a ConfigError naming the accepted ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(ALGORITHMS), n=1)
        accepted = ", ".join(ALGORITHMS)
        raise bad_setting(
            "train", "algo", name, accepted, close=repr(close[0]) if close else None
        ) from None


def build_agent(cfg, device, env=None, agent_state: dict | None = None, log=None):
    """The run's agent on ``device`` (its weights from ``agent_state`` when given).

    ``env`` tells the observation and action spaces; without one, a one-env copy of the
    run's env is made and closed.
    """
    own = env is None
    if own:
        env = make_env(
            cfg.train.env,
            num_envs=1,
            atari=cfg.atari,
            module=cfg.train.env_module,
            env_cfg=cfg.env,
        )
    try:
        agent = get_algorithm(cfg.train.algo).build_agent(cfg, device, env, log)
    finally:
        if own:
            env.close()
    if agent_state is not None:
        try:
            agent.load_state_dict(agent_state)
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            text = " ".join(str(exc).split()) or repr(exc)
            if isinstance(exc, RuntimeError) and "state_dict" not in text and "size" not in text:
                raise  # not a mismatch (a GPU error, say): the caller explains those
            text = text if len(text) <= 240 else text[:237] + "..."
            raise CheckpointError(
                f"the checkpoint's {cfg.train.algo} agent does not fit the network these "
                f"settings build ({text.rstrip(':. ')}); resume with the checkpoint's "
                "settings, or start a new run"
            ) from None
    return agent
