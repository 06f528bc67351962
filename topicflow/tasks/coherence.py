"""Graph builders for topic coherence: per-shard counts of the relevant words and pairs, tree-reduced.

One task per shard counts what :mod:`topicflow.metrics.cooccurrence` defines (boolean documents from the
bag-of-words layer, boolean sliding windows from the ordered-token layer); the counts of all shards are
added in the one tree reduction of :mod:`topicflow.tasks.reduce`, so the memory of every task and of
the result is ``O(K N^2)`` whatever the size of the reference. Lazy only.
"""
from __future__ import annotations

from typing import Any, Sequence

import dask

from topicflow.metrics.cooccurrence import (
    CooccurrenceCounts,
    PairIndex,
    RelevantWords,
    count_documents,
    count_windows,
)
from topicflow.models.common.blocks import DocBlock, OrderedBlock
from topicflow.tasks.reduce import tree_reduce


def _document_counts_task(block: DocBlock, relevant: RelevantWords, pairs: PairIndex) -> CooccurrenceCounts:
    return count_documents(block, relevant, pairs)


def _window_counts_task(block: OrderedBlock, relevant: RelevantWords, pairs: PairIndex, window: int,
                        exact: bool) -> CooccurrenceCounts:
    return count_windows(block, relevant, pairs, window=window, exact=exact)


def _merge_counts(*parts: CooccurrenceCounts) -> CooccurrenceCounts:
    return CooccurrenceCounts.merge_all(parts)


def map_document_counts(blocks: Sequence[Any], relevant: RelevantWords, pairs: PairIndex, *, token: str) -> list[Any]:
    """Boolean-document counts of each block, ``Delayed[CooccurrenceCounts]`` keyed ``doc-counts-<token>-<i>``.

    Parameters
    ----------
    blocks : sequence of Delayed[DocBlock]
        One per shard (``Corpus.to_delayed``).
    relevant : RelevantWords
        The relevant words in the store's vocabulary.
    pairs : PairIndex
        The pairs to count.
    token : str
        Makes the keys unique to the request.

    Returns
    -------
    list of Delayed
    """
    task = dask.delayed(_document_counts_task, pure=True)
    return [task(block, relevant, pairs, dask_key_name=f"doc-counts-{token}-{i}") for i, block in enumerate(blocks)]


def map_window_counts(blocks: Sequence[Any], relevant: RelevantWords, pairs: PairIndex, *, window: int,
                      exact: bool, token: str) -> list[Any]:
    """Sliding-window counts of each ordered block, ``Delayed[CooccurrenceCounts]`` keyed ``window-counts-<token>-<i>``.

    Parameters
    ----------
    blocks : sequence of Delayed[OrderedBlock]
        One per shard (``Corpus.to_delayed_ordered``).
    relevant : RelevantWords
        The relevant words in the store's vocabulary.
    pairs : PairIndex
        The pairs to count.
    window : int
        Window width in tokens.
    exact : bool
        Exact window sets instead of gensim's incremental ones.
    token : str
        Makes the keys unique to the request.

    Returns
    -------
    list of Delayed
    """
    task = dask.delayed(_window_counts_task, pure=True)
    return [task(block, relevant, pairs, window, exact, dask_key_name=f"window-counts-{token}-{i}")
            for i, block in enumerate(blocks)]


def reduce_counts(parts: Sequence[Any], *, split_every: int, token: str) -> Any:
    """Tree-sum of per-shard counts, ``Delayed[CooccurrenceCounts]`` (keys ``sum-counts-<token>-...``).

    Parameters
    ----------
    parts : sequence of Delayed[CooccurrenceCounts]
        At least one.
    split_every : int
        Fan-in of the tree.
    token : str
        Makes the keys unique to the request.

    Returns
    -------
    Delayed
    """
    return tree_reduce(list(parts), _merge_counts, split_every=split_every, name=f"sum-counts-{token}")
