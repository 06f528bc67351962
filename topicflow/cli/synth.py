"""``topicflow synth``: draw a corpus store from a true LDA model (for tests, benchmarks and demos)."""
from __future__ import annotations

from pathlib import Path

import click

from topicflow.cli._aliases import renamed_options
from topicflow.cli._common import (
    LOCATION,
    cluster_options,
    reports_errors,
    storage_options_option,
)
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.progress import TqdmProgress
from topicflow.pipeline.synth import synthesize_corpus


@click.command("synth", **renamed_options({"--alpha": "--doc-topic-prior", "--eta": "--topic-word-prior"}))
@click.option("--out", "out", required=True, type=LOCATION, metavar="STORE",
              help="Corpus store to create (the true model is saved inside it under truth/).")
@click.option("--docs", "n_docs", required=True, type=click.IntRange(min=1), help="Number of documents.")
@click.option("--topics", "n_topics", required=True, type=click.IntRange(min=1), help="Number of true topics.")
@click.option("--vocab", "n_terms", required=True, type=click.IntRange(min=1),
              help="Vocabulary size of every language.")
@click.option("--doc-length", type=click.FloatRange(min=0, min_open=True), default=100.0, show_default=True,
              help="Poisson mean of the tokens per document (and language); every document has at least 1.")
@click.option("--doc-topic-prior", default="0.1", show_default=True, metavar="A|A1,..,AK",
              help="Document-topic prior alpha: one value (symmetric) or one per topic, comma-separated.")
@click.option("--topic-word-prior", type=click.FloatRange(min=0, min_open=True), default=0.01, show_default=True,
              help="Topic-word prior eta (symmetric).")
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=0, show_default=True)
@click.option("--languages", "n_languages", type=click.IntRange(min=1), default=1, show_default=True,
              help="Aligned languages l0, l1, ... sharing each document's topic mixture.")
@click.option("--labels", is_flag=True, help="Label each document with its dominant true topic (topic-<k>).")
@click.option("--shard-size", type=click.IntRange(min=1), default=None,
              help="Documents per shard (default: topicflow.shard-size); never changes the documents.")
@click.option("--overwrite", is_flag=True, help="Replace STORE once the new one is complete.")
@cluster_options
@storage_options_option
@reports_errors
def synth(out: Path, n_docs: int, n_topics: int, n_terms: int, doc_length: float, doc_topic_prior: str,
          topic_word_prior: float,
          seed: int, n_languages: int, labels: bool, shard_size: int | None, overwrite: bool,
          cluster: ClusterConfig) -> None:
    """Draw a corpus from a true LDA model into STORE, with the true topic-word and doc-topic
    distributions under STORE/truth/ (read them with topicflow.pipeline.synth.load_truth).

    The same seed gives the same corpus for any number of workers and any shard size.
    """
    from topicflow.io.output_paths import STORE_LEFTOVERS, STORE_MARKERS, prepare_output

    prepare_output(out, what="store", option="synth --out", overwrite=overwrite, markers=STORE_MARKERS,
                   leftovers=STORE_LEFTOVERS)
    with connect(cluster) as client:
        result = synthesize_corpus(
            out, n_docs=n_docs, n_topics=n_topics, n_terms=n_terms, doc_length=doc_length,
            doc_topic_prior=doc_topic_prior, topic_word_prior=topic_word_prior, seed=seed, n_languages=n_languages,
            labels=labels,
            shard_size=shard_size, overwrite=overwrite, client=client, progress=TqdmProgress(),
        )
    tokens = ", ".join(f"{lang}: {n}" for lang, n in result.n_tokens.items())
    click.echo(f"wrote {result.path}: {result.n_docs} documents in {result.n_shards} shards, "
               f"tokens {tokens}, {n_topics} true topics")


COMMANDS = [synth]
