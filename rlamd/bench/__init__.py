"""Benchmarks behind one command, ``python -m rlamd.bench [SUITE ...]``. Importing the package
registers the shipped peers (:data:`SHIPPED`)."""

from .peers import SHIPPED

__all__ = ["SHIPPED"]
