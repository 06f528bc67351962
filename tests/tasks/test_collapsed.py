"""Graphs of the collapsed minibatch step: one task per piece, the fixed tree, laziness, the math they call."""
from __future__ import annotations

from typing import Any

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.hdp import pcsvb0
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.tasks.collapsed import map_local_minibatch, merge_stats, tree_merge_stats
from topicflow.tasks.reduce import tree_reduce_now

PARAMS = HDPParams(truncation=5, seed=4)


def shard_block(seed: int, n_docs: int = 12, n_terms: int = 20, first_doc: int = 0) -> DocBlock:
    rng = np.random.default_rng(seed)
    counts = sp.csr_matrix(rng.poisson(0.6, size=(n_docs, n_terms)))
    block = block_from_csr(counts)
    return DocBlock(block.indptr, block.term_ids, block.counts, block.doc_ids, first_doc, n_terms)


@pytest.fixture(scope="module")
def inputs() -> tuple[dict[int, DocBlock], Any]:
    blocks = {0: shard_block(1), 1: shard_block(2, first_doc=12)}
    state = HDPState.initial(PARAMS, n_terms=20, n_tokens=500, n_docs=24)
    return blocks, pcsvb0.global_view(state)


PIECES = [(0, 0, 5), (0, 5, 12), (1, 0, 7), (1, 7, 12)]


def refuse_to_compute(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a graph builder computed the keys {keys!r}")


def assert_stats_identical(a: Any, b: Any) -> None:
    for name in ("topic_word", "table_sums", "terms"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.digamma_sum, a.n_docs, a.n_tokens) == (b.digamma_sum, b.n_docs, b.n_tokens)


def test_one_task_per_piece_with_readable_keys_and_nothing_computed(inputs: tuple[dict[int, DocBlock], Any]) -> None:
    blocks, view = inputs
    delayed_blocks = {s: dask.delayed(b, name=f"block-{s}", traverse=False) for s, b in blocks.items()}
    with dask.config.set(scheduler=refuse_to_compute):
        parts = map_local_minibatch(delayed_blocks, PIECES, dask.delayed(view, name="view", traverse=False),
                                    pcsvb0.local_minibatch, PARAMS, token="tok")
        root = tree_merge_stats(parts, split_every=2, token="tok")
    assert [p.key for p in parts] == [f"cvb0-local-tok-{i}" for i in range(4)]
    keys = {str(k) for k in root.__dask_graph__()}
    assert {"cvb0-sum-tok-0-0", "cvb0-sum-tok-0-1", "cvb0-sum-tok-1-0"} <= keys
    with dask.config.set(scheduler=refuse_to_compute), pytest.raises(AssertionError, match="computed"):
        root.compute()  # the guard is live


def test_computed_graph_equals_the_local_steps_merged_in_the_same_tree(
        inputs: tuple[dict[int, DocBlock], Any]) -> None:
    blocks, view = inputs
    delayed_blocks = {s: dask.delayed(b, name=f"block-{s}", traverse=False) for s, b in blocks.items()}
    parts = map_local_minibatch(delayed_blocks, PIECES, dask.delayed(view, name="view", traverse=False),
                                pcsvb0.local_minibatch, PARAMS, token="tok")
    merged = tree_merge_stats(parts, split_every=3, token="tok").compute(scheduler="threads")
    direct = [pcsvb0.local_minibatch(view, blocks[s].slice(lo, hi), PARAMS) for s, lo, hi in PIECES]
    assert_stats_identical(merged, tree_reduce_now(direct, merge_stats, split_every=3))
    assert merged.n_docs == 24 and merged.n_tokens == sum(b.n_tokens for b in blocks.values())


def test_merge_is_left_to_right(inputs: tuple[dict[int, DocBlock], Any]) -> None:
    blocks, view = inputs
    parts = [pcsvb0.local_minibatch(view, blocks[s].slice(lo, hi), PARAMS) for s, lo, hi in PIECES]
    assert_stats_identical(merge_stats(*parts), parts[0].merge(parts[1]).merge(parts[2]).merge(parts[3]))
