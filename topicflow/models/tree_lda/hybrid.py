"""Hybrid variational-MCMC inference for tree-prior LDA (Zhai 2014, sec. 5.2.3, eq. 5.6).

This module owns the hybrid scheme's tree-specific half: q(pi | lambda) is variational as in
:mod:`topicflow.models.tree_lda.vb`, and each document's (z, y) is Gibbs-sampled under
``exp(E_q[log pi])``. It must not import dask, zarr or logging, and does no I/O.

Why the LDA sampler is reused unchanged. The chapter's conditional is
``q(z_n = k, y_n = s | rest) ∝ (alpha_k + N_dk^{-n}) w_ks`` with ``w_ks = exp(sum_{e in s} E_q[log pi_{k,e}])``
over the paths s of the token's word. pi is not collapsed, so the other tokens enter only through
the document's topic counts, never through their paths. Summing over s gives
``q(z_n = k | rest) ∝ (alpha_k + N_dk^{-n}) E_kw`` with ``E_kw = sum_s w_ks``: the LDA hybrid sampler
(:func:`topicflow.models.lda.vb.hybrid.hybrid_estep_block`) run on the tree's word weights. Given z,
each token's path is independent of everything else with ``q(y_n = s | z_n = k) = w_ks / E_kw``, so
drawing y after the z chain has the joint chain's distribution (test: exact enumeration on a toy).
Because the paths of the tokens with the same (topic, word) are i.i.d., their counts over the kept
sweeps are one multinomial draw of ``M * Nbar_kw`` trials with probabilities ``w_ks / E_kw``
(:func:`sample_path_counts`), drawn from the merged statistics with randomness keyed by
(seed, epoch, language) only, so the result does not depend on how documents were split. Splitting by
the expectation instead (``path_mode="expectation"``, Rao-Blackwellized) is the VB split
(:func:`topicflow.models.tree_lda.vb.split_path_counts`).

Sweeps (pitfall P5). The chapter: B = 5 burn-in, M = 5 kept; its reference code (kzhai/variationalTree)
draws a random initial (z, y), then runs 10 sweeps and keeps the last 5. ``HybridParams(burn_in=5,
samples=5, init="random")`` is exactly that: sweep 0 assigns the random start (it is not a Gibbs
sweep), then 5 discarded and 5 kept Gibbs sweeps (:data:`CHAPTER_HYBRID_SETTINGS`). With
``init="progressive"`` (topicflow's default) sweep 0 is a sequential draw instead of a uniform one.

Glossary: see :mod:`topicflow.models.tree_lda.vb`; ``samples`` (M) kept sweeps, ``burn_in`` (B).

References
----------
Zhai (2014), sec. 4.2 and 5.2.3. Mimno, Hoffman and Blei (2012). Sparse stochastic inference for LDA. ICML.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.rng import STREAM_TREE_PATH, doc_generator
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.layout import PreparedTopics
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.models.tree_lda.vb import (
    TreeVBLayout,
    blend_edge_var,
    check_edge_var,
    edge_counts,
    path_log_weights,
    prepare_tree_topics,
    split_path_counts,
)

#: The chapter's setting (B = 5, M = 5, random start; 10 Gibbs sweeps in all): ``HybridParams(n_topics=K, **...)``.
CHAPTER_HYBRID_SETTINGS: dict[str, Any] = {"burn_in": 5, "samples": 5, "init": "random"}
PathMode = Literal["sample", "expectation"]


def tree_hybrid_estep_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    edge_var: FloatArray | PreparedTopics,
    layout: TreeVBLayout,
    doc_topic_prior: FloatArray | float,
    params: HybridParams,
    *,
    epoch: int = 0,
    return_gamma: bool = False,
    compute_bound: bool = True,
) -> tuple[EStepStats, FloatArray | None]:
    """Sample each document's topics from the path marginal (the z part of the joint (z, y) chain).

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        As in :func:`topicflow.models.lda.vb.hybrid.hybrid_estep_block`.
    edge_var : ndarray of shape (n_topics, n_edges), float64, or PreparedTopics
        Lambda, or :func:`topicflow.models.tree_lda.vb.prepare_tree_topics` of it (build once per iteration).
    layout : TreeVBLayout
    doc_topic_prior : float or ndarray of shape (n_topics,)
    params : HybridParams
    epoch : int, default 0
    return_gamma, compute_bound : bool
        As in ``hybrid_estep_block``.

    Returns
    -------
    stats : EStepStats
        ``topic_terms`` are the kept-sweep counts Nbar_kw = (1/M) sum_kept [z = k, w]; the paths are
        drawn afterwards from the merged statistics (:func:`sample_path_counts`).
    doc_topic_var : ndarray of shape (n_docs, n_topics), or None

    Notes
    -----
    ``hybrid_estep_block(blocks, prepare_tree_topics(edge_var, layout), ...)``: see the module docstring.
    """
    topics = edge_var if isinstance(edge_var, PreparedTopics) else prepare_tree_topics(edge_var, layout)
    return hybrid_estep_block(blocks, topics, doc_topic_prior, params, epoch=epoch, return_gamma=return_gamma,
                              compute_bound=compute_bound)


def sample_path_counts(
    topic_terms: Mapping[str, TopicTermStats], edge_var: FloatArray, layout: TreeVBLayout, *,
    samples: int, seed: int, epoch: int,
) -> tuple[IntArray, FloatArray]:
    """Draw the kept sweeps' paths y | z: per (k, w) a multinomial of M Nbar_kw tokens over w's paths.

    Parameters
    ----------
    topic_terms : mapping of str to TopicTermStats
        Merged hybrid statistics Nbar_kw per language (kept counts / M).
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used.
    layout : TreeVBLayout
    samples : int
        M, the kept sweeps the statistics were averaged over.
    seed, epoch : int
        Randomness: one generator per (seed, epoch, language), ``doc_generator(seed, STREAM_TREE_PATH,
        epoch, language index)``, drawn over the present terms in increasing order.

    Returns
    -------
    paths : ndarray of shape (n_present_paths,), int64
    path_counts : ndarray of shape (n_topics, n_present_paths), float64
        Sampled (token, kept sweep) counts per (topic, path), integers; sum over a word's paths = M Nbar_kw.

    Raises
    ------
    InvalidParameterError
        ``samples`` < 1, or M Nbar_kw is not an integer (statistics not from the hybrid E-step with M).
    """
    if samples < 1:
        raise InvalidParameterError(f"samples must be >= 1, got {samples!r}")
    lam = check_edge_var(edge_var, layout)
    log_w = path_log_weights(lam, layout)
    path_parts, count_parts = [], []
    for li, lang in enumerate(layout.tree.languages):
        if lang not in topic_terms or topic_terms[lang].term_ids.size == 0:
            continue
        stats = topic_terms[lang]
        trials = np.rint(stats.values * samples)
        if not np.allclose(trials, stats.values * samples, rtol=0.0, atol=1e-6):
            raise InvalidParameterError(
                f"language {lang!r}: statistics times samples={samples} are not whole counts; "
                "pass the hybrid E-step's statistics and its HybridParams.samples")
        indptr = layout.word_path_indptr[li]
        starts, n_paths = indptr[stats.term_ids], np.diff(indptr)[stats.term_ids]
        width = int(n_paths.max())
        slot = np.arange(width)
        local = np.minimum(starts[:, None] + slot[None, :], starts[:, None] + n_paths[:, None] - 1)
        paths = int(layout.path_offsets[li]) + local  # (n_present, width); padding repeats the last path
        valid = slot[None, :] < n_paths[:, None]
        logits = np.where(valid[None, :, :], log_w[:, paths], -np.inf)  # (K, n_present, width)
        probs = np.exp(logits - logits.max(axis=2, keepdims=True))
        probs /= probs.sum(axis=2, keepdims=True)
        rng = doc_generator(seed, STREAM_TREE_PATH, epoch, li)
        drawn = rng.multinomial(trials.astype(np.int64), probs).astype(np.float64)  # (K, n_present, width)
        path_parts.append(paths[valid])
        count_parts.append(drawn[:, valid])
    if not path_parts:
        return np.zeros(0, np.int64), np.zeros((lam.shape[0], 0))
    return np.concatenate(path_parts).astype(np.int64), np.concatenate(count_parts, axis=1)


def hybrid_edge_counts(
    stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout, *, samples: int, seed: int, epoch: int,
    path_mode: PathMode = "sample",
) -> FloatArray:
    """Edge counts of eq. 5.6, (1/M) sum over the kept sweeps' tokens with z = k and e on y, (n_topics, n_edges).

    Parameters
    ----------
    stats : EStepStats
        Merged statistics of :func:`tree_hybrid_estep_block`.
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used.
    layout : TreeVBLayout
    samples : int
        M (``HybridParams.samples``); 1/M multiplies the counts only, never beta (P5).
    seed, epoch : int
        Randomness of the path draws (:func:`sample_path_counts`).
    path_mode : {"sample", "expectation"}, default "sample"
        "sample": paths drawn y | z (the chapter). "expectation": each Nbar_kw split over the word's
        paths by w_ks / E_kw (Rao-Blackwellized: the same mean, less noise).

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64

    Raises
    ------
    InvalidParameterError
        Unknown ``path_mode``, or as :func:`sample_path_counts`.
    """
    if path_mode == "expectation":
        paths, counts = split_path_counts(stats.topic_terms, edge_var, layout)
        return edge_counts(paths, counts, layout)
    if path_mode != "sample":
        raise InvalidParameterError(f"path_mode must be 'sample' or 'expectation', got {path_mode!r}")
    paths, counts = sample_path_counts(stats.topic_terms, edge_var, layout, samples=samples, seed=seed, epoch=epoch)
    return edge_counts(paths, counts, layout) / samples


def mstep_tree_hybrid(
    stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout, *, samples: int, seed: int, epoch: int,
    path_mode: PathMode = "sample",
) -> FloatArray:
    """Eq. 5.6: lambda_{k,e} = beta_e + :func:`hybrid_edge_counts`.

    Parameters
    ----------
    stats : EStepStats
        Merged statistics of :func:`tree_hybrid_estep_block`.
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used.
    layout : TreeVBLayout
    samples : int
        M (``HybridParams.samples``).
    seed, epoch : int
        Randomness of the path draws.
    path_mode : {"sample", "expectation"}, default "sample"
        As in :func:`hybrid_edge_counts`.

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64

    Raises
    ------
    InvalidParameterError
        As :func:`hybrid_edge_counts`.
    """
    counts = hybrid_edge_counts(stats, edge_var, layout, samples=samples, seed=seed, epoch=epoch, path_mode=path_mode)
    return layout.tree.edge_prior[None, :] + counts


def mstep_tree_hybrid_online(
    stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout, *, samples: int, seed: int, epoch: int,
    rho: float, total_docs: int, path_mode: PathMode = "sample",
) -> FloatArray:
    """Online hybrid step: lambda <- (1 - rho) lambda + rho (beta + D/|S| :func:`hybrid_edge_counts`).

    Parameters
    ----------
    stats : EStepStats
        The minibatch's merged hybrid statistics.
    edge_var : ndarray of shape (n_topics, n_edges), float64
        Lambda before the step (the one the E-step used).
    layout : TreeVBLayout
    samples : int
        M.
    seed, epoch : int
        Randomness of the path draws (``epoch``: the minibatch number).
    rho : float
        Step size in (0, 1].
    total_docs : int
        D, the corpus size.
    path_mode : {"sample", "expectation"}, default "sample"

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
    """
    counts = hybrid_edge_counts(stats, edge_var, layout, samples=samples, seed=seed, epoch=epoch, path_mode=path_mode)
    return blend_edge_var(edge_var, layout, counts, rho=rho, scale=total_docs / max(stats.n_docs, 1))
