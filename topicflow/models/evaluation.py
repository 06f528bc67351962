"""Model evaluation shared by every system in the benchmarks: document completion and NMI.

This module owns the held-out split of documents (deterministic per global document), the
document-completion log-likelihood that scores any topic model from its topic-word matrix and alpha
alone, and normalized mutual information for clusterings. It must not import dask, zarr or logging,
and it does no I/O.

Glossary:
    observed / heldout: the two parts of every test document's tokens
    topic_word (beta, (n_topics, n_terms)): row-normalized topic-word probabilities (point estimate)
    doc_topic_prior (alpha, (n_topics,))
    theta ((n_docs, n_topics)): topic proportions estimated from the observed part

References
----------
Wallach, Murray, Salakhutdinov and Mimno (2009). Evaluation methods for topic models. ICML.
Strehl and Ghosh (2002). Cluster ensembles. JMLR 3, 583-617.
"""
from __future__ import annotations

import math
from typing import Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.blocks import DocBlock
from topicflow.models.rng import STREAM_SPLIT, counter_key, uniform_from_key
from topicflow.models.vb_lda import (
    PreparedTopics,
    VBParams,
    as_block_mapping,
    as_prepared_topics,
    check_blocks,
    fold_in_block,
)


@numba.njit(nogil=True, cache=True)
def _split_counts(indptr, counts, first_doc, seed, fraction, observed):  # type: ignore[no-untyped-def]
    """observed[j] = tokens of entry j drawn into the observed part (partial Fisher-Yates per doc)."""
    max_len = 0
    for d in range(indptr.shape[0] - 1):
        n = 0
        for j in range(indptr[d], indptr[d + 1]):
            n += counts[j]
        max_len = max(max_len, n)
    owner = np.empty(max_len, dtype=np.int64)
    for d in range(indptr.shape[0] - 1):
        n = 0
        for j in range(indptr[d], indptr[d + 1]):
            for _ in range(counts[j]):
                owner[n] = j
                n += 1
        n_observed = int(math.floor(fraction * n + 0.5))
        key = counter_key(seed, STREAM_SPLIT, 0, first_doc + d)
        for i in range(n_observed):
            pick = i + int(uniform_from_key(key, i) * (n - i))
            owner[i], owner[pick] = owner[pick], owner[i]
            observed[owner[i]] += 1


def _subblock(block: DocBlock, counts: IntArray) -> DocBlock:
    """``block`` with new counts per entry, dropping entries whose count is 0."""
    keep = counts > 0
    rows = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=block.n_docs))]).astype(np.int64)
    return DocBlock(
        indptr=indptr, term_ids=block.term_ids[keep], counts=counts[keep].astype(np.int32),
        doc_ids=block.doc_ids, first_doc=block.first_doc, n_terms=block.n_terms, language=block.language,
        labels=block.labels, timestamps=block.timestamps,
    )


def split_doc_tokens(block: DocBlock, *, seed: int, fraction: float = 0.5) -> tuple[DocBlock, DocBlock]:
    """Split every document's tokens at random into an observed and a held-out part.

    Parameters
    ----------
    block : DocBlock
    seed : int
    fraction : float, default 0.5
        Share of each document's tokens that go to the observed part, in (0, 1); a document of N
        tokens gets ``floor(fraction * N + 0.5)`` observed tokens.

    Returns
    -------
    observed, heldout : DocBlock
        Same documents (rows, ids, ``first_doc``) as ``block``; their counts add up to ``block``'s.

    Raises
    ------
    InvalidParameterError
        ``fraction`` outside (0, 1).

    Notes
    -----
    The draw for a document depends only on ``(seed, first_doc + row)`` through
    ``counter_key(seed, STREAM_SPLIT, 0, doc)``, so a document is split the same way in any block.
    NumPy equivalent per document: ``tokens = np.repeat(term_ids, counts)``; take the first
    ``n_observed`` tokens of a (counter-RNG) permutation as observed, the rest as held out.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[3, 0, 1], [0, 2, 0]])))
    >>> observed, heldout = split_doc_tokens(block, seed=0)
    >>> (observed.to_csr() + heldout.to_csr()).toarray().tolist()
    [[3, 0, 1], [0, 2, 0]]
    """
    if not (0.0 < fraction < 1.0):
        raise InvalidParameterError(f"fraction must be in (0, 1), got {fraction!r}")
    observed = np.zeros(block.counts.shape[0], dtype=np.int64)
    _split_counts(block.indptr.astype(np.int64), block.counts.astype(np.int64), block.first_doc, seed,
                  float(fraction), observed)
    heldout = block.counts.astype(np.int64) - observed
    return _subblock(block, observed), _subblock(block, heldout)


@numba.njit(nogil=True, cache=True)
def _heldout_log_lik(indptr, term_ids, counts, theta, term_topic):  # type: ignore[no-untyped-def]
    """sum_d sum_w n_dw log(sum_k theta_dk beta_kw)."""
    total = 0.0
    for d in range(indptr.shape[0] - 1):
        for j in range(indptr[d], indptr[d + 1]):
            prob = 0.0
            for k in range(theta.shape[1]):
                prob += theta[d, k] * term_topic[term_ids[j], k]
            total += counts[j] * math.log(prob) if prob > 0.0 else -math.inf
    return total


def completion_log_likelihood(
    observed_blocks: Mapping[str, DocBlock] | DocBlock,
    heldout_blocks: Mapping[str, DocBlock] | DocBlock,
    topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
) -> tuple[float, int]:
    """Document-completion log-likelihood of held-out tokens given the observed ones.

    Parameters
    ----------
    observed_blocks, heldout_blocks : mapping of str to DocBlock, or DocBlock
        Output of :func:`split_doc_tokens` per language (same documents).
    topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), float64, or PreparedTopics
        Row-normalized topic-word probabilities beta of any system (ours, gensim, sklearn, ...).
        When scoring many blocks, pass ``prepare_topics(topic_word)`` once instead of the mapping.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        alpha of that system.
    params : VBParams
        Fold-in settings (``max_doc_iter``, ``doc_tol``).

    Returns
    -------
    log_lik : float
        sum over held-out tokens of log sum_k theta_dk beta_kw; ``-inf`` if a held-out token has
        probability 0 under the model.
    n_heldout_tokens : int
        Perplexity is ``exp(-log_lik / n_heldout_tokens)``.

    Raises
    ------
    InvalidParameterError
        Languages, shapes or priors do not fit (see :func:`topicflow.models.vb_lda.fold_in_block`),
        or the observed and held-out blocks hold different numbers of documents.

    Notes
    -----
    theta_d is gamma_d normalized, from a VB fold-in on the observed tokens with beta held fixed as a
    point estimate (``topic_word`` is passed where exp(E[log beta]) would go), so every system is
    scored from beta and alpha alone (Wallach et al. 2009, document completion). NumPy equivalent of
    the score: ``sum(n_dw * np.log(theta[d] @ topic_word[:, w]))`` over held-out entries.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 2]])))
    >>> obs, held = split_doc_tokens(block, seed=1)
    >>> ll, n = completion_log_likelihood(obs, held, {"default": np.full((1, 2), 0.5)}, 1.0, VBParams(1))
    >>> round(float(np.exp(-ll / n)), 6), n
    (2.0, 2)
    """
    observed = as_block_mapping(observed_blocks)
    heldout = as_block_mapping(heldout_blocks)
    topics = as_prepared_topics(topic_word)
    theta = fold_in_block(observed, topics, doc_topic_prior, params)
    if check_blocks(heldout, topics) != theta.shape[0]:
        raise InvalidParameterError(
            f"held-out blocks hold {check_blocks(heldout, topics)} documents but the observed blocks hold "
            f"{theta.shape[0]}; pass the two outputs of split_doc_tokens for the same block"
        )
    log_lik, n_tokens = 0.0, 0
    for lang, block in heldout.items():
        offset = topics.offsets[topics.languages.index(lang)]
        log_lik += _heldout_log_lik(block.indptr, block.term_ids.astype(np.int64) + offset, block.counts,
                                    theta, topics.term_topic)
        n_tokens += block.n_tokens
    return float(log_lik), n_tokens


def nmi(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """Normalized mutual information of two labelings, with arithmetic-mean normalization.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Any hashable labels (ints, strings).

    Returns
    -------
    float
        ``MI / ((H_true + H_pred) / 2)`` in [0, 1]; 1.0 when both labelings have a single cluster
        (or are empty), 0.0 when the mutual information is 0.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length.

    Notes
    -----
    Same value as ``sklearn.metrics.normalized_mutual_info_score`` (default ``"arithmetic"``).
    MI = sum_ij (n_ij / N) log(N n_ij / (a_i b_j)) with contingency counts n_ij, row sums a_i, column
    sums b_j; entropies use natural logs (Strehl and Ghosh 2002).

    Examples
    --------
    >>> round(nmi([0, 0, 1, 1], [1, 1, 0, 0]), 12)
    1.0
    >>> nmi([0, 0, 1, 1], [0, 1, 0, 1])
    0.0
    """
    true = np.asarray(labels_true)
    pred = np.asarray(labels_pred)
    if true.shape != pred.shape or true.ndim != 1:
        raise InvalidParameterError(
            f"labels_true and labels_pred must be 1-d of equal length, got {true.shape!r} and {pred.shape!r}"
        )
    classes, class_idx = np.unique(true, return_inverse=True)
    clusters, cluster_idx = np.unique(pred, return_inverse=True)
    if classes.shape[0] == clusters.shape[0] == 1 or true.shape[0] == 0:
        return 1.0
    n = float(true.shape[0])
    joint = np.bincount(class_idx * clusters.shape[0] + cluster_idx, minlength=classes.shape[0] * clusters.shape[0])
    joint = joint.reshape(classes.shape[0], clusters.shape[0]).astype(np.float64)
    a, b = joint.sum(axis=1), joint.sum(axis=0)
    nz = joint > 0
    outer = np.outer(a, b)[nz]
    mi = float(np.sum(joint[nz] / n * (np.log(joint[nz]) + math.log(n) - np.log(outer))))
    if mi <= 0.0:
        return 0.0
    h_true = -float(np.sum(a / n * np.log(a / n)))
    h_pred = -float(np.sum(b / n * np.log(b / n)))
    return float(mi / max((h_true + h_pred) / 2.0, np.finfo(np.float64).eps))
