"""Driver of ``topicflow report``: gather what a model's report shows and write the HTML page.

For every saved model (batch, online and hybrid VB, polylingual, and every streaming sampler's model,
all LDA models on disk) it collects each topic's top words and size, its coherence when given, the
fit's trace (ELBO per iteration, the online bound, or a stream's evaluation summary), example documents
per topic from folding a corpus into the model, and the topics of the model directory's versions
matched from one version to the next. The per-partition work runs as Dask graphs
(:mod:`topicflow.tasks.report`), the math is :mod:`topicflow.metrics.topic_summary`, and the page is
laid out by :mod:`topicflow.io.outputs.report`.

Coherence is an input: the caller computes it and passes a
:class:`~topicflow.io.outputs.report.CoherenceSummary`; the report never makes one up.
"""
from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel, load_model, read_model_info
from topicflow.io.models.versions import VersionInfo, list_versions
from topicflow.io.output_paths import prepare_output, staged_output_file
from topicflow.io.outputs.report import (
    CoherenceSummary,
    EvolutionCell,
    EvolutionReport,
    ExampleDocument,
    ReportData,
    TopicReport,
    TopicWords,
    TracePanel,
    VersionRow,
    render_report,
    render_topic_card,
    write_report,
)
from topicflow.metrics.topic_summary import (
    TopicDocStats,
    align_topics,
    evolution_step,
    model_topic_shares,
    top_terms,
    topic_lineages,
)
from topicflow.pipeline.cluster import compute_list, current_client
from topicflow.pipeline.evaluation.coherence import evaluate_coherence
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb import fold_in_params, model_blocks, model_token, share
from topicflow.tasks.estep import graph_token
from topicflow.tasks.reduce import tree_reduce_now
from topicflow.tasks.report import (
    map_doc_first_tokens,
    map_doc_top_terms,
    map_doc_topic_stats,
    map_topic_cards,
    merge_doc_topic_stats,
)

log = logging.getLogger(__name__)

#: Streamed models' summary metrics the trace shows, with their axis titles, in panel order.
STREAM_METRICS = {
    "log_likelihood_per_token": "log likelihood per token",
    "log_evidence_per_token": "log evidence per token",
    "perplexity_train": "training perplexity",
    "perplexity_out": "held-out perplexity",
    "nmi_in": "NMI, training documents",
    "nmi_out": "NMI, held-out documents",
    "ess_min": "smallest effective sample size",
}
#: How each streaming algorithm is named on the page.
ALGORITHM_NAMES = {"gibbs": "collapsed Gibbs sampling", "olda": "o-LDA", "incgibbs": "incremental Gibbs sampling",
                   "pf": "particle filter (Canini et al. 2009)", "sgs": "streaming Gibbs sampling (SGS)",
                   "dsgs": "distributed streaming Gibbs sampling (DSGS)"}


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """What the report shows and how much of it.

    Attributes
    ----------
    top_words : int
        Terms in each topic's chart.
    examples : int
        Example documents per topic (with a corpus).
    snippet_words : int
        Words shown of each example document.
    evolution_threshold : float
        Hellinger distance in [0, 1] above which topics matched across versions count as vanished
        and new.
    max_versions : int or None
        Compare only the newest this many versions (None: all); every version's topics are read, so
        a model updated every night for a year would otherwise make a very wide table.
    evolution_words : int
        Top words shown per topic in the evolution table.
    split_every : int or None
        Fan-in of the tree reductions (default ``topicflow.split-every``).
    """

    top_words: int = 12
    examples: int = 5
    snippet_words: int = 30
    evolution_threshold: float = 0.5
    max_versions: int | None = 8
    evolution_words: int = 6
    split_every: int | None = None

    def __post_init__(self) -> None:
        for name in ("top_words", "examples", "snippet_words", "evolution_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= self.evolution_threshold <= 1.0:
            raise InvalidParameterError(
                f"evolution_threshold is a Hellinger distance in [0, 1], got {self.evolution_threshold!r}")
        if self.max_versions is not None and self.max_versions < 2:
            raise InvalidParameterError(f"max_versions must be at least 2 (or None), got {self.max_versions!r}")


def build_report(
    model_path: str | Path, corpus: Corpus | str | Path | None = None, *,
    coherence: CoherenceSummary | None = None, coherence_note: str | None = None,
    options: ReportOptions = ReportOptions(), client: Any = None, progress: ProgressReporter = NO_PROGRESS,
) -> ReportData:
    """Collect everything the report of the model at ``model_path`` shows.

    Parameters
    ----------
    model_path : str or Path
        A model directory (any family; every version is read for the evolution section).
    corpus : Corpus or path, optional
        A store to fold into the model: topic sizes then come from its documents' topics, and each
        topic gets example documents. Without it, sizes come from the model's topic-word mass.
    coherence : CoherenceSummary, optional
        Per-topic coherence computed by the caller.
    coherence_note : str, optional
        Shown when ``coherence`` is None: why there is none.
    options : ReportOptions, optional
        How many words, documents and versions to show.
    client : distributed.Client, optional
        Where the fold-in runs; default the current client, else threads.
    progress : ProgressReporter, optional
        Receives the progress of the fold-in (one item per shard) and of reading the versions.

    Returns
    -------
    ReportData

    Raises
    ------
    ModelNotFoundError
        No model at ``model_path``.
    VocabularyMismatchError
        ``corpus`` shares no language with the model.
    InvalidParameterError
        ``coherence`` covers another number of topics.
    """
    model_path = Path(model_path)
    model = load_model(model_path)
    state = model.state
    if coherence is not None and len(coherence.per_topic) != state.n_topics:
        raise InvalidParameterError(
            f"coherence has {len(coherence.per_topic)} values but model {str(model_path)!r} has "
            f"{state.n_topics} topics")
    store = None if corpus is None else as_corpus(corpus)
    stats = None
    examples: dict[int, tuple[ExampleDocument, ...]] = {}
    if store is not None:
        stats = corpus_doc_stats(model, store, n_top=options.examples, client=client, progress=progress,
                                 split_every=options.split_every)
        examples = example_documents(stats, store, n_words=options.snippet_words, client=client)
    sizes = stats.shares() if stats is not None else model_topic_shares(state.topic_word_var, state.topic_word_prior)
    topics = topic_reports(model, sizes, coherence, examples, top_words=options.top_words)
    versions = list_versions(model_path)
    evolution, evolution_note = version_evolution(model_path, versions, options, progress)
    panels, trace_note = trace_panels(trace_history(model_path, versions, model.version))
    no_coherence = coherence_note or ("Coherence was not computed: give a reference store (`topicflow report MODEL "
                                      "--corpus STORE`) to score the topics.")
    return ReportData(
        title=f"Topic model report: {model_path.name}",
        facts=model_facts(model_path, model, versions, store, stats),
        topics=topics,
        size_source="corpus" if stats is not None else "model",
        notes=report_notes(model, store, coherence, options),
        coherence=coherence,
        coherence_note="" if coherence is not None else no_coherence,
        examples_note="" if store is not None else (
            "Example documents need a corpus: run `topicflow report MODEL --corpus STORE`."),
        trace=panels,
        trace_note=trace_note,
        versions=tuple(VersionRow(v.version, v.created[:19].replace("T", " "), v.kind, _version_summary(v),
                                  v.is_current) for v in versions),
        evolution=evolution,
        evolution_note=evolution_note,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def write_model_report(
    model_path: str | Path, out: str | Path, corpus: Corpus | str | Path | None = None, *,
    coherence: CoherenceSummary | None = None, coherence_note: str | None = None,
    options: ReportOptions = ReportOptions(), client: Any = None, progress: ProgressReporter = NO_PROGRESS,
    overwrite: bool = False,
) -> ReportData:
    """Build the report of a model and write it as one self-contained HTML file.

    Parameters
    ----------
    model_path : str or Path
        A model directory.
    out : str or Path
        The ``.html`` file to write (atomically), or its URL on object storage (docs/storage.md).
    corpus : Corpus or path, optional
        As in :func:`build_report`.
    coherence : CoherenceSummary, optional
        As in :func:`build_report`.
    coherence_note : str, optional
        As in :func:`build_report`.
    options : ReportOptions, optional
        As in :func:`build_report`.
    client : distributed.Client, optional
        As in :func:`build_report`.
    progress : ProgressReporter, optional
        Receives the fold-in's progress and the drawing of the topic charts.
    overwrite : bool, default False
        Replace an existing file at ``out``.

    Returns
    -------
    ReportData
        What the page shows.

    Raises
    ------
    StoreExistsError
        ``out`` exists and ``overwrite`` is False.

    Examples
    --------
    >>> data = write_model_report("model", "report.html", corpus="corpus.zarr")    # doctest: +SKIP
    >>> [t.size for t in data.topics]                                              # doctest: +SKIP
    """
    location = prepare_output(out, what="report", option="report --out", overwrite=overwrite, kind="file")
    data = build_report(model_path, corpus, coherence=coherence, coherence_note=coherence_note, options=options,
                        client=client, progress=progress)
    cards = topic_cards(data, client=client, progress=progress)
    page = render_report(data, topic_cards=cards)
    with staged_output_file(location) as local:  # a local file renamed, or one PUT on object storage
        write_report(local, page)
    return data


def topic_cards(data: ReportData, *, client: Any = None, progress: ProgressReporter = NO_PROGRESS) -> list[str]:
    """Draw every topic's card: as tasks on the cluster (all workers draw at once), else here.

    Parameters
    ----------
    data : ReportData
        The report.
    client : distributed.Client, optional
        Where to draw; None draws in this process, one topic after another.
    progress : ProgressReporter, optional
        One item per topic.

    Returns
    -------
    list of str
        The cards' HTML in topic order.
    """
    client = current_client(client)
    if client is None:
        return [render_topic_card(topic, data)
                for topic in progress.track(data.topics, total=len(data.topics), desc="charts", unit="topic")]
    shared = share(data, client, name="report-data")
    tasks = map_topic_cards(data.topics, shared, token=graph_token(data.title, data.generated, len(data.topics)))
    return [str(card) for card in compute_list(tasks, client=client, progress=progress, desc="charts", unit="topic")]


# ----------------------------------------------------------------------------- corpus


def corpus_doc_stats(model: SavedModel, corpus: Corpus, *, n_top: int, client: Any = None,
                     progress: ProgressReporter = NO_PROGRESS, split_every: int | None = None) -> TopicDocStats:
    """Fold every document of ``corpus`` into the model and summarize the document topics.

    Parameters
    ----------
    model : SavedModel
        The model (topics held fixed).
    corpus : Corpus
        The documents.
    n_top : int
        Documents kept per topic (highest proportion of the topic first).
    client : distributed.Client, optional
        Where the fold-in runs.
    progress : ProgressReporter, optional
        One item per shard.
    split_every : int, optional
        Fan-in of the merge tree.

    Returns
    -------
    TopicDocStats
        Token mass per topic (lengths in the model's vocabulary) and the top documents per topic.
    """
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    token = graph_token(corpus.token(), model_token(model), "report", n_top)
    blocks, maps = model_blocks(model, corpus, token=token)
    state = model.state
    topics = share(state.prepared_topics(list(maps)), client, name=f"topics-{token}")
    parts = map_doc_topic_stats(blocks, topics, state.doc_topic_prior, fold_in_params(model), n_top=n_top, token=token)
    computed = compute_list(parts, client=client, progress=progress, desc="fold-in", unit="shard")
    summary: TopicDocStats = tree_reduce_now(computed, merge_doc_topic_stats, split_every=split_every)
    return summary


def example_documents(stats: TopicDocStats, corpus: Corpus, *, n_words: int,
                      client: Any = None) -> dict[int, tuple[ExampleDocument, ...]]:
    """Each topic's top documents with a snippet of their text.

    The snippet is the document's first words in reading order when the store keeps token order
    (``topicflow ingest --keep-order``), else its most frequent terms; only the shards holding the
    chosen documents are read.

    Parameters
    ----------
    stats : TopicDocStats
        From :func:`corpus_doc_stats`.
    corpus : Corpus
        The store the documents are in.
    n_words : int
        Words per snippet and language.
    client : distributed.Client, optional
        Where the shards are read.

    Returns
    -------
    dict of int to tuple of ExampleDocument
        By topic, best first.
    """
    starts = [shard.first_doc for shard in corpus.shards]
    wanted: dict[int, set[int]] = {}
    for k in range(stats.top_weight.shape[0]):
        for position, _, _ in stats.top_documents(k):
            shard = bisect.bisect_right(starts, position) - 1
            wanted.setdefault(shard, set()).add(position - starts[shard])
    shards = sorted(wanted)
    rows = [sorted(wanted[s]) for s in shards]
    token = graph_token(corpus.token(), "snippets", n_words, shards, rows)
    vocab = {lang: corpus.vocabulary(lang).terms for lang in corpus.languages}
    texts: dict[int, list[tuple[str, str]]] = {}
    if corpus.has_order:
        kind = "first words"
        tasks = [task for lang in corpus.languages for task in
                 map_doc_first_tokens(corpus.to_delayed_ordered(lang, shards=shards), rows, n_words,
                                      token=f"{token}-{lang}")]
        found = compute_list(tasks, client=current_client(client))
        for index, lang in enumerate(corpus.languages):
            for shard, by_row in zip(shards, found[index * len(shards):(index + 1) * len(shards)]):
                for row, codes in by_row.items():
                    words = (c if isinstance(c, str) else str(vocab[lang][c]) for c in codes)
                    texts.setdefault(starts[shard] + row, []).append((lang, " ".join(words)))
    else:
        kind = "most frequent terms"
        tasks = map_doc_top_terms(corpus.to_delayed_multi(shards=shards), rows, n_words, token=token)
        for shard, by_row in zip(shards, compute_list(tasks, client=current_client(client))):
            for row, by_language in by_row.items():
                texts[starts[shard] + row] = [(lang, " ".join(str(vocab[lang][t]) for t in ids))
                                              for lang, ids in by_language.items()]
    return {k: tuple(ExampleDocument(doc_id=doc_id, position=position, theta=theta,
                                     snippet=tuple(texts[position]), snippet_kind=kind)
                     for position, doc_id, theta in stats.top_documents(k))
            for k in range(stats.top_weight.shape[0])}


def coherence_summary(model: SavedModel | str | Path, store: Corpus | str | Path, *, measure: str = "u_mass",
                      top_n: int = 10, window: int | None = None, client: Any = None) -> CoherenceSummary:
    """Score a model's topics with :func:`topicflow.metrics.coherence`, as the report shows them.

    Parameters
    ----------
    model : SavedModel, str or Path
        The model (a polylingual one is scored in its first language).
    store : Corpus, str or Path
        The reference store; window measures (``c_uci``, ``c_npmi``, ``c_v``) need one ingested with
        ``--keep-order``.
    measure : {"u_mass", "c_uci", "c_npmi", "c_v"}, default "u_mass"
        The coherence measure (document co-occurrence for ``u_mass``, so any store).
    top_n : int, default 10
        Top words per topic.
    window : int, optional
        Sliding-window width of window measures (default gensim's).
    client : distributed.Client, optional
        Where the store is counted.

    Returns
    -------
    CoherenceSummary

    Raises
    ------
    OrderNotKeptError
        A window measure on a store without token order.

    Examples
    --------
    >>> scores = coherence_summary("model", "corpus.zarr", measure="u_mass")        # doctest: +SKIP
    >>> write_model_report("model", "report.html", "corpus.zarr", coherence=scores)  # doctest: +SKIP
    """
    saved = model if isinstance(model, SavedModel) else load_model(model)
    result = evaluate_coherence(saved, store, measure=measure, top_n=top_n, window=window, client=client)
    polylingual = len(saved.state.languages) > 1
    return CoherenceSummary(measure=result.measure, top_n=result.top_n, reference=result.reference,
                            per_topic=tuple(float(v) for v in result.per_topic), mean=float(result.mean),
                            window=result.window, language=result.language if polylingual else None)


# ----------------------------------------------------------------------------- topics


def topic_words(model: SavedModel, n: int) -> list[tuple[TopicWords, ...]]:
    """Each topic's ``n`` most probable terms, per language.

    Parameters
    ----------
    model : SavedModel
        The model.
    n : int
        Terms per topic and language.

    Returns
    -------
    list of tuple of TopicWords
        In topic order; one entry per language of the model.
    """
    state = model.state
    per_topic: list[list[TopicWords]] = [[] for _ in range(state.n_topics)]
    for lang, topic_word in state.topic_word().items():
        terms, weights = top_terms(topic_word, n)
        vocab = model.vocabularies[lang].terms
        for k in range(state.n_topics):
            per_topic[k].append(TopicWords(lang, tuple(str(vocab[t]) for t in terms[k]),
                                           tuple(float(w) for w in weights[k])))
    return [tuple(entry) for entry in per_topic]


def topic_reports(model: SavedModel, sizes: np.ndarray, coherence: CoherenceSummary | None,
                  examples: Mapping[int, tuple[ExampleDocument, ...]], *, top_words: int) -> tuple[TopicReport, ...]:
    """Assemble the topics' records in topic order.

    Parameters
    ----------
    model : SavedModel
        The model.
    sizes : ndarray of shape (n_topics,)
        Shares of tokens.
    coherence : CoherenceSummary or None
        Per-topic coherence.
    examples : mapping of int to tuple of ExampleDocument
        Example documents by topic (may be empty).
    top_words : int
        Terms per topic.

    Returns
    -------
    tuple of TopicReport
    """
    state = model.state
    words = topic_words(model, top_words)
    return tuple(
        TopicReport(index=k, label=state.topic_label(k), words=words[k], size=float(sizes[k]),
                    coherence=None if coherence is None else float(coherence.per_topic[k]),
                    examples=examples.get(k, ()))
        for k in range(state.n_topics)
    )


# ----------------------------------------------------------------------------- trace


def _trace_kind(info: ModelInfo) -> str:
    """``batch``, ``online`` or ``stream``: which records a version's trace holds (``none`` if empty)."""
    if info.trace and "elbo" in info.trace[0]:
        return "batch"
    if info.trace and "rho" in info.trace[0]:
        return "online"
    return "stream" if info.summary else "none"


def trace_history(model_path: Path, versions: Sequence[VersionInfo], current: int | None) -> list[tuple[int, ModelInfo]]:
    """The versions whose traces continue one another, up to the current one, oldest first.

    From the current version back along its parents, as long as the versions record the same kind of
    trace (online minibatches, or a stream's evaluation points); a batch fit is one version.

    Parameters
    ----------
    model_path : Path
        The model directory.
    versions : sequence of VersionInfo
        Its versions.
    current : int or None
        The version shown (None for a model read from elsewhere: version 1).

    Returns
    -------
    list of (int, ModelInfo)
    """
    parents = {v.version: v.parent for v in versions}
    number: int | None = current if current is not None else 1
    chain: list[tuple[int, ModelInfo]] = []
    while number is not None and number in parents:
        info = read_model_info(model_path, number)
        if chain and (_trace_kind(info) != _trace_kind(chain[0][1]) or _trace_kind(info) == "batch"):
            break
        chain.insert(0, (number, info))
        number = parents[number]
    return chain


def trace_panels(history: Sequence[tuple[int, ModelInfo]]) -> tuple[tuple[TracePanel, ...], str]:
    """The fit's recorded trace as chart panels, and a sentence saying what it is.

    Batch VB records the ELBO per iteration; online VB a per-token bound every few minibatches, with
    the step size and the sum of alpha; a streamed model the mean and standard deviation over runs of
    its evaluation metrics at each evaluation point (``ModelInfo.summary``). Online and streamed
    traces of consecutive versions (``topicflow update``) are joined, each version's start marked.

    Parameters
    ----------
    history : sequence of (int, ModelInfo)
        Versions and their descriptions, oldest first (:func:`trace_history`); the last is shown.

    Returns
    -------
    panels : tuple of TracePanel
    note : str
    """
    if not history:
        return (), "The model recorded no trace."
    number, info = history[-1]
    kind = _trace_kind(info)
    span = f"version {number}" if len(history) == 1 else f"versions {history[0][0]} to {number}"
    if kind == "batch":
        records = info.trace
        x = tuple(float(r["iteration"]) + 1 for r in records)
        panels = (TracePanel("iteration", "ELBO per token (nats)", x, tuple(float(r["elbo_per_token"]) for r in records)),
                  TracePanel("iteration", "sum of alpha", x, tuple(float(r["alpha_sum"]) for r in records)))
        state = "converged" if info.converged else "stopped before converging"
        return panels, (f"Batch variational Bayes ({span}): the evidence lower bound (ELBO) per training token "
                        f"after each of {len(records)} iterations ({state}), and the learned document-topic prior.")
    if kind == "online":
        return _online_panels(history, span)
    if kind == "stream":
        return _stream_panels(history, span)
    return (), f"The model ({span}) recorded no trace."


def joined_records(history: Sequence[tuple[int, list[dict[str, Any]]]],
                   key: str) -> tuple[list[dict[str, Any]], tuple[tuple[float, str], ...]]:
    """Join the trace records of consecutive versions, and where each later version starts.

    A version may repeat its predecessors' records (an SGS update keeps the whole summary) or hold
    only its own (an online update): each version contributes the records past the last ``key``
    seen so far.

    Parameters
    ----------
    history : sequence of (int, list of dict)
        Versions, oldest first, with their records.
    key : str
        The increasing position of a record (``docs_seen``, or ``point`` for Gibbs sweeps).

    Returns
    -------
    records : list of dict
        In order, each position once.
    marks : tuple of (float, str)
        The position of each later version's first new record, labelled ``v<version>``.
    """
    joined: list[dict[str, Any]] = []
    marks = []
    for number, records in history:
        last = float(joined[-1][key]) if joined else -math.inf
        new = [r for r in records if float(r[key]) > last]
        if joined and new:
            marks.append((float(new[0][key]), f"v{number}"))
        joined.extend(new)
    return joined, tuple(marks)


def _online_panels(history: Sequence[tuple[int, ModelInfo]], span: str) -> tuple[tuple[TracePanel, ...], str]:
    records, marks = joined_records([(number, info.trace) for number, info in history], "docs_seen")
    x = tuple(float(r["docs_seen"]) for r in records)
    finite = [(float(r["docs_seen"]), float(r["bound_per_token"])) for r in records
              if r.get("bound_per_token") is not None and math.isfinite(float(r["bound_per_token"]))]
    panels = []
    if finite:
        panels.append(TracePanel("documents seen", "bound per token (nats)", tuple(p[0] for p in finite),
                                 tuple(p[1] for p in finite), marks=marks))
    panels.append(TracePanel("documents seen", "step size rho", x, tuple(float(r["rho"]) for r in records), marks=marks))
    panels.append(TracePanel("documents seen", "sum of alpha", x, tuple(float(r["alpha_sum"]) for r in records),
                             marks=marks))
    bound = ("the per-token variational bound of the minibatch, estimated every few minibatches, " if finite
             else "no bound estimate (the run evaluated none), ")
    return tuple(panels), (f"Online variational Bayes ({span}, {len(records)} minibatches): {bound}the step size and "
                           "the learned document-topic prior against the documents seen.")


def _stream_panels(history: Sequence[tuple[int, ModelInfo]], span: str) -> tuple[tuple[TracePanel, ...], str]:
    info = history[-1][1]
    gibbs = info.algorithm == "gibbs"
    xlabel = "sweep" if gibbs else "documents seen"
    key = "point" if gibbs else "docs_seen"
    rows, marks = joined_records([(number, version_info.summary) for number, version_info in history], key)
    panels = []
    for name, title in STREAM_METRICS.items():
        points = [(float(r[key]), float(r[f"{name}_mean"]), float(r.get(f"{name}_std", 0.0))) for r in rows
                  if r.get(f"{name}_mean") is not None and math.isfinite(float(r[f"{name}_mean"]))]
        if points:
            panels.append(TracePanel(xlabel, title, tuple(p[0] for p in points), tuple(p[1] for p in points),
                                     tuple(p[2] for p in points), marks=marks))
    runs = max(int(r.get("runs", 1)) for r in rows)
    algorithm = ALGORITHM_NAMES.get(str(info.algorithm), str(info.algorithm))
    band = f" (mean over {runs} runs, band: one standard deviation)" if runs > 1 else ""
    return tuple(panels), (f"Streamed model, {algorithm}, {span}: its evaluation metrics at each of {len(rows)} "
                           f"evaluation points{band}. The saved model is run 0.")


# ----------------------------------------------------------------------------- versions


def _version_summary(version: VersionInfo) -> str:
    summary = version.summary
    parts = []
    for key, label in (("n_docs", "documents"), ("new_docs", "new documents"), ("n_iterations", "iterations"),
                       ("minibatches", "minibatches"), ("method", "method")):
        if summary.get(key) is not None:
            parts.append(f"{summary[key]} {label}" if label != "method" else f"{summary[key]}")
    if summary.get("store"):
        parts.append(f"store {summary['store']}")
    return ", ".join(parts)


def version_evolution(model_path: Path, versions: Sequence[VersionInfo], options: ReportOptions,
                      progress: ProgressReporter = NO_PROGRESS) -> tuple[EvolutionReport | None, str]:
    """Match the topics of consecutive versions and follow them through.

    Versions are read one at a time; only the previous one's topics are kept while the next is read.

    Parameters
    ----------
    model_path : Path
        The model directory.
    versions : sequence of VersionInfo
        Its versions, oldest first.
    options : ReportOptions
        Threshold, how many versions, words shown.
    progress : ProgressReporter, optional
        One item per version read.

    Returns
    -------
    evolution : EvolutionReport or None
        None for a single version.
    note : str
        Why there is no evolution, or which versions are compared.
    """
    if len(versions) < 2:
        return None, ("The model has a single version: there is nothing to compare. Versions are added by "
                      "`topicflow update`.")
    chosen = list(versions)[-options.max_versions:] if options.max_versions else list(versions)
    previous: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    labels: list[list[str]] = []
    steps = []
    for version in progress.track(chosen, total=len(chosen), desc="versions", unit="version"):
        model = load_model(model_path, version=version.version)
        topics = {lang: (rows, model.vocabularies[lang].terms) for lang, rows in model.state.topic_word().items()}
        words = topic_words(model, options.evolution_words)
        labels.append([" ".join(w for entry in words[k] for w in entry.terms) for k in range(model.state.n_topics)])
        if previous is not None:
            earlier, later = align_topics([previous, topics])
            steps.append(evolution_step(earlier, later, threshold=options.evolution_threshold))
        previous = topics
    lineages = topic_lineages(steps, [len(row) for row in labels])
    rows = []
    for lineage in lineages:
        cells: list[EvolutionCell | None] = []
        for index, topic in enumerate(lineage):
            before = lineage[index - 1] if index else None
            if topic is None:
                cells.append(None)
            elif index == 0:
                cells.append(EvolutionCell(topic, labels[0][topic], None, "first"))
            elif before is None:
                distances = steps[index - 1].distance_matrix[:, topic]
                nearest = int(np.argmin(distances))
                cells.append(EvolutionCell(topic, labels[index][topic], None, "new",
                                           nearest=(nearest, float(distances[nearest]))))
            else:
                distance = float(steps[index - 1].distance_matrix[before, topic])
                cells.append(EvolutionCell(topic, labels[index][topic], distance, "continued"))
        rows.append(tuple(cells))
    note = "" if len(chosen) == len(versions) else (
        f"The newest {len(chosen)} of {len(versions)} versions are compared (--max-versions).")
    return EvolutionReport(versions=tuple(v.version for v in chosen), threshold=options.evolution_threshold,
                           lineages=tuple(rows)), note


# ----------------------------------------------------------------------------- facts and notes


def describe_method(model: SavedModel) -> str:
    """Name how the model was made, as the page says it.

    Parameters
    ----------
    model : SavedModel
        The model.

    Returns
    -------
    str
        For example ``"online variational Bayes, hybrid (Gibbs within VB) E-step, polylingual"``, or
        ``"imported from gensim 4.4.0 LdaModel"``.
    """
    info = model.info
    source = info.extra.get("source")
    if info.kind == "stream":
        text = ALGORITHM_NAMES.get(str(info.algorithm), str(info.algorithm))
    elif info.kind == "imported" and isinstance(source, dict):
        # a model of another library (topicflow.io.models.foreign), e.g. "tomotopy 0.14.0 LDAModel"
        made_by = [str(source[key]) for key in ("library", "version") if source.get(key)]
        text = " ".join(["imported from", *made_by, str(source.get("class", "")).rpartition(".")[2]]).strip()
    else:
        text = f"{info.method or 'batch'} variational Bayes"
        if info.settings.get("estep") == "hybrid":
            text += ", hybrid (Gibbs within VB) E-step"
        if info.settings.get("seed_topics"):
            text += ", informed priors"
    if len(model.state.languages) > 1:
        text += ", polylingual"
    return text


def model_facts(model_path: Path, model: SavedModel, versions: Sequence[VersionInfo], corpus: Corpus | None,
                stats: TopicDocStats | None) -> tuple[tuple[str, str], ...]:
    """The overview table: what the model is, what it was trained and evaluated on.

    Parameters
    ----------
    model_path : Path
        The model directory.
    model : SavedModel
        Its current version.
    versions : sequence of VersionInfo
        Its versions.
    corpus : Corpus or None
        The evaluation store.
    stats : TopicDocStats or None
        The evaluation store's summary.

    Returns
    -------
    tuple of (str, str)
    """
    state = model.state
    info = model.info
    facts = [("model", str(model_path)), ("method", describe_method(model)), ("topics", str(state.n_topics))]
    facts.append(("version", f"{model.version} of {len(versions)}" if model.version is not None else "1"))
    vocab = ", ".join(f"{lang}: {state.n_terms(lang):,} terms" for lang in state.languages)
    facts.append(("languages" if len(state.languages) > 1 else "vocabulary", vocab))
    facts.append(("sum of alpha", f"{float(state.doc_topic_prior.sum()):.4g}"))
    priors = [f"{lang}: {prior:.4g}" if isinstance(prior, float) else f"{lang}: informed (matrix)"
              for lang, prior in state.topic_word_prior.items()]
    facts.append(("topic-word prior eta", ", ".join(priors)))
    trained = info.corpus
    if trained:
        facts.append(("training store", (f"{trained.get('path', '?')} ({int(trained.get('n_docs', 0)):,} documents, "
                                        f"{int(trained.get('n_tokens', 0)):,} tokens)")))
    if corpus is not None and stats is not None:
        facts.append(("evaluation store", (f"{corpus.path} ({stats.n_docs:,} documents, {stats.n_tokens:,} tokens in the "
                                          "model's vocabulary)")))
    return tuple(facts)


def report_notes(model: SavedModel, corpus: Corpus | None, coherence: CoherenceSummary | None,
                 options: ReportOptions) -> tuple[tuple[str, str], ...]:
    """Headed paragraphs saying how each number of the report was computed.

    Parameters
    ----------
    model : SavedModel
        The model.
    corpus : Corpus or None
        The evaluation store.
    coherence : CoherenceSummary or None
        The coherence shown.
    options : ReportOptions
        The report's settings.

    Returns
    -------
    tuple of (str, str)
    """
    notes = [("Top words", (f"The {options.top_words} most probable terms of each topic under the posterior mean of "
                           "its word distribution (lambda normalized), per language."))]
    if corpus is not None:
        notes.append(("Topic size", ("Every document of the evaluation store is folded into the model (variational "
                                    "inference of its topic proportions theta with the topics held fixed). A topic's "
                                    "size is sum_d N_d theta_dk / sum_d N_d, the expected share of the store's tokens "
                                    "(N_d counts the tokens in the model's vocabulary).")))
        shown = "its first words in reading order, as tokenized (stop words left out)" if corpus.has_order else (
            "its most frequent terms (the store keeps no token order; ingest it with --keep-order to see text)")
        notes.append(("Example documents", (f"The {options.examples} documents with the highest theta_dk, ties to "
                                            f"the earlier document, each shown by its id and {shown}.")))
    else:
        notes.append(("Topic size", ("No corpus was given, so a topic's size is its share of the model's topic-word "
                                    "mass, sum_w (lambda_kw - eta_kw): the expected share of the training tokens "
                                    "assigned to it (for a streamed model, its sampler's counts).")))
    if coherence is not None:
        notes.append(("Coherence", (f"{coherence.describe()}: the measure over each topic's top {coherence.top_n} "
                                    "words, with word statistics counted in the reference store, as gensim's "
                                    "CoherenceModel defines it (definitions in docs/evaluation.md). Higher is more "
                                    "coherent.")))
    notes.append(("Topic evolution", ("Topics of consecutive versions are matched one to one by the Hungarian "
                                     "method minimizing the summed Hellinger distance of their word distributions "
                                     "(over the union of the versions' vocabularies; with several languages, "
                                     "the root mean square of the per-language distances). A matched pair further "
                                     f"apart than {options.evolution_threshold:g} counts as a vanished topic and a "
                                     "new one.")))
    return tuple(notes)
