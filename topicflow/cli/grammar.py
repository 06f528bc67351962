"""``topicflow grammar fit | segment``: online adaptor grammars (Zhai 2014, ch. 8).

This module only parses options and prints; the work is done by :class:`topicflow.api.adaptor_grammar.AdaptorGrammar`.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from topicflow.cli._common import reports_errors
from topicflow.errors import InputError


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
    """Adaptor grammars with online hybrid inference: fit on a store, segment text."""


@grammar.command("fit")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--grammar", "grammar_name", default="unigram", show_default=True,
              help="unigram, collocation, infvoc-lda or a grammar file.")
@click.option("--model", "model_path", type=click.Path(path_type=Path), required=True, help="Model directory to write.")
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
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="E-step tasks per minibatch.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed.")
@click.option("--language", default=None, help="Language of a multilingual store.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model.")
@reports_errors
def fit(store: Path, grammar_name: str, model_path: Path, batch_size: int, tau: float, kappa: float,
        prune_every: int, truncation: tuple[str, ...], params: tuple[str, ...], samples: int, passes: int,
        shuffle: bool, table_labels: bool, bias: str,
        partitions: int, seed: int, language: str | None, overwrite: bool) -> None:
    """Fit an adaptor grammar to STORE (ingested with --keep-order; each document's tokens joined)."""
    from topicflow.api.adaptor_grammar import AdaptorGrammar

    if model_path.exists() and not overwrite:
        raise click.BadParameter(f"{model_path} exists; pass --overwrite to replace it", param_hint="--model")
    start = time.perf_counter()
    model = AdaptorGrammar(grammar_name, batch_size=batch_size, tau=tau, kappa=kappa, prune_every=prune_every,
                           truncation=_pairs(truncation, "--truncation") or None,
                           grammar_params=_pairs(params, "--param") or None, n_samples=samples, passes=passes,
                           shuffle=shuffle, table_labels=table_labels, bias=bias, seed=seed, n_partitions=partitions,
                           language=language)
    model.fit(store)
    model.save(model_path, overwrite=overwrite)
    state = model.state_
    sizes = ", ".join(f"{state.grammar.nonterminals[c]} {len(t):,}" for c, t in zip(state.grammar.adapted, state.tngs))
    click.echo(f"fitted {model_path}: {state.minibatch:,} minibatches, {model.n_inside_calls_:,} inside calls, "
               f"TNGs {sizes or 'none'}, mean log p(x|G') of the last minibatch {model.log_likelihood_[-1]:.3f} "
               f"({time.perf_counter() - start:.1f} s)")
    top = model.top_atoms(10)
    if top:
        click.echo("  top atoms: " + " ".join(y for y, _ in top))


@grammar.command("segment")
@click.argument("model_path", type=click.Path(path_type=Path))
@click.argument("input_path", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Text file to write (one line per line).")
@click.option("--samples", type=click.IntRange(min=1), default=None,
              help="Trees drawn per line (default: the model's).")
@reports_errors
def segment(model_path: Path, input_path: Path, out: Path, samples: int | None) -> None:
    """Segment INPUT (UTF-8 text, one sentence per line; whitespace is a hard boundary) into words."""
    from topicflow.api.adaptor_grammar import AdaptorGrammar

    model = AdaptorGrammar.load(model_path)
    try:
        lines = input_path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"input file {input_path} not found", path=str(input_path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{input_path} is not UTF-8 text ({exc})", path=str(input_path)) from None
    written = []
    for number, line in enumerate(lines, start=1):
        words: list[str] = []
        for chunk in line.split():
            try:
                words.extend(model.segment([chunk], n_samples=samples)[0])
            except InputError as exc:
                raise InputError(f"{input_path} line {number}: {exc}", path=str(input_path), line=number) from None
        written.append(" ".join(words))
    out.write_text("".join(w + "\n" for w in written), encoding="utf-8")
    click.echo(f"segmented {len(lines):,} lines of {input_path} into {out}")


COMMANDS = [grammar]
