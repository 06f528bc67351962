"""Graph builders and task bodies of the distributed collapsed Gibbs sampler (AD-LDA over blocks).

A sweep is one task per *partition* (consecutive blocks of one shard): the task reads its shard, each
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

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import dask

from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import load_block
from topicflow.io.outputs.assignment_layer import read_block, write_block
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.lda.gibbs.adlda import (
    BlockSweep,
    CountDelta,
    DocHistograms,
    SweepView,
    start_block,
    sweep_block,
)
from topicflow.tasks.reduce import tree_reduce


@dataclass(frozen=True, slots=True)
class BlockSpec:
    """One sampling block: documents ``start:stop`` of shard ``shard_index`` (block ``index`` of that shard).

    Attributes
    ----------
    shard_index : int
    index : int
        Position of the block within its shard.
    start, stop : int
        Documents of the shard, stop exclusive.
    first_doc : int
        Global position of the block's first document.
    """

    shard_index: int
    index: int
    start: int
    stop: int
    first_doc: int


@dataclass(frozen=True, slots=True)
class Partition:
    """Consecutive blocks of one shard, sampled by one task.

    Attributes
    ----------
    shard : ShardInfo
    blocks : tuple of BlockSpec
    """

    shard: ShardInfo
    blocks: tuple[BlockSpec, ...]


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
    """The sampling blocks of a store: runs of ``block_size`` documents within each shard, in store order.

    Parameters
    ----------
    shards : sequence of ShardInfo
    block_size : int
        Documents per block (the last block of a shard may be shorter).

    Returns
    -------
    list of BlockSpec
    """
    blocks = []
    for shard_index, shard in enumerate(shards):
        for index, start in enumerate(range(0, shard.n_docs, block_size)):
            stop = min(shard.n_docs, start + block_size)
            blocks.append(BlockSpec(shard_index, index, start, stop, shard.first_doc + start))
    return blocks


def plan_partitions(shards: Sequence[ShardInfo], blocks: Sequence[BlockSpec],
                    blocks_per_partition: int | None) -> list[Partition]:
    """Group the blocks into tasks: consecutive blocks of one shard, at most ``blocks_per_partition`` each.

    Parameters
    ----------
    shards : sequence of ShardInfo
    blocks : sequence of BlockSpec
        From :func:`plan_blocks`.
    blocks_per_partition : int or None
        None: one partition per shard.

    Returns
    -------
    list of Partition
    """
    partitions: list[Partition] = []
    current: list[BlockSpec] = []
    for block in blocks:
        if current and (current[0].shard_index != block.shard_index
                        or (blocks_per_partition is not None and len(current) >= blocks_per_partition)):
            partitions.append(Partition(shards[current[0].shard_index], tuple(current)))
            current = []
        current.append(block)
    if current:
        partitions.append(Partition(shards[current[0].shard_index], tuple(current)))
    return partitions


def _sample(doc_block: DocBlock, spec: BlockSpec, partition: Partition, layer: str, sweep: int,
            view: SweepView | None,
            n_topics: int, seed: int) -> tuple[BlockSweep, int]:
    token_indptr, token_terms = expand_tokens(doc_block.slice(spec.start, spec.stop))
    shard_id = partition.shard.shard_id
    if sweep == 0:
        result = start_block(token_indptr, token_terms, spec.first_doc, n_topics, seed)
    else:
        topics = read_block(layer, sweep - 1, shard_id, spec.index, token_terms.shape[0])
        assert view is not None, "a sweep after the start needs the sweep-start counts"
        result = sweep_block(token_indptr, token_terms, topics, spec.first_doc, view, sweep)
    write_block(layer, sweep, shard_id, spec.index, result.topics, n_topics)
    return result, int(token_terms.shape[0])


def sweep_partition(store: str, partition: Partition, language: str, n_terms: int, layer: str, sweep: int,
                    view: SweepView | None, n_topics: int, seed: int, threads: int) -> PartitionResult:
    """Task body: one sweep (or, for sweep 0, the random start) of every block of a partition.

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
        0: the random start; s >= 1 reads the z of sweep s - 1.
    view : SweepView or None
        The sweep-start counts (None for sweep 0).
    n_topics, seed : int
    threads : int
        Blocks sampled at once (nogil kernels on a thread pool); the result does not depend on it.

    Returns
    -------
    PartitionResult
        The blocks' deltas and histograms merged in block order.
    """
    doc_block = load_block(store, partition.shard, language, n_terms, with_meta=False)

    def one(spec: BlockSpec) -> tuple[BlockSweep, int]:
        return _sample(doc_block, spec, partition, layer, sweep, view, n_topics, seed)

    if threads > 1 and len(partition.blocks) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(partition.blocks))) as pool:
            results = list(pool.map(one, partition.blocks))
    else:
        results = [one(spec) for spec in partition.blocks]
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
                view: Any, n_topics: int, seed: int, threads: int, *, split_every: int, token: str) -> Any:
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

    Returns
    -------
    Delayed[PartitionResult]
    """
    task = dask.delayed(sweep_partition, pure=True)
    parts = [task(store, partition, language, n_terms, layer, sweep, view, n_topics, seed, threads,
                  dask_key_name=f"gibbs-part-{token}-{sweep}-{i}")
             for i, partition in enumerate(partitions)]
    return tree_reduce(parts, merge_results, split_every=split_every, name=f"gibbs-sum-{token}-{sweep}")
