"""``topicflow tree build | info`` end to end on a tiny polylingual store."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.trees import read_tree
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.pipeline.ingest.ingest import ingest_corpus

ROWS = [
    {"id": "a", "en": "The house and the home of the cat", "de": "Das Haus und das Heim der Katze"},
    {"id": "b", "en": "A dog in the house", "de": "Ein Hund im Haus"},
]


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tree_cli")
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    ingest_corpus([src], tmp / "s.zarr", fields=FieldSpec(lang_fields=(("en", "en"), ("de", "de"))),
                  tokenizer=TokenizerConfig(stop_words_name="none", stop_words=()))
    return tmp / "s.zarr"


def test_build_then_info_text_and_json(store: Path, tmp_path: Path) -> None:
    dictionary = tmp_path / "d.tsv"
    dictionary.write_text("Haus\thouse\nHaus\thome\nHeim\thome\nKatze\tcat\nNew York\tNew York\nHund\tunicorn\n",
                          encoding="utf-8")
    result = run("tree", "build", dictionary, "--store", store, "--out", tmp_path / "t", "--languages", "de,en",
                 "--merge", "transitive", "--root-beta", "0.02")
    assert result.exit_code == 0, result.output
    assert "pairs read     6" in result.output and "not one token        1" in result.output
    assert "out of vocabulary    1" in result.output and "both in vocabularies 4" in result.output
    assert "largest concept 4 words:" in result.output and "built in" in result.output
    tree, info = read_tree(tmp_path / "t")
    assert info.settings["merge"] == "transitive" and info.settings["root_beta"] == 0.02
    assert tree.n_nodes == 3 and info.coverage.largest_concept == 4
    text = run("tree", "info", tmp_path / "t")
    assert text.exit_code == 0 and "convention=per-leaf" in text.output and "2 concepts" in text.output
    payload = json.loads(run("tree", "info", tmp_path / "t", "--format", "json").output)
    assert payload["coverage"]["pairs_in_vocabulary"] == 4 and payload["languages"] == ["en", "de"]
    assert payload["settings"]["merge"] == "transitive" and payload["n_paths"] == tree.n_paths
    again = run("tree", "build", dictionary, "--store", store, "--out", tmp_path / "t", "--languages", "de,en")
    assert again.exit_code == 2 and "exists already" in again.stderr and "--overwrite" in again.stderr


def test_empty_dictionary_with_header_gives_the_flat_tree(store: Path, tmp_path: Path) -> None:
    dictionary = tmp_path / "d.tsv"
    dictionary.write_text("de\ten\n", encoding="utf-8")
    result = run("tree", "build", dictionary, "--store", store, "--out", tmp_path / "t", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["coverage"]["concepts"] == 0
    tree, info = read_tree(tmp_path / "t")
    flat = flat_tree(info.languages, info.n_terms, 0.01)
    assert tree.node_names == flat.node_names
    assert np.array_equal(tree.edge_prior, flat.edge_prior) and np.array_equal(tree.path_term, flat.path_term)


def test_bad_input_names_file_and_line(store: Path, tmp_path: Path) -> None:
    dictionary = tmp_path / "bad.tsv"
    dictionary.write_text("Haus\thouse\n\nKatze\n", encoding="utf-8")
    result = run("tree", "build", dictionary, "--store", store, "--out", tmp_path / "t", "--languages", "de,en")
    assert result.exit_code == 2
    assert "topicflow: error: dictionary" in result.stderr and "bad.tsv', line 3: expected two tab-separated" in result.stderr
    result = run("tree", "build", dictionary, "--store", store, "--out", tmp_path / "t", "--languages", "fr,en")
    assert result.exit_code == 2 and "has no language 'fr'" in result.stderr
    result = run("tree", "info", tmp_path / "missing")
    assert result.exit_code == 2 and "no prior tree at" in result.stderr
    assert not (tmp_path / "t").exists()
