"""A run's configuration: typed sections, where their values come from, and their checks.

==========================  ===========================================================
``errors.py``               :class:`ConfigError` and the one message shape
                            (``SECTION.KEY=VALUE (WHY); accepted: WHAT. Did you mean``)
``values.py``               text and TOML values -> typed fields; the checks every
                            section shares; the field docstrings ``--help`` prints
``sources.py``              ``--set`` items and TOML files (and the TOML a run saves)
``sections.py``             :class:`~rlamd.config.sections.RunConfig`, its core
                            sections (``TrainConfig``, ``RayConfig``; ``AtariConfig``
                            and ``EnvConfig`` live beside the envs) and the registry
                            each algorithm's own section joins (``register_section``)
``flags.py``                which settings have a command-line flag of their own
``layers.py``               :func:`~rlamd.config.layers.resolve`: defaults -> the
                            algorithm's preset -> TOML file -> flags -> ``--set``
``layout.py``               what settings imply about a run's layout (envs per learner)
``checks.py``               run-wide checks (:func:`~rlamd.config.checks.check_run`);
                            each algorithm adds its own through the registry
``device_checks.py``        the device, precision and graph settings against this machine
==========================  ===========================================================

This module re-exports the pieces that import nothing else of rlamd (errors, values,
sources), so that any layer can use them; the rest is imported from its module.
"""

from __future__ import annotations

from .errors import ConfigError, bad_setting
from .sources import load_toml, parse_set, to_toml
from .values import INT_MINIMUMS, apply_overrides, check_fields, coerce, field_docs

__all__ = [
    "INT_MINIMUMS",
    "ConfigError",
    "apply_overrides",
    "bad_setting",
    "check_fields",
    "coerce",
    "field_docs",
    "load_toml",
    "parse_set",
    "to_toml",
]
