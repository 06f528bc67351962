"""Mean ± std bands over runs: the arrays, interpolation onto common x points, and the PNG file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

from topicflow.errors import InvalidParameterError
from topicflow.cli.plots import metric_band, plot_metric_band

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_plot_writes_png_and_returns_bands(tmp_path: Path) -> None:
    runs_pf = [[(0, 0.1), (100, 0.5), (200, 0.7)], [(0, 0.3), (100, 0.4), (200, 0.8)],
               [(0, 0.2), (100, 0.6), (200, 0.9)]]
    runs_gibbs = [[(200, 0.6), (0, 0.0), (100, 0.2)]]  # unordered pairs are sorted by documents seen
    out = tmp_path / "nmi.png"
    bands = plot_metric_band({"pf": runs_pf, "gibbs": runs_gibbs}, ylabel="NMI", out=out, title="rel3")
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 1000
    assert list(bands) == ["pf", "gibbs"]
    values = np.array([[y for _, y in run] for run in runs_pf])
    assert_allclose(bands["pf"].x, [0, 100, 200])
    assert_allclose(bands["pf"].mean, values.mean(axis=0), rtol=1e-14)
    assert_allclose(bands["pf"].std, values.std(axis=0, ddof=1), rtol=1e-14)
    assert bands["pf"].n_runs == 3
    assert_allclose(bands["gibbs"].mean, [0.0, 0.2, 0.6])
    assert_allclose(bands["gibbs"].std, 0.0)
    assert not list(tmp_path.glob(".*tmp-*")), "temporary file left behind"


def test_runs_with_different_x_are_interpolated_on_their_common_range(tmp_path: Path) -> None:
    run_a = [(0, 0.0), (10, 10.0), (20, 20.0)]
    run_b = [(5, 1.0), (25, 3.0)]
    band = metric_band([run_a, run_b])
    # Common range [5, 20]; x points: union of both runs' x inside it.
    assert_allclose(band.x, [5, 10, 20])
    a = np.array([5.0, 10.0, 20.0])
    b = 1.0 + (np.array([5.0, 10.0, 20.0]) - 5.0) * 0.1
    assert_allclose(band.mean, (a + b) / 2, rtol=1e-14)
    assert_allclose(band.std, np.abs(a - b) / np.sqrt(2), rtol=1e-14)
    bands = plot_metric_band([run_a, run_b], ylabel="perplexity", out=tmp_path / "p.png")
    assert list(bands) == [""] and (tmp_path / "p.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    ("runs", "match"),
    [
        ([], "no runs"),
        ([[]], "non-empty"),
        ([[(0, float("nan"))]], "finite"),
        ([[(0, 1.0), (0, 2.0)]], "appears twice"),
        ([[(0, 1.0), (1, 2.0)], [(5, 1.0), (6, 2.0)]], "do not overlap"),
    ],
)
def test_invalid_traces_raise(runs: list, match: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        plot_metric_band({"pf": runs}, ylabel="NMI", out=tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
