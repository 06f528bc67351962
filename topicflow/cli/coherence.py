"""``topicflow coherence``: topic coherence of a saved model against a reference corpus store."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import click

from topicflow._typing import CoherenceMeasure, OutputFormat, WindowSets, choices
from topicflow.api.hdp import hdp_topics
from topicflow.cli._common import cluster_options, reports_errors
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.metrics.confirmation import arithmetic_mean
from topicflow.metrics.topic_coherence import (
    DEFAULT_TOP_N,
    CoherenceResult,
    resolve_measure,
)
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.coherence import evaluate_coherence, require_order


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.option("--reference", "store", required=True, type=click.Path(file_okay=False),
              help="Corpus store to count words in: the training store, a held-out or an external one.")
@click.option("--measure", type=click.Choice(choices(CoherenceMeasure)), default="c_v", show_default=True,
              help="u_mass: document co-occurrence (any store); c_uci, c_npmi, c_v: sliding windows (stores "
                   "ingested with --keep-order). Definitions as gensim's CoherenceModel.")
@click.option("--top-n", default=DEFAULT_TOP_N, show_default=True, type=click.IntRange(min=1),
              help="Top words per topic.")
@click.option("--window", default=None, type=click.IntRange(min=1),
              help="Sliding-window width in tokens (default: 10 for c_uci and c_npmi, 110 for c_v).")
@click.option("--language", default=None, help="Language of a multilingual model (default: its first).")
@click.option("--windows", "window_sets", type=click.Choice(choices(WindowSets)), default="gensim", show_default=True,
              help="Words of a window: gensim's incremental set (what gensim computes) or the exact set.")
@click.option("--split-every", default=None, type=click.IntRange(min=2), help="Fan-in of the count reduction tree.")
@click.option("--all-topics", is_flag=True,
              help="HDP: score all T topics of the truncation, not only those in use (the mean is over the topics shown).")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@cluster_options
@reports_errors
def coherence(model_path: str, store: str, measure: str, top_n: int, window: int | None, language: str | None,
              window_sets: str, split_every: int | None, all_topics: bool, fmt: str, cluster: ClusterConfig) -> None:
    """Coherence of each topic of MODEL (its top words) and their mean, counted in a reference store.

    An HDP model shows its topics in use, by decreasing stick weight, and their mean (--all-topics: every
    topic of the truncation).
    """
    found, _ = resolve_measure(measure, window)  # fail fast, before a cluster starts
    model = load_model(model_path)
    corpus = Corpus.open(store)
    if found.uses_windows:
        require_order(corpus, measure)
    with connect(cluster) as client:
        result = evaluate_coherence(model, corpus, measure=measure, top_n=top_n, window=window,
                                    language=language, windows=window_sets, client=client,
                                    split_every=split_every)
    headline = None
    if model.info.family == "hdp" and not all_topics:
        in_use = hdp_topics(model)
        result = topics_subset(result, [int(k) for k in in_use.in_use])
        headline = in_use.headline()
    if fmt == "json":
        payload = result.to_dict()
        if headline is not None:
            payload["topics_in_use"] = headline
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    if headline is not None:
        click.echo(headline)
    setting = f"window {result.window}, {result.windows} window sets" if result.window else "document co-occurrence"
    click.echo(f"{result.measure} coherence, top {result.top_n} words, {setting}, "
               f"{result.n_units} {'windows' if result.window else 'documents'} of {result.reference}")
    for name, words, missing, value in zip(result.topic_names, result.topics, result.missing, result.per_topic):
        note = f"  (not in the reference: {' '.join(missing)})" if missing else ""
        click.echo(f"{name:>12} {_fmt(value)}  {' '.join(words)}{note}")
    click.echo(f"{'mean':>12} {_fmt(result.mean)}")


def topics_subset(result: CoherenceResult, keep: list[int]) -> CoherenceResult:
    """The coherence of the topics ``keep`` only (in that order), with their mean.

    Parameters
    ----------
    result : CoherenceResult
        Coherence of every topic, in topic order.
    keep : list of int
        Topic indices to keep.

    Returns
    -------
    CoherenceResult
    """
    per_topic = tuple(result.per_topic[k] for k in keep)
    return replace(result, per_topic=per_topic,
                   mean=arithmetic_mean(list(per_topic)) if per_topic else float("nan"),
                   topics=tuple(result.topics[k] for k in keep),
                   missing=tuple(result.missing[k] for k in keep) if result.missing else (),
                   topic_names=tuple(result.topic_names[k] for k in keep) if result.topic_names else ())


def _fmt(value: float) -> str:
    return f"{value:9.4f}" if math.isfinite(value) else f"{value!s:>9}"


COMMANDS = [coherence]
