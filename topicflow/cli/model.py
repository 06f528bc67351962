"""CLI commands for variational models: fit, topics, infer, evaluate, export."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, cast

import click
import numpy as np

from topicflow._typing import (
    EStepKind,
    ExportFormat,
    HeldoutProtocol,
    LearningMethod,
    OutputFormat,
    choices,
)
from topicflow.api.lda import LDA
from topicflow.cli._aliases import renamed_options
from topicflow.cli._common import (
    apply_preset,
    cluster_options,
    preset_option,
    progress_reporter,
    reports_errors,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import export_npz, load_model
from topicflow.metrics.classification import (
    DEFAULT_FOLDS,
    ClassificationScores,
    FeatureTransform,
)
from topicflow.metrics.left_to_right import DEFAULT_PARTICLES
from topicflow.models.lda.priors import parse_seed_words
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.features import FeaturesResult, topic_features_scores
from topicflow.pipeline.evaluation.heldout import (
    DEFAULT_PROTOCOL,
    HeldoutResult,
    heldout_likelihood,
)
from topicflow.pipeline.progress import TqdmProgress
from topicflow.pipeline.vb.infer import infer_doc_topics
from topicflow.pipeline.vb.online import EXECUTORS, MinibatchRecord

log = logging.getLogger(__name__)


def read_seed_words(path: str | None) -> tuple[Any, ...]:
    """Read the seed-word file given by ``--seed-words``.

    The file format is described in :func:`topicflow.models.lda.priors.parse_seed_words`.

    Parameters
    ----------
    path : str or None
        The file, or None when the option was not given.

    Returns
    -------
    tuple of SeedTopic
        The seed topics in file order; empty when ``path`` is None.

    Raises
    ------
    InvalidParameterError
        If the file cannot be read or decoded, or a line is malformed.
    """
    if path is None:
        return ()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"cannot read seed-words file {path!r}: {exc}", path=path) from exc
    return tuple(parse_seed_words(text, source=path))


@click.command(**renamed_options({"--alpha": "--doc-topic-prior", "--eta": "--topic-word-prior",
                                   "--optimize-eta": "--optimize-topic-word-prior", "--iterations": "--max-iter",
                                   "--doc-iterations": "--max-doc-iter"}))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--model", "model_path", required=True, type=click.Path(), help="Directory to save the model to.")
@click.option("--topics", "n_topics", default=None, type=click.IntRange(min=1),
              help="Number of topics K (required unless --preset sets it).")
@click.option("--method", type=click.Choice(choices(LearningMethod)), default="batch", show_default=True,
              help="Batch VB (Mr. LDA) or online VB over minibatches (Hoffman et al. 2010).")
@click.option("--max-iter", default=50, show_default=True, type=click.IntRange(min=1), help="Maximum batch VB iterations.")
@click.option("--tol", default=1e-4, show_default=True, type=float, help="Batch: stop at this relative ELBO change.")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1), help="Online: documents per minibatch S.")
@click.option("--tau0", default=10.0, show_default=True, type=float, help="Online: delay of the step sizes (tau0 + t)^-kappa.")
@click.option("--kappa", default=0.7, show_default=True, type=float, help="Online: forgetting rate, in [0, 1].")
@click.option("--passes", default=1, show_default=True, type=click.IntRange(min=1), help="Online: passes over the corpus.")
@click.option("--shuffle-window", default=0, show_default=True, type=click.IntRange(min=0),
              help="Online: visit documents in random order within windows of this many documents (0: store order).")
@click.option("--executor", type=click.Choice(list(EXECUTORS)), default="auto", show_default=True,
              help="Online: where minibatch E-steps run. threads: a thread pool of this process, no cluster "
                   "(fastest on one machine); servers: one actor per Dask worker.")
@click.option("--estep", type=click.Choice(choices(EStepKind)), default="vb", show_default=True,
              help="Dense VB E-step, or Gibbs sampling within VB (sparse; faster at large K).")
@click.option("--burn-in", default=5, show_default=True, type=click.IntRange(min=0), help="Hybrid: discarded sweeps per document.")
@click.option("--samples", default=5, show_default=True, type=click.IntRange(min=1), help="Hybrid: kept sweeps per document.")
@click.option("--doc-topic-prior", default="auto", show_default=True,
              help="Document-topic prior alpha: auto (asymmetric, Newton-Raphson), symmetric (learned), or a fixed value.")
@click.option("--topic-word-prior", default=0.01, show_default=True, type=float, help="Topic-word prior eta.")
@click.option("--optimize-topic-word-prior", is_flag=True, help="Learn a symmetric eta by Newton-Raphson.")
@click.option("--seed-words", type=click.Path(dir_okay=False), default=None, help="Informed priors: seeded topics and their words.")
@click.option("--seed-strength", default=1.0, show_default=True, type=float, help="Prior weight of a seed word in its topic.")
@click.option("--max-doc-iter", default=100, show_default=True, type=click.IntRange(min=1), help="Maximum E-step iterations per document.")
@click.option("--doc-tol", default=1e-3, show_default=True, type=float, help="E-step stops at this mean absolute change of gamma.")
@click.option("--warm-start/--cold-start", default=False, show_default=True,
              help="Batch: after 10 cold iterations, start each document's E-step from its previous gamma.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--init-shape", default=100.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Shape s of the Gamma(s, 1/s) entries of the random starting topics; smaller starts them "
                   "further apart.")
@click.option("--checkpoint-every", default=None, type=click.IntRange(min=1),
              help="Write the driver state every N iterations (batch) or minibatches (online).")
@click.option("--checkpoint", "checkpoint_path", default=None, type=click.Path(),
              help="Checkpoint directory (default: MODEL.checkpoint beside the model).")
@click.option("--resume", is_flag=True, help="Continue from the checkpoint of an interrupted run with the same settings.")
@click.option("--doc-topics", type=click.Path(), default=None, help="Also write normalized document topics to this zarr path.")
@click.option("--split-every", default=None, type=click.IntRange(min=2), help="Fan-in of the statistics tree reduction.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model / doc-topics output.")
@preset_option("fit")
@cluster_options
@reports_errors
def fit(store: str, model_path: str, n_topics: int | None, method: str, max_iter: int, tol: float, batch_size: int,
        tau0: float, kappa: float, passes: int, shuffle_window: int, executor: str, estep: str, burn_in: int, samples: int,
        doc_topic_prior: str, topic_word_prior: float, optimize_topic_word_prior: bool, seed_words: str | None,
        seed_strength: float, max_doc_iter: int, doc_tol: float, warm_start: bool, seed: int, init_shape: float,
        checkpoint_every: int | None,
        checkpoint_path: str | None, resume: bool, doc_topics: str | None, split_every: int | None,
        overwrite: bool, preset: str | None, cluster: ClusterConfig) -> None:
    """Fit LDA (polylingual LDA for a multilingual STORE) by batch or online variational Bayes.

    With --preset, a paper's settings fill every option you do not type.
    """
    from topicflow.io._atomic import check_output_path
    from topicflow.io.models.checkpoint import (
        default_checkpoint_path,
        remove_checkpoint,
    )
    from topicflow.pipeline.policies import CheckpointPolicy

    corpus = Corpus.open(store)
    check_output_path(Path(model_path), overwrite=overwrite, what="model")
    values, _ = apply_preset(preset, "fit", dict(
        n_topics=n_topics, doc_topic_prior=doc_topic_prior, topic_word_prior=topic_word_prior, max_iter=max_iter, tol=tol, max_doc_iter=max_doc_iter,
        doc_tol=doc_tol, seed=seed, seed_strength=seed_strength,
        optimize_topic_word_prior=optimize_topic_word_prior, split_every=split_every, warm_start=warm_start, method=method,
        batch_size=batch_size, tau0=tau0, kappa=kappa, passes=passes, shuffle_window=shuffle_window,
        estep=estep, burn_in=burn_in, samples=samples, executor=executor, init_shape=init_shape,
    ))
    if values["n_topics"] is None:
        raise click.UsageError("Missing option '--topics' (or a --preset that sets it).")
    n_topics, method = values["n_topics"], values["method"]
    estimator = LDA(seed_topics=read_seed_words(seed_words), **values)
    estimator._config()  # validate before starting a cluster
    estimator._online_config()
    checkpoint = None
    if checkpoint_every or resume:
        path = Path(checkpoint_path) if checkpoint_path else default_checkpoint_path(Path(model_path))
        checkpoint = CheckpointPolicy(path, every=checkpoint_every or 1, resume=resume)
        if resume and (path / "latest.json").exists():
            click.echo(f"resuming from checkpoint {path}", err=True)
    click.echo(f"fitting K={n_topics} by {method} VB on {corpus!r}", err=True)
    progress = progress_reporter()
    with connect(cluster) as client:
        click.echo(f"dashboard: {client.dashboard_link}", err=True)
        started = time.perf_counter()
        estimator.fit(corpus, client, progress=progress, checkpoint=checkpoint)
        for line in trace_lines(estimator):
            click.echo(line, err=True)
        estimator.save(model_path, overwrite=overwrite)
        if checkpoint is not None:
            remove_checkpoint(checkpoint.path)
        done = (f"{estimator.n_iter_} iterations, {'converged' if estimator.converged_ else 'not converged'}"
                if method == "batch" else f"{estimator.n_iter_} minibatches, {estimator.n_docs_seen_} documents")
        click.echo(f"saved model to {model_path} ({done}, {time.perf_counter() - started:.1f} s)", err=True)
        for name, words in estimator.model_.info.unknown_seed_words.items():
            click.echo(f"warning: seed words of topic {name!r} not in the vocabulary: {', '.join(words)}", err=True)
        if doc_topics:
            written = infer_doc_topics(estimator.model_, corpus, Path(doc_topics), client=client,
                                       overwrite=overwrite, progress=progress)
            click.echo(f"wrote document topics of {written} documents to {doc_topics}", err=True)


def trace_lines(estimator: LDA) -> list[str]:
    """One line per batch iteration, or one per bound estimate of an online run plus a throughput summary."""
    from topicflow.pipeline.vb.batch import IterationRecord

    records = estimator.trace_
    if records and isinstance(records[0], IterationRecord):
        return [
            f"iter {r.iteration:3d}  ELBO {r.elbo:.6e}  per token {r.elbo_per_token:.4f}  "
            f"alpha sum {r.alpha_sum:.4f}  {r.seconds:.2f} s  {r.tokens_per_second:,.0f} tokens/s"
            for r in records
        ]
    online = cast(list[MinibatchRecord], records)  # not a batch trace, so an online one (or empty)
    lines = [
        f"minibatch {r.t:6d}  docs seen {r.docs_seen:9d}  rho {r.rho:.4f}  bound per token {r.bound_per_token:.4f}  "
        f"alpha sum {r.alpha_sum:.4f}"
        for r in online if np.isfinite(r.bound_per_token)
    ]
    seconds = sum(r.seconds for r in online)
    docs = sum(r.docs for r in online)
    tokens = sum(r.tokens for r in online)
    lines.append(f"{len(records)} minibatches, {docs} documents in {seconds:.1f} s: "
                 f"{docs / max(seconds, 1e-9):,.0f} docs/s, {tokens / max(seconds, 1e-9):,.0f} tokens/s")
    return lines


def format_topics(model_path: str, top: int) -> dict[str, Any]:
    """Return the topics of a saved model with their most probable terms, as JSON-able data.

    Parameters
    ----------
    model_path : str
        Model directory.
    top : int
        Terms listed per topic and language.

    Returns
    -------
    dict of str to Any
        ``languages`` and ``topics``: one entry per topic, by decreasing alpha, with its id, name,
        alpha and, per language, its ``top`` terms with their probabilities.
    """
    model = load_model(Path(model_path))
    state = model.state
    topic_word = state.topic_word()
    order = np.argsort(-state.doc_topic_prior, kind="stable")
    topics = []
    for k in order:
        entry: dict[str, Any] = {"topic": int(k), "name": state.topic_label(int(k)), "alpha": float(state.doc_topic_prior[k])}
        for lang in state.languages:
            row = topic_word[lang][k]
            best = np.argsort(-row, kind="stable")[:top]
            entry[lang] = [{"term": model.vocabularies[lang].term_of(int(w)), "p": float(row[w])} for w in best]
        topics.append(entry)
    return {"languages": list(state.languages), "topics": topics}


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="Terms per topic.")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@reports_errors
def topics(model_path: str, top: int, fmt: str) -> None:
    """Print each topic's top terms (side by side per language), by decreasing alpha."""
    listing = format_topics(model_path, top)
    if fmt == "json":
        click.echo(json.dumps(listing, indent=2, ensure_ascii=False))
        return
    langs = listing["languages"]
    for entry in listing["topics"]:
        columns = [" ".join(t["term"] for t in entry[lang]) for lang in langs]
        if len(langs) == 1:
            click.echo(f"{entry['name']:>12} ({entry['alpha']:.3f}): {columns[0]}")
        else:
            click.echo(f"{entry['name']} (alpha {entry['alpha']:.3f})")
            for lang, column in zip(langs, columns):
                click.echo(f"    [{lang}] {column}")


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(), help="zarr path for the document topics.")
@click.option("--overwrite", is_flag=True)
@cluster_options
@reports_errors
def infer(model_path: str, store: str, out: str, overwrite: bool, cluster: ClusterConfig) -> None:
    """Fold STORE's documents into MODEL (topics fixed) and write their topic proportions."""
    model = load_model(Path(model_path))
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        written = infer_doc_topics(model, corpus, Path(out), client=client, overwrite=overwrite, progress=TqdmProgress())
    click.echo(f"wrote document topics of {written} documents to {out}", err=True)


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--protocol", type=click.Choice(choices(HeldoutProtocol)), default=None,
              help="Held-out likelihood protocol (docs/evaluation.md)  [default: completion-random]")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the token split, the particles, the folds and the document sample.")
@click.option("--fraction", default=0.5, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Completion protocols: share of each document's tokens observed.")
@click.option("--particles", default=DEFAULT_PARTICLES, show_default=True, type=click.IntRange(min=1),
              help="left-to-right: particles R.")
@click.option("--labels", "with_labels", is_flag=True,
              help="Topics as features instead: classification accuracy and clustering scores against the "
                   "store's labels.")
@click.option("--folds", default=DEFAULT_FOLDS, show_default=True, type=click.IntRange(min=2),
              help="--labels: folds of the stratified cross-validation.")
@click.option("--max-docs", default=None, type=click.IntRange(min=1),
              help="--labels: score a deterministic sample of N documents (their features, 8 x topics bytes "
                   "each, are held in memory).")
@click.option("--baseline", type=click.Choice(choices(FeatureTransform)), default="tfidf", show_default=True,
              help="--labels: the bag-of-words baseline's features, tf-idf weights or raw counts.")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@cluster_options
@reports_errors
def evaluate(model_path: str, store: str, protocol: str | None, seed: int, fraction: float, particles: int,
             with_labels: bool, folds: int, max_docs: int | None, baseline: str, fmt: str,
             cluster: ClusterConfig) -> None:
    """Held-out likelihood of MODEL on STORE under a named protocol, or (--labels) topics as features."""
    if with_labels and protocol is not None:
        raise click.UsageError("--labels scores topics as features, --protocol held-out likelihood: run "
                               "`topicflow evaluate` once for each.")
    model = load_model(Path(model_path))
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        if with_labels:
            scores = topic_features_scores(model, corpus, client=client, n_folds=folds, seed=seed, max_docs=max_docs,
                                           baseline=cast(FeatureTransform, baseline), progress=progress_reporter())
            lines, payload = features_lines(scores), scores.to_dict()
        else:
            result = heldout_likelihood(model, corpus, protocol or DEFAULT_PROTOCOL, client=client, seed=seed,
                                        fraction=fraction, n_particles=particles)
            lines, payload = heldout_lines(result), result.to_dict()
    click.echo(json.dumps(payload, indent=2) if fmt == "json" else "\n".join(lines))


def heldout_lines(result: HeldoutResult) -> list[str]:
    """The text report of :func:`evaluate` for a held-out likelihood.

    Parameters
    ----------
    result : HeldoutResult

    Returns
    -------
    list of str
    """
    settings = " ".join(f"{name}={value}" for name, value in result.settings.items())
    lines = [
        f"protocol             {result.protocol}",
        f"                     {result.description}",
        f"documents            {result.n_docs}",
        f"evaluated tokens     {result.n_tokens}",
        (f"log likelihood       {result.log_lik_per_token:.4f} nats per token "
         f"(total {result.log_likelihood:.2f} nats)"),
        f"perplexity           {result.perplexity:.2f}   (exp of minus the log likelihood per token)",
        f"settings             {settings}",
    ]
    if result.token_order is not None:
        order = "reading order" if result.token_order == "reading" else "bag order (terms ascending, by count)"
        lines.append(f"token order          {order}")
    if result.oov_tokens:
        lines.append(f"out-of-vocabulary    {result.oov_tokens} tokens (not evaluated)")
    return lines


def features_lines(scores: FeaturesResult) -> list[str]:
    """The text report of :func:`evaluate` with ``--labels``.

    Parameters
    ----------
    scores : FeaturesResult

    Returns
    -------
    list of str
    """
    def accuracy(name: str, result: ClassificationScores) -> str:
        return (f"  {name:<19}accuracy {result.mean_accuracy:.4f} +- {result.std_accuracy:.4f} "
                f"({result.features}, {result.n_features} features)")

    clustering = scores.clustering
    return [
        f"documents            {scores.n_docs} (of {scores.n_docs_store} in the store)",
        f"classification       {scores.settings['classifier']}; mean +- std over folds",
        accuracy("topics", scores.classification),
        accuracy("bag of words", scores.baseline),
        (f"clustering           most probable topic vs label ({clustering.n_classes} classes, "
         f"{clustering.n_clusters} clusters)"),
        f"  NMI (arithmetic)   {clustering.nmi_arithmetic:.4f}",
        f"  NMI (geometric)    {clustering.nmi_geometric:.4f}",
        f"  ARI                {clustering.ari:.4f}",
        f"  purity             {clustering.purity:.4f}",
    ]


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.npz, or .json for pyldavis).")
@click.option("--format", "fmt", type=click.Choice(choices(ExportFormat)), default="npz", show_default=True,
              help="npz: the model's arrays; pyldavis: the arguments of pyLDAvis.prepare as JSON (needs --corpus; "
                   "pass sort_topics=False to keep the topic order).")
@click.option("--corpus", "store", type=click.Path(file_okay=False), default=None,
              help="pyldavis: the store whose documents and term frequencies are shown.")
@click.option("--language", default=None, help="pyldavis: the language shown (required for a polylingual model).")
@cluster_options
@reports_errors
def export(model_path: str, out: str, fmt: str, store: str | None, language: str | None,
           cluster: ClusterConfig) -> None:
    """Export topic_word (rows normalized), alpha and vocab (per language) to .npz, or pyLDAvis's input to JSON."""
    if fmt == "npz":
        if store is not None or language is not None:
            raise InvalidParameterError("--corpus and --language belong to --format pyldavis; the npz export "
                                        "holds the model alone")
        shapes = export_npz(Path(out), load_model(Path(model_path)))
        for name, shape in shapes.items():
            click.echo(f"{name:>20} {shape}", err=True)
        click.echo(f"wrote {out}", err=True)
        return
    if store is None:
        raise InvalidParameterError("--format pyldavis needs --corpus STORE: the documents whose topics, lengths "
                                    "and term frequencies pyLDAvis shows (usually the training store)")
    from topicflow.pipeline.evaluation.pyldavis import export_pyldavis, shown_language

    model = load_model(Path(model_path))
    corpus = Corpus.open(store)
    shown_language(model, corpus, language)  # refuse before starting a cluster
    with connect(cluster) as client:
        data = export_pyldavis(model, corpus, out, client=client, language=language, progress=progress_reporter())
    n_docs, n_topics = data["doc_topic_dists"].shape
    click.echo(f"wrote {out}: {n_topics} topics, {len(data['vocab'])} terms, {n_docs} documents; load it with "
               "pyLDAvis.prepare(**json.load(f), sort_topics=False)", err=True)


COMMANDS = [fit, topics, infer, evaluate, export]
