"""Graph builders and task bodies of the distributed collapsed Gibbs sampler (AD-LDA over blocks).

A sweep is one task per *partition* (consecutive blocks): the task reads the shards it covers, each
block's z of the previous sweep from the assignment layer, runs
:func:`topicflow.models.lda.gibbs.adlda.sweep_block` on every block (in parallel threads: the kernels
release the GIL), writes the new z, and returns the blocks' merged count delta and histograms
(:class:`PartitionResult`). The partitions' results are tree-reduced in store order
(:func:`topicflow.tasks.reduce.tree_reduce`). Blocks, not partitions, define the sampler: how blocks
are grouped into tasks, and how many threads a task uses, never changes the result. The math is
:mod:`topicflow.models.lda.gibbs.adlda`; nothing here computes it.

Keys: ``gibbs-part-<token>-<sweep>-<i>`` and ``gibbs-sum-<token>-<sweep>-<depth>-<index>``.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import load_block
from topicflow.io.outputs.assignment_layer import read_block, write_block
from topicflow.models.common.blocks import DocBlock, concat_blocks, expand_tokens
from topicflow.models.lda.gibbs.adlda import (
    BlockSweep,
    CountDelta,
    DocHistograms,
    SweepView,
    apply_delta,
    sequential_start_block,
    start_block,
    sweep_block,
)
from topicflow.tasks.reduce import tree_reduce


@dataclass(frozen=True, slots=True)
class BlockSpec:
    """One sampling block: ``n_docs`` consecutive documents of the store from global position ``first_doc``.

    Attributes
    ----------
    index : int
        Position of the block in the store (names its z in the assignment layer).
    first_doc, n_docs : int
    pieces : tuple of (int, int, int)
        (shard index, start, stop): the documents of each shard the block covers, in order.
    """

    index: int
    first_doc: int
    n_docs: int
    pieces: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class Partition:
    """Consecutive blocks sampled by one task, and the shards they read.

    Attributes
    ----------
    blocks : tuple of BlockSpec
    shards : dict of int to ShardInfo
        Every shard a block of the partition covers, by store index.
    """

    blocks: tuple[BlockSpec, ...]
    shards: dict[int, ShardInfo]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What a sweep task returns (and what the tree reduction merges).

    Attributes
    ----------
    delta : CountDelta
    histograms : DocHistograms
    n_tokens : int
    """

    delta: CountDelta
    histograms: DocHistograms
    n_tokens: int


def plan_blocks(shards: Sequence[ShardInfo], block_size: int) -> list[BlockSpec]:
    """The sampling blocks of a store: runs of ``block_size`` documents in store order (across shards).

    Parameters
    ----------
    shards : sequence of ShardInfo
    block_size : int
        Documents per block (the last block may be shorter).

    Returns
    -------
    list of BlockSpec
    """
    offsets = np.concatenate([[0], np.cumsum([shard.n_docs for shard in shards])]).astype(np.int64)
    total = int(offsets[-1])
    blocks = []
    for index, lo in enumerate(range(0, total, block_size)):
        hi = min(total, lo + block_size)
        pieces = []
        for shard_index in range(len(shards)):
            start, stop = max(lo, int(offsets[shard_index])), min(hi, int(offsets[shard_index + 1]))
            if start < stop:
                pieces.append((shard_index, start - int(offsets[shard_index]), stop - int(offsets[shard_index])))
        first = shards[pieces[0][0]].first_doc + pieces[0][1]
        blocks.append(BlockSpec(index, int(first), hi - lo, tuple(pieces)))
    return blocks


def plan_partitions(shards: Sequence[ShardInfo], blocks: Sequence[BlockSpec],
                    blocks_per_partition: int) -> list[Partition]:
    """Group consecutive blocks into tasks of at most ``blocks_per_partition`` blocks.

    Parameters
    ----------
    shards : sequence of ShardInfo
    blocks : sequence of BlockSpec
        From :func:`plan_blocks`.
    blocks_per_partition : int

    Returns
    -------
    list of Partition
    """
    partitions = []
    for lo in range(0, len(blocks), blocks_per_partition):
        group = tuple(blocks[lo:lo + blocks_per_partition])
        used = sorted({piece[0] for block in group for piece in block.pieces})
        partitions.append(Partition(group, {index: shards[index] for index in used}))
    return partitions


def _sample(doc_block: DocBlock, spec: BlockSpec, layer: str, sweep: int, view: SweepView | None,
            n_topics: int, seed: int, sequential: bool) -> tuple[BlockSweep, int]:
    token_indptr, token_terms = expand_tokens(doc_block)
    if sweep == 0 and sequential:
        assert view is not None, "the sequential start needs the counts of the blocks started before"
        result = sequential_start_block(token_indptr, token_terms, spec.first_doc, view)
    elif sweep == 0:
        result = start_block(token_indptr, token_terms, spec.first_doc, n_topics, seed)
    else:
        assert view is not None, "a sweep after the start needs the sweep-start counts"
        topics = read_block(layer, sweep - 1, spec.index, token_terms.shape[0])
        result = sweep_block(token_indptr, token_terms, topics, spec.first_doc, view, sweep)
    write_block(layer, sweep, spec.index, result.topics, n_topics)
    return result, int(token_terms.shape[0])


#: Bytes of shard arrays a process keeps between sweeps (least recently used first out): reading and
#: checking a shard every sweep costs about as much as sampling it. 0 disables the cache.
SHARD_CACHE_BYTES = 64 * 2**20
_cache: OrderedDict[tuple[str, str, str, str, int], DocBlock] = OrderedDict()
_cache_lock = threading.Lock()


def _nbytes(block: DocBlock) -> int:
    return int(block.indptr.nbytes + block.term_ids.nbytes + block.counts.nbytes + 64 * block.n_docs)


def cached_shard(store: str, shard: ShardInfo, language: str, n_terms: int) -> DocBlock:
    """A shard's documents, from this process's small LRU cache or read from the store.

    Parameters
    ----------
    store : str
    shard : ShardInfo
        Its checksum is part of the key, so a rewritten shard is read again.
    language : str
    n_terms : int

    Returns
    -------
    DocBlock
    """
    key = (store, shard.shard_id, shard.checksum, language, n_terms)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    block = load_block(store, shard, language, n_terms, with_meta=False)
    if _nbytes(block) <= SHARD_CACHE_BYTES:
        with _cache_lock:
            _cache[key] = block
            while sum(_nbytes(b) for b in _cache.values()) > SHARD_CACHE_BYTES:
                _cache.popitem(last=False)
    return block


def _block_documents(store: str, partition: Partition, spec: BlockSpec, language: str, n_terms: int,
                     loaded: dict[int, DocBlock]) -> DocBlock:
    parts = []
    for shard_index, start, stop in spec.pieces:
        if shard_index not in loaded:
            loaded[shard_index] = cached_shard(store, partition.shards[shard_index], language, n_terms)
        parts.append(loaded[shard_index].slice(start, stop))
    return parts[0] if len(parts) == 1 else concat_blocks(parts)


def sweep_partition(store: str, partition: Partition, language: str, n_terms: int, layer: str, sweep: int,
                    view: SweepView | None, n_topics: int, seed: int, threads: int,
                    sequential: bool = False) -> PartitionResult:
    """Task body: one sweep (or, for sweep 0, the start) of every block of a partition.

    Parameters
    ----------
    store : str
        The corpus store.
    partition : Partition
    language : str
    n_terms : int
        The language's vocabulary size.
    layer : str
        The run directory holding the assignment layer.
    sweep : int
        0: the start; s >= 1 reads the z of sweep s - 1.
    view : SweepView or None
        The sweep-start counts (sweep 0: the counts of the blocks started before, or None for the
        random start).
    n_topics, seed : int
    threads : int
        Blocks sampled at once (nogil kernels on a thread pool); the result does not depend on it.
    sequential : bool, default False
        Sweep 0 only: the sequential start, block after block (each given the ones before it).

    Returns
    -------
    PartitionResult
        The blocks' deltas and histograms merged in block order.
    """
    loaded: dict[int, DocBlock] = {}
    documents = [_block_documents(store, partition, spec, language, n_terms, loaded) for spec in partition.blocks]
    loaded.clear()
    if sweep == 0 and sequential:  # each block given the ones before it: one after the other
        assert view is not None, "the sequential start needs the counts of the blocks started before"
        term_topic, topic_counts = view.term_topic.copy(), view.topic_counts.copy()
        results = []
        for doc_block, spec in zip(documents, partition.blocks):
            current = SweepView(term_topic, topic_counts, view.alpha, view.beta, view.seed)
            result, n = _sample(doc_block, spec, layer, 0, current, n_topics, seed, True)
            apply_delta(term_topic, topic_counts, result.delta)
            results.append((result, n))
    else:
        def one(item: tuple[DocBlock, BlockSpec]) -> tuple[BlockSweep, int]:
            return _sample(item[0], item[1], layer, sweep, view, n_topics, seed, False)

        items = list(zip(documents, partition.blocks))
        if threads > 1 and len(items) > 1:
            with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
                results = list(pool.map(one, items))
        else:
            results = [one(item) for item in items]
    first = results[0][0]
    return PartitionResult(first.delta.merge(*(r.delta for r, _ in results[1:])),
                           first.histograms.merge(*(r.histograms for r, _ in results[1:])),
                           sum(n for _, n in results))


def merge_results(*parts: PartitionResult) -> PartitionResult:
    """Body of one tree node: merge partition results left to right.

    Parameters
    ----------
    *parts : PartitionResult
        At least one, in store order.

    Returns
    -------
    PartitionResult
    """
    first = parts[0]
    return PartitionResult(first.delta.merge(*(p.delta for p in parts[1:])),
                           first.histograms.merge(*(p.histograms for p in parts[1:])),
                           sum(p.n_tokens for p in parts))


def sweep_graph(store: str, partitions: Sequence[Partition], language: str, n_terms: int, layer: str, sweep: int,
                view: Any, n_topics: int, seed: int, threads: int, *, split_every: int, token: str,
                sequential: bool = False) -> Any:
    """The lazy graph of one sweep: a task per partition, tree-merged in store order.

    Parameters
    ----------
    store : str
    partitions : sequence of Partition
    language : str
    n_terms : int
    layer : str
    sweep : int
    view : SweepView, a scattered future of one, a Delayed, or None (sweep 0)
        Passed to every task as is, so that the graph holds it once.
    n_topics, seed, threads : int
    split_every : int
        Fan-in of the tree reduction.
    token : str
        Names the keys.
    sequential : bool, default False
        Sweep 0: the sequential start (give one partition at a time, with the counts so far).

    Returns
    -------
    Delayed[PartitionResult]
    """
    task = dask.delayed(sweep_partition, pure=True)
    parts = [task(store, partition, language, n_terms, layer, sweep, view, n_topics, seed, threads, sequential,
                  dask_key_name=f"gibbs-part-{token}-{sweep}-{i}")
             for i, partition in enumerate(partitions)]
    return tree_reduce(parts, merge_results, split_every=split_every, name=f"gibbs-sum-{token}-{sweep}")
