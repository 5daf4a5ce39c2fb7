"""Seeds and sweeps on Ray Tune: many rlamd runs as Tune trials, and results to report.

``python -m rlamd.sweep ENV`` (``rlamd sweep``) and ``rlamd.sweep(...)`` run one ordinary
rlamd run per trial (``runs/SWEEP/TRIAL/``) over seeds and a grid, random or Optuna search
of any ``--set`` key, optionally stopped early by ASHA, and end with a table over seeds
(mean and IQM with 95% intervals), the best configuration as TOML and learning curves.

==================  ==========================================================
``space.py``        seeds, ``--grid``, ``--sample``: parsed and checked by rlamd.config
``plan.py``         what a sweep runs (``sweep.json``)
``driver.py``       checks, the sweep folder, the Tuner (new or restored)
``trial.py``        one trial: ``rlamd.train`` as a child, its CSVs reported to Tune
``child.py``        the child's launcher (it dies with its trial)
``stats.py``        mean, IQM and their intervals; two groups compared (SciPy)
``report.py``       the table, ``best.toml``; ``curves.py`` the chart
``api.py``          :func:`rlamd.sweep.api.sweep`, the Python API
``bench.py``        aggregate throughput of trials packed on one machine
==================  ==========================================================

This package is callable: ``rlamd.sweep(env, ...)`` is :func:`rlamd.sweep.api.sweep`
(the package must keep its name for ``python -m rlamd.sweep``, so the module itself
answers the call). Ray is imported only when trials run.
"""

from __future__ import annotations

import sys
import types

__all__ = ["sweep"]


class _CallableModule(types.ModuleType):
    """``rlamd.sweep(...)`` calls :func:`rlamd.sweep.api.sweep`."""

    def __call__(self, *args, **kwargs):
        from .api import sweep

        return sweep(*args, **kwargs)


def __getattr__(name: str):
    if name == "sweep":
        from .api import sweep

        return sweep
    raise AttributeError(f"module 'rlamd.sweep' has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallableModule
