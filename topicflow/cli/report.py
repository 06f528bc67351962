"""``topicflow report``: one self-contained HTML page about a saved model."""
from __future__ import annotations

import time

import click

from topicflow.cli._common import cluster_options, progress_reporter, reports_errors
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.report import ReportOptions, write_model_report


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.option("--corpus", "store", type=click.Path(file_okay=False), default=None,
              help="Store to fold into the model: topic sizes from its documents, example documents per topic "
                   "(default: sizes from the model's topic-word mass, no examples).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
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
def report(model_path: str, store: str | None, out: str, top_words: int, examples: int, snippet_words: int,
           evolution_threshold: float, max_versions: int | None, overwrite: bool, cluster: ClusterConfig) -> None:
    """Write an HTML report of MODEL: topics (top words, size, examples), trace, evolution across versions."""
    options = ReportOptions(top_words=top_words, examples=examples, snippet_words=snippet_words,
                            evolution_threshold=evolution_threshold, max_versions=max_versions)
    progress = progress_reporter()
    started = time.perf_counter()
    if store is None:
        data = write_model_report(model_path, out, options=options, progress=progress, overwrite=overwrite)
    else:
        corpus = Corpus.open(store)
        with connect(cluster) as client:
            data = write_model_report(model_path, out, corpus, options=options, client=client, progress=progress,
                                      overwrite=overwrite)
    click.echo(f"wrote report of {len(data.topics)} topics to {out} ({time.perf_counter() - started:.1f} s)", err=True)


COMMANDS = [report]
