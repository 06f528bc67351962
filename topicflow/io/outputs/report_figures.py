"""Figures of the HTML report, drawn with matplotlib and returned as PNG bytes.

This module owns how the report's charts look: a topic's top words as horizontal bars (one panel per
language), the topic sizes beside their coherence, the training trace, and the Hellinger distances of
topics matched across model versions. It uses matplotlib's object API with the Agg canvas (no pyplot:
no global figure state, no display), so it is safe in threads and on headless machines. It computes
nothing: every value comes in ready to plot. matplotlib is imported when the first figure is drawn, so
importing the evaluation drivers stays cheap.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Resolution of the PNGs; the page shows them at 96 px per inch, so they stay sharp on dense screens.
DPI = 160
#: One colour per topic (matplotlib's tab10, cycled).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
INK = "#333333"
GRID = "#dddddd"


def topic_color(k: int) -> str:
    """Return the colour of topic ``k`` (the same in every chart of a report).

    Parameters
    ----------
    k : int
        Topic index.

    Returns
    -------
    str
        A hex colour.
    """
    return PALETTE[k % len(PALETTE)]


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _style(axes: object) -> None:
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)  # type: ignore[attr-defined]
    for side in ("left", "bottom"):
        axes.spines[side].set_color("#999999")  # type: ignore[attr-defined]
    axes.tick_params(colors=INK, labelsize=8)  # type: ignore[attr-defined]


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def figure_size(png: bytes) -> tuple[int, int]:
    """Return the size in CSS pixels (96 per inch) at which a PNG of this module is shown.

    Parameters
    ----------
    png : bytes
        A PNG written by this module.

    Returns
    -------
    tuple of (int, int)
        Width and height.
    """
    width = int.from_bytes(png[16:20], "big")
    height = int.from_bytes(png[20:24], "big")
    return round(width * 96 / DPI), round(height * 96 / DPI)


def topic_words_png(words: Sequence[tuple[str, Sequence[str], Sequence[float]]], *, color: str) -> bytes:
    """Draw a topic's top words as horizontal bars, most probable on top, one panel per language.

    Parameters
    ----------
    words : sequence of (str, sequence of str, sequence of float)
        Per language: its name (shown as the panel title when there are several), the terms and
        their probabilities in the topic.
    color : str
        Bar colour.

    Returns
    -------
    bytes
        A PNG.
    """
    from matplotlib.ticker import MaxNLocator

    n_rows = max((len(terms) for _, terms, _ in words), default=1)
    figure = _figure(4.0 * len(words), 0.2 * n_rows + 0.62)
    for column, (language, terms, weights) in enumerate(words):
        axes = figure.add_subplot(1, len(words), column + 1)
        positions = np.arange(len(terms))[::-1]
        axes.barh(positions, weights, color=color, height=0.72)
        axes.set_yticks(positions, [str(t) for t in terms])
        axes.set_ylim(-0.6, n_rows - 0.4)
        axes.set_xlabel("probability in topic", fontsize=8, color=INK)
        axes.xaxis.set_major_locator(MaxNLocator(nbins=4))
        axes.xaxis.grid(True, color=GRID, linewidth=0.6)
        axes.set_axisbelow(True)
        _style(axes)
        if len(words) > 1:
            axes.set_title(language, fontsize=9, color=INK)
    figure.tight_layout(pad=0.4)
    return _png(figure)


def sizes_png(labels: Sequence[str], sizes: Sequence[float], coherence: Sequence[float] | None, *,
              size_label: str, coherence_label: str) -> bytes:
    """Draw every topic's size as a bar, and its coherence beside it when known.

    Parameters
    ----------
    labels : sequence of str
        Topic labels, in topic order.
    sizes : sequence of float
        Shares of tokens, in [0, 1].
    coherence : sequence of float, optional
        Per-topic coherence (non-finite values are left out).
    size_label : str
        Axis title of the sizes (says where they come from).
    coherence_label : str
        Axis title of the coherence panel.

    Returns
    -------
    bytes
        A PNG.
    """
    n = len(labels)
    panels = 2 if coherence is not None else 1
    figure = _figure(2.9 * panels + 0.6, 0.2 * n + 0.8)
    positions = np.arange(n)[::-1]
    colors = [topic_color(k) for k in range(n)]
    axes = figure.add_subplot(1, panels, 1)
    axes.barh(positions, 100.0 * np.asarray(sizes, dtype=float), color=colors, height=0.72)
    axes.set_yticks(positions, list(labels))
    axes.set_xlabel(size_label, fontsize=8, color=INK)
    axes.xaxis.grid(True, color=GRID, linewidth=0.6)
    axes.set_axisbelow(True)
    _style(axes)
    if coherence is not None:
        values = np.asarray(coherence, dtype=float)
        right = figure.add_subplot(1, panels, 2, sharey=axes)
        finite = np.isfinite(values)
        right.barh(positions[finite], values[finite], color=[c for c, f in zip(colors, finite) if f], height=0.72)
        right.axvline(0.0, color="#999999", linewidth=0.8)
        right.set_xlabel(coherence_label, fontsize=8, color=INK)
        right.xaxis.grid(True, color=GRID, linewidth=0.6)
        right.set_axisbelow(True)
        right.tick_params(labelleft=False)
        _style(right)
    axes.set_ylim(-0.6, n - 0.4)
    figure.tight_layout(pad=0.4)
    return _png(figure)


#: One panel of :func:`trace_png`: x title, y title, x, y, standard deviation or None, labelled x marks.
TracePanelSpec = tuple[str, str, Sequence[float], Sequence[float], Sequence[float] | None,
                       Sequence[tuple[float, str]]]


def trace_png(panels: Sequence[TracePanelSpec]) -> bytes:
    """Draw the training trace: one panel per recorded quantity, side by side.

    Parameters
    ----------
    panels : sequence of TracePanelSpec
        Per panel: the x-axis title, the y-axis title, x, y, a standard deviation over runs to draw
        as a band (or None), and vertical marks ``(x, label)`` (where each model version starts).

    Returns
    -------
    bytes
        A PNG.
    """
    n = max(len(panels), 1)
    columns = min(n, 3)
    rows = -(-n // columns)
    figure = _figure(3.3 * columns + 0.3, 2.5 * rows)
    for index, (xlabel, ylabel, x, y, std, marks) in enumerate(panels):
        axes = figure.add_subplot(rows, columns, index + 1)
        xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        axes.plot(xs, ys, color=PALETTE[0], linewidth=1.4, marker="o" if len(xs) <= 30 else None, markersize=3)
        if std is not None:
            band = np.asarray(std, dtype=float)
            axes.fill_between(xs, ys - band, ys + band, color=PALETTE[0], alpha=0.2, linewidth=0)
        for position, label in marks:
            if len(xs) == 0 or not xs.min() < position <= xs.max():
                continue
            axes.axvline(position, color="#999999", linewidth=0.8, linestyle=":")
            axes.annotate(label, (position, 1.0), xycoords=("data", "axes fraction"), fontsize=7, color="#666666",
                          xytext=(2, -8), textcoords="offset points")
        axes.set_xlabel(xlabel, fontsize=8, color=INK)
        axes.set_ylabel(ylabel, fontsize=8, color=INK)
        axes.grid(True, color=GRID, linewidth=0.6)
        axes.set_axisbelow(True)
        _style(axes)
    figure.tight_layout(pad=0.5)
    return _png(figure)


def evolution_png(distances: np.ndarray, row_labels: Sequence[str], column_labels: Sequence[str], *,
                  threshold: float) -> bytes:
    """Draw topic lineages across versions as a heat map of each step's Hellinger distance.

    Parameters
    ----------
    distances : ndarray of shape (n_lineages, n_steps), float64
        Cell (i, s): distance between lineage i's topics before and after step s; NaN where the
        lineage has no topic after the step, -1 where it appears at the step (new).
    row_labels : sequence of str
        One per lineage.
    column_labels : sequence of str
        One per step (e.g. ``"v1→v2"``).
    threshold : float
        The matching threshold, marked on the colour bar.

    Returns
    -------
    bytes
        A PNG.
    """
    n_rows, n_columns = distances.shape
    figure = _figure(2.6 + 0.9 * n_columns, 0.26 * n_rows + 1.1)
    axes = figure.add_subplot()
    shown = np.where(distances >= 0, distances, np.nan)
    image = axes.imshow(shown, aspect="auto", cmap="viridis_r", vmin=0.0, vmax=1.0, interpolation="nearest")
    new_rows, new_columns = np.nonzero(distances < 0)
    if len(new_rows):
        axes.scatter(new_columns, new_rows, marker="*", s=60, color="#d62728", label="new topic")
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16 - 0.5 / max(n_rows, 1)), fontsize=7,
                    frameon=False)
    axes.set_xticks(np.arange(n_columns), list(column_labels))
    axes.set_yticks(np.arange(n_rows), list(row_labels))
    axes.set_xlabel("update", fontsize=8, color=INK)
    _style(axes)
    bar = figure.colorbar(image, ax=axes, fraction=0.1, pad=0.04)
    bar.set_label("Hellinger distance", fontsize=8, color=INK)
    bar.ax.axhline(threshold, color="#d62728", linewidth=1.5)
    bar.ax.tick_params(labelsize=7)
    figure.tight_layout(pad=0.4)
    return _png(figure)


def rank_history_png(x: Sequence[float], series: Sequence[tuple[str, Sequence[float]]], *, title: str = "") -> bytes:
    """Draw words' ranks in one topic against minibatches, rank 1 on top, log scale (Zhai 2014, Fig. 7.1).

    Parameters
    ----------
    x : sequence of float
        The minibatch number of each point.
    series : sequence of (str, sequence of float)
        Per word: its label and its rank after each minibatch (1 = first; NaN or 0 where the word is
        not in the topic's truncation ordered set, drawn as a gap).
    title : str, optional
        Shown above the panel.

    Returns
    -------
    bytes
        A PNG.
    """
    from matplotlib.ticker import MaxNLocator

    figure = _figure(4.4, 2.6)
    axes = figure.add_subplot(1, 1, 1)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    xs = np.asarray(x, dtype=float)
    top = 1.0
    for index, (label, ranks) in enumerate(series):
        ys = np.asarray(ranks, dtype=float)
        ys = np.where(ys > 0, ys, np.nan)
        if np.any(np.isfinite(ys)):
            top = max(top, float(np.nanmax(ys)))
        axes.plot(xs, ys, color=PALETTE[index % len(PALETTE)], linewidth=1.4, label=label,
                  marker="o" if len(xs) <= 30 else None, markersize=3)
    axes.set_yscale("log")
    axes.set_ylim(top * 1.5, 0.8)  # rank 1 on top
    if xs.size:
        axes.set_xlim(float(xs.min()) - 0.5, float(xs.max()) + 0.5)  # the whole stream, before a word appears too
    axes.set_xlabel("minibatch", fontsize=8, color=INK)
    axes.set_ylabel("rank in the topic (1 = first)", fontsize=8, color=INK)
    axes.grid(True, color=GRID, linewidth=0.6)
    axes.set_axisbelow(True)
    if series:
        axes.legend(fontsize=7, frameon=False, loc="best")
    if title:
        axes.set_title(title, fontsize=9, color=INK)
    _style(axes)
    figure.tight_layout(pad=0.5)
    return _png(figure)
