"""The truncated stick-breaking prior of the HDP and its point-estimate updates (Bleier, secs. 1-3).

Equation numbers are Bleier's. Per-topic quantities are indexed by *physical* topic (the row of
n_kw that holds the topic, which never moves); the stick order is a permutation computed from the
table statistics, so "re-ordering the sticks by size" (sec. 3) costs a sort of T numbers instead of
moving T x V rows.

Table statistics (spec P4). Eqs. 4 and 10-11 are written with u and v, but v_k is a tail sum over
the sticks after k, which stops meaning anything once the sticks are re-ordered. We keep instead
the per-topic expected table count ``a_k`` (batch: ``sum_d E[1(n_dk >= 1)]``; stochastic: its
running average ``a_k <- (1 - rho^h) a_k + rho^h D E[1(n_dk >= 1)]``, which commutes with any
permutation) and derive ``u_k = 1 + a_k`` and ``v_k = gamma + sum_{l after k} a_l`` in the current
order. With a fixed order and constant gamma this is eqs. 10-11 exactly (they are linear in the
statistics); when gamma moves, v uses the current gamma rather than a running blend of old ones
(docs/hdp.md, deviations).
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma

from topicflow._typing import FloatArray, IntArray


def stick_order(tables: FloatArray) -> IntArray:
    """Physical topics in stick order: expected table counts descending, ties by topic id.

    Parameters
    ----------
    tables : ndarray of shape (T,)
        The expected table count a_k of each physical topic.

    Returns
    -------
    ndarray of shape (T,), int64
        ``order[j]`` is the physical topic on stick j.

    Examples
    --------
    >>> stick_order(np.array([1.0, 3.0, 3.0, 0.0])).tolist()
    [1, 2, 0, 3]
    """
    return np.argsort(-np.asarray(tables, dtype=np.float64), kind="stable").astype(np.int64)


def stick_params(tables: FloatArray, gamma: float, order: IntArray | None = None) -> tuple[FloatArray, FloatArray]:
    """Beta parameters (u, v) of the first T - 1 sticks in stick order (eq. 4 with spec P4).

    Parameters
    ----------
    tables : ndarray of shape (T,)
        The expected table count a_k of each physical topic.
    gamma : float
        Current top-level concentration (gamma_0 of eq. 4).
    order : ndarray of shape (T,), optional
        Stick order; default :func:`stick_order` of ``tables``.

    Returns
    -------
    u : ndarray of shape (T - 1,)
        ``u_j = 1 + a_{order[j]}``.
    v : ndarray of shape (T - 1,)
        ``v_j = gamma + sum_{l > j} a_{order[l]}``.
    """
    a = np.asarray(tables, dtype=np.float64)
    if order is None:
        order = stick_order(a)
    ordered = a[order]
    tail = np.cumsum(ordered[::-1])[::-1]  # tail[j] = sum_{l >= j}
    u = 1.0 + ordered[:-1]
    v = gamma + tail[1:]
    return u, v


def stick_weights(tables: FloatArray, gamma: float, order: IntArray | None = None) -> FloatArray:
    """Top-level topic weights pi per physical topic (eq. 3 with pi_bar the Beta mean, eq. 1's pi_bar_T = 1).

    Parameters
    ----------
    tables : ndarray of shape (T,)
    gamma : float
    order : ndarray of shape (T,), optional

    Returns
    -------
    ndarray of shape (T,)
        Non-negative, sums to 1.

    Examples
    --------
    >>> pi = stick_weights(np.zeros(3), 1.0)
    >>> pi.round(3).tolist(), float(pi.sum())
    ([0.5, 0.25, 0.25], 1.0)
    """
    a = np.asarray(tables, dtype=np.float64)
    if order is None:
        order = stick_order(a)
    u, v = stick_params(a, gamma, order)
    bar = u / (u + v)
    remaining = np.concatenate(([1.0], np.cumprod(1.0 - bar)))  # prod_{l<j} (1 - pi_bar_l), j = 0..T-1
    ordered = np.empty(a.shape[0], dtype=np.float64)
    ordered[:-1] = bar * remaining[:-1]
    ordered[-1] = remaining[-1]  # pi_bar_T = 1
    pi = np.empty_like(ordered)
    pi[order] = ordered
    return pi


def gamma_update(u: FloatArray, v: FloatArray) -> float:
    """Eq. 6: ``gamma = (T - 1) / sum_{k<T} [psi(u_k + v_k) - psi(v_k)]``.

    Parameters
    ----------
    u, v : ndarray of shape (T - 1,)

    Returns
    -------
    float
    """
    denom = float(np.sum(digamma(u + v) - digamma(v)))
    return float(u.shape[0]) / denom


def alpha_ratio(table_sum: float, doc_lengths: FloatArray, alpha: float) -> float:
    """``sum E[1(n_dk >= 1)] / sum_d [psi(n_d + alpha) - psi(alpha)]``: eq. 5's update, eq. 12's target.

    Parameters
    ----------
    table_sum : float
        Expected tables of the documents, summed over documents and topics.
    doc_lengths : ndarray of shape (n_docs,)
        The lengths n_d of the same documents.
    alpha : float
        The current alpha (alpha_old).

    Returns
    -------
    float
        Batch PCVB0 sets alpha to it over the corpus (eq. 5); PCSVB0 blends alpha toward it over one
        document (eq. 12) or a minibatch.
    """
    lengths = np.asarray(doc_lengths, dtype=np.float64)
    denom = float(np.sum(digamma(lengths + alpha) - digamma(alpha)))
    return table_sum / denom


def expected_tables(log_miss: FloatArray) -> FloatArray:
    """``E[1(n_dk >= 1)] = 1 - prod_i (1 - q_dik)`` from ``log_miss = sum_i log(1 - q_dik)`` (Sato et al.).

    Parameters
    ----------
    log_miss : ndarray
        Sums of ``log1p(-q)`` with q clipped to at most 1 - 1e-12 (spec P9).

    Returns
    -------
    ndarray of the same shape
    """
    return -np.expm1(log_miss)


def blend_tables(tables: FloatArray, table_sums: FloatArray, *, n_docs: int, batch_docs: int, rho: float) -> FloatArray:
    """Stochastic step of the table statistics (eqs. 10-11 in the form of spec P4).

    Parameters
    ----------
    tables : ndarray of shape (T,)
        The expected table count a_k of each physical topic.
    table_sums : ndarray of shape (T,)
        ``sum_{d in batch} E[1(n_dk >= 1)]`` of the documents just processed (one, or a minibatch).
    n_docs : int
        D, the number of training documents (spec P10).
    batch_docs : int
        Documents behind ``table_sums``.
    rho : float
        The step rho^h.

    Returns
    -------
    ndarray of shape (T,)
        ``(1 - rho) a + rho (D / batch_docs) table_sums``.
    """
    return (1.0 - rho) * tables + rho * (n_docs / batch_docs) * np.asarray(table_sums, dtype=np.float64)
