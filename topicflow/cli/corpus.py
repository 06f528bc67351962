"""``topicflow ingest | append | info``: create, grow and describe corpus stores.

This module only parses options, connects to Dask and prints summaries; the work is done by
:mod:`topicflow.pipeline.ingest.ingest`. Option names map 1:1 to :class:`FieldSpec`, :class:`TokenizerConfig`,
:class:`PruneConfig` fields and ``topicflow.*`` config keys.
"""
from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from topicflow._typing import OnError, OutputFormat, choices
from topicflow.cli._common import (
    LOCATION,
    cluster_options,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.io.corpus.reader import read_manifest
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import (
    DEFAULT_TOKEN_PATTERN,
    PruneConfig,
    TokenizerConfig,
)
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.ingest.ingest import ingest_corpus

F = TypeVar("F", bound=Callable[..., Any])


def _parse_lang_fields(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        lang, sep, name = value.partition("=")
        if not sep or not lang or not name:
            raise click.BadParameter(f"{value!r} is not LANG=FIELD (e.g. en=text_en).", param_hint="--lang-field")
        pairs.append((lang, name))
    return tuple(pairs)


def field_options(func: F) -> F:
    """Add the options naming the input fields; the command receives them as ``fields=FieldSpec``."""

    @click.option("--id-field", default="id", show_default=True,
                  help="Field with the document id (else <file>:<line>, or the file path for text dirs).")
    @click.option("--text-field", default="text", show_default=True, help="Field with the text.")
    @click.option("--lang-field", "lang_fields", multiple=True, metavar="LANG=FIELD",
                  help="Multilingual: text field of one language (repeat per language).")
    @click.option("--label-field", default=None, help="Field with the document label.")
    @click.option("--timestamp-field", default=None,
                  help="Field with the time (ISO-8601 or epoch seconds), stored as UTC epoch seconds.")
    @click.option("--label-from-dir", is_flag=True, help="Text directories: label = parent folder name.")
    @functools.wraps(func)
    def wrapper(*args: Any, id_field: str, text_field: str, lang_fields: tuple[str, ...],
                label_field: str | None, timestamp_field: str | None, label_from_dir: bool,
                **kwargs: Any) -> Any:
        kwargs["fields"] = FieldSpec(
            id_field=id_field or None, text_field=text_field, lang_fields=_parse_lang_fields(lang_fields),
            label_field=label_field, timestamp_field=timestamp_field, label_from_dir=label_from_dir,
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def tokenizer_options(*, stored_defaults: bool) -> Callable[[F], F]:
    """Tokenizer options; with ``stored_defaults`` they default to None (use the store's settings)."""

    def default(value: Any) -> Any:
        return None if stored_defaults else value

    def decorate(func: F) -> F:
        @click.option("--lowercase/--no-lowercase", default=default(True), show_default=not stored_defaults,
                      help="Lowercase text before tokenizing.")
        @click.option("--token-pattern", default=default(DEFAULT_TOKEN_PATTERN),
                      show_default=not stored_defaults, help="Regular expression matching one token.")
        @click.option("--min-length", type=click.IntRange(min=1), default=default(2),
                      show_default=not stored_defaults, help="Drop tokens shorter than this.")
        @click.option("--stop-words", default=default("english"), show_default=not stored_defaults,
                      metavar="LIST|LANG=LIST,...", help="Stop words: a built-in list (english, german), none, "
                      "a file with one word per line, or several joined by '+' (english+german); or a list "
                      "per language of the store (en=english,de=german; a language not named gets none).")
        @functools.wraps(func)
        def wrapper(*args: Any, lowercase: bool | None, token_pattern: str | None, min_length: int | None,
                    stop_words: str | None, **kwargs: Any) -> Any:
            kwargs["tokenizer_options"] = {
                name: value for name, value in (("lowercase", lowercase), ("token_pattern", token_pattern),
                                                ("min_length", min_length), ("stop_words", stop_words))
                if value is not None
            }
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def _echo_summary(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=LOCATION)
@click.option("--out", required=True, type=LOCATION, help="Store to create (a path, or a URL: docs/storage.md).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store once the new one is complete.")
@field_options
@tokenizer_options(stored_defaults=False)
@click.option("--min-df", type=click.IntRange(min=1), default=1, show_default=True,
              help="Keep terms found in at least this many documents.")
@click.option("--max-df-fraction", type=click.FloatRange(0, 1, min_open=True), default=1.0,
              show_default=True, help="Keep terms found in at most this fraction of documents.")
@click.option("--max-vocab", type=click.IntRange(min=1), default=None,
              help="Keep at most this many terms per language (most frequent first).")
@click.option("--shard-size", type=click.IntRange(min=1), default=None,
              help="Documents per partition and shard (config topicflow.shard-size).")
@click.option("--split-every", type=click.IntRange(min=2), default=None,
              help="Fan-in of the count reduction tree (config topicflow.split-every).")
@click.option("--on-error", type=click.Choice(choices(OnError)), default="raise", show_default=True,
              help="Stop at the first bad record, or skip bad records and report how many.")
@click.option("--keep-order", is_flag=True,
              help="Also keep each document's tokens in reading order (out-of-vocabulary ones as strings), "
              "for sliding-window coherence and first-half completion; writes store format 3.")
@storage_options_option
@cluster_options
@reports_errors
def ingest(inputs: tuple[Path, ...], out: Path, overwrite: bool, fields: FieldSpec,
           tokenizer_options: dict[str, Any], min_df: int, max_df_fraction: float, max_vocab: int | None,
           shard_size: int | None, split_every: int | None, on_error: str, keep_order: bool,
           cluster: ClusterConfig) -> None:
    """Build a corpus store from text directories, JSON Lines and parquet files.

    Each directory holds one document per file; JSONL files hold one JSON object per line; parquet
    files one document per row. With --keep-order the store also holds every document's tokens in
    order (later appends keep it).
    """
    from topicflow.io.output_paths import STORE_LEFTOVERS, STORE_MARKERS, prepare_output

    tokenizer = TokenizerConfig.from_options(**tokenizer_options)
    tokenizer.check_languages(fields.languages)  # before anything is written or started
    prepare_output(out, what="store", option="ingest --out", overwrite=overwrite, markers=STORE_MARKERS,
                   leftovers=STORE_LEFTOVERS)
    prune = PruneConfig(min_df=min_df, max_df_fraction=max_df_fraction, max_vocab=max_vocab)
    with connect(cluster) as client:
        result = ingest_corpus(inputs, out, fields=fields, tokenizer=tokenizer, prune=prune,
                               shard_size=shard_size, split_every=split_every, on_error=on_error,  # type: ignore[arg-type]
                               overwrite=overwrite, keep_order=keep_order, client=client, progress=progress_reporter())
    _echo_summary(result.summary_lines())


def _tokenizer_to_check(store: Path, options: dict[str, Any]) -> TokenizerConfig | None:
    """The store's tokenizer with the given options applied (None when no option was given)."""
    if not options:
        return None
    stored = TokenizerConfig.from_dict(read_manifest(store).tokenizer)
    changes = {k: v for k, v in options.items() if k != "stop_words"}
    if "stop_words" in options:
        changes.update(TokenizerConfig.stop_word_fields(options["stop_words"]))
    return replace(stored, **changes)


@click.command()
@click.argument("store", type=LOCATION)
@click.argument("inputs", nargs=-1, required=True, type=LOCATION)
@field_options
@tokenizer_options(stored_defaults=True)
@click.option("--split-every", type=click.IntRange(min=2), default=None,
              help="Fan-in of the count reduction tree (config topicflow.split-every).")
@click.option("--on-error", type=click.Choice(choices(OnError)), default="raise", show_default=True,
              help="Stop at the first bad record or id collision, or skip them and report how many.")
@click.option("--promote-min-df", type=click.IntRange(min=1), default=None, metavar="N",
              help="Add candidate terms found in at least N documents (over all appends) to the end of "
              "the vocabulary, as a new vocabulary version; existing term ids never change.")
@storage_options_option
@cluster_options
@reports_errors
def append(store: Path, inputs: tuple[Path, ...], fields: FieldSpec, tokenizer_options: dict[str, Any],
           split_every: int | None, on_error: str, promote_min_df: int | None, cluster: ClusterConfig) -> None:
    """Add documents to STORE, encoded with its vocabulary and tokenizer.

    Out-of-vocabulary terms are kept as candidate terms with their frequencies; with
    --promote-min-df the frequent ones join the vocabulary (at its end, so fitted models stay
    valid). Tokenizer options are only checked against the store's: leave them out. A store that
    keeps token order (ingest --keep-order) keeps it for the new documents.
    """
    # Here, not at import: append loads the models' vocabulary growth (numba), which ingest never needs.
    from topicflow.pipeline.ingest.append import append_corpus

    tokenizer = _tokenizer_to_check(store, tokenizer_options)
    with connect(cluster) as client:
        result = append_corpus(store, inputs, fields=fields, tokenizer=tokenizer, split_every=split_every,
                               on_error=on_error, promote_min_df=promote_min_df,  # type: ignore[arg-type]
                               client=client, progress=progress_reporter())
    _echo_summary(result.summary_lines())


def _format_info(info: dict[str, Any]) -> list[str]:
    def per_lang(values: dict[str, int]) -> str:
        return ", ".join(f"{lang}: {n:,}" for lang, n in values.items())

    labels = info["labels"]
    label_text = (f"{len(labels)} distinct ({', '.join(f'{k}: {v}' for k, v in list(labels.items())[:10])}"
                  f"{', ...' if len(labels) > 10 else ''})" if info["has_labels"] else "none")
    tok = info["tokenizer"]
    stop_words = f"{tok.get('stop_words_name')} ({tok.get('stop_words')} words)"
    if tok.get("language_stop_words"):  # per language; the list above serves the languages not named
        stop_words = ", ".join([*(f"{lang}={entry['name']} ({entry['stop_words']} words)"
                                  for lang, entry in tok["language_stop_words"].items()), f"others={stop_words}"])
    return [
        f"store           {info['path']}",
        f"format version  {info['format_version']}",
        f"documents       {info['n_docs']:,}",
        f"tokens          {per_lang(info['n_tokens'])}",
        f"languages       {', '.join(info['languages'])}",
        f"vocabulary      {per_lang(info['vocab_sizes'])} (version {info['vocab_version']})",
        f"shards          {info['n_shards']} (shard size {info['shard_size']})",
        f"labels          {label_text}",
        f"timestamps      {'yes' if info['has_timestamps'] else 'no'}",
        f"token order     {'kept' if info['has_order'] else 'not kept (ingest --keep-order keeps it)'}",
        f"candidates      {info['candidates'] or 'none'} ({per_lang(info['n_candidates'])} terms)",
        f"tokenizer       lowercase={tok.get('lowercase')} pattern={tok.get('token_pattern')!r} "
        f"min_length={tok.get('min_length')} stop_words={stop_words}",
        f"appends         {info['n_appends']}",
    ]


@click.command()
@click.argument("store", type=LOCATION)
@click.option("--format", "output_format", type=click.Choice(choices(OutputFormat)), default="text",
              show_default=True, help="Human-readable text or JSON.")
@storage_options_option
@reports_errors
def info(store: Path, output_format: str) -> None:
    """Describe STORE: documents, tokens, languages, vocabularies, shards, labels, token order, candidates."""
    from topicflow.pipeline.ingest.describe import describe_store

    summary = describe_store(store)
    if output_format == "json":
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        _echo_summary(_format_info(summary))


COMMANDS = [ingest, append, info]
