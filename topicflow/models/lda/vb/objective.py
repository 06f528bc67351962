"""ELBO terms, the batch M-step and the starting topics of variational LDA."""
from __future__ import annotations

import math
from typing import Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import NumericalError
from topicflow.models.common.dirichlet import (
    dirichlet_objective,
)
from topicflow.models.common.rng import STREAM_TOPIC_INIT, doc_generator
from topicflow.models.common.special import digamma, digamma_lgamma, gammaln_array
from topicflow.models.common.threads import run_chunks
from topicflow.models.lda.vb.stats import EStepStats


def alpha_elbo_terms(alpha: FloatArray | float, alpha_suff: FloatArray, n_docs: int) -> float:
    """E_q[log p(theta | alpha)] summed over ``n_docs`` documents.

    Parameters
    ----------
    alpha : float or ndarray of shape (n_topics,), float64
    alpha_suff : ndarray of shape (n_topics,), float64
    n_docs : int

    Returns
    -------
    float
        ``n_docs * (lnG(sum alpha) - sum lnG(alpha)) + sum((alpha - 1) * alpha_suff)``.

    Examples
    --------
    >>> alpha_elbo_terms(1.0, np.array([-1.0, -1.0]), 1)
    0.0
    """
    suff = np.asarray(alpha_suff, dtype=np.float64)
    alpha_arr = np.broadcast_to(np.asarray(alpha, dtype=np.float64), suff.shape)
    return dirichlet_objective(alpha_arr, suff, n_docs)


def local_elbo_terms(stats: EStepStats, doc_topic_prior: FloatArray | float) -> float:
    """The documents' part of the ELBO: their bound terms plus E_q[log p(theta | alpha)].

    Parameters
    ----------
    stats : EStepStats
        E-step statistics of some documents, computed with ``doc_topic_prior``.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The alpha the E-step used.

    Returns
    -------
    float
        ``stats.doc_elbo + alpha_elbo_terms(alpha, stats.alpha_suff, stats.n_docs)``: every term of
        the ELBO that sums over documents (the topic terms are :func:`topic_elbo_terms`).

    Examples
    --------
    >>> local_elbo_terms(EStepStats.zeros(1, ["en"]), 1.0)
    0.0
    """
    return stats.doc_elbo + alpha_elbo_terms(doc_topic_prior, stats.alpha_suff, stats.n_docs)


def topic_elbo_terms(topic_word_var: FloatArray, topic_word_prior: FloatArray | float, *,
                     threads: int | None = None) -> float:
    """E_q[log p(beta | eta)] - E_q[log q(beta | lambda)] for one language.

    Parameters
    ----------
    topic_word_var : ndarray of shape (n_topics, n_terms), float64
        Variational parameters lambda.
    topic_word_prior : float or ndarray of shape (n_topics, n_terms), float64
        The prior eta (a matrix for informed priors).
    threads : int, optional
        Threads of this process that share the rows (default: its cores); the value has the same
        bits for any number.

    Returns
    -------
    float

    Notes
    -----
    NumPy equivalent, with ``elog = dirichlet_expectation(lam)``::

        (gammaln(eta.sum(1)) - gammaln(eta).sum(1)).sum() + ((eta - lam) * elog).sum()
        + gammaln(lam).sum() - gammaln(lam.sum(1)).sum()

    computed in one pass over lambda, a row per kernel call (no K x V temporary), with psi and
    lnGamma of each element from :func:`~topicflow.models.common.special.digamma_lgamma`. The
    driver pays this every batch iteration for the stopping rule; on two idle cores it takes 10 ms
    where the NumPy form took 26 ms at K = 100, V = 6,911 (benchmarks/RESULTS.md).

    Examples
    --------
    >>> topic_elbo_terms(np.ones((1, 2)), 1.0)
    0.0
    """
    lam = np.ascontiguousarray(topic_word_var, dtype=np.float64)
    if np.ndim(topic_word_prior) == 0:
        n_topics, n_terms = lam.shape
        value = float(topic_word_prior)
        prior_norm = n_topics * (math.lgamma(n_terms * value) - n_terms * math.lgamma(value))
        eta_rows = np.empty((0, 0))
    else:
        eta_rows = np.ascontiguousarray(np.broadcast_to(np.asarray(topic_word_prior, dtype=np.float64), lam.shape))
        prior_norm = float(gammaln_array(eta_rows.sum(axis=1)).sum() - gammaln_array(eta_rows).sum())
        value = 0.0
    rows = np.empty(lam.shape[0], dtype=np.float64)

    def fill(start: int, stop: int) -> None:
        _topic_rows(lam, eta_rows, value, start, stop, rows)

    run_chunks(fill, lam.shape[0], work=lam.size, threads=threads)
    return prior_norm + float(np.sum(rows))


@numba.njit(nogil=True, cache=True, inline="always")
def _neumaier_add(total, compensation, x):
    """One step of Neumaier's compensated sum: (total + x, the compensation with this step's rounding)."""
    t = total + x
    if abs(total) >= abs(x):
        compensation += (total - t) + x
    else:
        compensation += (x - t) + total
    return t, compensation


@numba.njit(nogil=True, cache=True)
def _topic_rows(lam, eta_rows, eta_value, start, stop, out):
    """out[k] = sum_v (eta - lam)(psi(lam) - psi(sum lam)) + lnG(lam), minus lnG(sum lam), rows start..stop-1.

    A row's sum and terms are added with Neumaier's compensated summation (the terms are of both
    signs and their sum is much smaller than their sizes), in index order by one call, so a row's
    value does not depend on how the rows are split among threads.
    """
    n_terms = lam.shape[1]
    matrix = eta_rows.shape[0] > 0
    for k in range(start, stop):
        total = 0.0
        carry = 0.0
        for v in range(n_terms):  # compensated too: psi and lnG of the sum multiply its rounding by ~10
            total, carry = _neumaier_add(total, carry, lam[k, v])
        total += carry
        psi_total = digamma(total)
        acc = 0.0
        compensation = 0.0
        for v in range(n_terms):
            x = lam[k, v]
            eta = eta_rows[k, v] if matrix else eta_value
            psi, lgamma = digamma_lgamma(x)
            acc, compensation = _neumaier_add(acc, compensation, (eta - x) * (psi - psi_total) + lgamma)
        out[k] = (acc + compensation) - math.lgamma(total)


def mstep_batch(
    stats_dense: FloatArray, topic_word_prior: FloatArray | float, *, overwrite_stats: bool = False
) -> FloatArray:
    """Batch M-step for one language: lambda = eta + sum_d n_dw phi_dwk.

    Parameters
    ----------
    stats_dense : ndarray of shape (n_topics, n_terms), float64
        ``TopicTermStats.to_dense(n_terms)`` of the merged statistics.
    topic_word_prior : float or ndarray of shape (n_topics, n_terms), float64
    overwrite_stats : bool, default False
        Add the prior into ``stats_dense`` in place and return it (one K x V array fewer; the same
        bits, float addition being commutative). ``stats_dense`` must then be a C-contiguous float64
        array the caller no longer needs.

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64

    Examples
    --------
    >>> mstep_batch(np.zeros((1, 2)), 0.5).tolist()
    [[0.5, 0.5]]
    >>> stats = np.ones((1, 2))
    >>> mstep_batch(stats, 0.5, overwrite_stats=True) is stats, stats.tolist()
    (True, [[1.5, 1.5]])
    """
    if overwrite_stats and isinstance(stats_dense, np.ndarray) and stats_dense.dtype == np.float64:
        np.add(stats_dense, np.asarray(topic_word_prior, dtype=np.float64), out=stats_dense)
        return stats_dense
    return np.asarray(topic_word_prior, dtype=np.float64) + np.asarray(stats_dense, dtype=np.float64)


def initial_topic_word_var(
    n_topics: int, n_terms: int, *, seed: int, language_index: int = 0, shape: float = 100.0
) -> FloatArray:
    """Random starting lambda: Gamma(shape, 1/shape) entries (mean 1, variance 1/shape).

    Parameters
    ----------
    n_topics, n_terms : int
    seed : int
    language_index : int, default 0
        Position of the language, so each language gets its own draws.
    shape : float, default 100
        100 is Hoffman et al. (2010)'s start, which gensim and scikit-learn use. A smaller shape
        starts the topics further apart (measured in benchmarks/RESULTS.md).

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64

    Notes
    -----
    Row k is drawn from ``doc_generator(seed, STREAM_TOPIC_INIT, language_index, k)``, so the result
    depends only on its arguments.

    Examples
    --------
    >>> initial_topic_word_var(2, 3, seed=0).shape
    (2, 3)
    """
    out = np.empty((n_topics, n_terms), dtype=np.float64)  # filled row by row: no second K x V copy
    for k in range(n_topics):
        out[k] = doc_generator(seed, STREAM_TOPIC_INIT, language_index, k).gamma(shape, 1.0 / shape, size=n_terms)
    return out


def full_elbo(
    stats: EStepStats,
    topic_word_var: Mapping[str, FloatArray],
    doc_topic_prior: FloatArray | float,
    topic_word_prior: Mapping[str, FloatArray | float] | float,
) -> float:
    """The full ELBO of a batch iteration: document terms + alpha terms + topic terms of each language.

    Parameters
    ----------
    stats : EStepStats
        Merged E-step statistics of the whole corpus, computed with ``topic_word_var`` and
        ``doc_topic_prior``.
    topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms_lang)
        The lambda the E-step used.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The alpha the E-step used.
    topic_word_prior : float, or mapping of str to float or ndarray of shape (n_topics, n_terms_lang)

    Returns
    -------
    float

    Raises
    ------
    NumericalError
        The ELBO is not finite.

    Notes
    -----
    ``local_elbo_terms(stats, alpha) + sum_l topic_elbo_terms(lambda_l, eta_l)``.

    Examples
    --------
    >>> stats = EStepStats.zeros(1, ["en"])
    >>> full_elbo(stats, {"en": np.ones((1, 2))}, 1.0, 1.0)
    0.0
    """
    value = local_elbo_terms(stats, doc_topic_prior)
    for lang, lam in topic_word_var.items():
        eta = topic_word_prior[lang] if isinstance(topic_word_prior, Mapping) else topic_word_prior
        value += topic_elbo_terms(lam, eta)
    if not math.isfinite(value):
        raise NumericalError(f"ELBO is not finite ({value!r}); doc part {stats.doc_elbo!r}")
    return float(value)
