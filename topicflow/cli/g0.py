"""``topicflow g0 train | info | score``: the base distribution G0 over strings of infinite-vocabulary LDA.

This module only parses options and prints; the work is done by :mod:`topicflow.io.g0` and
:mod:`topicflow.models.infvoc_lda.g0`.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import click

from topicflow.cli._common import (
    LOCATION,
    echo_info,
    reports_errors,
    storage_options_option,
)
from topicflow.io.g0 import G0Info, read_g0, read_g0_info, train_g0_from_file, write_g0
from topicflow.models.infvoc_lda.g0 import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_MIN_LENGTH,
    DEFAULT_ORDER,
    DEFAULT_SMOOTHING,
    LENGTH_FITS,
    log_g0,
)

#: Lengths shown in the zeta table of ``train`` and ``info``.
ZETA_ROWS = 8


def _info_lines(info: G0Info) -> list[str]:
    s, cov = info.settings, info.coverage
    zeta = [(length, z) for length, z in enumerate(info.zeta) if z > 0]
    head = sorted(zeta, key=lambda item: -item[1])[:ZETA_ROWS]
    return [
        f"G0 {info.path} (format {info.format_version})",
        (f"  settings      order={s.get('order')} smoothing={s.get('smoothing')} lengths {s.get('min_length')}.."
         f"{s.get('max_length')} lowercase={s.get('lowercase')} length_fit={s.get('length_fit')}"),
        f"  charset       {len(info.charset)} characters: {info.charset}  (+1 unknown-character bin)",
        f"  trained from  {cov.source}",
        f"  lines         {cov.lines:,} ({cov.skipped_lines:,} blank or comment)",
        (f"  words read    {cov.words_read:,}: kept {cov.kept:,}, dropped {cov.too_short:,} shorter than "
         f"{s.get('min_length')} and {cov.too_long:,} longer than {s.get('max_length')}"),
        "  zeta (largest) " + "  ".join(f"l={length}: {z:.4f}" for length, z in head),
        f"  zeta > 0 on lengths {zeta[0][0]}..{zeta[-1][0]}" if zeta else "  zeta is empty",
    ]


@click.group("g0")
def g0() -> None:
    """The base distribution G0 over strings (infinite-vocabulary LDA): train, inspect, score."""


@g0.command("train")
@click.argument("words", type=LOCATION)
@click.option("--out", type=LOCATION, required=True, help="G0 directory to create (a path or a URL).")
@click.option("--order", type=click.IntRange(min=1), default=DEFAULT_ORDER, show_default=True,
              help="n of the character n-gram.")
@click.option("--smoothing", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_SMOOTHING,
              show_default=True, help="Lidstone pseudo-count per character and context (the reference code: 1e6).")
@click.option("--min-length", type=click.IntRange(min=1), default=DEFAULT_MIN_LENGTH, show_default=True,
              help="Shorter words are dropped from training and get G0 = 0.")
@click.option("--max-length", type=click.IntRange(min=1), default=DEFAULT_MAX_LENGTH, show_default=True,
              help="Longer words are dropped from training and get G0 = 0.")
@click.option("--length-fit", type=click.Choice(list(LENGTH_FITS)), default="empirical", show_default=True,
              help="zeta as the word list's length shares, or the chapter's least squares.")
@click.option("--no-lowercase", is_flag=True, help="Keep case (default: lowercase words for training and scoring).")
@click.option("--overwrite", is_flag=True, help="Replace an existing G0 once the new one is complete.")
@click.option("--json", "as_json", is_flag=True, help="Print the G0's info as JSON.")
@storage_options_option
@reports_errors
def train(words: Path, out: Path, order: int, smoothing: float, min_length: int, max_length: int, length_fit: str,
          no_lowercase: bool, overwrite: bool, as_json: bool) -> None:
    """Train G0 on WORDS (one word per line; blank and '#' lines skipped) and save it to --out."""
    if max_length < min_length:
        raise click.BadParameter(f"must be >= --min-length ({min_length})", param_hint="--max-length")
    from topicflow.io.g0 import HEADER_FILE
    from topicflow.io.output_paths import prepare_output

    # Checked before training (the rule of every output: docs/storage.md); write_g0 checks it again.
    prepare_output(out, what="G0", option="g0 train --out", overwrite=overwrite, markers=(HEADER_FILE,))
    start = time.perf_counter()
    model, coverage = train_g0_from_file(words, order=order, smoothing=smoothing, min_length=min_length,
                                         max_length=max_length, lowercase=not no_lowercase,
                                         length_fit=length_fit)  # type: ignore[arg-type]
    info = write_g0(out, model, coverage=coverage, overwrite=overwrite)
    echo_info(info, _info_lines, as_json=as_json, seconds=time.perf_counter() - start, done="trained")


@g0.command("info")
@click.argument("path", type=LOCATION)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Human-readable text or JSON.")
@storage_options_option
@reports_errors
def info(path: Path, output_format: str) -> None:
    """Describe the G0 at PATH: settings, charset, training coverage and zeta."""
    echo_info(read_g0_info(path), _info_lines, as_json=output_format == "json")


@g0.command("score")
@click.argument("path", type=LOCATION)
@click.argument("words", nargs=-1, required=True)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="A table or JSON.")
@storage_options_option
@reports_errors
def score(path: Path, words: tuple[str, ...], output_format: str) -> None:
    """Print log G0 of each WORD under the G0 at PATH (natural log and log10; -inf outside the length bounds)."""
    model, _ = read_g0(path)
    values = log_g0(model, list(words))
    if output_format == "json":
        rows = [{"word": w, "log_g0": float(v) if math.isfinite(v) else None} for w, v in zip(words, values)]
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(w) for w in words)
    click.echo(f"{'word':<{width}}  {'length':>6}  {'log G0':>10}  {'log10 G0':>9}")
    for word, value in zip(words, values):
        length = len(word.lower() if model.lowercase else word)
        click.echo(f"{word:<{width}}  {length:>6}  {value:>10.3f}  {value / math.log(10):>9.3f}")


COMMANDS = [g0]
