"""Graph builders of the infinite-vocabulary LDA driver: minibatch pieces, their strings, E-step and merge.

Lazy only: nothing here computes or touches a Client. The math lives in
:mod:`topicflow.models.infvoc_lda`; task bodies only call it. A minibatch runs in two rounds over the
same pieces (slices of the store's ordered-token layer, ``infvoc-piece-<token>-<j>``):

1. ``infvoc-codes-<token>-<j>``: the piece's distinct token codes in first-seen order (term ids >= 0,
   out-of-vocabulary tokens as their strings), from which the driver extends the global word index;
2. ``infvoc-estep-<token>-<j>``: the piece's tokens translated to global word ids and sampled by
   :func:`~topicflow.models.infvoc_lda.estep_documents`; the statistics are tree-merged in piece order
   (``infvoc-merge-<token>-...``, :func:`topicflow.tasks.reduce.tree_reduce`).
"""
from __future__ import annotations

from typing import Any, Sequence

import dask
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.infvoc_lda import (
    InfVocParams,
    InfVocStats,
    PreparedWeights,
    estep_documents,
)
from topicflow.tasks.reduce import tree_reduce


def slice_piece(block: OrderedBlock, start: int, stop: int) -> OrderedBlock:
    """Return rows ``start:stop`` of a shard's ordered block (module-level so it pickles).

    Parameters
    ----------
    block : OrderedBlock
    start, stop : int

    Returns
    -------
    OrderedBlock
    """
    return block.slice(start, stop)


def first_seen_codes(block: OrderedBlock) -> IntArray:
    """The block's distinct token codes in the order of their first occurrence (reading order).

    Parameters
    ----------
    block : OrderedBlock

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> block = OrderedBlock(np.array([0, 2, 4]), np.array([3, -1, 3, 0], np.int32), np.array(["emu"], dtype=object),
    ...                      np.array(["a", "b"], dtype=object), 0, 5)
    >>> first_seen_codes(block).tolist()
    [3, -1, 0]
    """
    tokens = np.asarray(block.tokens, dtype=np.int64)
    codes, first = np.unique(tokens, return_index=True)
    return codes[np.argsort(first, kind="stable")]


def piece_codes(block: OrderedBlock) -> tuple[IntArray, list[str]]:
    """Task body of round 1: distinct codes in first-seen order and the strings of the negative ones.

    Parameters
    ----------
    block : OrderedBlock
        One piece.

    Returns
    -------
    codes : ndarray of int64
        :func:`first_seen_codes`.
    oov : list of str
        ``block.oov_terms[-c - 1]`` of every negative code c, in the order of ``codes``.
    """
    codes = first_seen_codes(block)
    return codes, [str(block.oov_terms[-int(c) - 1]) for c in codes[codes < 0].tolist()]


def piece_word_ids(block: OrderedBlock, codes: IntArray, code_word_ids: IntArray) -> IntArray:
    """Translate a piece's token codes to global word ids, given the id of each of its distinct codes.

    Parameters
    ----------
    block : OrderedBlock
    codes : ndarray of int64
        Distinct codes (any order), covering every token of ``block``.
    code_word_ids : ndarray of int64
        Global word id of each of ``codes``.

    Returns
    -------
    ndarray of int64
        One id per token, in reading order.
    """
    tokens = np.asarray(block.tokens, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    at = np.searchsorted(codes[order], tokens)
    if tokens.shape[0] and (np.any(at >= codes.shape[0]) or np.any(codes[order][np.minimum(at, codes.shape[0] - 1)]
                                                                   != tokens)):
        raise InvalidParameterError("a token code of the piece has no word id; pass the piece's own codes")
    return np.asarray(code_word_ids, dtype=np.int64)[order][at] if tokens.shape[0] else np.zeros(0, np.int64)


def estep_piece(block: OrderedBlock, codes: IntArray, code_word_ids: IntArray, weights: PreparedWeights,
                params: InfVocParams, minibatch: int) -> tuple[InfVocStats, FloatArray]:
    """Task body of round 2: the hybrid E-step of one piece (documents keyed by their store position).

    Parameters
    ----------
    block : OrderedBlock
        One piece (its ``first_doc`` is the global position of its first document).
    codes, code_word_ids : ndarray of int64
        The piece's distinct codes and their global word ids.
    weights : PreparedWeights
        Of the minibatch's words (shared).
    params : InfVocParams
    minibatch : int
        The minibatch number i (keys the random numbers).

    Returns
    -------
    stats : InfVocStats
    doc_topic : ndarray of shape (n_docs, n_topics)
    """
    words = piece_word_ids(block, codes, code_word_ids)
    return estep_documents(block.indptr, words, weights, params, first_doc=int(block.first_doc), minibatch=minibatch)


def merge_infvoc(*parts: InfVocStats) -> InfVocStats:
    """Body of one tree node: its children merged left to right (module-level so it pickles)."""
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    return merged


def _stats_of(result: tuple[InfVocStats, FloatArray]) -> InfVocStats:
    return result[0]


def _doc_topic_of(result: tuple[InfVocStats, FloatArray]) -> FloatArray:
    return result[1]


def map_pieces(shard_blocks: Any, pieces: Sequence[tuple[int, int, int]], *, token: str) -> list[Any]:
    """One slicing task per piece ``(shard, start, stop)``, keyed ``infvoc-piece-<token>-<j>``.

    Parameters
    ----------
    shard_blocks : mapping of int to Delayed[OrderedBlock]
        The whole shard's ordered block, by store index (read once per minibatch).
    pieces : sequence of (int, int, int)
    token : str

    Returns
    -------
    list of Delayed[OrderedBlock]
    """
    task = dask.delayed(slice_piece, pure=True)
    return [task(shard_blocks[shard], start, stop, dask_key_name=f"infvoc-piece-{token}-{j}")
            for j, (shard, start, stop) in enumerate(pieces)]


def map_codes(pieces: Sequence[Any], *, token: str) -> list[Any]:
    """Round 1: :func:`piece_codes` of every piece, keyed ``infvoc-codes-<token>-<j>``.

    Parameters
    ----------
    pieces : sequence of Delayed[OrderedBlock]
    token : str

    Returns
    -------
    list of Delayed[tuple]
    """
    task = dask.delayed(piece_codes, pure=True)
    return [task(piece, dask_key_name=f"infvoc-codes-{token}-{j}") for j, piece in enumerate(pieces)]


def map_estep(pieces: Sequence[Any], codes: Sequence[IntArray], code_word_ids: Sequence[IntArray], weights: Any,
              params: InfVocParams, *, minibatch: int, token: str, split_every: int,
              doc_topics: bool = False) -> tuple[Any, list[Any]]:
    """Round 2: the E-step of every piece, tree-merged in piece order.

    Parameters
    ----------
    pieces : sequence of Delayed[OrderedBlock]
    codes, code_word_ids : sequence of ndarray
        Per piece: its distinct codes and their global word ids.
    weights : Delayed or Future of PreparedWeights
        Shared once by the caller.
    params : InfVocParams
    minibatch : int
    token : str
    split_every : int
        Fan-in of the merge tree.
    doc_topics : bool, default False
        Also return each piece's document topic vectors.

    Returns
    -------
    stats : Delayed[InfVocStats]
    doc_topic : list of Delayed[ndarray]
        Per piece (empty unless ``doc_topics``).
    """
    task = dask.delayed(estep_piece, pure=True)
    results = [task(piece, c, ids, weights, params, minibatch, dask_key_name=f"infvoc-estep-{token}-{j}")
               for j, (piece, c, ids) in enumerate(zip(pieces, codes, code_word_ids))]
    get_stats = dask.delayed(_stats_of, pure=True)
    stats = [get_stats(r, dask_key_name=f"infvoc-stats-{token}-{j}") for j, r in enumerate(results)]
    merged = tree_reduce(stats, merge_infvoc, split_every=split_every, name=f"infvoc-merge-{token}")
    if not doc_topics:
        return merged, []
    get_gamma = dask.delayed(_doc_topic_of, pure=True)
    return merged, [get_gamma(r, dask_key_name=f"infvoc-doctopic-{token}-{j}") for j, r in enumerate(results)]
