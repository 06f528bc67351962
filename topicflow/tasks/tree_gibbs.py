"""Task bodies of the distributed tree collapsed Gibbs sampler (AD-LDA over shards).

Each function is one task of :func:`topicflow.pipeline.tree_lda.gibbs.fit_tree_gibbs`: start a
shard's chain (from blocks or from a store shard read on the worker), run a shard's sweeps against
the other shards' edge counts, and summarize a shard for the driver's synchronization. The math is
:mod:`topicflow.models.tree_lda.gibbs`; nothing here re-derives it. Module-level functions, so they
pickle.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from topicflow._typing import FloatArray, IntArray, TreeNormalization
from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import load_multiblock
from topicflow.models.common.blocks import DocBlock
from topicflow.models.tree_lda.gibbs import (
    TreeGibbsParams,
    TreeGibbsState,
    initial_state,
    joint_log_likelihood,
    run_sweeps,
)
from topicflow.models.tree_lda.tree import PriorTree


@dataclass(frozen=True, slots=True)
class ShardSummary:
    """What the driver gathers of one shard at a synchronization (small: no token arrays).

    Attributes
    ----------
    edge_topic_counts : ndarray of shape (n_topics, n_edges), int32
        The shard's N_ke.
    group_topic_counts : ndarray of shape (n_topics, n_groups), int64
        The shard's G_kg (per internal node under "node": N_ki); also readable as ``node_topic_counts``.
    doc_log_likelihood : float
        The shard's documents' part of log p(w, z, y) (theta integrated out).
    n_tokens : int
    """

    edge_topic_counts: np.ndarray
    group_topic_counts: np.ndarray
    doc_log_likelihood: float
    n_tokens: int

    @property
    def node_topic_counts(self) -> np.ndarray:
        """``group_topic_counts`` under its former name."""
        return self.group_topic_counts


def counts_only_state(edge_topic_counts: np.ndarray, group_topic_counts: np.ndarray, alpha: FloatArray,
                      normalization: TreeNormalization = "node") -> TreeGibbsState:
    """A state with no documents and the given topic counts (for the topic-side read-outs and scores).

    Parameters
    ----------
    edge_topic_counts : ndarray of shape (n_topics, n_edges)
    group_topic_counts : ndarray of shape (n_topics, n_groups)
        G_kg of ``normalization``'s groups (N_ki under "node").
    alpha : ndarray of shape (n_topics,)
    normalization : {"node", "node_language"}, default "node"
        The params' normalization (the read-outs of the state use it).

    Returns
    -------
    TreeGibbsState
        Zero documents and tokens; :func:`~topicflow.models.tree_lda.gibbs.joint_log_likelihood` of it is
        the topic (tree) part of the joint alone.
    """
    n_topics = edge_topic_counts.shape[0]
    empty = np.zeros(0, dtype=np.int32)
    return TreeGibbsState(np.zeros(1, dtype=np.int64), empty, empty, empty, np.zeros((0, n_topics), np.int32),
                          np.asarray(edge_topic_counts, np.int32), np.asarray(group_topic_counts, np.int64), 0,
                          np.asarray(alpha, np.float64), 0, normalization)


def start_shard(blocks: DocBlock | Mapping[str, DocBlock], tree: PriorTree, params: TreeGibbsParams) -> TreeGibbsState:
    """Task body: the random start of one shard's chain (:func:`~topicflow.models.tree_lda.gibbs.initial_state`).

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
        The shard's documents, one block per language.
    tree : PriorTree
    params : TreeGibbsParams

    Returns
    -------
    TreeGibbsState
    """
    return initial_state(blocks, tree, params)


def start_store_shard(store: str, shard: ShardInfo, vocab_sizes: Mapping[str, int], tree: PriorTree,
                      params: TreeGibbsParams) -> TreeGibbsState:
    """Task body: read one shard of a store (on the worker) and start its chain.

    Parameters
    ----------
    store : str
        The corpus store directory.
    shard : ShardInfo
        The shard as the manifest lists it.
    vocab_sizes : mapping of str to int
        The languages to read (those of the tree) with their vocabulary sizes.
    tree : PriorTree
    params : TreeGibbsParams

    Returns
    -------
    TreeGibbsState
    """
    return initial_state(load_multiblock(store, shard, vocab_sizes, with_meta=False), tree, params)


def sweep_shard(state: TreeGibbsState, tree: PriorTree, params: TreeGibbsParams, n_sweeps: int,
                total_counts: IntArray | None) -> TreeGibbsState:
    """Task body: ``n_sweeps`` sweeps of one shard with the other shards' edge counts fixed.

    Parameters
    ----------
    state : TreeGibbsState
        The shard's chain as of the last synchronization.
    tree : PriorTree
    params : TreeGibbsParams
    n_sweeps : int
    total_counts : ndarray of shape (n_topics, n_edges) or None
        The sum of every shard's N_ke at the last synchronization (the same array for every shard, so
        it is broadcast once); None with one shard.

    Returns
    -------
    TreeGibbsState

    Notes
    -----
    The other shards' counts are ``total_counts - state.edge_topic_counts``: the state has not moved
    since the synchronization that summed it.
    """
    pseudo = None if total_counts is None else (
        np.asarray(total_counts, dtype=np.int64) - state.edge_topic_counts).astype(np.float64)
    return run_sweeps(state, tree, params, n_sweeps, pseudo_counts=pseudo)


def summarize_shard(state: TreeGibbsState, tree: PriorTree) -> ShardSummary:
    """Task body: the shard's counts and its documents' part of the joint log-likelihood.

    Parameters
    ----------
    state : TreeGibbsState
    tree : PriorTree

    Returns
    -------
    ShardSummary

    Notes
    -----
    The documents' part is ``joint_log_likelihood(state) - joint_log_likelihood(counts only)``: the
    model's function evaluated twice, so the score's math stays in :mod:`topicflow.models`.
    """
    topic_part = joint_log_likelihood(counts_only_state(state.edge_topic_counts, state.group_topic_counts,
                                                        state.doc_topic_prior, state.normalization), tree)
    return ShardSummary(state.edge_topic_counts.copy(), state.group_topic_counts.copy(),
                        joint_log_likelihood(state, tree) - topic_part, state.n_tokens)
