"""E-step of infinite-vocabulary LDA: hybrid Gibbs sampling of each document's topic assignments (eq. 7.2).

This module owns the per-document sampler with the sticks held fixed (:func:`estep_documents`), its
mergeable statistics (:class:`InfVocStats`), the fold-in of held-out documents (:func:`fold_in`) and the
translation of the ordered-token layer into global word ids (:func:`words_from_ordered_block`). The
driver runs :func:`estep_documents` per partition of a minibatch and tree-reduces the statistics with
:meth:`InfVocStats.merge`; the random numbers are keyed by (seed, minibatch, global document), so the
merged result does not depend on how the minibatch is split. Pure NumPy + numba: no Dask, no I/O.

Glossary (Zhai 2014, sec. 7.3.2; Mimno et al. 2012):
    weights (W, (n_present, n_topics)): exp(E[log beta_k, T_k(w)]) per distinct word, up to a per-word factor
    doc_counts (n_dk): tokens of document d assigned to topic k in the current sweep
    burn_in (B), samples (M): Gibbs sweeps after the random start, discarded and kept
    kept_counts: sum over the kept sweeps of the token indicators [w_dn = w, z_dn = k]
    phi sums (sum_d sum_n phi_dnk [w_dn = w]): kept_counts / M
    doc_topic (gamma_d): alpha^theta + n_dk of the last sweep (spec 3.3, P9)
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.common.categorical import draw_dense, draw_uniform
from topicflow.models.common.rng import (
    STREAM_FOLD_IN,
    STREAM_INFVOC_GIBBS,
    counter_key,
    uniform_from_key,
)
from topicflow.models.infvoc_lda.params import InfVocParams
from topicflow.models.infvoc_lda.tos import (
    InfVocState,
    PreparedWeights,
    prepare_weights,
)


@dataclass(frozen=True, slots=True)
class InfVocStats:
    """Sampled sufficient statistics of a set of documents; ``merge`` adds them (a commutative monoid).

    Attributes
    ----------
    word_ids : ndarray of shape (n_present,), int64
        Distinct word ids, ascending.
    kept_counts : ndarray of shape (n_present, n_topics), float64
        sum over documents and kept sweeps of [w_dn = w, z_dn = k]: integers, so sums are exact and
        the merge order does not change a bit.
    n_docs, n_tokens : int
        Documents and tokens counted.
    n_samples : int
        M, the kept sweeps per document; phi sums are ``kept_counts / n_samples``.
    """

    word_ids: IntArray
    kept_counts: FloatArray
    n_docs: int
    n_tokens: int
    n_samples: int

    @classmethod
    def zeros(cls, n_topics: int, n_samples: int) -> InfVocStats:
        """Return the identity of :meth:`merge`: no word, no document.

        Parameters
        ----------
        n_topics : int
            K.
        n_samples : int
            M.

        Returns
        -------
        InfVocStats
        """
        return cls(np.zeros(0, np.int64), np.zeros((0, n_topics)), 0, 0, n_samples)

    @property
    def phi_sums(self) -> FloatArray:
        """sum_d sum_n phi_dnk [w_dn = w] per (present word, topic): ``kept_counts / n_samples``."""
        return self.kept_counts / self.n_samples

    def merge(self, other: InfVocStats) -> InfVocStats:
        """Return the statistics of both document sets (union of words, counts added).

        Parameters
        ----------
        other : InfVocStats
            Statistics with the same K and M.

        Returns
        -------
        InfVocStats
        """
        if other.kept_counts.shape[1] != self.kept_counts.shape[1] or other.n_samples != self.n_samples:
            raise InvalidParameterError(
                f"cannot merge infvoc statistics of K={self.kept_counts.shape[1]}, M={self.n_samples} with "
                f"K={other.kept_counts.shape[1]}, M={other.n_samples}"
            )
        words = np.union1d(self.word_ids, other.word_ids)
        counts = np.zeros((words.shape[0], self.kept_counts.shape[1]))
        counts[np.searchsorted(words, self.word_ids)] += self.kept_counts
        counts[np.searchsorted(words, other.word_ids)] += other.kept_counts
        return InfVocStats(words, counts, self.n_docs + other.n_docs, self.n_tokens + other.n_tokens,
                           self.n_samples)


@numba.njit(nogil=True, cache=True)
def _sweep(cols, lo, n_tok, z, doc_counts, weights, alpha, key, first_draw, buf):
    """One Gibbs sweep over a document's tokens by eq. 7.2, in place on ``z`` and ``doc_counts``."""
    for t in range(n_tok):
        c = cols[lo + t]
        doc_counts[z[t]] -= 1
        for k in range(buf.shape[0]):
            buf[k] = (doc_counts[k] + alpha) * weights[c, k]
        k_new, _ = draw_dense(buf, uniform_from_key(key, first_draw + t))
        z[t] = k_new
        doc_counts[k_new] += 1


@numba.njit(nogil=True, cache=True)
def _gibbs_docs(indptr, cols, weights, alpha, seed, stream, epoch, first_doc, burn_in, samples,
                kept, last_counts, z, doc_counts, buf):
    """Sample every document; NumPy equivalent in tests/reference/infvoc.py (``estep``).

    Adds the kept sweeps' indicators to ``kept`` (n_present, K) and writes the last sweep's n_dk to
    ``last_counts`` (n_docs, K). ``z``, ``doc_counts``, ``buf`` are scratch.
    """
    n_topics = buf.shape[0]
    for d in range(indptr.shape[0] - 1):
        key = counter_key(seed, stream, epoch, first_doc + d)
        lo, n_tok = indptr[d], indptr[d + 1] - indptr[d]
        doc_counts[:] = 0
        for t in range(n_tok):  # random start: uniforms 0 .. n_tok - 1
            z[t] = draw_uniform(uniform_from_key(key, t), n_topics)
            doc_counts[z[t]] += 1
        for sweep in range(1, 1 + burn_in + samples):
            _sweep(cols, lo, n_tok, z, doc_counts, weights, alpha, key, sweep * n_tok, buf)
            if sweep > burn_in:
                for t in range(n_tok):
                    kept[cols[lo + t], z[t]] += 1.0
        last_counts[d, :] = doc_counts


def _check_documents(indptr: IntArray, words: IntArray, weights: PreparedWeights) -> IntArray:
    """Validate the CSR layout; return each token's column in ``weights`` (error names a missing word)."""
    if indptr.ndim != 1 or indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != words.shape[0] \
            or np.any(np.diff(indptr) < 0):
        raise InvalidParameterError(
            f"indptr must start at 0, be non-decreasing and end at len(words) = {words.shape[0]}")
    cols = np.searchsorted(weights.word_ids, words)
    inside = cols < weights.word_ids.shape[0]
    bad = ~inside
    bad[inside] = weights.word_ids[cols[inside]] != words[inside]
    if np.any(bad):
        raise InvalidParameterError(
            f"word id {int(words[np.argmax(bad)])} of the documents has no prepared weight; build the "
            "weights with prepare_weights on every word of the minibatch")
    return cols.astype(np.int64)


def estep_documents(
    indptr: IntArray, words: IntArray, weights: PreparedWeights, params: InfVocParams,
    *, first_doc: int, minibatch: int, stream: int = STREAM_INFVOC_GIBBS,
) -> tuple[InfVocStats, FloatArray]:
    """Sample every document's topic assignments with the sticks fixed and collect the statistics.

    Parameters
    ----------
    indptr : ndarray of shape (n_docs + 1,), int
        Document d's tokens are ``words[indptr[d]:indptr[d + 1]]``.
    words : ndarray of shape (n_tokens,), int
        Global word ids of the tokens, in reading order (out-of-vocabulary words already given ids).
    weights : PreparedWeights
        From :func:`~topicflow.models.infvoc_lda.tos.prepare_weights` on (at least) these words.
    params : InfVocParams
        K, alpha^theta, B, M and the seed.
    first_doc : int
        Global number of the first document (keys its random numbers).
    minibatch : int
        The minibatch number i (keys the random numbers, so each minibatch draws afresh).
    stream : int, default STREAM_INFVOC_GIBBS
        Random-number stream (fold-in uses another).

    Returns
    -------
    stats : InfVocStats
        Kept-sweep counts of the distinct words of these documents.
    doc_topic : ndarray of shape (n_docs, n_topics), float64
        Alpha^theta + n_dk of the last sweep.

    Notes
    -----
    Zhai (2014) eq. 7.2: token n of document d draws ``z = k`` with probability proportional to
    ``(n_dk^{-n} + alpha^theta) * W[w_dn, k]``, W = exp(E[log beta_k, T_k(w)]) (eq. 7.3 for a word in
    T_k, eq. 7.4 otherwise; up to a per-word factor). Sweep 0 is a random start (token t takes topic
    ``floor(u_t K)``); sweeps 1..B are discarded, B+1..B+M kept. The u-th uniform of global document g
    is ``uniform_from_key(counter_key(seed, stream, minibatch, g), u)``, with u = sweep * n_tokens_d + t,
    and the draw is :func:`~topicflow.models.common.categorical.draw_dense` over the K weights in topic
    order. NumPy equivalent (per token)::

        p = (doc_counts + alpha) * W[w]; k = min(np.searchsorted(np.cumsum(p), u * p.sum(), "right"), K - 1)

    Inputs are not modified.

    Examples
    --------
    >>> from topicflow.models.infvoc_lda.tos import empty_state
    >>> params = InfVocParams(n_topics=2)
    >>> w = prepare_weights(empty_state(2), np.array([3, 5]))
    >>> stats, gamma = estep_documents(np.array([0, 3]), np.array([3, 5, 3]), w, params, first_doc=0, minibatch=1)
    >>> float(stats.kept_counts.sum()), float(gamma.sum())
    (15.0, 4.0)
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    words = np.ascontiguousarray(words, dtype=np.int64)
    if weights.n_topics != params.n_topics:
        raise InvalidParameterError(f"weights have {weights.n_topics} topics but params.n_topics is {params.n_topics}")
    cols = _check_documents(indptr, words, weights)
    present, local = np.unique(cols, return_inverse=True)
    n_docs, n_topics = indptr.shape[0] - 1, params.n_topics
    kept = np.zeros((present.shape[0], n_topics))
    last = np.zeros((n_docs, n_topics), dtype=np.int64)
    max_tok = int(np.max(np.diff(indptr), initial=0))
    _gibbs_docs(indptr, np.ascontiguousarray(local, dtype=np.int64),
                np.ascontiguousarray(weights.weights[present]), params.alpha, params.seed, stream, int(minibatch),
                int(first_doc), params.burn_in, params.samples, kept, last, np.zeros(max_tok, np.int64),
                np.zeros(n_topics, np.int64), np.zeros(n_topics))
    stats = InfVocStats(weights.word_ids[present], kept, n_docs, int(words.shape[0]), params.samples)
    return stats, params.alpha + last.astype(np.float64)


def fold_in(
    state: InfVocState, indptr: IntArray, words: IntArray, params: InfVocParams,
    *, first_doc: int = 0, epoch: int = 0, log_g0: FloatArray | None = None,
) -> FloatArray:
    """Infer held-out documents' topic proportions with the state fixed.

    Parameters
    ----------
    state : InfVocState
        The trained state (not modified).
    indptr : ndarray of shape (n_docs + 1,), int
        CSR pointer over ``words``.
    words : ndarray of shape (n_tokens,), int
        Global word ids; words never seen get each topic's remaining-stick weight (eq. 7.4).
    params : InfVocParams
        K, alpha^theta, B, M and the seed.
    first_doc : int, default 0
        Global number of the first held-out document.
    epoch : int, default 0
        Keys the random numbers (with the seed and the document number, in stream STREAM_FOLD_IN).
    log_g0 : ndarray of shape (n_words_total,), float64, optional
        The log G0 of every word id, for ``params.unseen_weight == "g0"``.

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64
        Rows theta_d = gamma_d / sum_k gamma_dk, gamma_d = alpha^theta + last-sweep n_dk; they sum to 1.
    """
    weights = prepare_weights(state, np.asarray(words), params, log_g0=log_g0)
    _, gamma = estep_documents(indptr, words, weights, params, first_doc=first_doc, minibatch=epoch,
                               stream=STREAM_FOLD_IN)
    return gamma / gamma.sum(axis=1, keepdims=True)


def words_from_ordered_block(block: OrderedBlock, term_word_ids: IntArray, oov_word_ids: IntArray) -> IntArray:
    """Translate an ordered block's token codes to global word ids.

    Parameters
    ----------
    block : OrderedBlock
        Tokens: a term id ``t >= 0`` of the store vocabulary, or ``-(j + 1)`` for ``block.oov_terms[j]``.
    term_word_ids : ndarray of shape (n_terms,), int
        Global word id of each store term (the driver's string -> id index).
    oov_word_ids : ndarray of shape (n_oov,), int
        Global word id of each of ``block.oov_terms``.

    Returns
    -------
    ndarray of shape (n_tokens,), int64
        The tokens' word ids, in the block's order (``block.indptr`` still delimits documents).

    Examples
    --------
    >>> block = OrderedBlock(np.array([0, 3]), np.array([1, -1, 0], np.int32), np.array(["emu"], dtype=object),
    ...                      np.array(["a"], dtype=object), 0, 2)
    >>> words_from_ordered_block(block, np.array([7, 2]), np.array([9])).tolist()
    [2, 9, 7]
    """
    tokens = np.asarray(block.tokens, dtype=np.int64)
    term_ids = np.asarray(term_word_ids, dtype=np.int64)
    oov_ids = np.asarray(oov_word_ids, dtype=np.int64)
    if oov_ids.shape[0] != len(block.oov_terms):
        raise InvalidParameterError(
            f"block has {len(block.oov_terms)} out-of-vocabulary strings but {oov_ids.shape[0]} ids were given")
    if tokens.shape[0] and int(tokens.max()) >= term_ids.shape[0]:
        raise InvalidParameterError(
            f"block holds term id {int(tokens.max())} but only {term_ids.shape[0]} term word ids were given")
    table = np.concatenate([term_ids, oov_ids[::-1]])
    return table[tokens] if tokens.shape[0] else np.zeros(0, np.int64)
