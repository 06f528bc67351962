"""The HTML report of a model (``topicflow report``): its content as data, and one self-contained page.

This module owns the report's page: the records a driver fills (:class:`ReportData` and the records
it holds), the HTML they become, and writing it atomically. The page needs nothing at view time: its
charts are PNGs from :mod:`topicflow.io.outputs.report_figures` inlined as ``data:`` URLs, its style
is inline, it has no script, and no element refers to another file or to the network. Everything shown
is computed by the driver (:mod:`topicflow.pipeline.evaluation.report`); this module only lays it out.

Sections, each a ``<section>`` with a fixed id: ``overview`` (facts, topic sizes and coherence),
``topics`` (one card per topic: its chart of top words, size, coherence, example documents),
``trace`` (the fit's trace), ``evolution`` (versions and topics matched across them) and ``notes``
(how each number was computed). Each topic's chart is the only ``img`` of class ``topic-chart`` in its
card.
"""
from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topicflow._version import __version__
from topicflow.io._atomic import atomic_write_bytes
from topicflow.io.outputs.report_figures import (
    evolution_png,
    figure_size,
    sizes_png,
    topic_color,
    topic_words_png,
    trace_png,
)

#: Ids of the page's sections, in page order.
SECTIONS = ("overview", "topics", "trace", "evolution", "notes")


@dataclass(frozen=True)
class TopicWords:
    """A topic's most probable terms in one language.

    Attributes
    ----------
    language : str
    terms : tuple of str
        By decreasing probability.
    weights : tuple of float
        Their probabilities in the topic.
    """

    language: str
    terms: tuple[str, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class ExampleDocument:
    """A document with a high proportion of a topic.

    Attributes
    ----------
    doc_id : str
    position : int
        Position in the store (store order).
    theta : float
        The topic's proportion in the document.
    snippet : tuple of (str, str)
        Per language: the language and the text shown.
    snippet_kind : str
        What the text is (``"first words"`` or ``"most frequent terms"``).
    """

    doc_id: str
    position: int
    theta: float
    snippet: tuple[tuple[str, str], ...]
    snippet_kind: str


@dataclass(frozen=True)
class TopicReport:
    """Everything the report shows about one topic.

    Attributes
    ----------
    index : int
        The topic's index in the model.
    label : str
        Its name (a seed topic's name, else ``topic-<index>``).
    words : tuple of TopicWords
        One entry per language.
    size : float
        Share of tokens, in [0, 1] (see :attr:`ReportData.size_source`).
    coherence : float or None
        The topic's coherence, when computed.
    examples : tuple of ExampleDocument
        Best first; empty without a corpus.
    """

    index: int
    label: str
    words: tuple[TopicWords, ...]
    size: float
    coherence: float | None = None
    examples: tuple[ExampleDocument, ...] = ()


@dataclass(frozen=True)
class CoherenceSummary:
    """Coherence of every topic, as computed elsewhere and handed to the report.

    Attributes
    ----------
    measure : str
        ``u_mass``, ``c_uci``, ``c_npmi`` or ``c_v``.
    top_n : int
        Top words per topic the measure used.
    reference : str
        The store the counts came from.
    per_topic : tuple of float
        In topic order (NaN where the measure is undefined for a topic).
    mean : float
    window : int or None
        Sliding-window width of window measures.
    language : str or None
        The model language whose words were scored (polylingual models).
    """

    measure: str
    top_n: int
    reference: str
    per_topic: tuple[float, ...]
    mean: float
    window: int | None = None
    language: str | None = None

    def describe(self) -> str:
        """Say what was measured, as the page does.

        Returns
        -------
        str
            For example ``"u_mass, top 10 words, reference corpus.zarr"``.
        """
        parts = [self.measure, f"top {self.top_n} words"]
        if self.window:
            parts.append(f"window {self.window}")
        if self.language:
            parts.append(f"language {self.language}")
        parts.append(f"reference {self.reference}")
        return ", ".join(parts)


@dataclass(frozen=True)
class TracePanel:
    """One recorded quantity of the fit against iterations or documents seen.

    Attributes
    ----------
    xlabel, ylabel : str
        Axis titles.
    x, y : tuple of float
        The points.
    std : tuple of float or None
        Standard deviation over runs (streamed models), drawn as a band.
    marks : tuple of (float, str)
        Vertical marks with a label (where each later model version starts).
    """

    xlabel: str
    ylabel: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    std: tuple[float, ...] | None = None
    marks: tuple[tuple[float, str], ...] = ()


@dataclass(frozen=True)
class VersionRow:
    """One version of the model directory, as listed on the page.

    Attributes
    ----------
    version : int
    created : str
    kind : str
    summary : str
        A short description (documents processed, store).
    is_current : bool
    """

    version: int
    created: str
    kind: str
    summary: str
    is_current: bool


@dataclass(frozen=True)
class EvolutionCell:
    """A lineage's topic in one version.

    Attributes
    ----------
    topic : int
        The topic's index in that version.
    words : str
        Its top words.
    distance : float or None
        Hellinger distance to its topic in the previous version (None in the first version or when new).
    status : {"first", "continued", "new"}
    nearest : (int, float) or None
        For a new topic: the closest topic of the previous version and its distance (above the
        threshold, or taken by another match).
    """

    topic: int
    words: str
    distance: float | None
    status: str
    nearest: tuple[int, float] | None = None


@dataclass(frozen=True)
class EvolutionReport:
    """Topics followed through versions.

    Attributes
    ----------
    versions : tuple of int
        The versions compared, oldest first.
    threshold : float
        Hellinger distance above which matched topics count as vanished and new.
    lineages : tuple of tuple of (EvolutionCell or None)
        One row per lineage, one cell per version (None: no topic of the lineage in that version).
    """

    versions: tuple[int, ...]
    threshold: float
    lineages: tuple[tuple[EvolutionCell | None, ...], ...]


@dataclass(frozen=True)
class ReportData:
    """The content of a report.

    Attributes
    ----------
    title : str
    facts : tuple of (str, str)
        The overview's table: what the model is, how it was made, what it was evaluated on.
    topics : tuple of TopicReport
        In topic order.
    size_source : {"corpus", "model"}
        Whether sizes come from the corpus's document topics or the model's topic-word mass.
    notes : tuple of (str, str)
        Headed paragraphs of the notes section (how every number was computed).
    coherence : CoherenceSummary or None
    coherence_note : str
        Shown instead of coherence values when there are none (why).
    examples_note : str
        Shown instead of example documents when there are none (why).
    trace : tuple of TracePanel
    trace_note : str
        What the trace records.
    versions : tuple of VersionRow
    evolution : EvolutionReport or None
    evolution_note : str
        Shown when there is nothing to compare (a single version).
    generated : str
        When the report was made.
    """

    title: str
    facts: tuple[tuple[str, str], ...]
    topics: tuple[TopicReport, ...]
    size_source: str
    notes: tuple[tuple[str, str], ...] = ()
    coherence: CoherenceSummary | None = None
    coherence_note: str = ""
    examples_note: str = ""
    trace: tuple[TracePanel, ...] = ()
    trace_note: str = ""
    versions: tuple[VersionRow, ...] = ()
    evolution: EvolutionReport | None = None
    evolution_note: str = ""
    generated: str = ""


# ----------------------------------------------------------------------------- page


STYLE = """
:root { --ink: #24292f; --muted: #5b636e; --line: #d8dee4; --panel: #f6f8fa; --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: #fff; }
header { padding: 28px 40px 18px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 600; }
header p { margin: 0; color: var(--muted); }
nav { position: sticky; top: 0; z-index: 1; padding: 8px 40px; background: #fff; border-bottom: 1px solid var(--line); }
nav a { margin-right: 18px; color: var(--accent); text-decoration: none; font-weight: 500; }
main { padding: 8px 40px 40px; max-width: 1500px; }
section { margin-top: 28px; }
h2 { font-size: 20px; font-weight: 600; border-bottom: 1px solid var(--line); padding-bottom: 6px; }
h3 { margin: 0; font-size: 16px; font-weight: 600; }
h4 { margin: 12px 0 4px; font-size: 13px; font-weight: 600; color: var(--muted); text-transform: uppercase;
     letter-spacing: .04em; }
table { border-collapse: collapse; font-size: 13.5px; }
th, td { text-align: left; padding: 5px 12px 5px 0; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; padding-right: 16px; }
.facts { max-width: 640px; }
.facts th { width: 180px; }
.overview { display: flex; flex-wrap: wrap; gap: 28px; align-items: flex-start; }
.note { color: var(--muted); font-size: 13.5px; max-width: 980px; }
.topic-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 18px; }
.topic { border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; background: #fff; }
.topic header { all: unset; display: flex; align-items: baseline; gap: 10px; flex-wrap: wrap; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; }
.badge { font-size: 12.5px; color: var(--muted); background: var(--panel); border: 1px solid var(--line);
         border-radius: 10px; padding: 0 8px; }
figure { margin: 8px 0; }
figure img { max-width: 100%; height: auto; }
ol.examples { margin: 0; padding-left: 20px; font-size: 13px; }
ol.examples li { margin-bottom: 6px; }
.doc-id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.snippet { color: var(--muted); }
.lang { font-size: 11px; color: var(--muted); border: 1px solid var(--line); border-radius: 3px; padding: 0 3px; }
.evolution td { font-size: 12.5px; min-width: 150px; }
.status-new { color: #b42318; font-weight: 600; }
.status-vanished { color: var(--muted); font-style: italic; }
footer { padding: 18px 40px; color: var(--muted); font-size: 12.5px; border-top: 1px solid var(--line); }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _img(png: bytes, *, css_class: str, alt: str) -> str:
    width, height = figure_size(png)
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="{css_class}" src="data:image/png;base64,{data}" width="{width}" height="{height}" '
            f'alt="{_e(alt)}">')


def _number(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.{digits}f}"


def _percent(value: float) -> str:
    return f"{100.0 * value:.1f}%"


def _size_heading(data: ReportData) -> str:
    return "share of corpus tokens" if data.size_source == "corpus" else "share of model's topic-word mass"


def _overview(data: ReportData) -> str:
    facts = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in data.facts)
    coherence = data.coherence
    per_topic = coherence.per_topic if coherence is not None else None
    chart = sizes_png([t.label for t in data.topics], [t.size for t in data.topics], per_topic,
                      size_label=f"size (% {_size_heading(data)})",
                      coherence_label=f"coherence ({coherence.measure})" if coherence else "")
    head = "<th>topic</th><th class=\"num\">size</th>"
    head += f"<th class=\"num\">coherence ({_e(coherence.measure)})</th>" if coherence else ""
    rows = []
    for topic in data.topics:
        words = " ".join(w for entry in topic.words for w in entry.terms[:8])
        cells = f"<td><a href=\"#topic-{topic.index}\">{_e(topic.label)}</a></td><td class=\"num\">{_percent(topic.size)}</td>"
        cells += f"<td class=\"num\">{_number(topic.coherence)}</td>" if coherence else ""
        rows.append(f"<tr>{cells}<td>{_e(words)}</td></tr>")
    mean = (f"<p class=\"note\">Mean coherence ({_e(coherence.describe())}): <b>{_number(coherence.mean)}</b>.</p>"
            if coherence
            else f"<p class=\"note\">{_e(data.coherence_note)}</p>")
    return (
        '<section id="overview"><h2>Overview</h2><div class="overview">'
        f'<table class="facts"><tbody>{facts}</tbody></table>'
        f'<figure>{_img(chart, css_class="overview-chart", alt="topic sizes and coherence")}</figure></div>'
        f'<p class="note">Sizes are each topic\'s {_e(_size_heading(data))}.</p>{mean}'
        f'<table class="topics-table"><thead><tr>{head}<th>top words</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table></section>'
    )


def _example(doc: ExampleDocument) -> str:
    parts = []
    for language, text in doc.snippet:
        tag = f'<span class="lang">{_e(language)}</span> ' if len(doc.snippet) > 1 else ""
        parts.append(f"{tag}{_e(text)}")
    return (f'<li><span class="doc-id">{_e(doc.doc_id)}</span> <span class="badge">θ {doc.theta:.2f}</span> '
            f'<span class="snippet">{" ".join(parts)}</span></li>')


def _topic_card(topic: TopicReport, data: ReportData) -> str:
    color = topic_color(topic.index)
    chart = topic_words_png([(w.language, w.terms, w.weights) for w in topic.words], color=color)
    badges = f'<span class="badge">size {_percent(topic.size)}</span>'
    if data.coherence is not None:
        badges += f'<span class="badge">coherence {_number(topic.coherence)} ({_e(data.coherence.measure)})</span>'
    if topic.examples:
        kind = topic.examples[0].snippet_kind
        examples = (f"<h4>Example documents ({_e(kind)})</h4>"
                    f'<ol class="examples">{"".join(_example(d) for d in topic.examples)}</ol>')
    else:
        examples = f'<p class="note">{_e(data.examples_note)}</p>'
    alt = f"top words of {topic.label}"
    return (f'<article class="topic" id="topic-{topic.index}"><header>'
            f'<span class="swatch" style="background:{color}"></span><h3>{_e(topic.label)}</h3>{badges}</header>'
            f'<figure>{_img(chart, css_class="topic-chart", alt=alt)}</figure>{examples}</article>')


def _topics(data: ReportData, cards: Sequence[str]) -> str:
    return f'<section id="topics"><h2>Topics</h2><div class="topic-grid">{"".join(cards)}</div></section>'


def _trace(data: ReportData) -> str:
    body = f'<p class="note">{_e(data.trace_note)}</p>'
    if data.trace:
        chart = trace_png([(p.xlabel, p.ylabel, p.x, p.y, p.std, p.marks) for p in data.trace])
        body += f'<figure>{_img(chart, css_class="trace-chart", alt="training trace")}</figure>'
    return f'<section id="trace"><h2>Training trace</h2>{body}</section>'


def _evolution(data: ReportData) -> str:
    rows = "".join(
        f"<tr><td class=\"num\">{v.version}{' (current)' if v.is_current else ''}</td><td>{_e(v.kind)}</td>"
        f"<td>{_e(v.created)}</td><td>{_e(v.summary)}</td></tr>" for v in data.versions
    )
    body = ("<h3>Versions</h3><table class=\"versions\"><thead><tr><th class=\"num\">version</th><th>kind</th>"
            f"<th>created</th><th>summary</th></tr></thead><tbody>{rows}</tbody></table>")
    evolution = data.evolution
    if data.evolution_note:
        body += f'<p class="note">{_e(data.evolution_note)}</p>'
    if evolution is None:
        return f'<section id="evolution"><h2>Topic evolution</h2>{body}</section>'
    body += (f'<p class="note">Topics of consecutive versions are matched one to one by the Hungarian method on '
             f'the Hellinger distance of their word distributions. A matched pair further apart than '
             f'{evolution.threshold:g} is no continuation: the earlier topic is marked vanished and the later one '
             f'new. Each cell gives the topic, its distance to the previous version and its top words.</p>')
    body += f'<figure>{_img(_evolution_chart(evolution), css_class="evolution-chart", alt="topic evolution")}</figure>'
    head = "".join(f"<th>version {v}</th>" for v in evolution.versions)
    lines = []
    for lineage in evolution.lineages:
        cells = []
        for index, cell in enumerate(lineage):
            if cell is None:
                before = any(c is not None for c in lineage[:index])
                cells.append('<td class="status-vanished">vanished</td>' if before and lineage[index - 1] is not None
                             else "<td></td>")
                continue
            status = ('<span class="status-new">new</span> ' if cell.status == "new" else "")
            distance = f" (d = {cell.distance:.2f})" if cell.distance is not None else ""
            if cell.nearest is not None:
                distance = f" (nearest before: topic-{cell.nearest[0]}, d = {cell.nearest[1]:.2f})"
            cells.append(f"<td>{status}<b>topic-{cell.topic}</b>{distance}<br>{_e(cell.words)}</td>")
        lines.append(f"<tr>{''.join(cells)}</tr>")
    body += f'<table class="evolution"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'
    return f'<section id="evolution"><h2>Topic evolution</h2>{body}</section>'


def _evolution_chart(evolution: EvolutionReport) -> bytes:
    steps = len(evolution.versions) - 1
    distances = np.full((len(evolution.lineages), steps), np.nan)
    labels = []
    for row, lineage in enumerate(evolution.lineages):
        for column, cell in enumerate(lineage[1:]):
            if cell is not None:
                distances[row, column] = -1.0 if cell.status == "new" else (
                    cell.distance if cell.distance is not None else np.nan)
        index, last = next((i, c) for i, c in reversed(list(enumerate(lineage))) if c is not None)
        gone = "" if index == len(lineage) - 1 else f", gone after v{evolution.versions[index]}"
        labels.append(f"topic-{last.topic} ({last.words.split(' ')[0]}{gone})")
    columns = [f"v{a}→v{b}" for a, b in zip(evolution.versions, evolution.versions[1:])]
    return evolution_png(distances, labels, columns, threshold=evolution.threshold)


def _notes(data: ReportData) -> str:
    paragraphs = "".join(f"<h3>{_e(head)}</h3><p class=\"note\">{_e(text)}</p>" for head, text in data.notes)
    return f'<section id="notes"><h2>How to read this report</h2>{paragraphs}</section>'


def render_report(data: ReportData, *, topic_cards: Sequence[str] | None = None) -> str:
    """Return the report's HTML page.

    Parameters
    ----------
    data : ReportData
        What to show.
    topic_cards : sequence of str, optional
        The topics' cards already rendered by :func:`render_topic_card` (a driver renders them one
        by one to report progress); rendered here by default.

    Returns
    -------
    str
        A complete, self-contained HTML document.
    """
    cards = list(topic_cards) if topic_cards is not None else [render_topic_card(t, data) for t in data.topics]
    nav = "".join(f'<a href="#{s}">{s.capitalize() if s != "trace" else "Training trace"}</a>' for s in SECTIONS)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(data.title)}</title><link rel="icon" href="data:,">'
        f"<style>{STYLE}</style></head><body>"
        f"<header><h1>{_e(data.title)}</h1><p>{len(data.topics)} topics · generated {_e(data.generated)} by "
        f"topicflow {_e(__version__)}</p></header><nav>{nav}</nav><main>"
        f"{_overview(data)}{_topics(data, cards)}{_trace(data)}{_evolution(data)}{_notes(data)}"
        f"</main><footer>Self-contained report: every chart is embedded; the page loads nothing else.</footer>"
        "</body></html>\n"
    )


def render_topic_card(topic: TopicReport, data: ReportData) -> str:
    """Return one topic's card: its chart of top words, size, coherence and example documents.

    Parameters
    ----------
    topic : TopicReport
        The topic.
    data : ReportData
        The report it belongs to (for the coherence measure and notes).

    Returns
    -------
    str
        An ``<article class="topic">`` element.
    """
    return _topic_card(topic, data)


def write_report(path: Path, page: str) -> None:
    """Write the page to ``path`` atomically (a temporary sibling, fsync, rename).

    Parameters
    ----------
    path : Path
        The ``.html`` file; its directory must exist.
    page : str
        From :func:`render_report`.
    """
    atomic_write_bytes(Path(path), page.encode("utf-8"))
