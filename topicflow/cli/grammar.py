"""``topicflow grammar fit | segment | topics``: online adaptor grammars (Zhai 2014, ch. 8).

This module only parses options and prints; the work is done by :class:`topicflow.api.adaptor_grammar.AdaptorGrammar`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import cast

import click

from topicflow.cli._common import (
    LOCATION,
    cluster_options,
    model_location,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.errors import InputError
from topicflow.pipeline.cluster import ClusterConfig


def _pairs(values: tuple[str, ...], option: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        name, eq, number = value.partition("=")
        if not eq or not name or not number.strip().isdigit():
            raise click.BadParameter(f"write NAME=INTEGER, got {value!r}", param_hint=option)
        out[name.strip()] = int(number)
    return out


@click.group("grammar")
def grammar() -> None:
    """Adaptor grammars with online hybrid inference: fit on a store, segment text, list topics."""


@grammar.command("fit")
@click.argument("store", type=LOCATION)
@click.option("--grammar", "grammar_name", default="unigram", show_default=True,
              help="unigram, collocation, infvoc-lda or a grammar file.")
@click.option("--model", "model_path", type=LOCATION, required=True,
              help="Model directory to write (a versioned model; a path or a URL: docs/storage.md).")
@click.option("--batch-size", type=click.IntRange(min=1), default=20, show_default=True,
              help="Sentences per minibatch (B).")
@click.option("--tau", type=click.FloatRange(min=0), default=64.0, show_default=True, help="Decay inertia.")
@click.option("--kappa", type=click.FloatRange(min=0), default=0.8, show_default=True, help="Decay rate.")
@click.option("--prune-every", type=click.IntRange(min=1), default=10, show_default=True,
              help="Prune the TNGs every u minibatches.")
@click.option("--truncation", multiple=True, metavar="NT=K", help="Truncation of an adapted nonterminal (repeatable).")
@click.option("--param", "params", multiple=True, metavar="NAME=N", help="Grammar template parameter (repeatable).")
@click.option("--samples", type=click.IntRange(min=1), default=10, show_default=True, help="Trees per sentence.")
@click.option("--passes", type=click.IntRange(min=1), default=1, show_default=True, help="Passes over the store.")
@click.option("--shuffle", is_flag=True, help="Visit the sentences in a seeded random order, new every pass.")
@click.option("--table-labels", is_flag=True, help="Resample the cached atoms' trees after every pruning.")
@click.option("--bias", type=click.Choice(["correct", "tau-kappa", "none"]), default="correct", show_default=True,
              help="Handling of the zero start of the running counts.")
@click.option("--optimize-hyper", type=click.Choice(["ab", "a", "none"]), default="ab", show_default=True,
              help="Re-estimate the Pitman-Yor a and b, only a, or neither after every pruning.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="E-step tasks per minibatch (each reads its own sentences from the store).")
@click.option("--corpus-size", type=click.IntRange(min=1), default=None,
              help="|X| of the updates (default: the store's sentences); give the final size to fit a stream "
                   "in parts with `topicflow update`.")
@click.option("--alphabet", default=None, metavar="CHARS",
              help="Characters to make terminals besides the store's (so `topicflow update` may bring them).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed.")
@click.option("--init", "init", type=click.Choice(["seed", "empty"]), default="seed", show_default=True,
              help="seed: parse every sentence once before the first minibatch (PyAdaGram's start); empty: [Z]'s "
                   "empty TNGs (docs/adaptor_grammar.md, \"Seed pass\"). `topicflow update` never seeds.")
@click.option("--language", default=None, help="Language of a multilingual store.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model.")
@cluster_options
@storage_options_option
@reports_errors
def fit(store: str | Path, grammar_name: str, model_path: str | Path, batch_size: int, tau: float, kappa: float,
        prune_every: int, truncation: tuple[str, ...], params: tuple[str, ...], samples: int, passes: int,
        shuffle: bool, table_labels: bool, bias: str, partitions: int, corpus_size: int | None, alphabet: str | None,
        seed: int, init: str, language: str | None, overwrite: bool, cluster: ClusterConfig,
        optimize_hyper: str) -> None:
    """Fit an adaptor grammar to STORE (ingested with --keep-order; each document's tokens joined).

    The store is streamed: each minibatch's E-step tasks read their own sentences. The model is saved as
    version 1 of a versioned model; `topicflow update MODEL STORE` continues it with the documents
    appended since, and `topicflow versions` / `rollback` work on it.
    """
    from topicflow.api.adaptor_grammar import AdaptorGrammar
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import save_model
    from topicflow.io.output_paths import MODEL_LEFTOVERS, MODEL_MARKERS, prepare_output
    from topicflow.io.storage import require_local
    from topicflow.pipeline.cluster import connect

    require_local(grammar_name, what="grammar file", option="grammar fit --grammar")  # read by models/ as a file
    prepare_output(model_path, what="model", option="grammar fit --model", overwrite=overwrite,
                   markers=MODEL_MARKERS, leftovers=MODEL_LEFTOVERS)
    start = time.perf_counter()
    model = AdaptorGrammar(grammar_name, batch_size=batch_size, tau=tau, kappa=kappa, prune_every=prune_every,
                           truncation=_pairs(truncation, "--truncation") or None,
                           grammar_params=_pairs(params, "--param") or None, n_samples=samples, passes=passes,
                           shuffle=shuffle, table_labels=table_labels, bias=bias, seed=seed, n_partitions=partitions,
                           language=language, corpus_size=corpus_size, alphabet=alphabet, init=init,
                           optimize_hyper=optimize_hyper)
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        model.fit(corpus, client=client, progress=progress_reporter())
    save_model(model_location(model_path), model.to_saved_model(), overwrite=overwrite)
    state = model.state_
    sizes = ", ".join(f"{state.grammar.nonterminals[c]} {len(t):,}" for c, t in zip(state.grammar.adapted, state.tngs))
    seeded = "" if model.seed_log_likelihood_ is None else "seed pass + "
    click.echo(f"fitted {model_path} (version 1): {seeded}{state.minibatch:,} minibatches, "
               f"{model.n_inside_calls_:,} inside calls, TNGs {sizes or 'none'}, mean log p(x|G') of the last "
               f"minibatch {model.log_likelihood_[-1]:.3f} "
               f"({time.perf_counter() - start:.1f} s)")
    top = model.top_atoms(10)
    if top:
        click.echo("  top atoms: " + " ".join(y for y, _ in top))


@grammar.command("segment")
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.argument("input_path", metavar="INPUT", type=LOCATION)
@click.option("--out", type=LOCATION, required=True,
              help="Text file to write: the words of each sentence, separated by spaces, one line per sentence.")
@click.option("--samples", type=click.IntRange(min=1), default=None,
              help="Trees drawn per line (default: the model's).")
@click.option("--version", "version", type=click.IntRange(min=1), default=None,
              help="Model version to use (default: the current one).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@storage_options_option
@reports_errors
def segment(model_path: str | Path, input_path: Path, out: str | Path, samples: int | None, version: int | None,
            overwrite: bool) -> None:
    """Segment INPUT (UTF-8 text, one unsegmented sentence per line, blank lines skipped) into words.

    A line with whitespace inside is refused (give sentences with their spaces removed).
    """
    from topicflow.api.adaptor_grammar import AdaptorGrammar
    from topicflow.io._atomic import atomic_write_bytes
    from topicflow.io.output_paths import prepare_output
    from topicflow.io.sources.segmentation import read_unsegmented_lines
    from topicflow.io.storage import StoragePath, write_object

    location = prepare_output(out, what="segmentation", option="grammar segment --out", overwrite=overwrite,
                              kind="file")
    sentences = read_unsegmented_lines(input_path)
    model = AdaptorGrammar.load(model_location(model_path), version=version)
    written = []
    for number, sentence in enumerate(progress_reporter().track(sentences, total=len(sentences),
                                                                desc="segmenting", unit="sentence"), start=1):
        try:
            words = model.segment([sentence], n_samples=samples)[0]
        except InputError as exc:
            raise InputError(f"{input_path}, sentence {number} (the {number}th non-blank line): {exc}",
                             path=str(input_path)) from None
        written.append(" ".join(words))
    data = "".join(w + "\n" for w in written).encode("utf-8")
    if isinstance(location, StoragePath):
        write_object(str(location), data)
    else:
        atomic_write_bytes(Path(location), data)
    click.echo(f"segmented {len(sentences):,} sentences of {input_path} into {out}")


@grammar.command("topics")
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.option("--top", "top_n", type=click.IntRange(min=1), default=10, show_default=True, help="Words per topic.")
@click.option("--by", type=click.Choice(["stick", "count"]), default="stick", show_default=True,
              help="Rank by the expected stick weight E[pi] or by the running count f~.")
@click.option("--nonterminal", "nonterminals", multiple=True,
              help="Adapted nonterminal to list (repeatable; default: all, e.g. Topic1..TopicK).")
@click.option("--version", "version", type=click.IntRange(min=1), default=None,
              help="Model version to use (default: the current one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {nonterminal: [[word, weight], ...]}.")
@storage_options_option
@reports_errors
def topics(model_path: str | Path, top_n: int, by: str, nonterminals: tuple[str, ...], version: int | None,
           as_json: bool) -> None:
    """List each adapted nonterminal's top cached yields: the topics of an infvoc-lda grammar model."""
    import json

    from topicflow.api.adaptor_grammar import AdaptorGrammar

    model = AdaptorGrammar.load(model_location(model_path), version=version)
    names = list(nonterminals) or model.topic_names()
    found = cast("list[list[tuple[str, float]]]", model.topics(top_n, nonterminals=names, by=by, weights=True))
    if as_json:
        click.echo(json.dumps({name: [[w, v] for w, v in pairs] for name, pairs in zip(names, found)}))
        return
    for name, pairs in zip(names, found):
        click.echo(f"{name}: " + " ".join(w for w, _ in pairs))


COMMANDS = [grammar]
