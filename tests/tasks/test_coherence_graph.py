"""Coherence counting graphs: one task per shard, a tree sum, lazy, and the same counts for any split."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest

from tests.reference.corpora import random_counts
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.cooccurrence import PairIndex, RelevantWords, count_documents
from topicflow.models.common.blocks import concat_blocks
from topicflow.pipeline.cluster import compute
from topicflow.tasks import coherence as tasks_coherence
from topicflow.tasks.coherence import (
    map_document_counts,
    map_window_counts,
    reduce_counts,
)
from topicflow.testing.corpora import write_test_store

WORDS = ("de00002", "de00005", "de00011", "de00017", "de00023")


def refuse_to_compute(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a graph builder computed the keys {keys!r}")


@pytest.fixture(scope="module")
def counts_matrix() -> Any:
    import scipy.sparse as sp

    return sp.csr_matrix(random_counts(230, 30, seed=11, mean_len=8, empty_rows=(0, 17, 101)))


def store_of(path: Path, matrix: Any, shard_size: int) -> Corpus:
    return Corpus.open(write_test_store(path, {"default": matrix}, shard_size=shard_size))


def request(corpus: Corpus) -> tuple[RelevantWords, PairIndex]:
    relevant = RelevantWords.in_vocabulary(WORDS, corpus.vocabulary().terms)
    pairs = PairIndex.from_topics([np.array([0, 1, 2]), np.array([2, 3, 4]), np.array([0, 4])], len(WORDS))
    return relevant, pairs


def test_building_the_graph_computes_nothing(tmp_path: Path, counts_matrix: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = store_of(tmp_path / "s.zarr", counts_matrix, 50)
    relevant, pairs = request(corpus)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a kernel ran while the graph was being built")

    monkeypatch.setattr(tasks_coherence, "count_documents", refuse)
    monkeypatch.setattr(tasks_coherence, "count_windows", refuse)
    with dask.config.set(scheduler=refuse_to_compute):
        parts = map_document_counts(corpus.to_delayed(), relevant, pairs, token="t")
        windows = map_window_counts(corpus.to_delayed(), relevant, pairs, window=4, exact=False, token="w")
        total = reduce_counts(parts, split_every=2, token="t")
    assert len(parts) == len(windows) == corpus.n_shards == 5
    assert [p.key for p in parts] == [f"doc-counts-t-{i}" for i in range(5)]
    assert str(total.key).startswith("sum-counts-t-")


@pytest.mark.parametrize(("shard_size", "split_every"), [(230, 8), (50, 2), (13, 3)])
def test_tree_reduced_counts_equal_one_block_counts(tmp_path: Path, counts_matrix: Any, shard_size: int,
                                                     split_every: int, client: Any) -> None:
    corpus = store_of(tmp_path / "s.zarr", counts_matrix, shard_size)
    relevant, pairs = request(corpus)
    parts = map_document_counts(corpus.to_delayed(), relevant, pairs, token=f"{shard_size}")
    (total,) = compute(reduce_counts(parts, split_every=split_every, token=f"{shard_size}"), client=client)
    whole = count_documents(concat_blocks(list(corpus.iter_blocks())), relevant, pairs)
    assert np.array_equal(total.occurrences, whole.occurrences)
    assert np.array_equal(total.pair_counts, whole.pair_counts)
    assert total.n_units == whole.n_units == 230
