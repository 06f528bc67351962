"""Prior-tree files: dictionaries read over a real (tiny) store, the saved format, damage and mismatch."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from topicflow import Corpus
from topicflow.errors import (
    CorpusFormatError,
    FormatVersionError,
    InputError,
    InvalidParameterError,
    StoreExistsError,
    StoreNotFoundError,
    VocabularyMismatchError,
)
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.trees import (
    ARRAYS_FILE,
    HEADER_FILE,
    build_and_write_tree,
    build_tree_for_store,
    check_tree_matches,
    read_dictionary,
    read_tree,
    read_tree_info,
    store_vocab_checksums,
    vocabulary_checksum,
    write_tree,
)
from topicflow.models.tree_lda.build import build_tree_from_pairs
from topicflow.pipeline.ingest.ingest import ingest_corpus

ROWS = [
    {"id": "a", "en": "The house and the home of the cat", "de": "Das Haus und das Heim der Katze"},
    {"id": "b", "en": "A dog in the house", "de": "Ein Hund im Haus"},
    {"id": "c", "en": "New York system", "de": "System"},
]
ARRAYS = ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language", "path_term")


def make_store(tmp: Path, rows: list[dict[str, str]] = ROWS, name: str = "s.zarr", shard_size: int | None = None,
               client: object = None) -> Path:
    src = tmp / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    ingest_corpus([src], tmp / name, fields=FieldSpec(lang_fields=(("en", "en"), ("de", "de"))),
                  tokenizer=TokenizerConfig(stop_words_name="english", stop_words=("the", "and", "of", "in", "a")),
                  shard_size=shard_size, client=client)
    return tmp / name


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("trees"))


def write_dict(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_build_for_store_normalizes_like_the_store(store: Path, tmp_path: Path) -> None:
    dictionary = write_dict(tmp_path / "d.tsv", "de\ten\n# comment\n\nHaus\tHOUSE\nHeim\thome\nHaus\thome\n"
                                                "Katze\tcat\nHund\tdog\nSystem\tsystem\nNeu York\tNew York\n"
                                                "das\tthe\nEinhorn\tunicorn\n")
    tree, cov, settings = build_tree_for_store(dictionary, store)
    corpus = Corpus.open(store)
    assert tree.languages == corpus.languages == ("en", "de")
    assert tree.n_terms == (len(corpus.vocabulary("en")), len(corpus.vocabulary("de")))
    assert cov.pairs_read == 9 and cov.pairs_in_vocabulary == 6
    # "Neu York"/"New York" are two tokens; "the" is a stop word of the store (no token): both skipped.
    assert cov.pairs_not_single_token == 2 and cov.pairs_out_of_vocabulary == 1
    assert cov.concepts == 6 and cov.words_multi_path == 2  # haus and home have two senses
    de = corpus.vocabulary("de")
    assert len(tree.word_paths("de", de.id_of("haus"))) == 2 and len(tree.word_paths("de", de.id_of("das"))) == 1
    assert "en:system|de:system" in tree.node_names  # P3: one leaf per language
    assert settings["merge"] == "pairs" and settings["convention"] == "per-leaf"
    # The same tree from the pure builder on the normalized pairs.
    pairs = [(("de", d), ("en", e)) for d, e in [("haus", "house"), ("heim", "home"), ("haus", "home"),
                                                   ("katze", "cat"), ("hund", "dog"), ("system", "system")]]
    vocabs = {lang: corpus.vocabulary(lang).terms.tolist() for lang in ("en", "de")}
    direct, _ = build_tree_from_pairs(pairs, ["en", "de"], vocabs)
    for name in ARRAYS:
        assert np.array_equal(getattr(tree, name), getattr(direct, name))


def test_round_trip_is_bit_for_bit(store: Path, tmp_path: Path) -> None:
    dictionary = write_dict(tmp_path / "d.tsv", "Haus\thouse\nHaus\thome\nKatze\tcat\n")
    tree, info = build_and_write_tree(dictionary, store, tmp_path / "t1", languages=["de", "en"],
                                      merge="transitive", convention="tree-tm", concept_beta=50.0)
    back, back_info = read_tree(tmp_path / "t1")
    assert back.node_names == tree.node_names and back.languages == tree.languages and back.n_terms == tree.n_terms
    for name in ARRAYS:
        a, b = getattr(tree, name), getattr(back, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    assert back_info == info == read_tree_info(tmp_path / "t1")
    assert info.settings["merge"] == "transitive" and info.settings["concept_beta"] == 50.0
    assert info.coverage.largest_concept == 3 and info.vocab_checksums == store_vocab_checksums(Corpus.open(store))
    write_tree(tmp_path / "t2", back, vocab_checksums=info.vocab_checksums, store=info.store, settings=info.settings,
               coverage=info.coverage)
    for name in (HEADER_FILE, ARRAYS_FILE):
        assert (tmp_path / "t1" / name).read_bytes() == (tmp_path / "t2" / name).read_bytes()
    with np.load(tmp_path / "t1" / ARRAYS_FILE, allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(ARRAYS)


def test_existing_tree_is_kept_unless_overwrite(store: Path, tmp_path: Path) -> None:
    dictionary = write_dict(tmp_path / "d.tsv", "Haus\thouse\n")
    build_and_write_tree(dictionary, store, tmp_path / "t", languages=["de", "en"])
    with pytest.raises(StoreExistsError, match=r"prior tree .* \(tree build --out\) exists already"):
        build_and_write_tree(dictionary, store, tmp_path / "t", languages=["de", "en"])
    _, info = build_and_write_tree(dictionary, store, tmp_path / "t", languages=["de", "en"], root_beta=0.5,
                                   overwrite=True)
    assert read_tree_info(tmp_path / "t").settings["root_beta"] == 0.5 == info.settings["root_beta"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _saved(store: Path, tmp_path: Path) -> Path:
    dictionary = write_dict(tmp_path / "d.tsv", "Haus\thouse\nKatze\tcat\n")
    build_and_write_tree(dictionary, store, tmp_path / "t", languages=["de", "en"])
    return tmp_path / "t"


def test_damaged_arrays_are_refused_naming_the_tree(store: Path, tmp_path: Path) -> None:
    tree_dir = _saved(store, tmp_path)
    arrays = tree_dir / ARRAYS_FILE
    data = bytearray(arrays.read_bytes())
    with np.load(arrays, allow_pickle=False) as archive:
        saved = {name: archive[name] for name in archive.files}
    # A consistent archive with other values (a stale or hand-edited file): the header's checksum differs.
    changed = dict(saved, edge_prior=saved["edge_prior"] * 2)
    np.savez(arrays, **changed)
    with pytest.raises(CorpusFormatError, match=r"prior tree .*/t' is damaged: array edge_prior .*checksum"
                                                r".*topicflow tree build"):
        read_tree(tree_dir)
    np.savez(arrays, **dict(saved, path_term=saved["path_term"].astype(np.int32)))
    with pytest.raises(CorpusFormatError, match=r"array path_term in arrays.npz is int32"):
        read_tree(tree_dir)
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF  # inside an array's bytes: the zip's CRC fails
    arrays.write_bytes(bytes(flipped))
    with pytest.raises(CorpusFormatError, match=r"/t' is damaged: arrays.npz cannot be read"):
        read_tree(tree_dir)
    arrays.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CorpusFormatError, match="is damaged: arrays.npz cannot be read"):
        read_tree(tree_dir)
    arrays.unlink()
    with pytest.raises(CorpusFormatError, match="arrays.npz is missing"):
        read_tree(tree_dir)


def test_damaged_or_foreign_headers_are_refused(store: Path, tmp_path: Path) -> None:
    tree_dir = _saved(store, tmp_path)
    header_path = tree_dir / HEADER_FILE
    header = json.loads(header_path.read_text())
    # A structurally invalid tree whose checksums were "fixed" still fails validation.
    header["n_terms"][0] += 1
    header_path.write_text(json.dumps(header))
    with pytest.raises(CorpusFormatError, match="is damaged: invalid prior tree: language 'en': 1 terms have no path"):
        read_tree(tree_dir)
    header["format_version"] = 99
    header_path.write_text(json.dumps(header))
    with pytest.raises(FormatVersionError, match="format version 99"):
        read_tree_info(tree_dir)
    header_path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CorpusFormatError, match="is not a prior tree .format"):
        read_tree(tree_dir)
    header_path.write_text("{not json")
    with pytest.raises(CorpusFormatError, match="tree.json is not valid JSON"):
        read_tree(tree_dir)
    header_path.unlink()
    with pytest.raises(CorpusFormatError, match="is not a prior tree \\(no tree.json\\)"):
        read_tree(tree_dir)
    with pytest.raises(StoreNotFoundError, match="no prior tree at"):
        read_tree(tmp_path / "nothing")


def test_check_tree_matches_refuses_another_store(store: Path, tmp_path: Path) -> None:
    tree_dir = _saved(store, tmp_path)
    info = read_tree_info(tree_dir)
    check_tree_matches(info, store)
    check_tree_matches(info, Corpus.open(store), languages=["de"])
    other = make_store(tmp_path, ROWS[:2], name="other.zarr")
    with pytest.raises(VocabularyMismatchError, match=r"built for another 'en' vocabulary.*topicflow tree build"):
        check_tree_matches(info, other)
    de_only = build_and_write_tree(write_dict(tmp_path / "syn.tsv", "de\tde\nHaus\tHeim\n"), store, tmp_path / "de")[1]
    assert de_only.languages == ("de",) and de_only.coverage.concepts == 1
    with pytest.raises(VocabularyMismatchError, match=r"has languages \['de'\], not 'en'"):
        check_tree_matches(de_only, store)
    check_tree_matches(de_only, store, languages=["de"])
    assert vocabulary_checksum(["a", "b"]) != vocabulary_checksum(["ab"])


def test_bad_dictionaries_name_file_and_line(store: Path, tmp_path: Path) -> None:
    one_column = write_dict(tmp_path / "one.tsv", "Haus\thouse\nKatze\n")
    with pytest.raises(InputError, match=r"one.tsv', line 2: expected two tab-separated words") as caught:
        read_dictionary(one_column, languages=["de", "en"])
    assert caught.value.line == 2
    no_header = write_dict(tmp_path / "nohead.tsv", "Haus\thouse\n")
    with pytest.raises(InputError, match=r"line 1: without --languages .*first line must name"):
        build_tree_for_store(no_header, store)
    bad_utf8 = tmp_path / "latin1.tsv"
    bad_utf8.write_bytes("de\ten\nHaus\thouse\nM\u00e4dchen\tgirl\n".encode("latin-1"))
    with pytest.raises(InputError, match="line 3: not valid UTF-8"):
        read_dictionary(bad_utf8)
    with pytest.raises(InvalidParameterError, match="has no language 'fr'"):
        build_tree_for_store(no_header, store, languages=["fr", "en"])
    header_fr = write_dict(tmp_path / "fr.tsv", "fr\ten\nmaison\thouse\n")
    with pytest.raises(InputError, match="first line must name the columns' languages"):
        build_tree_for_store(header_fr, store)
    with pytest.raises(InputError, match="does not exist"):
        read_dictionary(tmp_path / "missing.tsv", languages=["de", "en"])


def test_json_hierarchy_source(store: Path, tmp_path: Path) -> None:
    hierarchy = {"children": [
        {"name": "animal", "children": [
            {"name": "pet", "children": [{"term": "Cat", "language": "en"}, {"term": "dog", "language": "en"}]},
            {"term": "Katze", "language": "de", "beta": 2.0}]},
        {"name": "dwelling", "beta": 0.5, "children": [{"term": "house", "language": "en"},
                                                        {"term": "Haus", "language": "de"}]}]}
    source = tmp_path / "h.json"
    source.write_text(json.dumps(hierarchy))
    tree, info = build_and_write_tree(source, store, tmp_path / "t", source_format="json")
    assert tree.node_names == ("ROOT", "animal", "pet", "dwelling") and info.coverage.pairs_read == 5
    de = Corpus.open(store).vocabulary("de")
    (path,) = tree.word_paths("de", de.id_of("katze"))
    edges = tree.path_edges[tree.path_indptr[path]:tree.path_indptr[path + 1]]
    assert tree.edge_prior[edges].tolist() == [0.03, 2.0]
    source.write_text(json.dumps({"children": [{"name": "x", "children": [{"term": 3}]}]}))
    with pytest.raises(InputError, match=r"h.json', node root.children\[0\].children\[0\]: a leaf needs"):
        build_tree_for_store(source, store, source_format="json")
    source.write_text(json.dumps({"children": [{"term": "haus", "language": "fr"}]}))
    with pytest.raises(InputError, match="language 'fr'"):
        build_tree_for_store(source, store, source_format="json")


def test_same_tree_whatever_the_partitioning_and_scheduler(store: Path, tmp_path: Path, client: object) -> None:
    """The tree depends on the vocabularies only, which ingest makes identical for any partitioning."""
    dictionary = write_dict(tmp_path / "d.tsv", "de\ten\nHaus\thouse\nHaus\thome\nKatze\tcat\n")
    one_per_shard = make_store(tmp_path, name="p.zarr", shard_size=1, client=client)
    assert Corpus.open(one_per_shard).n_shards == len(ROWS)
    tree, info = build_and_write_tree(dictionary, one_per_shard, tmp_path / "t1")
    reference, reference_info = build_and_write_tree(dictionary, store, tmp_path / "t2")
    for name in ARRAYS:
        assert getattr(tree, name).tobytes() == getattr(reference, name).tobytes()
    assert info.vocab_checksums == reference_info.vocab_checksums
    check_tree_matches(reference_info, one_per_shard)
