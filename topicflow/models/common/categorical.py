"""Inverse-CDF draws from categorical distributions, given one uniform number each.

This module owns the categorical draws the samplers share, as numba helpers called from their kernels:
a dense draw over explicit weights (:func:`draw_dense`, the particle filter), a uniform draw
(:func:`draw_uniform`, random starts and source picks), and the two-bucket draw of a token whose
topic weights are ``(c_k + a_k) E_k`` with sparse counts c (:func:`draw_two_bucket`, the hybrid E-step
and Gibbs fold-in with fixed topics), whose count vector keeps its nonzero components as a sorted
list (:func:`add_sorted_count`, :func:`remove_sorted_count`). Every draw is a function of its
uniform, so the caller's counter-based random numbers fix it. Pure numba: no dask, zarr, logging
or I/O, and nothing here knows of topic models beyond the names of its glossary.

Glossary (Yao, Mimno and McCallum 2009):
    u: a uniform number in [0, 1); weights: nonnegative, not normalized
    counts (c, (n_components,)), nonzero (sorted list of the k with c_k > 0, its first n_nonzero entries)
    smoothing (a, (n_components,)) and column weights (E_kw, one row ``term_topic[w]`` per term w)
    smoothing bucket s_w = sum_k a_k E_kw; document bucket r = sum_k c_k E_kw (over the nonzero k)
    chunk_cum ((n_rows, n_chunks)): s's running sum at the end of every chunk of ``chunk`` components

References
----------
Yao, Mimno and McCallum (2009). Efficient methods for topic model inference on streaming document
collections. KDD.
Mimno, Hoffman and Blei (2012). Sparse stochastic inference for latent Dirichlet allocation. ICML.
"""
from __future__ import annotations

import math

import numba
import numpy as np

#: Components per chunk of the smoothing bucket's table: :func:`smoothing_chunk_sums` stores the running
#: sum of a_k E_kw only at chunk ends (n_rows x K / 32 floats) and a draw recomputes at most 32 terms of it.
SMOOTHING_CHUNK = 32


@numba.njit(nogil=True, cache=True)
def draw_dense(weights, u):
    """Draw the first index whose running sum of ``weights`` exceeds ``u`` times their total.

    Parameters
    ----------
    weights : ndarray of shape (n,), float64
        Positive weights, not normalized.
    u : float
        Uniform number in [0, 1).

    Returns
    -------
    index : int
    total : float
        The sum of the weights, accumulated in index order.

    Notes
    -----
    NumPy equivalent: ``min(np.searchsorted(np.cumsum(w), u * np.cumsum(w)[-1], "right"), n - 1)``;
    the last index is taken when ``u * total`` rounds up to the total.
    """
    total = 0.0
    for k in range(weights.shape[0]):
        total += weights[k]
    x = u * total
    running = 0.0
    for k in range(weights.shape[0]):
        running += weights[k]
        if running > x:
            return k, total
    return weights.shape[0] - 1, total  # u * total rounded up to the total: every weight is positive


@numba.njit(nogil=True, cache=True, inline="always")
def draw_uniform(u, n):
    """Draw one of ``n`` equally likely indices: ``floor(u n)``, at most ``n - 1``.

    Parameters
    ----------
    u : float
        Uniform number in [0, 1).
    n : int
        Number of indices, at least 1.

    Returns
    -------
    int

    Notes
    -----
    NumPy equivalent: ``min(int(u * n), n - 1)`` (the bound guards ``u * n`` rounded up to n).
    """
    return min(int(u * n), n - 1)


@numba.njit(nogil=True, cache=True)
def smoothing_chunk_sums(rows, term_topic, smoothing, chunk, out):
    """Tabulate the smoothing bucket's running sum at the end of every chunk of components.

    Parameters
    ----------
    rows : ndarray of shape (n_rows,), int
        Rows of ``term_topic`` to tabulate (the terms present in a block).
    term_topic : ndarray of shape (n_terms, n_components), float64 or float32
        Column weights E; row w holds E_kw for every k.
    smoothing : ndarray of shape (n_components,), float64
        The smoothing weights a.
    chunk : int
        Components per chunk (:data:`SMOOTHING_CHUNK`).
    out : ndarray of shape (n_rows, ceil(n_components / chunk)), float64
        ``out[c, b] = s_cum[min((b + 1) * chunk, K) - 1]`` for ``w = rows[c]``, with the running sum
        ``s_cum[k] = sum_{k' <= k} a_k' E_k'w`` accumulated in k order.

    Returns
    -------
    int
        The number of E entries of the tabulated rows that are negative or not finite.
    """
    n_bad = 0
    n_components = smoothing.shape[0]
    for c in range(rows.shape[0]):
        w = rows[c]
        acc = 0.0
        for k in range(n_components):
            value = np.float64(term_topic[w, k])
            n_bad += not (0.0 <= value < math.inf)
            acc += smoothing[k] * value
            if (k + 1) % chunk == 0 or k == n_components - 1:
                out[c, k // chunk] = acc
    return n_bad


@numba.njit(nogil=True, cache=True)
def _search_smoothing(y, w, c, term_topic, smoothing, chunk_cum, chunk):
    """First k with s_cum[k] > y or, if none (y rounded up to the total s), the first k with s_cum[k] >= s.

    A binary search over the chunk ends, then the running sum is continued inside one chunk from the
    stored value at the end of the previous chunk, so every s_cum[k] is the same float as a
    sequential cumulative sum over all k.
    """
    n_chunks = chunk_cum.shape[1]
    total = chunk_cum[c, n_chunks - 1]
    strict = y < total
    lo, hi = 0, n_chunks - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if (chunk_cum[c, mid] > y) if strict else (chunk_cum[c, mid] >= total):
            hi = mid
        else:
            lo = mid + 1
    acc = 0.0 if lo == 0 else chunk_cum[c, lo - 1]
    k_end = min((lo + 1) * chunk, smoothing.shape[0])
    for k in range(lo * chunk, k_end):
        acc += smoothing[k] * np.float64(term_topic[w, k])
        if (acc > y) if strict else (acc >= total):
            return k
    return k_end - 1  # not reached: the chunk's last running sum is chunk_cum[c, lo]


@numba.njit(nogil=True, cache=True)
def draw_two_bucket(u, w, c, term_topic, smoothing, chunk_cum, chunk, counts, nonzero, n_nonzero, doc_cum):
    """Draw k from ``p(k) ∝ (c_k + a_k) E_kw`` with the uniform ``u``: document bucket, then smoothing.

    Parameters
    ----------
    u : float
        Uniform number in [0, 1).
    w : int
        Row of ``term_topic`` (the token's term).
    c : int
        Row of ``chunk_cum`` tabulated for w by :func:`smoothing_chunk_sums`.
    term_topic : ndarray of shape (n_terms, n_components), float64 or float32
        The column weights E, read as float64.
    smoothing : ndarray of shape (n_components,), float64
        The smoothing weights a.
    chunk_cum : ndarray of shape (n_rows, n_chunks), float64
        From :func:`smoothing_chunk_sums`.
    chunk : int
        The chunk size the table was built with.
    counts : ndarray of shape (n_components,), int
        The counts c, without the token being drawn.
    nonzero : ndarray of shape (n_components,), int
        The k with ``c_k > 0`` in increasing order, in the first ``n_nonzero`` entries.
    n_nonzero : int
    doc_cum : ndarray of shape (n_components,), float64
        Scratch: the document bucket's running sums.

    Returns
    -------
    int
        The drawn component.

    Notes
    -----
    With ``r_cum`` the running sum of c_k E_kw over the nonzero k in increasing order (total r) and
    ``s_cum`` the running sum of a_k E_kw over all k (total s), let ``x = u * (s + r)``. If ``x < r``
    the draw is the first (smallest) k whose r_cum exceeds x; otherwise it is the first k with
    ``s_cum[k] > x - r`` (binary search over the chunk ends, then a walk inside one chunk), or, when
    none does (s = 0: a term with E_kw = 0 everywhere goes to component 0; or x - r rounded up to s),
    the first k with ``s_cum[k] >= s``. A draw costs O(n_nonzero + log K + chunk), not O(K).
    NumPy equivalent::

        r_cum = np.cumsum(counts * E[:, w]); s_cum = np.cumsum(a * E[:, w])
        x = u * (s_cum[-1] + r_cum[-1])
        k = (np.searchsorted(r_cum, x, "right") if x < r_cum[-1]
             else np.searchsorted(s_cum, x - r_cum[-1], "right"))   # then the rounding fallback
    """
    r = 0.0
    for i in range(n_nonzero):
        k = nonzero[i]
        r += np.float64(counts[k]) * np.float64(term_topic[w, k])
        doc_cum[i] = r
    x = u * (chunk_cum[c, chunk_cum.shape[1] - 1] + r)
    if x < r:
        i = 0
        while doc_cum[i] <= x:
            i += 1
        return nonzero[i]
    return _search_smoothing(x - r, w, c, term_topic, smoothing, chunk_cum, chunk)


@numba.njit(nogil=True, cache=True)
def add_sorted_count(k, counts, nonzero, n_nonzero):
    """Add one to ``counts[k]``, inserting k into the sorted ``nonzero`` list when it becomes used.

    Parameters
    ----------
    k : int
    counts : ndarray of shape (n_components,), int
        Updated in place.
    nonzero : ndarray of shape (n_components,), int
        The k with ``counts[k] > 0`` in increasing order, in the first ``n_nonzero`` entries; updated
        in place.
    n_nonzero : int

    Returns
    -------
    int
        The new length of the list.
    """
    counts[k] += 1
    if counts[k] == 1:
        i = n_nonzero
        while i > 0 and nonzero[i - 1] > k:
            nonzero[i] = nonzero[i - 1]
            i -= 1
        nonzero[i] = k
        n_nonzero += 1
    return n_nonzero


@numba.njit(nogil=True, cache=True)
def remove_sorted_count(k, counts, nonzero, n_nonzero):
    """Subtract one from ``counts[k]``, removing k from the sorted ``nonzero`` list when it becomes unused.

    Parameters
    ----------
    k : int
        A component with ``counts[k] > 0``.
    counts : ndarray of shape (n_components,), int
        Updated in place.
    nonzero : ndarray of shape (n_components,), int
        As in :func:`add_sorted_count`; updated in place.
    n_nonzero : int

    Returns
    -------
    int
        The new length of the list.
    """
    counts[k] -= 1
    if counts[k] == 0:
        i = 0
        while nonzero[i] != k:
            i += 1
        for i in range(i, n_nonzero - 1):
            nonzero[i] = nonzero[i + 1]
        n_nonzero -= 1
    return n_nonzero
