"""The collapsed Gibbs conditional of LDA: the topic weights of one token given everyone else's counts.

This module owns the dense form of the conditional of Griffiths and Steyvers (2004), eq. (5), written
once for every sampler that evaluates it topic by topic: the streaming particle filter's proposal
and rejuvenation kernels call :func:`collapsed_conditional`, and :func:`token_conditional` is its
checked wrapper for driver code and tests. The batch sampler (:mod:`topicflow.models.lda.gibbs.sparse`)
draws from the same distribution through its sparse bucket decomposition instead. Pure NumPy +
numba: no dask, zarr, logging or I/O.

Glossary (Griffiths and Steyvers 2004; Canini et al. 2009):
    doc_row (n_dk), term_row (n_wk), topic_row (n_k): counts of the token's document, its term and
        every topic, shape (n_topics,)
    own: the token's current topic, removed from the three counts (-1 for a token not yet counted)
    doc_topic_prior (alpha): a scalar (symmetric) or one value per topic
    topic_word_prior (beta): symmetric; v_beta = V beta with V the vocabulary size
"""
from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.validation import parse_dirichlet_prior, parse_int, parse_positive_float


def _component(prior: float | FloatArray, k: int) -> float:
    """alpha_k of a symmetric (scalar) or per-topic (vector) prior; numba picks one by the argument type."""
    return float(prior[k]) if np.ndim(prior) else float(prior)  # type: ignore[index]


@overload(_component, inline="always")
def _component_numba(prior, k):
    if isinstance(prior, types.Array):
        return lambda prior, k: prior[k]
    return lambda prior, k: prior


@numba.njit(nogil=True, cache=True)
def collapsed_conditional(doc_row, term_row, topic_row, own, alpha, beta, v_beta, out):
    """Write the unnormalized topic weights of one token into ``out``.

    Parameters
    ----------
    doc_row : ndarray of shape (n_topics,), int or float
        The counts n_dk of the token's document.
    term_row : ndarray of shape (n_topics,), int or float
        The counts n_wk of the token's term.
    topic_row : ndarray of shape (n_topics,), int or float
        The counts n_k.
    own : int
        The token's current topic, counted in the three rows and removed here; -1 if the token is
        not counted.
    alpha : float or ndarray of shape (n_topics,), float64
        The document-topic prior.
    beta : float
        The topic-word prior.
    v_beta : float
        V beta, the vocabulary size times beta.
    out : ndarray of shape (n_topics,), float64
        Written in place.

    Notes
    -----
    Griffiths and Steyvers (2004), eq. (5); Canini et al. (2009), eq. (3). With ``e_k = [k == own]``::

        out[k] = (n_wk - e_k + beta) / (n_k - e_k + V beta) * (n_dk - e_k + alpha_k)

    computed in that order. NumPy equivalent:
    ``(term_row - e + beta) / (topic_row - e + v_beta) * (doc_row - e + alpha)``.
    """
    for k in range(out.shape[0]):
        e = 1 if k == own else 0
        out[k] = ((np.float64(term_row[k] - e) + beta) / (np.float64(topic_row[k] - e) + v_beta)
                  * (np.float64(doc_row[k] - e) + _component(alpha, k)))


def token_conditional(
    doc_counts: np.ndarray, term_counts: np.ndarray, topic_counts: np.ndarray,
    doc_topic_prior: float | FloatArray, topic_word_prior: float, vocab_size: int, *, exclude: int = -1,
) -> FloatArray:
    """Compute the unnormalized collapsed Gibbs conditional of one token from the counts.

    Parameters
    ----------
    doc_counts, term_counts, topic_counts : ndarray of shape (n_topics,), int or float
        The counts n_dk, n_wk and n_k, including the token itself when ``exclude >= 0``.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha, positive.
    topic_word_prior : float
        The prior beta, positive.
    vocab_size : int
        V, at least 1.
    exclude : int, default -1
        The token's current topic, removed from the three counts (a resampled token); -1 for a token
        the counts do not hold (a new token).

    Returns
    -------
    ndarray of shape (n_topics,), float64
        ``(n_wk + beta) / (n_k + V beta) * (n_dk + alpha_k)`` with the token excluded. Their sum
        divided by ``n_d + sum(alpha)`` is the predictive probability of the token's term.

    Raises
    ------
    InvalidParameterError
        Counts of different shapes, a prior that is not positive, or ``exclude`` out of range.

    Notes
    -----
    :func:`collapsed_conditional`, the kernels' computation, on the given counts.

    Examples
    --------
    >>> token_conditional(np.array([0, 0]), np.array([0, 0]), np.array([0, 0]), 1.0, 1.0, 4).tolist()
    [0.25, 0.25]
    """
    rows = [np.ascontiguousarray(a) for a in (doc_counts, term_counts, topic_counts)]
    n_topics = rows[0].shape[0] if rows[0].ndim == 1 else 0
    if n_topics < 1 or any(r.shape != (n_topics,) for r in rows):
        raise InvalidParameterError(
            f"doc_counts, term_counts and topic_counts must have one shape (n_topics,), got "
            f"{[r.shape for r in rows]!r}"
        )
    rows = [r.astype(np.int64) if np.issubdtype(r.dtype, np.integer) else r.astype(np.float64) for r in rows]
    alpha: float | FloatArray = (
        parse_positive_float("doc_topic_prior", doc_topic_prior) if np.ndim(doc_topic_prior) == 0
        else parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, n_topics)
    )
    beta = parse_positive_float("topic_word_prior", topic_word_prior)
    v_beta = parse_int("vocab_size", vocab_size, 1) * beta
    exclude = parse_int("exclude", exclude, -1, n_topics)
    out = np.empty(n_topics, dtype=np.float64)
    collapsed_conditional(rows[0], rows[1], rows[2], exclude, alpha, beta, v_beta, out)
    return out
