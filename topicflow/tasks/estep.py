"""Graph builders for the variational E-step, the statistics tree-merge, fold-in and evaluation.

Lazy only: nothing here computes, persists, or touches a Client. The math lives in
:mod:`topicflow.models.lda.vb.estep` and :mod:`topicflow.metrics.heldout`; task bodies only call it.
Keys are deterministic and readable (``estep-<token>-<block>``), so the dashboard reads like the
algorithm and the same inputs give the same graph.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import dask
import numpy as np
from dask.base import tokenize

from topicflow.io.outputs.gamma_scratch import read_gamma, write_gamma
from topicflow.models.common.blocks import DocBlock
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.layout import PreparedTopics
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.tasks.reduce import tree_reduce

#: Either E-step's parameters; the type selects the kernel.
EStepParams = VBParams | HybridParams


def run_estep(
    blocks: Mapping[str, DocBlock], topics: PreparedTopics, doc_topic_prior: np.ndarray,
    params: EStepParams, epoch: int = 0,
) -> EStepStats:
    """The dense variational E-step for :class:`VBParams`, the sampled one for :class:`HybridParams`.

    ``epoch`` (iteration or minibatch number) only reaches the sampler, so each pass draws afresh.
    """
    if isinstance(params, HybridParams):
        stats, _ = hybrid_estep_block(blocks, topics, doc_topic_prior, params, epoch=epoch)
    else:
        stats, _ = estep_block(blocks, topics, doc_topic_prior, params)
    return stats


def _estep_task(
    blocks: Mapping[str, DocBlock], topics: PreparedTopics,
    doc_topic_prior: np.ndarray, params: EStepParams, epoch: int = 0,
) -> EStepStats:
    return run_estep(blocks, topics, doc_topic_prior, params, epoch)


def _estep_warm_task(
    blocks: Mapping[str, DocBlock], topics: PreparedTopics, doc_topic_prior: np.ndarray,
    params: VBParams, scratch: str, shard_id: str, iteration: int,
) -> EStepStats:
    gamma_init = read_gamma(scratch, iteration - 1, shard_id)
    stats, gamma = estep_block(blocks, topics, doc_topic_prior, params, return_gamma=True, gamma_init=gamma_init)
    write_gamma(scratch, iteration, shard_id, gamma)  # type: ignore[arg-type]
    return stats


def merge_stats(*parts: EStepStats) -> EStepStats:
    """Body of one tree node: its children merged left to right (module-level so it pickles)."""
    return EStepStats.merge_all(parts)


def map_estep(
    blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray,
    params: EStepParams, *, token: str, epoch: int = 0,
) -> list[Any]:
    """One E-step task per block, keyed ``estep-<token>-<i>``.

    Parameters
    ----------
    blocks : sequence of Delayed[dict[str, DocBlock]]
        In global block order.
    topics : Delayed or Future of PreparedTopics
        Values exp(E[log beta]) of every language in the E-step layout
        (:func:`topicflow.models.lda.vb.layout.prepare_topics_from_var`); the caller shares it once.
    params : VBParams or HybridParams
        Selects the E-step (see :func:`run_estep`).
    token : str
        Names this E-step (e.g. a tokenize of the model state and iteration).
    epoch : int
        Iteration number, for the hybrid sampler's random numbers.

    Returns
    -------
    list of Delayed[EStepStats], in the order of ``blocks``.
    """
    task = dask.delayed(_estep_task, pure=True)
    return [
        task(block, topics, doc_topic_prior, params, epoch, dask_key_name=f"estep-{token}-{i}")
        for i, block in enumerate(blocks)
    ]


def _piece_estep_task(
    blocks: Mapping[str, DocBlock], start: int, stop: int, topics: PreparedTopics,
    doc_topic_prior: np.ndarray, params: EStepParams, epoch: int,
) -> EStepStats:
    rows = {lang: block.slice(start, stop) for lang, block in blocks.items()}
    return run_estep(rows, topics, doc_topic_prior, params, epoch)


def map_piece_estep(
    shard_blocks: Mapping[int, Any], pieces: Sequence[tuple[int, int, int]], topics: Any,
    doc_topic_prior: np.ndarray, params: EStepParams, *, epoch: int, token: str,
) -> list[Any]:
    """One E-step task per piece ``(shard, start, stop)`` of a minibatch, keyed ``estep-<token>-<i>``.

    ``shard_blocks[shard]`` is the ``Delayed[dict[str, DocBlock]]`` of the whole shard; each task
    slices its rows from it, so a shard is read once per minibatch whatever the number of pieces.
    """
    task = dask.delayed(_piece_estep_task, pure=True)
    return [
        task(shard_blocks[shard], start, stop, topics, doc_topic_prior, params, epoch,
             dask_key_name=f"estep-{token}-{i}")
        for i, (shard, start, stop) in enumerate(pieces)
    ]


def map_estep_warm(
    blocks: Sequence[Any], topics: Any, doc_topic_prior: np.ndarray, params: VBParams, *,
    scratch: str, shard_ids: Sequence[str], iteration: int, token: str,
) -> list[Any]:
    """Like :func:`map_estep`, but each document starts from its gamma of the previous iteration.

    Gamma goes through :mod:`topicflow.io.outputs.gamma_scratch` (read ``iteration - 1``, write
    ``iteration``), so a recomputed task sees the same input.
    """
    task = dask.delayed(_estep_warm_task, pure=True)
    return [
        task(block, topics, doc_topic_prior, params, scratch, shard_id, iteration,
             dask_key_name=f"estep-{token}-{i}")
        for i, (block, shard_id) in enumerate(zip(blocks, shard_ids))
    ]


def tree_merge(parts: Sequence[Any], *, split_every: int, token: str) -> Any:
    """Tree-merge E-step statistics (see :func:`topicflow.tasks.reduce.tree_reduce`): ``Delayed[EStepStats]``."""
    return tree_reduce(parts, merge_stats, split_every=split_every, name=f"merge-{token}")


def graph_token(*parts: Any) -> str:
    """A short deterministic token for key names."""
    return tokenize(*parts)[:16]
