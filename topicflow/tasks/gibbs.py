"""Task bodies and planning of the distributed collapsed Gibbs sampler (AD-LDA over blocks).

A sweep is one task per *partition* (consecutive blocks): for every block the task reads its tokens
and its z of the previous sweep from the assignment layer (the start, sweep 0, reads the tokens from
the store's shards once and writes them there), runs
:func:`topicflow.models.lda.gibbs.adlda.sweep_block` (the blocks of a partition in parallel threads:
the kernels release the GIL), writes the new z, and returns the blocks' count deltas and merged
histograms (:class:`PartitionResult`). The driver (:mod:`topicflow.pipeline.gibbs.fit`) submits the
tasks and adds each delta to its counts as it arrives: integer sums, so the order does not matter.
Blocks, not partitions, define the sampler: how blocks are grouped into tasks, and how many threads
a task uses, never changes the result. The math is :mod:`topicflow.models.lda.gibbs.adlda`; nothing
here computes it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import load_block
from topicflow.io.outputs.assignment_layer import (
    read_block,
    read_doc_topic,
    read_tokens,
    write_block,
    write_doc_topic,
    write_tokens,
)
from topicflow.models.common.blocks import DocBlock, concat_blocks, expand_tokens
from topicflow.models.lda.gibbs.adlda import (
    BlockSweep,
    CountDelta,
    DocHistograms,
    SweepView,
    apply_delta,
    sequential_start_block,
    start_block,
    start_block_from_topics,
    sweep_block,
)
from topicflow.models.lda.gibbs.cvb_start import SCVB0Pass, draw_topics
from topicflow.models.lda.gibbs.state import GibbsParams


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
    """What a sweep task returns.

    Attributes
    ----------
    deltas : tuple of CountDelta
        One per block, in block order (not merged: the driver adds each to its counts, which costs
        less than merging sparse deltas).
    histograms : DocHistograms
        Of the partition's documents.
    n_tokens : int
    """

    deltas: tuple[CountDelta, ...]
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


def _store_block(store: str, partition: Partition, spec: BlockSpec, language: str, n_terms: int,
                 loaded: dict[int, DocBlock]) -> DocBlock:
    """A block's documents read from the store's shards (``loaded``: shards read by this task)."""
    parts = []
    for shard_index, start, stop in spec.pieces:
        if shard_index not in loaded:
            loaded[shard_index] = load_block(store, partition.shards[shard_index], language, n_terms,
                                             with_meta=False)
        parts.append(loaded[shard_index].slice(start, stop))
    block = parts[0] if len(parts) == 1 else concat_blocks(parts)
    assert block.first_doc == spec.first_doc, "a block's documents are numbered from its store position"
    return block


def _store_tokens(store: str, partition: Partition, spec: BlockSpec, language: str, n_terms: int,
                  loaded: dict[int, DocBlock]) -> tuple[np.ndarray, np.ndarray]:
    """A block's tokens read from the store's shards (the start)."""
    return expand_tokens(_store_block(store, partition, spec, language, n_terms, loaded))


@dataclass(frozen=True, slots=True)
class SCVB0Draw:
    """What every block's SCVB0 start reads besides its own N^theta rows.

    The pass's word factor and the chain's alpha and seed
    (:func:`topicflow.models.lda.gibbs.cvb_start.draw_topics`).
    """

    factor: np.ndarray
    params: GibbsParams


def scvb0_pass_partition(store: str, partition: Partition, language: str, n_terms: int, layer: str,
                         state: SCVB0Pass) -> SCVB0Pass:
    """Task body: carry the SCVB0 start's pass over a partition's blocks in store order.

    Each block's N^theta rows go to the run directory (:func:`write_doc_topic`), where the block's draw
    reads them, so that nothing of size D waits in memory between the pass and the draw.

    Parameters
    ----------
    store : str
    partition : Partition
    language : str
    n_terms : int
    layer : str
        The run directory (local path or URL).
    state : SCVB0Pass
        The pass after the partitions before this one (not modified: the task works on a copy).

    Returns
    -------
    SCVB0Pass
        The pass after this partition.
    """
    state = dataclasses.replace(state, topic_word=state.topic_word.copy(), topic_totals=state.topic_totals.copy())
    loaded: dict[int, DocBlock] = {}
    for spec in partition.blocks:
        write_doc_topic(layer, spec.index, state.visit(_store_block(store, partition, spec, language, n_terms, loaded)))
    return state


def _block_tokens(store: str, partition: Partition, spec: BlockSpec, language: str, n_terms: int, layer: str,
                  sweep: int, loaded: dict[int, DocBlock]) -> tuple[np.ndarray, np.ndarray]:
    """A block's (token_indptr, token_terms): from the assignment layer after the start, else the store."""
    if sweep > 0:
        found = read_tokens(layer, spec.index, spec.n_docs)
        if found is not None:
            return found
    tokens = _store_tokens(store, partition, spec, language, n_terms, loaded)
    write_tokens(layer, spec.index, tokens[0], tokens[1], n_terms)
    return tokens


def _sample(tokens: tuple[np.ndarray, np.ndarray], spec: BlockSpec, layer: str, sweep: int, view: SweepView | None,
            n_topics: int, seed: int, sequential: bool,
            scvb0: SCVB0Draw | None = None) -> tuple[BlockSweep, int]:
    token_indptr, token_terms = tokens
    if sweep == 0 and scvb0 is not None:
        rows = read_doc_topic(layer, spec.index, spec.n_docs, n_topics)
        topics = draw_topics(token_indptr, token_terms, rows, scvb0.factor, scvb0.params, spec.first_doc)
        result = start_block_from_topics(token_indptr, token_terms, topics, n_topics)
    elif sweep == 0 and sequential:
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


def sweep_partition(store: str, partition: Partition, language: str, n_terms: int, layer: str, sweep: int,
                    view: SweepView | None, n_topics: int, seed: int, threads: int,
                    sequential: bool = False, scvb0: SCVB0Draw | None = None) -> PartitionResult:
    """Task body: one sweep (or, for sweep 0, the start) of every block of a partition.

    Parameters
    ----------
    store : str
        The corpus store (read by the start only, and by a later sweep whose run directory lacks a
        block's tokens).
    partition : Partition
    language : str
    n_terms : int
        The language's vocabulary size.
    layer : str
        The run directory holding the assignment layer (z and the blocks' tokens): a local path, or a
        URL on object storage that the task writes to and reads from directly.
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
    scvb0 : SCVB0Draw, optional
        Sweep 0 only: the SCVB0 start, the pass's word factor (each block's N^theta rows are read from
        the run directory, where :func:`scvb0_pass_partition` wrote them).

    Returns
    -------
    PartitionResult
        The blocks' deltas in block order and their merged histograms.

    Notes
    -----
    A block's tokens, z and sampler arrays are released when its sweep ends; a task holds at most
    ``threads`` blocks' arrays at once, and nothing is kept in the process between tasks.
    """
    loaded: dict[int, DocBlock] = {}

    def tokens_of(spec: BlockSpec) -> tuple[np.ndarray, np.ndarray]:
        return _block_tokens(store, partition, spec, language, n_terms, layer, sweep, loaded)

    if sweep == 0 and sequential:  # each block given the ones before it: one after the other
        assert view is not None, "the sequential start needs the counts of the blocks started before"
        term_topic, topic_counts = view.term_topic.copy(), view.topic_counts.copy()
        results = []
        for spec in partition.blocks:
            current = SweepView(term_topic, topic_counts, view.alpha, view.beta, view.seed)
            result, n = _sample(tokens_of(spec), spec, layer, 0, current, n_topics, seed, True)
            apply_delta(term_topic, topic_counts, result.delta)
            results.append((result.delta, result.histograms, n))
    else:
        # The start reads each shard once, before the blocks share them out; later sweeps read a
        # block's tokens in its own thread, from the assignment layer.
        prepared = {spec.index: tokens_of(spec) for spec in partition.blocks} if sweep == 0 else {}
        loaded.clear()

        def one(spec: BlockSpec) -> tuple[CountDelta, DocHistograms, int]:
            tokens = prepared.pop(spec.index) if sweep == 0 else tokens_of(spec)
            result, n = _sample(tokens, spec, layer, sweep, view, n_topics, seed, False, scvb0)
            return result.delta, result.histograms, n  # z is on disk: not kept

        if threads > 1 and len(partition.blocks) > 1:
            with ThreadPoolExecutor(max_workers=min(threads, len(partition.blocks))) as pool:
                results = list(pool.map(one, partition.blocks))
        else:
            results = [one(spec) for spec in partition.blocks]
    histograms = results[0][1].merge(*(h for _, h, _ in results[1:])) if len(results) > 1 else results[0][1]
    return PartitionResult(tuple(d for d, _, _ in results), histograms, sum(n for _, _, n in results))
