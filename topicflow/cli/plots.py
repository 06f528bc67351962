"""Plots of evaluation traces of streaming samplers: mean and one standard deviation over runs.

This module owns turning several runs' traces of ``(documents seen, value)`` per algorithm into band
arrays on common x points and drawing them as PNG figures (Canini et al. 2009, May et al. 2014 report
NMI and perplexity against the number of documents seen this way). It uses matplotlib's object API with
the Agg canvas (no pyplot, so no global figure state and no display), and writes files atomically
through :mod:`topicflow.io._atomic`.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import atomic_write_bytes

#: One run's trace: (documents seen, metric value) pairs.
Trace = Sequence[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class MetricBand:
    """Mean and standard deviation over runs of one algorithm's trace, on common x points.

    Attributes
    ----------
    x : ndarray of shape (n_points,), float64
        Documents seen, ascending.
    mean : ndarray of shape (n_points,), float64
    std : ndarray of shape (n_points,), float64
        Sample standard deviation over runs (``ddof=1``); zeros for a single run.
    n_runs : int
    """

    x: FloatArray
    mean: FloatArray
    std: FloatArray
    n_runs: int


def _run_arrays(run: Trace, name: str, index: int) -> tuple[FloatArray, FloatArray]:
    """One run as ascending x and its values, or InvalidParameterError naming the run."""
    pairs = np.asarray(list(run), dtype=np.float64)
    where = f"algorithm {name!r}, run {index}"
    if pairs.ndim != 2 or pairs.shape[0] == 0 or pairs.shape[1] != 2:
        raise InvalidParameterError(f"{where}: expected a non-empty sequence of (documents seen, value) pairs")
    if not np.all(np.isfinite(pairs)):
        raise InvalidParameterError(f"{where}: documents seen and values must be finite")
    order = np.argsort(pairs[:, 0], kind="stable")
    x, y = pairs[order, 0], pairs[order, 1]
    if np.any(np.diff(x) == 0):
        raise InvalidParameterError(f"{where}: documents seen {x[:-1][np.diff(x) == 0][0]!r} appears twice")
    return x, y


def metric_band(runs: Sequence[Trace], *, name: str = "") -> MetricBand:
    """Mean and standard deviation of several runs' traces of one algorithm.

    Parameters
    ----------
    runs : sequence of sequences of (int, float)
        Each run's ``(documents seen, value)`` pairs, in any order.
    name : str, default ""
        Algorithm name, for error messages.

    Returns
    -------
    MetricBand
        If every run has the same x points, those; otherwise the union of all runs' x points inside the
        range every run covers (no extrapolation), with each run linearly interpolated onto them.

    Raises
    ------
    InvalidParameterError
        No runs, an empty or non-finite run, a repeated x within a run, or runs whose x ranges do not
        overlap.

    Examples
    --------
    >>> band = metric_band([[(0, 1.0), (10, 3.0)], [(0, 3.0), (10, 5.0)]])
    >>> band.mean.tolist(), band.std.tolist()
    ([2.0, 4.0], [1.4142135623730951, 1.4142135623730951])
    """
    if len(runs) == 0:
        raise InvalidParameterError(f"algorithm {name!r}: no runs to plot")
    arrays = [_run_arrays(run, name, i) for i, run in enumerate(runs)]
    if all(np.array_equal(x, arrays[0][0]) for x, _ in arrays):
        x_common = arrays[0][0]
        values = np.stack([y for _, y in arrays])
    else:
        lo, hi = max(x[0] for x, _ in arrays), min(x[-1] for x, _ in arrays)
        if lo > hi:
            raise InvalidParameterError(
                f"algorithm {name!r}: runs cover documents seen ranges that do not overlap ({lo!r} > {hi!r})"
            )
        x_all = np.unique(np.concatenate([x for x, _ in arrays]))
        x_common = x_all[(x_all >= lo) & (x_all <= hi)]
        values = np.stack([np.interp(x_common, x, y) for x, y in arrays])
    std = values.std(axis=0, ddof=1) if len(arrays) > 1 else np.zeros(x_common.shape[0])
    return MetricBand(x=x_common, mean=values.mean(axis=0), std=std, n_runs=len(arrays))


def plot_metric_band(
    traces: Sequence[Trace] | Mapping[str, Sequence[Trace]],
    *,
    ylabel: str,
    out: Path,
    title: str = "",
) -> dict[str, MetricBand]:
    """Draw mean ± one standard deviation over runs per algorithm and save it as a PNG.

    Parameters
    ----------
    traces : sequence of runs, or mapping of algorithm name to sequence of runs
        A run is a sequence of ``(documents seen, value)`` pairs. A bare sequence is one unnamed
        algorithm (key ``""``, no legend).
    ylabel : str
        Label of the y axis (e.g. ``"NMI"``, ``"held-out perplexity"``).
    out : Path
        PNG file to write (atomically; its directory must exist).
    title : str, default ""

    Returns
    -------
    dict of str to MetricBand
        The plotted arrays per algorithm, in drawing order.

    Raises
    ------
    InvalidParameterError
        No algorithms, or a trace rejected by :func:`metric_band`.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     bands = plot_metric_band({"pf": [[(0, 0.1), (5, 0.4)], [(0, 0.3), (5, 0.6)]]},
    ...                              ylabel="NMI", out=Path(tmp) / "nmi.png")
    >>> np.round(bands["pf"].mean, 6).tolist()
    [0.2, 0.5]
    """
    by_name = {"": traces} if not isinstance(traces, Mapping) else dict(traces)
    if not by_name:
        raise InvalidParameterError("no algorithms to plot; pass at least one name with its runs")
    bands = {name: metric_band(runs, name=name) for name, runs in by_name.items()}
    figure = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, band in bands.items():
        label = f"{name} ({band.n_runs} runs)" if name else None
        (line,) = axes.plot(band.x, band.mean, label=label)
        axes.fill_between(band.x, band.mean - band.std, band.mean + band.std, color=line.get_color(), alpha=0.25,
                          linewidth=0)
    axes.set_xlabel("documents seen")
    axes.set_ylabel(ylabel)
    if title:
        axes.set_title(title)
    if any(bands):
        axes.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    atomic_write_bytes(Path(out), buffer.getvalue())
    return bands
