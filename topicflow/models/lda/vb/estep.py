"""Variational Bayes for LDA and polylingual LDA: the block E-step and fold-in kernels.

This module owns the math of batch variational LDA (Blei et al. 2003) split the way Mr. LDA splits it
(Zhai et al. 2012): a *mapper* (:func:`estep_block`) fits q(theta_d) for every document of a block and
emits mergeable statistics (:class:`EStepStats`), a *reducer* merges them (:meth:`EStepStats.merge`), and
the *driver* updates the global parameters (:func:`mstep_batch`, :func:`topicflow.models.common.dirichlet.newton_alpha`)
and sums the ELBO (:func:`full_elbo`). Polylingual LDA (Mimno et al. 2009) is the same kernel: a document's
theta is shared by all its languages, and each word's phi uses its own language's topics. Informed priors
only enter through ``topic_word_prior`` (see :mod:`topicflow.models.lda.priors`).

Pure NumPy + numba; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary (Blei et al. 2003; Hoffman et al. 2010):
    topic_word_var (lambda, (n_topics, n_terms)): Dirichlet parameters of q(beta), one array per language
    doc_topic_var (gamma, (n_docs, n_topics)): Dirichlet parameters of q(theta)
    exp_elog_topic_word (exp E_q[log beta], (n_topics, n_terms)): per language
    term_topic ((n_terms_total, n_topics)): exp_elog_topic_word of all languages, transposed and stacked
    doc_topic_prior (alpha, (n_topics,)); topic_word_prior (eta, scalar or (n_topics, n_terms))
    phi_wk: q(z = k) for the tokens of term w in one document
    alpha_suff ((n_topics,)): sum_d E_q[log theta_dk]

References
----------
Blei, Ng and Jordan (2003). Latent Dirichlet allocation. JMLR 3, 993-1022.
Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
Mimno, Wallach, Naradowsky, Smith and McCallum (2009). Polylingual topic models. EMNLP.
Zhai, Boyd-Graber, Asadi and Alkhouja (2012). Mr. LDA: a flexible large scale topic modeling package
using variational inference in MapReduce. WWW.
"""
from __future__ import annotations

import math
from typing import Mapping, cast

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import DocBlock, present_terms
from topicflow.models.common.dirichlet import (
    add_dirichlet_entropy,
    exp_dirichlet_expectation_into,
    posterior_mean,
)
from topicflow.models.common.rng import STREAM_GAMMA_INIT, gamma_rows_from_keys
from topicflow.models.common.validation import parse_dirichlet_prior
from topicflow.models.lda.vb.layout import (
    PreparedTopics,
    _split_stats,
    _stack_languages,
    as_block_mapping,
    as_prepared_topics,
    check_blocks,
)
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats

#: Added to every phi normalizer sum_k exp(E[log theta_k]) exp(E[log beta_kw]) so a term whose
#: exp(E[log beta]) underflows to 0 in every topic gives phi = 0 instead of 0/0 (as Hoffman's code does).
PHI_NORM_EPS = 1e-100


@numba.njit(nogil=True, cache=True)
def _gather_doc(term_topic, term_ids, counts, lo, n, rows, cols, cnts):
    """Copy the document's exp(E[log beta]) rows into ``rows`` (n, K) and ``cols`` (K, n)."""
    for j in range(n):
        t = term_ids[lo + j]
        cnts[j] = counts[lo + j]
        for k in range(term_topic.shape[1]):
            value = term_topic[t, k]
            rows[j, k] = value
            cols[k, j] = value


@numba.njit(nogil=True, cache=True)
def _phi_norm(cols, n, exp_elog_theta, norm):
    """norm_j = eps + sum_k exp_elog_theta_k * cols[k, j], summed in k order.

    k-outer order vectorizes over j; four k per pass cut the loads/stores of ``norm`` by four
    without changing the order of the additions.
    """
    n_topics = cols.shape[0]
    for j in range(n):
        norm[j] = PHI_NORM_EPS
    k = 0
    while k + 4 <= n_topics:
        e0, e1 = exp_elog_theta[k], exp_elog_theta[k + 1]
        e2, e3 = exp_elog_theta[k + 2], exp_elog_theta[k + 3]
        for j in range(n):
            norm[j] = (((norm[j] + e0 * cols[k, j]) + e1 * cols[k + 1, j])
                       + e2 * cols[k + 2, j]) + e3 * cols[k + 3, j]
        k += 4
    for k in range(k, n_topics):
        e = exp_elog_theta[k]
        for j in range(n):
            norm[j] += e * cols[k, j]


@numba.njit(nogil=True, cache=True)
def _weighted_row_sum(rows, cnts, norm, n, acc):
    """acc_k = sum_j (cnts_j / norm_j) rows[j, k], summed in j order, four rows per pass over acc."""
    n_topics = rows.shape[1]
    acc[:] = 0.0
    j = 0
    while j + 4 <= n:
        r0, r1 = cnts[j] / norm[j], cnts[j + 1] / norm[j + 1]
        r2, r3 = cnts[j + 2] / norm[j + 2], cnts[j + 3] / norm[j + 3]
        for k in range(n_topics):
            acc[k] = (((acc[k] + r0 * rows[j, k]) + r1 * rows[j + 1, k])
                      + r2 * rows[j + 2, k]) + r3 * rows[j + 3, k]
        j += 4
    for j in range(j, n):
        ratio = cnts[j] / norm[j]
        for k in range(n_topics):
            acc[k] += ratio * rows[j, k]


@numba.njit(nogil=True, cache=True)
def _fit_doc(rows, cols, cnts, n, alpha, gamma_d, eth, norm, acc, max_iter, tol):
    """Alternate phi and gamma in place; ``eth`` ends matching the final gamma. Return (converged, sweeps).

    One sweep: phi_jk = eth_k rows[j, k] / norm_j (never stored) and gamma_k = alpha_k + eth_k acc_k
    with acc_k = sum_j n_j rows[j, k] / norm_j.
    """
    n_topics = gamma_d.shape[0]
    exp_dirichlet_expectation_into(gamma_d, eth)
    for sweep in range(max_iter):
        _phi_norm(cols, n, eth, norm)
        _weighted_row_sum(rows, cnts, norm, n, acc)
        change = 0.0
        for k in range(n_topics):
            new = alpha[k] + eth[k] * acc[k]
            change += abs(new - gamma_d[k])
            gamma_d[k] = new
        exp_dirichlet_expectation_into(gamma_d, eth)
        if change / n_topics < tol:
            return True, sweep + 1
    return False, max_iter


@numba.njit(nogil=True, cache=True)
def _doc_stats(cols, cnts, n, gamma_d, eth, norm, ratios, alpha_suff):
    """Store the document's n_j / norm_j in ``ratios`` and add E[log theta] to ``alpha_suff``; return its ELBO terms.

    The statistics n_j phi_jk = ratios_j eth_k exp(E[log beta_kj]) are added later, topic block by
    topic block, by :func:`_add_topic_stats`.
    """
    _phi_norm(cols, n, eth, norm)
    elbo = 0.0
    for j in range(n):
        elbo += cnts[j] * math.log(norm[j])
        ratios[j] = cnts[j] / norm[j]
    return add_dirichlet_entropy(gamma_d, elbo, alpha_suff)


#: A block whose statistics (8 K n_present bytes) reach this size writes them directly in the
#: (K, n_present) layout of :class:`TopicTermStats` (no transposed copy, somewhat slower); smaller
#: blocks accumulate (n_present, K) and transpose it. Both give the same bits.
DIRECT_STATS_BYTES = 64 * 10**6

#: Topics per pass of :func:`_add_topic_stats`: the statistics rows a pass writes stay in cache.
STATS_TOPIC_BLOCK = 16


@numba.njit(nogil=True, cache=True)
def _add_topic_stats(indptr, term_ids, local_cols, term_topic, ratios, eths, stats):
    """stats[k, c_j] += ratios_j eths[d, k] term_topic[t_j, k] for every entry j of every document d.

    ``stats`` is (K, n_present), the layout :class:`TopicTermStats` keeps, so the block's result
    needs no transposed copy. Writing it document by document would touch one cache line per
    (topic, term); a pass over the documents per block of :data:`STATS_TOPIC_BLOCK` topics keeps the
    rows it writes in cache. Each entry still receives the same products in document order, so the
    sums have the same bits as a (term, topic) accumulation.
    """
    n_topics = stats.shape[0]
    for k0 in range(0, n_topics, STATS_TOPIC_BLOCK):
        k1 = min(k0 + STATS_TOPIC_BLOCK, n_topics)
        for d in range(indptr.shape[0] - 1):
            for i in range(indptr[d], indptr[d + 1]):
                t = term_ids[i]
                c = local_cols[i]
                ratio = ratios[i]
                for k in range(k0, k1):
                    stats[k, c] += ratio * eths[d, k] * term_topic[t, k]


@numba.njit(nogil=True, cache=True)
def _add_doc_stats_rows(rows, n, local_cols, eth, ratios, stats):
    """stats[c_j, k] += ratios_j eth_k exp(E[log beta_kj]) into (n_present, K) statistics (small blocks)."""
    for j in range(n):
        ratio = ratios[j]
        c = local_cols[j]
        for k in range(stats.shape[1]):
            stats[c, k] += ratio * eth[k] * rows[j, k]


@numba.njit(nogil=True, cache=True)
def _estep_csr(indptr, term_ids, counts, local_cols,
               term_topic, alpha, max_iter, tol, gamma, stats, alpha_suff, doc_elbo,
               rows, cols, cnts, eth, norm, acc, direct):
    """Coordinate ascent for every document; NumPy equivalent in tests/reference/vb_lda_numpy.py.

    ``gamma`` (n_docs, K) holds the start point on entry and the result on exit; ``stats``,
    ``alpha_suff`` (K,) and ``doc_elbo`` (n_docs,) are accumulated into; the rest are scratch buffers
    sized for the longest document. ``stats`` is (K, n_present) when ``direct`` (filled by
    :func:`_add_topic_stats` after the documents), else (n_present, K), filled document by document
    (faster, but the caller then transposes it). Both give the same bits. Returns (capped documents,
    total sweeps).
    """
    n_capped = 0
    n_sweeps = 0
    n_docs = indptr.shape[0] - 1
    ratios = np.empty(term_ids.shape[0], dtype=np.float64)
    eths = np.empty((n_docs if direct else 0, alpha.shape[0]), dtype=np.float64)
    for d in range(n_docs):
        lo = indptr[d]
        n = indptr[d + 1] - lo
        _gather_doc(term_topic, term_ids, counts, lo, n, rows, cols, cnts)
        converged, sweeps = _fit_doc(rows, cols, cnts, n, alpha, gamma[d], eth, norm, acc, max_iter, tol)
        n_capped += not converged
        n_sweeps += sweeps
        doc_elbo[d] = _doc_stats(cols, cnts, n, gamma[d], eth, norm, ratios[lo:lo + n], alpha_suff)
        if direct:
            eths[d] = eth
        else:
            _add_doc_stats_rows(rows, n, local_cols[lo:lo + n], eth, ratios[lo:lo + n], stats)
    if direct:
        _add_topic_stats(indptr, term_ids, local_cols, term_topic, ratios, eths, stats)
    return n_capped, n_sweeps


def _split_topic_stats(
    term_ids: IntArray, stats: FloatArray, topics: PreparedTopics
) -> dict[str, TopicTermStats]:
    """Split (K, n_present) statistics of the stacked vocabulary into per-language TopicTermStats.

    With one language the array is kept as it is (no copy: at K = 1000 a block's statistics are
    hundreds of MB); with several, each language gets its columns.
    """
    bounds = np.searchsorted(term_ids, topics.offsets)
    out = {}
    for i, lang in enumerate(topics.languages):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        values = stats if (lo, hi) == (0, stats.shape[1]) else np.ascontiguousarray(stats[:, lo:hi])
        out[lang] = TopicTermStats((term_ids[lo:hi] - topics.offsets[i]).astype(np.int64), values)
    return out


def random_initial_gamma(n_docs: int, n_topics: int, *, seed: int, first_doc: int) -> FloatArray:
    """Gamma(100, 1/100) starting values of gamma, row d keyed by (seed, document ``first_doc + d``)."""
    out = np.empty((n_docs, n_topics), dtype=np.float64)
    gamma_rows_from_keys(seed, STREAM_GAMMA_INIT, first_doc, 100.0, 0.01, out)
    return out


def _initial_gamma(
    indptr: IntArray, counts: np.ndarray, alpha: FloatArray, gamma_init: FloatArray | None,
    params: VBParams | None = None, first_doc: int = 0,
) -> FloatArray:
    n_docs, n_topics = indptr.shape[0] - 1, alpha.shape[0]
    if gamma_init is None and params is not None and params.random_init:
        return random_initial_gamma(n_docs, n_topics, seed=params.seed, first_doc=first_doc)
    if gamma_init is not None:
        gamma = np.array(gamma_init, dtype=np.float64, order="C")
        if gamma.shape != (n_docs, n_topics) or not (np.all(np.isfinite(gamma)) and np.all(gamma > 0)):
            raise InvalidParameterError(
                f"gamma_init must be finite, positive, of shape {(n_docs, n_topics)!r}; got shape {gamma.shape!r}"
            )
        return gamma
    cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    doc_len = (cum[indptr[1:]] - cum[indptr[:-1]]).astype(np.float64)
    return alpha[None, :] + (doc_len / n_topics)[:, None]


def estep_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
    *,
    return_gamma: bool = False,
    gamma_init: FloatArray | None = None,
) -> tuple[EStepStats, FloatArray | None]:
    """Fit q(theta_d) for every document of a block and collect the E-step statistics.

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        The block's documents in each language (same documents, same order); one entry for
        monolingual LDA. A language may be absent, and a document may be empty in a language.
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), or PreparedTopics
        Values of exp(E_q[log beta]) per language. Pass :func:`prepare_topics` output (built once per
        iteration) to avoid re-stacking per block; its dtype (float64 or float32) selects the kernel.
    doc_topic_prior : float or ndarray of shape (n_topics,), float64
        The prior alpha, positive.
    params : VBParams
    return_gamma : bool, default False
        Also return gamma.
    gamma_init : ndarray of shape (n_docs, n_topics), float64, optional
        Warm start; by default gamma_dk = alpha_k + N_d / K (Blei et al. 2003, figure 6), or
        :func:`random_initial_gamma` with ``params.random_init``.

    Returns
    -------
    stats : EStepStats
        Statistics for every language of the topics (zeros for a language without documents).
    doc_topic_var : ndarray of shape (n_docs, n_topics), float64, or None
        The variational parameters gamma when ``return_gamma``, else None.

    Raises
    ------
    InvalidParameterError
        Languages, document alignment, term ids, shapes or priors do not fit.
    NumericalError
        The documents' ELBO is not finite.

    Notes
    -----
    Blei et al. (2003), figure 6, with Hoffman et al. (2010)'s exp(E[log beta]) form: per document,
    repeat ``phi_w ∝ exp(E[log theta]) * expElogbeta[:, w]`` and
    ``gamma = alpha + sum_w n_w phi_w`` (over all languages' words) until
    ``mean(|delta gamma|) < doc_tol`` or ``max_doc_iter``; then, from the final gamma, add
    ``n_w phi_w`` to the statistics, ``psi(gamma) - psi(sum gamma)`` to ``alpha_suff`` and
    ``sum_w n_w log(sum_k exp(E[log theta_k]) expElogbeta_kw) - E_q[log q(theta)]`` to ``doc_elbo``.
    NumPy equivalent: ``tests/reference/vb_lda_numpy.py``. Inputs are not modified.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0], [0, 0, 3]])), language="en")
    >>> stats, gamma = estep_block({"en": block}, {"en": np.full((2, 3), 0.3)}, 0.1,
    ...                            VBParams(n_topics=2), return_gamma=True)
    >>> stats.n_tokens, gamma.shape
    (6, (2, 2))
    """
    blocks = as_block_mapping(blocks)
    topics = as_prepared_topics(exp_elog_topic_word)
    if topics.n_topics != params.n_topics:
        raise InvalidParameterError(
            f"exp_elog_topic_word has {topics.n_topics} topics but params.n_topics is {params.n_topics}"
        )
    n_docs = check_blocks(blocks, topics)
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, params.n_topics)
    indptr, term_ids, counts = _stack_languages(blocks, topics, n_docs)
    gamma = _initial_gamma(indptr, counts, alpha, gamma_init, params, next(iter(blocks.values())).first_doc)
    present, local_cols = present_terms(term_ids, int(topics.offsets[-1]))
    # Large statistics are written directly as (K, n_present), sparing a transposed copy (338 MB per
    # block at K = 1000 with 42k terms) for about 20% more E-step time at that size (RESULTS.md).
    direct = 8 * params.n_topics * present.shape[0] >= DIRECT_STATS_BYTES
    shape = (params.n_topics, present.shape[0]) if direct else (present.shape[0], params.n_topics)
    stats = np.zeros(shape, dtype=np.float64)
    alpha_suff = np.zeros(params.n_topics, dtype=np.float64)
    doc_elbo = np.zeros(n_docs, dtype=np.float64)
    max_len = int(np.max(np.diff(indptr), initial=0))
    dtype = topics.term_topic.dtype
    n_capped, n_sweeps = _estep_csr(
        indptr, term_ids, counts, local_cols, topics.term_topic, alpha,
        params.max_doc_iter, params.doc_tol, gamma, stats, alpha_suff, doc_elbo,
        np.empty((max_len, params.n_topics), dtype=dtype), np.empty((params.n_topics, max_len), dtype=dtype),
        np.empty(max_len, dtype=np.float64), np.empty(params.n_topics), np.empty(max_len),
        np.empty(params.n_topics), direct,
    )
    elbo = float(doc_elbo.sum())
    if not math.isfinite(elbo):
        first_doc = next(iter(blocks.values())).first_doc
        raise NumericalError(
            f"E-step ELBO is not finite for the block starting at document {first_doc}; "
            "check exp_elog_topic_word and doc_topic_prior for zeros, infinities or NaN"
        )
    result = EStepStats(
        topic_terms=(_split_topic_stats if direct else _split_stats)(present, stats, topics),
        alpha_suff=alpha_suff, doc_elbo=elbo,
        n_docs=n_docs, n_tokens=int(counts.sum(dtype=np.int64)), n_capped=int(n_capped),
        n_doc_iter=int(n_sweeps),
    )
    return result, (gamma if return_gamma else None)


def fold_in_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
    *,
    gamma_init: FloatArray | None = None,
) -> FloatArray:
    """Compute topic proportions of new documents with the topics held fixed (``transform``).

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        As in :func:`estep_block`.
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), or PreparedTopics
        As in :func:`estep_block`.
    doc_topic_prior : float or ndarray of shape (n_topics,), float64
        As in :func:`estep_block`.
    params : VBParams
        As in :func:`estep_block`.
    gamma_init : ndarray of shape (n_docs, n_topics), float64, optional
        As in :func:`estep_block`.

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64
        The variational parameters gamma normalized to rows that sum to 1.

    Notes
    -----
    The mean of q(theta) (:func:`topicflow.models.common.dirichlet.posterior_mean` of gamma). NumPy
    equivalent: ``gamma / gamma.sum(1, keepdims=True)`` with gamma from :func:`estep_block`.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0]])))
    >>> theta = fold_in_block(block, {"default": np.full((2, 3), 0.3)}, 0.1, VBParams(n_topics=2))
    >>> float(theta.sum().round(12))
    1.0
    """
    _, gamma = estep_block(
        blocks, exp_elog_topic_word, doc_topic_prior, params, return_gamma=True, gamma_init=gamma_init
    )
    return posterior_mean(cast(FloatArray, gamma))  # return_gamma=True always returns gamma
