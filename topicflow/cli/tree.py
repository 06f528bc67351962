"""``topicflow tree build | info``: prior trees for tLDA / ptLDA from dictionaries and hierarchies.

This module only parses options and prints; the work is done by :mod:`topicflow.io.trees`.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from topicflow.cli._common import (
    LOCATION,
    echo_info,
    reports_errors,
    storage_options_option,
)
from topicflow.io.trees import (
    SOURCE_FORMATS,
    TreeInfo,
    build_and_write_tree,
    read_tree_info,
)
from topicflow.models.tree_lda.build import (
    CONVENTIONS,
    DEFAULT_CONCEPT_BETA,
    DEFAULT_ROOT_BETA,
    MERGES,
)


def _languages(value: str | None) -> list[str] | None:
    if value is None:
        return None
    langs = [part.strip() for part in value.split(",") if part.strip()]
    if not langs:
        raise click.BadParameter("give languages as LANG1,LANG2", param_hint="--languages")
    return langs


def _info_lines(info: TreeInfo) -> list[str]:
    cov = info.coverage
    s = info.settings
    lines = [
        f"prior tree {info.path} (format {info.format_version})",
        f"  languages      {', '.join(f'{lang} ({n:,} terms)' for lang, n in zip(info.languages, info.n_terms))}",
        f"  built from     {s.get('source', '?')} ({s.get('source_format', '?')}) over store {info.store}",
        (f"  settings       merge={s.get('merge')} convention={s.get('convention')} root_beta={s.get('root_beta')} "
        f"concept_beta={s.get('concept_beta')}"),
        (f"  tree           {info.n_nodes:,} nodes ({cov.concepts:,} concepts), {info.n_edges:,} edges, "
        f"{info.n_paths:,} paths"),
        f"  pairs read     {cov.pairs_read:,}",
        f"    not one token        {cov.pairs_not_single_token:,}",
        f"    out of vocabulary    {cov.pairs_out_of_vocabulary:,}",
        f"    both in vocabularies {cov.pairs_in_vocabulary:,} ({cov.pairs_used:,} distinct links used)",
        (f"  words in concepts {cov.words_in_concepts:,} "
        f"({', '.join(f'{k} {v:,}' for k, v in cov.words_per_language.items())}); on >1 path {cov.words_multi_path:,}"),
        f"  largest concept {cov.largest_concept:,} words: {' '.join(cov.largest_concept_words[:10])}"
        + (" ..." if cov.largest_concept > 10 else ""),
    ]
    return lines


@click.group("tree")
def tree() -> None:
    """Prior trees for tree LDA (tLDA / ptLDA): build from a dictionary, inspect."""


@tree.command("build")
@click.argument("dictionary", type=LOCATION)
@click.option("--store", type=LOCATION, required=True,
              help="Corpus store whose vocabularies the tree covers.")
@click.option("--out", type=LOCATION, required=True, help="Tree directory to create (a path or a URL).")
@click.option("--languages", default=None, metavar="LANG1,LANG2",
              help="tsv: the two columns' languages (else the first line must name them); json: the tree's languages.")
@click.option("--merge", type=click.Choice(list(MERGES)), default="pairs", show_default=True,
              help="One concept per pair, or one per connected component of the pairs (tree-TM mergeML).")
@click.option("--convention", type=click.Choice(list(CONVENTIONS)), default="per-leaf", show_default=True,
              help="Edge priors: per-leaf (a flat tree is LDA with beta=root-beta) or tree-tm (node totals).")
@click.option("--root-beta", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_ROOT_BETA,
              show_default=True, help="per-leaf: prior per leaf under the root; tree-tm: the root's total mass.")
@click.option("--concept-beta", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_CONCEPT_BETA,
              show_default=True, help="Total prior mass of each concept's child edges.")
@click.option("--format", "source_format", type=click.Choice(list(SOURCE_FORMATS)), default="tsv",
              show_default=True, help="DICTIONARY is a tab-separated pair list or a JSON hierarchy.")
@click.option("--overwrite", is_flag=True, help="Replace an existing tree once the new one is complete.")
@click.option("--json", "as_json", is_flag=True, help="Print the tree's info as JSON.")
@storage_options_option
@reports_errors
def build(dictionary: Path, store: Path, out: Path, languages: str | None, merge: str, convention: str,
          root_beta: float, concept_beta: float, source_format: str, overwrite: bool, as_json: bool) -> None:
    """Build a prior tree from DICTIONARY over the vocabularies of --store, and print its coverage.

    Dictionary words are normalized with the store's tokenizer; pairs whose words are not single
    tokens, or not in the vocabularies, are skipped and counted.
    """
    start = time.perf_counter()
    _, info = build_and_write_tree(dictionary, store, out, languages=_languages(languages),
                                   source_format=source_format, merge=merge, convention=convention,
                                   root_beta=root_beta, concept_beta=concept_beta, overwrite=overwrite)
    echo_info(info, _info_lines, as_json=as_json, seconds=time.perf_counter() - start)


@tree.command("info")
@click.argument("path", type=LOCATION)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Human-readable text or JSON.")
@storage_options_option
@reports_errors
def info(path: Path, output_format: str) -> None:
    """Describe the prior tree at PATH: languages, settings, size and coverage."""
    echo_info(read_tree_info(path), _info_lines, as_json=output_format == "json")


COMMANDS = [tree]
