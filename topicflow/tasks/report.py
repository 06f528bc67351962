"""Graph builders for the report and the pyLDAvis export: per-partition summaries, tree-reduced. Lazy only.

The math lives in :mod:`topicflow.metrics.topic_summary` (document summaries, term counts) and
:mod:`topicflow.models.lda.vb.estep` (fold-in); task bodies only call it. Keys are readable and
deterministic: ``doc-topic-stats-<token>-<i>``, ``term-counts-<token>-<i>``, ``doc-lengths-<token>-<i>``,
``doc-terms-<token>-<i>``, ``doc-first-tokens-<token>-<i>``, ``topic-card-<token>-<i>``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dask
import numpy as np

from topicflow._typing import IntArray
from topicflow.io.outputs.report import ReportData, TopicReport, render_topic_card
from topicflow.metrics.topic_summary import (
    TopicDocStats,
    doc_first_tokens,
    doc_top_terms,
    doc_topic_stats,
    term_counts,
)
from topicflow.models.common.blocks import DocBlock, OrderedBlock
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.models.lda.vb.layout import PreparedTopics
from topicflow.models.lda.vb.params import VBParams
from topicflow.tasks.reduce import tree_reduce


def doc_lengths(blocks: Mapping[str, DocBlock], language: str | None = None) -> IntArray:
    """Count the tokens of each document of a shard: in one language, or summed over every language.

    Parameters
    ----------
    blocks : mapping of str to DocBlock
        One shard, keyed by language.
    language : str, optional
        Count only this language's tokens.

    Returns
    -------
    ndarray of shape (n_docs,), int64
    """
    chosen = [blocks[language]] if language is not None else list(blocks.values())
    total: IntArray = np.sum([block.doc_lengths() for block in chosen], axis=0).astype(np.int64)
    return total


def _doc_topic_stats_task(blocks: Mapping[str, DocBlock], topics: PreparedTopics, doc_topic_prior: np.ndarray,
                          params: VBParams, n_top: int) -> TopicDocStats:
    theta = fold_in_block(blocks, topics, doc_topic_prior, params)
    first = next(iter(blocks.values()))
    return doc_topic_stats(theta, doc_lengths(blocks), first.doc_ids, first.first_doc, n_top)


def merge_doc_topic_stats(*parts: TopicDocStats) -> TopicDocStats:
    """Body of one tree node: its children merged left to right (module-level so it pickles).

    Parameters
    ----------
    *parts : TopicDocStats
        Summaries of consecutive partitions.

    Returns
    -------
    TopicDocStats
    """
    return TopicDocStats.merge_all(parts)


def map_doc_topic_stats(blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray, params: VBParams, *,
                        n_top: int, token: str) -> list[Any]:
    """Fold every partition into the model and summarize its document topics, one task per partition.

    Merge the results with :func:`merge_doc_topic_stats` in a tree (:func:`doc_topic_summary` builds
    that tree as a graph; a driver that reports progress per partition computes these parts and merges
    them with :func:`topicflow.tasks.reduce.tree_reduce_now`, the same tree).

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        The store's shards in the model's term ids, in store order.
    topics : Delayed or Future of PreparedTopics
        The model's exp(E[log beta]), shared once by the caller.
    doc_topic_prior : ndarray of shape (n_topics,)
        Alpha.
    params : VBParams
        Fold-in settings.
    n_top : int
        Documents kept per topic.
    token : str
        Names the graph's keys.

    Returns
    -------
    list of Delayed[TopicDocStats]
        In the order of ``blocks``.
    """
    task = dask.delayed(_doc_topic_stats_task, pure=True)
    return [task(block, topics, doc_topic_prior, params, n_top, dask_key_name=f"doc-topic-stats-{token}-{i}")
            for i, block in enumerate(blocks)]


def doc_topic_summary(blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray, params: VBParams, *,
                      n_top: int, split_every: int, token: str) -> Any:
    """The summaries of :func:`map_doc_topic_stats` merged in a tree of fan-in ``split_every``.

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        As in :func:`map_doc_topic_stats`.
    topics : Delayed or Future of PreparedTopics
        As in :func:`map_doc_topic_stats`.
    doc_topic_prior : ndarray of shape (n_topics,)
        Alpha.
    params : VBParams
        Fold-in settings.
    n_top : int
        Documents kept per topic.
    split_every : int
        Fan-in of the tree.
    token : str
        Names the graph's keys.

    Returns
    -------
    Delayed[TopicDocStats]
    """
    parts = map_doc_topic_stats(blocks, topics, doc_topic_prior, params, n_top=n_top, token=token)
    return tree_reduce(parts, merge_doc_topic_stats, split_every=split_every, name=f"merge-doc-topic-stats-{token}")


def _term_counts_task(blocks: Mapping[str, DocBlock], language: str) -> IntArray:
    return term_counts(blocks[language])


def sum_counts(*parts: IntArray) -> IntArray:
    """Body of one tree node: the element-wise sum of its children, left to right.

    Parameters
    ----------
    *parts : ndarray of shape (n_terms,), int64
        Counts of consecutive partitions.

    Returns
    -------
    ndarray of shape (n_terms,), int64
    """
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def term_frequencies(blocks: Sequence[Any], language: str, *, split_every: int, token: str) -> Any:
    """Count each term's tokens per partition and sum the counts in a tree.

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        The store's shards (in the model's term ids), in store order.
    language : str
        The language counted.
    split_every : int
        Fan-in of the tree.
    token : str
        Names the graph's keys.

    Returns
    -------
    Delayed[ndarray of shape (n_terms,), int64]
    """
    task = dask.delayed(_term_counts_task, pure=True)
    parts = [task(block, language, dask_key_name=f"term-counts-{token}-{i}") for i, block in enumerate(blocks)]
    return tree_reduce(parts, sum_counts, split_every=split_every, name=f"sum-term-counts-{token}")


def map_doc_lengths(blocks: Sequence[Any], language: str | None, *, token: str) -> list[Any]:
    """Count the tokens of each document, one task per partition (see :func:`doc_lengths`).

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        The store's shards, in store order.
    language : str or None
        Count one language, or every language.
    token : str
        Names the graph's keys.

    Returns
    -------
    list of Delayed[ndarray of shape (n_docs,), int64]
    """
    task = dask.delayed(doc_lengths, pure=True)
    return [task(block, language, dask_key_name=f"doc-lengths-{token}-{i}") for i, block in enumerate(blocks)]


def _doc_terms_task(blocks: Mapping[str, DocBlock], rows: Sequence[int], n_terms: int) -> dict[int, dict[str, IntArray]]:
    return {row: {lang: doc_top_terms(block, row, n_terms) for lang, block in blocks.items()} for row in rows}


def map_doc_top_terms(blocks: Sequence[Any], rows: Sequence[Sequence[int]], n_terms: int, *, token: str) -> list[Any]:
    """The most frequent terms of chosen documents, one task per shard that holds any.

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        The shards holding the documents (store term ids).
    rows : sequence of sequence of int
        For each of ``blocks``, the rows of the chosen documents.
    n_terms : int
        Terms per document and language.
    token : str
        Names the graph's keys.

    Returns
    -------
    list of Delayed[dict of int to dict of str to ndarray]
        Per shard: row -> language -> term ids by decreasing count.
    """
    task = dask.delayed(_doc_terms_task, pure=True)
    return [task(block, list(chosen), n_terms, dask_key_name=f"doc-terms-{token}-{i}")
            for i, (block, chosen) in enumerate(zip(blocks, rows))]


def _first_tokens_task(block: OrderedBlock, rows: Sequence[int], n_tokens: int) -> dict[int, list[int | str]]:
    return {row: doc_first_tokens(block, row, n_tokens) for row in rows}


def map_doc_first_tokens(blocks: Sequence[Any], rows: Sequence[Sequence[int]], n_tokens: int, *,
                         token: str) -> list[Any]:
    """The first tokens in reading order of chosen documents, one task per shard that holds any.

    Parameters
    ----------
    blocks : sequence of Delayed[OrderedBlock]
        The ordered-token layer of one language of the shards holding the documents.
    rows : sequence of sequence of int
        For each of ``blocks``, the rows of the chosen documents.
    n_tokens : int
        Tokens per document.
    token : str
        Names the graph's keys.

    Returns
    -------
    list of Delayed[dict of int to list of (int or str)]
        Per shard: row -> term ids (or out-of-vocabulary strings) in reading order.
    """
    task = dask.delayed(_first_tokens_task, pure=True)
    return [task(block, list(chosen), n_tokens, dask_key_name=f"doc-first-tokens-{token}-{i}")
            for i, (block, chosen) in enumerate(zip(blocks, rows))]


def map_topic_cards(topics: Sequence[TopicReport], data: Any, *, token: str) -> list[Any]:
    """Each topic's card of the report (its chart drawn by matplotlib), one task per topic.

    Drawing is the report's slowest step once the corpus is folded in; as tasks it runs on every
    worker at once.

    Parameters
    ----------
    topics : sequence of TopicReport
        The topics to draw.
    data : Delayed[ReportData] or ReportData
        The report they belong to (shared once by the caller).
    token : str
        Names the graph's keys.

    Returns
    -------
    list of Delayed[str]
        The cards' HTML, in the order of ``topics``.
    """
    task = dask.delayed(_card_task, pure=True)
    return [task(topic, data, dask_key_name=f"topic-card-{token}-{i}") for i, topic in enumerate(topics)]


def _card_task(topic: TopicReport, data: ReportData) -> str:
    return render_topic_card(topic, data)
