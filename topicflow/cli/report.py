"""``topicflow report``: one self-contained HTML page about a saved model."""
from __future__ import annotations

import time

import click

from topicflow._typing import CoherenceMeasure, choices
from topicflow.cli._common import cluster_options, progress_reporter, reports_errors
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.topic_coherence import resolve_measure
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    coherence_summary,
    write_model_report,
)


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.option("--corpus", "store", type=click.Path(file_okay=False), default=None,
              help="Store to fold into the model and score it against: topic sizes from its documents, example "
                   "documents per topic, coherence (default: sizes from the model's topic-word mass, no examples, "
                   "no coherence).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--coherence", "measure", type=click.Choice([*choices(CoherenceMeasure), "none"]), default=None,
              help="Coherence measure against --corpus [default: u_mass, which any store supports; c_uci, c_npmi "
                   "and c_v need a store ingested with --keep-order].")
@click.option("--coherence-top-n", default=10, show_default=True, type=click.IntRange(min=1),
              help="Top words per topic the coherence scores.")
@click.option("--window", default=None, type=click.IntRange(min=1),
              help="Sliding-window width of c_uci, c_npmi and c_v (default gensim's: 10, 10, 110).")
@click.option("--top-words", default=12, show_default=True, type=click.IntRange(min=1), help="Words in each topic's chart.")
@click.option("--examples", default=5, show_default=True, type=click.IntRange(min=1),
              help="Example documents per topic (with --corpus).")
@click.option("--snippet-words", default=30, show_default=True, type=click.IntRange(min=1),
              help="Words shown of each example document.")
@click.option("--evolution-threshold", default=0.5, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Hellinger distance above which topics matched across model versions count as a vanished "
                   "and a new topic.")
@click.option("--max-versions", default=8, show_default=True, type=click.IntRange(min=2),
              help="Compare the newest N versions in the topic evolution.")
@click.option("--overwrite", is_flag=True, help="Replace an existing file at --out.")
@cluster_options
@reports_errors
def report(model_path: str, store: str | None, out: str, measure: str | None, coherence_top_n: int,
           window: int | None, top_words: int, examples: int, snippet_words: int, evolution_threshold: float,
           max_versions: int, overwrite: bool, cluster: ClusterConfig) -> None:
    """Write an HTML report of MODEL: topics (top words, size, coherence, examples), trace, evolution."""
    options = ReportOptions(top_words=top_words, examples=examples, snippet_words=snippet_words,
                            evolution_threshold=evolution_threshold, max_versions=max_versions)
    progress = progress_reporter()
    started = time.perf_counter()
    if store is None:
        if measure not in (None, "none"):
            raise InvalidParameterError("--coherence needs --corpus STORE: the reference whose word statistics "
                                        "score the topics (usually the training store)")
        data = write_model_report(model_path, out, options=options, progress=progress, overwrite=overwrite,
                                  coherence_note="Coherence was not computed: give a reference store with "
                                                 "`topicflow report MODEL --corpus STORE`.")
    else:
        corpus = Corpus.open(store)
        measure = measure or "u_mass"
        if measure != "none":
            found, _ = resolve_measure(measure, window)  # fail before a cluster starts
            if found.uses_windows and not corpus.has_order:
                raise OrderNotKeptError(
                    f"--coherence {measure} counts sliding windows, which need each document's tokens in reading "
                    f"order, but store {store!r} was ingested without them. Re-ingest it with `topicflow ingest "
                    "--keep-order`, or use --coherence u_mass (document co-occurrence, which any store supports).",
                    path=store)
        with connect(cluster) as client:
            scores = None
            if measure != "none":
                progress.message(f"coherence ({measure}) against {store}")
                scores = coherence_summary(model_path, corpus, measure=measure, top_n=coherence_top_n,
                                           window=window, client=client)
            data = write_model_report(model_path, out, corpus, coherence=scores, options=options, client=client,
                                      progress=progress, overwrite=overwrite,
                                      coherence_note="Coherence was not computed (--coherence none).")
    click.echo(f"wrote report of {len(data.topics)} topics to {out} ({time.perf_counter() - started:.1f} s)", err=True)


COMMANDS = [report]
