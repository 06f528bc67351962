"""The ordered-token layer of the corpus store: reader API, validation, format versions, errors."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr

from topicflow import Corpus
from topicflow.errors import (
    CorpusFormatError,
    CorruptShardError,
    FormatVersionError,
    OrderNotKeptError,
)
from topicflow.io.corpus import layout
from topicflow.io.corpus.layout import (
    BASE_FORMAT_VERSION,
    GROWN_VOCAB_FORMAT_VERSION,
    ORDERED_FORMAT_VERSION,
    order_problems,
    store_format_version,
)
from topicflow.io.corpus.reader import load_block, load_ordered_block
from topicflow.io.tokenizer import PruneConfig
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

TEXTS = [
    "the fox and the dog run; fox runs fast",
    "a dog sleeps, the lazy dog dreams of a fox",
    "tax rates and tax policy of the economy",
    "economy grows; tax falls; fox news",
    "lazy dog lazy fox lazy economy",
    "dog fox tax economy dog",
]


def write_jsonl(path: Path, texts: list[str], prefix: str = "doc") -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}-{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


@pytest.fixture()
def ordered_store(tmp_path: Path) -> Path:
    src = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    ingest_corpus([src], tmp_path / "o.zarr", shard_size=3, prune=PruneConfig(min_df=2), keep_order=True)
    return tmp_path / "o.zarr"


@pytest.fixture()
def plain_store(tmp_path: Path) -> Path:
    src = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    ingest_corpus([src], tmp_path / "p.zarr", shard_size=3, prune=PruneConfig(min_df=2))
    return tmp_path / "p.zarr"


def chunk_file(store: Path, shard_id: str, array: str) -> Path:
    files = [p for p in (store / "shards" / shard_id / array / "c").rglob("*") if p.is_file()]
    assert len(files) == 1, files
    return files[0]


def rewrite_array(store: Path, shard_id: str, array: str, values: np.ndarray) -> None:
    """Replace an array's values with a well-encoded chunk: only the content is wrong."""
    zarr.open_array(str(store / "shards" / shard_id / array), mode="r+")[:] = values


def brute_force_bag(block: OrderedBlock, row: int) -> dict[int, int]:
    """The bag of words of one document, counted from its ordered tokens one by one."""
    counts: dict[int, int] = {}
    for code in block.doc_tokens(row).tolist():
        if code >= 0:
            counts[code] = counts.get(code, 0) + 1
    return counts


# ----------------------------------------------------------------------------- reader API


def test_reader_api_agrees_with_the_bags(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    assert corpus.has_order and corpus.n_shards == 2
    blocks = list(corpus.iter_ordered())
    delayed = dask.compute(*corpus.to_delayed_ordered())
    only_second = dask.compute(*corpus.to_delayed_ordered(shards=[1]))
    assert [d.key for d in corpus.to_delayed_ordered()] == [d.key for d in corpus.to_delayed_ordered()]
    assert corpus.to_delayed_ordered()[0].key.startswith("load-ordered-")
    for index, (block, bag_block) in enumerate(zip(blocks, corpus.iter_blocks())):
        assert isinstance(block, OrderedBlock) and block.n_terms == len(corpus.vocabulary())
        assert block.first_doc == bag_block.first_doc and block.language == "default"
        np.testing.assert_array_equal(block.doc_ids, bag_block.doc_ids)
        for row in range(block.n_docs):  # the invariant, by brute force
            assert brute_force_bag(block, row) == bag_block.doc_bag(row)
        for other in (delayed[index], corpus.read_ordered(index)):
            np.testing.assert_array_equal(other.tokens, block.tokens)
            np.testing.assert_array_equal(other.indptr, block.indptr)
            assert other.oov_terms.tolist() == block.oov_terms.tolist()
    np.testing.assert_array_equal(only_second[0].tokens, blocks[1].tokens)
    assert [list(b.doc_ids) for b in corpus.iter_ordered(start=1)] == [list(blocks[1].doc_ids)]
    assert sum(b.n_tokens for b in blocks) > corpus.n_tokens  # the layer also holds the pruned tokens
    texts = blocks[0].texts(corpus.vocabulary())
    assert texts[0] == ["fox", "dog", "run", "fox", "runs", "fast"]
    assert blocks[0].texts(corpus.vocabulary(), include_oov=False)[0] == ["fox", "dog", "fox"]


def test_texts_refuses_a_vocabulary_too_short_for_the_block(ordered_store: Path) -> None:
    block = Corpus.open(ordered_store).read_ordered(0)
    short = Vocabulary(np.array(["fox"], dtype=object), np.ones(1, np.int64), np.ones(1, np.int64))
    with pytest.raises(ValueError, match=r"term id \d+ but the vocabulary given has only 1 terms"):
        block.texts(short)


def test_slice_keeps_positions_and_oov_strings(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    block = corpus.read_ordered(0)
    part = block.slice(1, 3)
    assert part.n_docs == 2 and part.first_doc == block.first_doc + 1
    assert part.texts(corpus.vocabulary()) == block.texts(corpus.vocabulary())[1:3]


def test_store_without_order_raises_order_not_kept(plain_store: Path) -> None:
    corpus = Corpus.open(plain_store)
    assert not corpus.has_order
    for call in (lambda: corpus.read_ordered(0), lambda: corpus.iter_ordered(), lambda: corpus.to_delayed_ordered()):
        with pytest.raises(OrderNotKeptError) as info:
            call()
        message = str(info.value)
        assert repr(str(plain_store)) in message and "topicflow ingest --keep-order" in message
        assert "does not keep token order" in message and info.value.path == str(plain_store)
        assert isinstance(info.value, CorpusFormatError) and isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- format versions


def test_format_versions_of_each_kind_of_store() -> None:
    assert store_format_version(1) == BASE_FORMAT_VERSION == 1
    assert store_format_version(2) == GROWN_VOCAB_FORMAT_VERSION == 2
    assert store_format_version(1, has_order=True) == store_format_version(3, has_order=True) == 3
    assert layout.FORMAT_VERSION == ORDERED_FORMAT_VERSION


def test_a_format_2_reader_refuses_an_ordered_store(ordered_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulate the topicflow before this layer: it reads formats up to 2.
    monkeypatch.setattr(layout, "FORMAT_VERSION", GROWN_VOCAB_FORMAT_VERSION)
    with pytest.raises(FormatVersionError, match="format version 3, newer than version 2.*upgrade topicflow"):
        Corpus.open(ordered_store)
    with pytest.raises(FormatVersionError, match="upgrade topicflow"):
        append_corpus(ordered_store, [write_jsonl(ordered_store.parent / "more.jsonl", ["fox dog"], "new")])


def test_format_1_and_2_stores_read_without_the_layer(plain_store: Path, tmp_path: Path) -> None:
    payload = json.loads((plain_store / "manifest.json").read_text())
    assert payload["format_version"] == 1 and "has_order" not in payload
    # Grow the vocabulary: format 2, still without the layer.
    append_corpus(plain_store, [write_jsonl(tmp_path / "more.jsonl", ["zebra owl", "zebra owl fox"], "new")],
                  promote_min_df=2)
    payload = json.loads((plain_store / "manifest.json").read_text())
    assert payload["format_version"] == 2
    corpus = Corpus.open(plain_store)
    assert not corpus.has_order and corpus.vocab_version == 2 and corpus.verify() == []
    assert sum(b.n_docs for b in corpus.iter_blocks()) == 8
    # A store written by the array writers (format 1, no layer) reads too.
    truth = draw_planted_corpus(n_docs=20, n_topics=2, n_terms=10, doc_length=10, alpha=0.5, seed=1)
    arrays = Corpus.open(write_test_store(tmp_path / "t.zarr", truth.counts, shard_size=10))
    assert not arrays.has_order and arrays.read_block(1).n_docs == 10


def test_manifest_whose_shards_disagree_about_order_is_refused(ordered_store: Path) -> None:
    payload = json.loads((ordered_store / "manifest.json").read_text())
    del payload["shards"][1]["has_order"]
    (ordered_store / "manifest.json").write_text(json.dumps(payload))
    with pytest.raises(CorpusFormatError, match=r"keeps token order but shard\(s\) \['000001'\] say otherwise"):
        Corpus.open(ordered_store)


# ----------------------------------------------------------------------------- validation


def test_swapped_tokens_are_caught_by_the_checksum(ordered_store: Path) -> None:
    tokens = Corpus.open(ordered_store).read_ordered(1).tokens.copy()
    first = int(np.flatnonzero(tokens != tokens[0])[0])
    tokens[[0, first]] = tokens[[first, 0]]  # same document, same counts: only the order changed
    rewrite_array(ordered_store, "000001", "default/order/tokens", tokens)
    corpus = Corpus.open(ordered_store)
    with pytest.raises(CorruptShardError, match=r"shard 000001 of .* is corrupt: .*do not match the manifest's checksum") as info:
        corpus.read_ordered(1)
    assert info.value.shard == "000001" and info.value.path == str(ordered_store)
    # The checksum covers the layer, so a read of the bags notices too, and so does verify().
    with pytest.raises(CorruptShardError, match="shard 000001.*checksum"):
        corpus.read_block(1)
    assert corpus.verify(raise_errors=False) == ["000001"]
    assert corpus.read_ordered(0).n_docs == 3


def test_a_token_that_breaks_the_bag_invariant_is_reported(ordered_store: Path) -> None:
    block = Corpus.open(ordered_store).read_ordered(0)
    tokens = block.tokens.copy()
    position = int(np.flatnonzero(tokens >= 0)[-1])
    tokens[position] = -1  # an in-vocabulary token of the last document becomes an OOV one
    rewrite_array(ordered_store, "000000", "default/order/tokens", tokens)
    last_doc = int(np.searchsorted(block.indptr, position, side="right") - 1)
    with pytest.raises(CorruptShardError, match=rf"shard 000000 .*document {last_doc} .*do not add up to its bag"):
        Corpus.open(ordered_store).read_ordered(0)


def test_flipped_bytes_and_missing_order_arrays_are_reported(ordered_store: Path) -> None:
    path = chunk_file(ordered_store, "000000", "default/order/tokens")
    data = bytearray(path.read_bytes())
    for i in range(12, min(40, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match=r"shard 000000 .*order/tokens"):  # undecodable or out of range
        Corpus.open(ordered_store).read_ordered(0)
    oov = ordered_store / "shards" / "000001" / "default" / "order" / "oov_terms"
    for child in sorted(oov.rglob("*"), reverse=True):
        child.unlink() if child.is_file() else child.rmdir()
    oov.rmdir()
    corpus = Corpus.open(ordered_store)
    with pytest.raises(CorruptShardError, match=r"shard 000001 .*order/oov_terms' is missing"):
        load_ordered_block(str(ordered_store), corpus.shards[1], "default", len(corpus.vocabulary()))
    with pytest.raises(CorruptShardError, match=r"shard 000001 .*order/oov_terms' is missing"):
        load_block(str(ordered_store), corpus.shards[1], "default", len(corpus.vocabulary()))
    assert corpus.verify(raise_errors=False) == ["000000", "000001"]


def test_order_problems_reference_cases() -> None:
    bag = (np.array([0, 2, 2]), np.array([0, 3], np.int32), np.array([2, 1], np.int32))
    good = (np.array([0, 4, 5]), np.array([3, 0, -1, 0, -1], np.int32), np.array(["x"], dtype=object))
    assert order_problems(good, bag, 2, 4) == []
    cases = {
        "expected (3,) starting at 0": (np.array([0, 5]), good[1], good[2]),
        "not nondecreasing": (np.array([0, 4, 3]), good[1], good[2]),
        "outside [-1, 4)": (good[0], np.array([3, 0, -2, 0, -1], np.int32), good[2]),
        "holds a string twice": (good[0], good[1], np.array(["x", "x"], dtype=object)),
        "document 0": (good[0], np.array([3, 3, -1, 0, -1], np.int32), good[2]),
        "document 1": (good[0], np.array([3, 0, 0, -1, 1], np.int32), good[2]),
    }
    for phrase, order in cases.items():
        found = order_problems(order, bag, 2, 4)
        assert found and phrase in found[0], (phrase, found)


def test_texts_match_a_counter_of_the_bag_for_every_document(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    vocab = corpus.vocabulary()
    for block, bag_block in zip(corpus.iter_ordered(), corpus.iter_blocks()):
        for row, words in enumerate(block.texts(vocab, include_oov=False)):
            assert Counter(words) == Counter({str(vocab.terms[t]): c for t, c in bag_block.doc_bag(row).items()})
