"""Graph builders of batch PCVB0: the random start and one iteration per shard, and their tree merge.

Lazy only. The math is :mod:`topicflow.models.hdp.pcvb0`; q goes through
:mod:`topicflow.io.outputs.assignment_scratch` (iteration t reads ``t - 1`` and writes ``t``, so a task
the scheduler recomputes sees the same input). A task works through its shard in slices of documents
holding at most ``slice_rows`` rows of q, so a worker holds one slice of q at a time. Keys:
``pcvb0-start-<token>-<i>``, ``pcvb0-sweep-<token>-<t>-<i>``, ``pcvb0-merge-<token>-<t>-...``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import dask
import numpy as np

from topicflow.io.outputs.assignment_scratch import create_q, open_q
from topicflow.models.common.blocks import DocBlock
from topicflow.models.hdp.pcvb0 import (
    PCVB0Stats,
    PCVB0View,
    block_statistics,
    initial_q,
    sweep_block,
    unit_layout,
)
from topicflow.tasks.reduce import tree_reduce

#: Bytes of q a task holds at a time (one slice of documents).
SLICE_BYTES = 8 * 2**20


def slice_rows_for(truncation: int, dtype: str, slice_bytes: int = SLICE_BYTES) -> int:
    """Count the rows of q that fit in ``slice_bytes`` bytes (at least 1).

    Parameters
    ----------
    truncation : int
    dtype : str
    slice_bytes : int

    Returns
    -------
    int
    """
    return max(1, slice_bytes // (truncation * np.dtype(dtype).itemsize))


def doc_slices(block: DocBlock, clumping: bool, max_rows: int) -> Iterator[tuple[int, int, int, int]]:
    """Consecutive document ranges of a block with at most ``max_rows`` rows of q each (one document at least).

    Parameters
    ----------
    block : DocBlock
    clumping : bool
    max_rows : int

    Yields
    ------
    (first_doc, stop_doc, first_row, stop_row)
        Block-local documents and their rows of q.
    """
    indptr, _, _ = unit_layout(block, clumping)
    d = 0
    while d < block.n_docs:
        stop = int(np.searchsorted(indptr, indptr[d] + max_rows, side="right")) - 1
        stop = min(max(stop, d + 1), block.n_docs)
        yield d, stop, int(indptr[d]), int(indptr[stop])
        d = stop


def _add(total: PCVB0Stats | None, part: PCVB0Stats) -> PCVB0Stats:
    # A running left fold (the bits of merge_all over the slices), so that a task holds one slice's
    # statistics at a time rather than a list of them.
    return part if total is None else total.merge(part)


def start_task(block: DocBlock, truncation: int, seed: int, clumping: bool, dtype: str, alpha: float,
               scratch: str, shard_id: str, slice_rows: int, weights: np.ndarray | None = None) -> PCVB0Stats:
    """Draw a shard's starting q, store it as iteration -1 and return its statistics.

    Parameters
    ----------
    block : DocBlock
    truncation, seed : int
    clumping : bool
    dtype : str
    alpha : float
    scratch, shard_id : str
        The run directory of q (a local path or a URL) and the shard.
    slice_rows : int
    weights : ndarray of shape (T,), optional
        Start weights (:func:`topicflow.models.hdp.pcvb0.initial_q`).

    Returns
    -------
    PCVB0Stats
    """
    rows = int(unit_layout(block, clumping)[0][-1])
    writer = create_q(scratch, -1, shard_id, rows, truncation, dtype)
    total = None
    try:
        for d0, d1, r0, _ in doc_slices(block, clumping, slice_rows):
            sub = block.slice(d0, d1)
            q = initial_q(sub, truncation, seed=seed, clumping=clumping, dtype=dtype, weights=weights)
            writer.write(r0, q)
            total = _add(total, block_statistics(sub, q, alpha=alpha, clumping=clumping))
            del q
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return total if total is not None else PCVB0Stats.zeros(truncation)


def sweep_task(block: DocBlock, view: PCVB0View, clumping: bool, dtype: str, scratch: str, shard_id: str,
               iteration: int, slice_rows: int) -> PCVB0Stats:
    """One PCVB0 iteration over a shard: read q of ``iteration - 1``, update it, store it as ``iteration``.

    Parameters
    ----------
    block : DocBlock
    view : PCVB0View
    clumping : bool
    dtype : str
    scratch, shard_id : str
    iteration, slice_rows : int

    Returns
    -------
    PCVB0Stats
    """
    T = view.truncation
    rows = int(unit_layout(block, clumping)[0][-1])
    old = open_q(scratch, iteration - 1, shard_id, n_rows=rows, truncation=T)
    writer = create_q(scratch, iteration, shard_id, rows, T, dtype)
    total = None
    try:
        for d0, d1, r0, r1 in doc_slices(block, clumping, slice_rows):
            q = np.ascontiguousarray(old[r0:r1], dtype=dtype)
            total = _add(total, sweep_block(view, block.slice(d0, d1), q, clumping=clumping))
            writer.write(r0, q)
            del q
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return total if total is not None else PCVB0Stats.zeros(T)


def merge_stats(*parts: PCVB0Stats) -> PCVB0Stats:
    """Body of one tree node: its children merged left to right.

    Parameters
    ----------
    *parts : PCVB0Stats

    Returns
    -------
    PCVB0Stats
    """
    return PCVB0Stats.merge_all(parts)


def map_start(blocks: Sequence[Any], shard_ids: Sequence[str], *, truncation: int, seed: int, clumping: bool,
              dtype: str, alpha: float, scratch: str, slice_rows: int, token: str,
              weights: np.ndarray | None = None) -> list[Any]:
    """One start task per shard, keyed ``pcvb0-start-<token>-<i>``.

    Parameters
    ----------
    blocks : sequence of Delayed[DocBlock]
        In store order.
    shard_ids : sequence of str
    truncation, seed : int
    clumping : bool
    dtype : str
    alpha : float
    scratch : str
    slice_rows : int
    token : str
    weights : ndarray of shape (T,), optional
        Start weights.

    Returns
    -------
    list of Delayed[PCVB0Stats]
    """
    task = dask.delayed(start_task, pure=True)
    return [task(block, truncation, seed, clumping, dtype, alpha, scratch, shard_id, slice_rows, weights,
                 dask_key_name=f"pcvb0-start-{token}-{i}")
            for i, (block, shard_id) in enumerate(zip(blocks, shard_ids))]


def map_sweep(blocks: Sequence[Any], view: Any, shard_ids: Sequence[str], *, clumping: bool, dtype: str,
              scratch: str, iteration: int, slice_rows: int, token: str) -> list[Any]:
    """One sweep task per shard, keyed ``pcvb0-sweep-<token>-<iteration>-<i>``.

    Parameters
    ----------
    blocks : sequence of Delayed[DocBlock]
    view : Delayed or Future of PCVB0View
        Shared once by the caller.
    shard_ids : sequence of str
    clumping : bool
    dtype : str
    scratch : str
    iteration, slice_rows : int
    token : str

    Returns
    -------
    list of Delayed[PCVB0Stats]
    """
    task = dask.delayed(sweep_task, pure=True)
    return [task(block, view, clumping, dtype, scratch, shard_id, iteration, slice_rows,
                 dask_key_name=f"pcvb0-sweep-{token}-{iteration}-{i}")
            for i, (block, shard_id) in enumerate(zip(blocks, shard_ids))]


def tree_merge(parts: Sequence[Any], *, split_every: int, name: str) -> Any:
    """Tree-merge PCVB0 statistics in part order (:func:`topicflow.tasks.reduce.tree_reduce`).

    Parameters
    ----------
    parts : sequence of Delayed[PCVB0Stats]
    split_every : int
    name : str

    Returns
    -------
    Delayed[PCVB0Stats]
    """
    return tree_reduce(parts, merge_stats, split_every=split_every, name=name)
