"""Graph builders of the report and the pyLDAvis export: lazy, readable keys, tree equals the driver's merge."""
from __future__ import annotations

from typing import Any

import dask
import numpy as np
import pytest

from topicflow.api.lda import LDA
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.pipeline.vb.infer import fold_in_params
from topicflow.tasks.reduce import tree_reduce_now
from topicflow.tasks.report import (
    doc_topic_summary,
    map_doc_lengths,
    map_doc_top_terms,
    map_doc_topic_stats,
    merge_doc_topic_stats,
    term_frequencies,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def raise_on_compute(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a graph builder computed")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Corpus, Any]:
    base = tmp_path_factory.mktemp("report-tasks")
    counts = draw_planted_corpus(n_docs=70, n_topics=2, n_terms=12, doc_length=15, alpha=0.3, seed=1).counts
    store = write_test_store(base / "s.zarr", counts, shard_size=10)
    LDA(2, max_iter=5).fit(store).save(base / "model")
    return Corpus.open(store), load_model(base / "model")


def test_builders_do_not_compute_and_name_their_keys(setup: tuple[Corpus, Any]) -> None:
    corpus, model = setup
    state = model.state
    with dask.config.set(scheduler=raise_on_compute):
        blocks = corpus.to_delayed_multi()
        topics = dask.delayed(state.prepared_topics(), traverse=False)
        parts = map_doc_topic_stats(blocks, topics, state.doc_topic_prior, fold_in_params(model), n_top=3, token="t")
        root = doc_topic_summary(blocks, topics, state.doc_topic_prior, fold_in_params(model), n_top=3,
                                 split_every=3, token="t")
        counts = term_frequencies(blocks, "default", split_every=3, token="t")
        lengths = map_doc_lengths(blocks, None, token="t")
        terms = map_doc_top_terms(blocks[:2], [[0, 3], [1]], 4, token="t")
    assert [p.key for p in parts] == [f"doc-topic-stats-t-{i}" for i in range(7)]
    assert root.key == "merge-doc-topic-stats-t-1-0" and counts.key == "sum-term-counts-t-1-0"
    assert lengths[0].key == "doc-lengths-t-0" and terms[1].key == "doc-terms-t-1"


def test_graph_tree_equals_the_driver_merge_and_counts_equal_brute_force(setup: tuple[Corpus, Any]) -> None:
    corpus, model = setup
    state = model.state
    blocks = corpus.to_delayed_multi()
    topics = dask.delayed(state.prepared_topics(), traverse=False)
    params = fold_in_params(model)
    root = doc_topic_summary(blocks, topics, state.doc_topic_prior, params, n_top=4, split_every=3, token="a")
    parts = map_doc_topic_stats(blocks, topics, state.doc_topic_prior, params, n_top=4, token="a")
    (tree,) = dask.compute(root, scheduler="sync")
    driver = tree_reduce_now(list(dask.compute(*parts, scheduler="sync")), merge_doc_topic_stats, split_every=3)
    np.testing.assert_array_equal(tree.topic_tokens, driver.topic_tokens)
    np.testing.assert_array_equal(tree.top_position, driver.top_position)
    dense = np.vstack([corpus.read_block(i).to_csr().toarray() for i in range(corpus.n_shards)])
    (frequencies,) = dask.compute(term_frequencies(blocks, "default", split_every=2, token="b"), scheduler="sync")
    np.testing.assert_array_equal(frequencies, dense.sum(axis=0))
    lengths = np.concatenate(dask.compute(*map_doc_lengths(blocks, "default", token="c"), scheduler="sync"))
    np.testing.assert_array_equal(lengths, dense.sum(axis=1))
    assert tree.n_tokens == dense.sum() and tree.n_docs == 70
    (found,) = dask.compute(map_doc_top_terms(blocks[1:2], [[2]], 3, token="d")[0], scheduler="sync")
    row = dense[12]
    assert found[2]["default"].tolist() == sorted(np.flatnonzero(row).tolist(), key=lambda w: (-row[w], w))[:3]
