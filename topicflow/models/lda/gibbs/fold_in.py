"""Fold-in of held-out documents by Gibbs sweeps with the topics fixed."""
from __future__ import annotations

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import (
    DocBlock,
    expand_entries_into,
    expand_tokens,
    present_terms,
)
from topicflow.models.common.categorical import (
    SMOOTHING_CHUNK,
    add_sorted_count,
    draw_two_bucket,
    draw_uniform,
    remove_sorted_count,
    smoothing_chunk_sums,
)
from topicflow.models.common.rng import STREAM_FOLD_IN, counter_key, uniform_from_key
from topicflow.models.common.validation import parse_dirichlet_prior, parse_int
from topicflow.models.lda.gibbs.sparse import _check_block
from topicflow.models.lda.gibbs.state import _MAX_SEED

# ----------------------------------------------------------------------------- fold-in


@numba.njit(nogil=True, cache=True)
def _fold_in_doc(n_tok, tok_col, key_seed, doc, n_sweeps, phi_cols, alpha, chunk_cum,
                 z, doc_counts, nonzero, doc_cum):
    """Random start, then ``n_sweeps`` sweeps of one document's tokens; returns the nonzero-list length."""
    n_topics = alpha.shape[0]
    key = counter_key(key_seed, STREAM_FOLD_IN, 0, doc)
    n_nonzero = 0
    for t in range(n_tok):
        z[t] = draw_uniform(uniform_from_key(key, t), n_topics)
        n_nonzero = add_sorted_count(z[t], doc_counts, nonzero, n_nonzero)
    for sweep in range(1, n_sweeps + 1):
        key = counter_key(key_seed, STREAM_FOLD_IN, sweep, doc)
        for t in range(n_tok):
            n_nonzero = remove_sorted_count(z[t], doc_counts, nonzero, n_nonzero)
            c = tok_col[t]
            z[t] = draw_two_bucket(uniform_from_key(key, t), c, c, phi_cols, alpha, chunk_cum, SMOOTHING_CHUNK,
                                   doc_counts, nonzero, n_nonzero, doc_cum)
            n_nonzero = add_sorted_count(z[t], doc_counts, nonzero, n_nonzero)
    return n_nonzero


@numba.njit(nogil=True, cache=True)
def _fold_in_csr(indptr, counts, local_cols, phi_cols,
                 alpha, chunk_cum, first_doc, seed, n_sweeps, out, tok_col, z, doc_counts, nonzero, doc_cum):
    """Fold every document in; out[d] = n_dk after the last sweep (out zero on entry)."""
    for d in range(indptr.shape[0] - 1):
        n_tok = expand_entries_into(local_cols, counts, indptr[d], indptr[d + 1], tok_col, 0)
        n_nonzero = _fold_in_doc(n_tok, tok_col, seed, first_doc + d, n_sweeps, phi_cols, alpha, chunk_cum,
                                 z, doc_counts, nonzero, doc_cum)
        for i in range(n_nonzero):
            k = nonzero[i]
            out[d, k] = doc_counts[k]
            doc_counts[k] = 0


def fold_in(
    block: DocBlock, topic_word: FloatArray, doc_topic_prior: FloatArray | float, *, n_sweeps: int = 5,
    seed: int = 0,
) -> Int32Array:
    """Topic counts of held-out documents by Gibbs sampling with the topics fixed.

    Parameters
    ----------
    block : DocBlock
        Held-out documents; ``block.n_terms`` at most ``topic_word.shape[1]``.
    topic_word : ndarray of shape (n_topics, n_terms), float64
        Topic-word weights phi, finite and >= 0 (rows need not be normalized: each draw normalizes).
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha, positive.
    n_sweeps : int, default 5
        Gibbs sweeps after the random start (May et al. 2014 use 5); 0 returns the random start.
    seed : int, default 0

    Returns
    -------
    ndarray of shape (n_docs, n_topics), int32
        The counts n_dk after the last sweep; rows sum to the documents' lengths.

    Raises
    ------
    InvalidParameterError
        Shapes, alpha, ``n_sweeps`` or ``seed`` do not fit.
    NumericalError
        ``topic_word`` is negative or not finite on a term of the block.

    Notes
    -----
    Per document (global index g = ``first_doc + d``), the tokens are its terms repeated by count in
    CSR order. Token t starts at ``floor(u K)`` with u the t-th uniform of
    ``counter_key(seed, STREAM_FOLD_IN, 0, g)``; in sweep ``s = 1 .. n_sweeps`` it is removed and
    redrawn from ``p(z = k) ∝ (n_dk + alpha_k) phi_kw`` with the t-th uniform of
    ``counter_key(seed, STREAM_FOLD_IN, s, g)``. The draw is the two-bucket inverse CDF
    :func:`topicflow.models.common.categorical.draw_two_bucket` that the hybrid E-step uses too
    (document bucket over the used topics in increasing order, then the smoothing bucket alpha_k phi_kw
    in topic order); NumPy equivalent::

        r_cum = np.cumsum(n_d * phi[:, w]); s_cum = np.cumsum(alpha * phi[:, w])
        x = u * (r_cum[-1] + s_cum[-1])
        k = (np.searchsorted(r_cum, x, "right") if x < r_cum[-1]
             else np.searchsorted(s_cum, x - r_cum[-1], "right"))

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[5, 0], [0, 3]])))
    >>> fold_in(block, np.array([[1.0, 0.0], [0.0, 1.0]]), 0.1).tolist()
    [[5, 0], [0, 3]]
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[1] < block.n_terms:
        raise InvalidParameterError(
            f"topic_word must have shape (n_topics, n_terms >= {block.n_terms}), got {phi.shape!r}"
        )
    n_topics = phi.shape[0]
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, n_topics)
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    seed = parse_int("seed", seed, 0, _MAX_SEED)
    _check_block(block)
    present, local_cols = present_terms(block.term_ids, block.n_terms)
    phi_cols = np.ascontiguousarray(phi[:, present].T)  # (n_present, K): one term's weights contiguous
    chunk_cum = np.empty((present.shape[0], -(-n_topics // SMOOTHING_CHUNK)))
    n_bad = smoothing_chunk_sums(np.arange(present.shape[0]), phi_cols, alpha, SMOOTHING_CHUNK, chunk_cum)
    if n_bad or not np.all(np.isfinite(chunk_cum[:, -1] if chunk_cum.size else chunk_cum)):
        raise NumericalError(
            f"topic_word has {n_bad} negative or non-finite values on the terms of the block starting at "
            f"document {block.first_doc} (or alpha * phi overflows); expected finite values >= 0"
        )
    max_tokens = int(np.diff(expand_tokens(block)[0]).max(initial=0))
    out = np.zeros((block.n_docs, n_topics), dtype=np.int32)
    _fold_in_csr(block.indptr.astype(np.int64), block.counts, local_cols, phi_cols, alpha,
                 chunk_cum, int(block.first_doc), seed, n_sweeps, out,
                 np.empty(max_tokens, dtype=np.int64), np.empty(max_tokens, dtype=np.int64),
                 np.zeros(n_topics, dtype=np.int64),
                 np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.float64))
    return out
