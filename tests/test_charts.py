"""The one chart helper the sweep and the bench draw through."""

from __future__ import annotations

import sys

import pytest

from rlamd.charts import new_chart, save_chart
from rlamd.sweep.curves import plot_curves


def test_without_matplotlib_each_chart_is_skipped_with_a_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    assert new_chart(1, 1, (2, 2)) is None
    said = plot_curves([], tmp_path / "curves.png")
    assert said.startswith("curves.png skipped: matplotlib is not installed")
    assert not (tmp_path / "curves.png").exists()


def test_a_chart_has_its_grid_of_axes_and_is_written_into_a_new_folder(tmp_path):
    pytest.importorskip("matplotlib")
    fig, axes = new_chart(2, 3, (4, 3))
    assert axes.shape == (2, 3)
    axes[1, 2].plot([0, 1], [1, 0])
    path = tmp_path / "new" / "chart.png"
    assert save_chart(fig, path) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
