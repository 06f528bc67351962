"""``python -m topicflow.cli.demo`` (``make demo``): the main job end to end on the bundled corpus.

The corpus is ``topicflow/data/kjv_passages.jsonl.gz``: 3,667 passages of 5-10 consecutive verses
of the King James Bible (public domain; see ``topicflow/data/KJV_LICENSE.md`` and
``scripts/build_demo_corpus.py``), labelled with their book. The demo starts a local Dask cluster
(or joins ``--scheduler``), decompresses the corpus into a work directory, ingests it with
:func:`topicflow.pipeline.ingest.ingest.ingest_corpus`, prints a corpus summary and then runs
:func:`run_model_stage`.

This is a user-facing script, so it writes its report to stdout with ``click.echo``; the library
code it calls reports only through logging and progress objects.
"""
from __future__ import annotations

import contextlib
import gzip
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, cast

import click

from topicflow.api.lda import LDA
from topicflow.cli._common import cluster_options, reports_errors
from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig, load_builtin_stop_words
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.ingest.ingest import IngestResult, ingest_corpus
from topicflow.pipeline.progress import TqdmProgress
from topicflow.pipeline.vb.batch import IterationRecord

CORPUS_RESOURCE = "kjv_passages.jsonl.gz"
MODEL_NAME = "kjv-model"
DEMO_TOPICS = 20
DEMO_ITERATIONS = 40
DEMO_TOP_TERMS = 8
STORE_NAME = "kjv.zarr"
#: Small shards so even the demo spreads over several workers (3,667 documents -> 15 shards).
DEMO_SHARD_SIZE = 250
#: Early Modern English function words and narrative verbs ("said", "came") that the modern English
#: stop-word list does not hold; without them they fill every topic.
ARCHAIC_STOP_WORDS = (
    "art", "doth", "dost", "hast", "hath", "shalt", "thee", "thence", "thereof", "therein", "thine",
    "thither", "thou", "thus", "thy", "unto", "upon", "wast", "whence", "wherefore", "wherein",
    "whither", "wilt", "ye", "yea", "shall", "saith", "said", "also", "even", "came", "come",
)


@dataclass(frozen=True, slots=True)
class CorpusSummary:
    """What the demo reports about the ingested store.

    Attributes
    ----------
    n_docs, n_tokens, n_terms, n_shards, n_labels : int
    top_terms : tuple of (str, int)
        The most frequent terms with their corpus frequency, most frequent first.
    """

    n_docs: int
    n_tokens: int
    n_terms: int
    n_shards: int
    n_labels: int
    top_terms: tuple[tuple[str, int], ...]

    def lines(self) -> list[str]:
        top = ", ".join(f"{term} ({count})" for term, count in self.top_terms)
        return [
            f"documents   {self.n_docs:,} in {self.n_shards} shards ({self.n_labels} books)",
            f"tokens      {self.n_tokens:,}",
            f"vocabulary  {self.n_terms:,} terms",
            f"top terms   {top}",
        ]


def bundled_corpus() -> Any:
    """The packaged ``kjv_passages.jsonl.gz`` (an importlib.resources Traversable)."""
    return resources.files("topicflow").joinpath("data", CORPUS_RESOURCE)


def prepare_corpus(workdir: Path, *, limit: int | None = None) -> Path:
    """Decompress the bundled corpus (its first ``limit`` passages) to ``workdir/kjv_passages.jsonl``.

    The ingest readers take plain ``.jsonl``, so the demo decompresses first.
    """
    out = Path(workdir) / "kjv_passages.jsonl"
    with bundled_corpus().open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        with open(out, "w", encoding="utf-8") as handle:
            for index, line in enumerate(lines):
                if limit is not None and index >= limit:
                    break
                handle.write(line)
    return out


def demo_tokenizer() -> TokenizerConfig:
    """Default tokenizer plus :data:`ARCHAIC_STOP_WORDS` (``thee``, ``unto``, ...)."""
    words = load_builtin_stop_words("english") + ARCHAIC_STOP_WORDS
    return TokenizerConfig(stop_words_name="file", stop_words=words)


def ingest_demo_corpus(jsonl: Path, store: Path, *, client: Any, overwrite: bool = False) -> IngestResult:
    """Ingest the passages with the book as label; terms must occur in 3 to 50% of passages."""
    return ingest_corpus(
        [jsonl],
        store,
        fields=FieldSpec(id_field="id", text_field="text", label_field="label"),
        tokenizer=demo_tokenizer(),
        prune=PruneConfig(min_df=3, max_df_fraction=0.5),
        shard_size=DEMO_SHARD_SIZE,
        overwrite=overwrite,
        client=client,
        progress=TqdmProgress(),
    )


def summarize_corpus(store: Path, *, n_top_terms: int = 12) -> CorpusSummary:
    """Documents, tokens, vocabulary and most frequent terms of a monolingual store."""
    corpus = Corpus.open(store)
    vocab = corpus.vocabulary()
    order = sorted(range(len(vocab)), key=lambda i: (-int(vocab.corpus_freq[i]), str(vocab.terms[i])))
    top = tuple((str(vocab.terms[i]), int(vocab.corpus_freq[i])) for i in order[:n_top_terms])
    labels = {str(x) for block in corpus.iter_blocks() for x in (block.labels if block.labels is not None else ())}
    return CorpusSummary(
        n_docs=len(corpus),
        n_tokens=corpus.n_tokens,
        n_terms=len(vocab),
        n_shards=corpus.n_shards,
        n_labels=len(labels),
        top_terms=top,
    )


def run_model_stage(
    store: Path, client: Any, workdir: Path, *, n_topics: int = DEMO_TOPICS, iterations: int = DEMO_ITERATIONS,
    echo: Callable[[str], Any] = click.echo,
) -> LDA:
    """Fit batch variational LDA on ``store``, save it under ``workdir`` and print its topics."""
    echo(f"fitting LDA with {n_topics} topics (batch variational Bayes, at most {iterations} iterations)")
    model = LDA(n_topics, doc_topic_prior="auto", topic_word_prior=0.05, max_iter=iterations, tol=1e-4, seed=0)
    model.fit(store, client, progress=TqdmProgress())
    last = cast(IterationRecord, model.trace_[-1])  # a batch fit's trace
    seconds = sum(r.seconds for r in model.trace_)
    echo(
        f"  {model.n_iter_} iterations in {seconds:.1f} s ({'converged' if model.converged_ else 'iteration limit'}), "
        f"ELBO per token {last.elbo_per_token:.3f}, alpha sum {last.alpha_sum:.3f}"
    )
    model.save(workdir / MODEL_NAME, overwrite=True)
    echo(f"  model saved to {workdir / MODEL_NAME} (try: topicflow topics {workdir / MODEL_NAME})")
    echo("topics, most prevalent first (alpha, top terms):")
    top = model.top_terms(DEMO_TOP_TERMS)
    for k in sorted(range(n_topics), key=lambda k: -model.doc_topic_prior_[k]):
        echo(f"  {model.topic_names_[k]:>9} {model.doc_topic_prior_[k]:.3f}  " + " ".join(t for t, _ in top[k]))
    return model


@contextlib.contextmanager
def work_directory(workdir: Path | None) -> Iterator[Path]:
    """``workdir`` (created if needed and kept), or a temporary directory removed afterwards."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="topicflow-demo-") as tmp:
        yield Path(tmp)


def run_demo(
    workdir: Path,
    *,
    cluster: ClusterConfig,
    limit: int | None = None,
    overwrite: bool = False,
    echo: Callable[[str], Any] = click.echo,
) -> CorpusSummary:
    """Prepare, ingest and summarize the bundled corpus on ``cluster``, then run the model stage."""
    with connect(cluster) as client:
        echo(f"Dask dashboard: {client.dashboard_link}")
        jsonl = prepare_corpus(workdir, limit=limit)
        store = workdir / STORE_NAME
        echo(f"ingesting {jsonl} -> {store}")
        result = ingest_demo_corpus(jsonl, store, client=client, overwrite=overwrite)
        for line in result.summary_lines():
            echo(f"  {line}")
        summary = summarize_corpus(store)
        echo("corpus summary (King James Bible passages, public domain):")
        for line in summary.lines():
            echo(f"  {line}")
        run_model_stage(store, client, workdir, echo=echo)
    return summary


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the decompressed corpus and the store here (default: a temporary directory).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Use only the first N passages (quick runs and tests).")
@click.option("--overwrite", is_flag=True, help="Replace a store left in --workdir by an earlier run.")
@cluster_options
@reports_errors
def main(workdir: Path | None, limit: int | None, overwrite: bool, cluster: ClusterConfig) -> None:
    """Run topicflow end to end on the bundled King James Bible passages."""
    with work_directory(workdir) as directory:
        run_demo(directory, cluster=cluster, limit=limit, overwrite=overwrite)
        if workdir is None:
            click.echo("(outputs were in a temporary directory; pass --workdir DIR to keep them)")


if __name__ == "__main__":
    main()
