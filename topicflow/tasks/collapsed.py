"""Graph builders of the collapsed variational minibatch step (PCSVB0 and SCVB0 by minibatch).

One task per piece of a minibatch (contiguous rows of one shard) runs the method's local step with the
global statistics fixed (:func:`topicflow.models.hdp.pcsvb0.local_minibatch`, or SCVB0's), and the pieces'
:class:`~topicflow.models.common.cvb0.CVB0Stats` are tree-reduced in piece order
(:func:`topicflow.tasks.reduce.tree_reduce`). The math lives in :mod:`topicflow.models`; nothing here
computes, and no task body re-derives an update.

Keys: ``cvb0-local-<token>-<piece>`` and ``cvb0-sum-<token>-<depth>-<index>``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import dask

from topicflow.models.common.blocks import DocBlock
from topicflow.tasks.reduce import tree_reduce

#: ``local(view, block, params) -> stats``: a method's per-partition step (module-level, so it pickles).
LocalStep = Callable[[Any, DocBlock, Any], Any]


def local_piece(local: LocalStep, view: Any, block: DocBlock, start: int, stop: int, params: Any) -> Any:
    """Body of one piece task: the local step over rows ``[start, stop)`` of a shard's block.

    Parameters
    ----------
    local : callable
        The method's local step, ``local(view, block, params) -> CVB0Stats``.
    view : object
        The global statistics the minibatch runs with (a ``GlobalView``).
    block : DocBlock
        One shard of the training language.
    start, stop : int
        Rows of ``block`` that form the piece.
    params : object
        The method's settings.

    Returns
    -------
    CVB0Stats
        The piece's statistics.
    """
    return local(view, block.slice(start, stop), params)


def merge_stats(*parts: Any) -> Any:
    """Body of one tree node: merge statistics left to right (``CVB0Stats.merge``).

    Parameters
    ----------
    *parts : CVB0Stats
        At least one, in piece order.

    Returns
    -------
    CVB0Stats
    """
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    return merged


def map_local_minibatch(
    blocks: Mapping[int, Any], pieces: Sequence[tuple[int, int, int]], view: Any, local: LocalStep, params: Any,
    *, token: str,
) -> list[Any]:
    """One local-step task per piece, in piece order.

    Parameters
    ----------
    blocks : mapping of int to Delayed[DocBlock]
        The shards the pieces read, by store index.
    pieces : sequence of (shard, start, stop)
        The minibatch's pieces in their fixed order (:func:`topicflow.pipeline.vb.online.plan_minibatches`).
    view : object
        The minibatch's global view, scattered (a future) or wrapped in a Delayed by the caller, so the
        graph holds it once.
    local : callable
        The method's local step (module-level).
    params : object
        The method's settings.
    token : str
        Names the keys ``cvb0-local-<token>-<i>``.

    Returns
    -------
    list of Delayed[CVB0Stats]
    """
    task = dask.delayed(local_piece, pure=True)
    return [task(local, view, blocks[shard], start, stop, params, dask_key_name=f"cvb0-local-{token}-{i}")
            for i, (shard, start, stop) in enumerate(pieces)]


def tree_merge_stats(parts: Sequence[Any], *, split_every: int, token: str) -> Any:
    """The pieces' statistics merged in a tree whose shape depends only on ``len(parts)``.

    Parameters
    ----------
    parts : sequence of Delayed[CVB0Stats]
        In piece order.
    split_every : int
        Fan-in of the tree.
    token : str
        Names the keys ``cvb0-sum-<token>-<depth>-<index>``.

    Returns
    -------
    Delayed[CVB0Stats]

    Raises
    ------
    ValueError
        If ``parts`` is empty or ``split_every < 2``.
    """
    return tree_reduce(parts, merge_stats, split_every=split_every, name=f"cvb0-sum-{token}")
