"""The E-step executors' shard reader: cached, shared by threads, reading ahead in the background."""
from __future__ import annotations

import concurrent.futures
import shutil
from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import CorpusFormatError
from topicflow.io.corpus.reader import Corpus, load_multiblock
from topicflow.pipeline import shard_reader
from topicflow.pipeline.shard_reader import ShardReader
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=30, doc_length=20, alpha=0.3, seed=4)
    return write_test_store(tmp_path / "c.zarr", truth.counts, shard_size=40)


def open_reader(store: Path, cache_size: int = 8) -> tuple[Corpus, ShardReader]:
    corpus = Corpus.open(store)
    return corpus, ShardReader(str(store), corpus.shards, corpus.vocab_sizes(), cache_size=cache_size)


def test_rows_are_the_shards_rows_whether_read_ahead_or_not(store: Path) -> None:
    corpus, reader = open_reader(store)
    reader.prefetch([1, 2])
    for shard in (2, 0, 1):
        want = load_multiblock(str(store), corpus.shards[shard], corpus.vocab_sizes())["default"].slice(5, 17)
        got = reader.rows(shard, 5, 17)["default"]
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.term_ids, want.term_ids)
        np.testing.assert_array_equal(got.counts, want.counts)
    reader.close()


def test_each_shard_is_loaded_once_by_threads_and_read_ahead(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    original = shard_reader.load_multiblock

    def counting(store_path: str, shard: object, vocab_sizes: object) -> object:
        loads.append(shard.shard_id)  # type: ignore[attr-defined]
        return original(store_path, shard, vocab_sizes)  # type: ignore[arg-type]

    monkeypatch.setattr(shard_reader, "load_multiblock", counting)
    corpus, reader = open_reader(store)
    reader.prefetch([0, 1, 2])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        blocks = list(pool.map(lambda i: reader.rows(i % 3, 0, 10), range(24)))
    reader.prefetch([0, 1, 2])  # all cached: nothing to do
    reader.close()
    assert sorted(loads) == sorted(s.shard_id for s in corpus.shards)
    assert all(b["default"].n_docs == 10 for b in blocks)


def test_cache_keeps_the_most_recent_shards(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    original = shard_reader.load_multiblock
    monkeypatch.setattr(shard_reader, "load_multiblock",
                        lambda p, shard, v: loads.append(shard.first_doc) or original(p, shard, v))
    _, reader = open_reader(store, cache_size=2)
    for shard in (0, 1, 0, 2, 0, 1):
        reader.rows(shard, 0, 1)
    assert loads == [0, 40, 80, 40]  # shard 1 was evicted when shard 2 came in; shard 0 stayed in use


def test_a_failed_read_ahead_is_reported_when_the_rows_are_needed(store: Path) -> None:
    corpus, reader = open_reader(store)
    shutil.rmtree(store / "shards" / corpus.shards[1].shard_id)
    reader.prefetch([1])
    reader.close()  # the background load has failed by now
    with pytest.raises(CorpusFormatError, match=corpus.shards[1].shard_id):
        reader.rows(1, 0, 5)
    assert reader.rows(0, 0, 5)["default"].n_docs == 5
