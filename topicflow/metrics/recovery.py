"""Recovery of known topics: distances between topic-word rows and their optimal one-to-one matching.

This module owns the comparison of estimated topics with the true ones of a planted corpus (or of two
fits with each other): pairwise Hellinger or cosine distances between rows, the Hungarian matching that
minimizes their sum, and the worst matched distance that recovery tests bound. It must not import
dask, zarr or logging, and it does no I/O.

Glossary:
    estimated ((n_estimated, n_terms)), true ((n_true, n_terms)): rows are topic-word distributions
        (nonnegative; Hellinger expects rows that sum to 1, cosine accepts any scale)
    Hellinger distance: ``sqrt(1/2 sum_w (sqrt p_w - sqrt q_w)^2)``, in [0, 1]
    cosine distance: ``1 - p.q / (|p| |q|)``

References
----------
Kuhn (1955). The Hungarian method for the assignment problem. Naval Research Logistics 2, 83-97.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError

#: Distances :func:`match_topics` can match on.
TopicDistance = Literal["hellinger", "cosine"]


def _topic_rows(p: np.ndarray, q: np.ndarray) -> tuple[FloatArray, FloatArray]:
    """Both sets of topics as float64, checked: 2-d, finite, nonnegative, over one vocabulary."""
    pair = []
    for name, values in (("p", p), ("q", q)):
        rows = np.asarray(values, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] == 0:
            raise InvalidParameterError(
                f"{name} must be 2-d (n_topics, n_terms) with n_topics >= 1, got {rows.shape!r}")
        if not (np.all(np.isfinite(rows)) and np.all(rows >= 0)):
            raise InvalidParameterError(f"{name} must be finite and nonnegative")
        pair.append(rows)
    if pair[0].shape[1] != pair[1].shape[1]:
        raise InvalidParameterError(
            f"topics of {pair[0].shape[1]} and {pair[1].shape[1]} terms cannot be compared; give both over one "
            "vocabulary"
        )
    return pair[0], pair[1]


def hellinger(p: np.ndarray, q: np.ndarray) -> FloatArray:
    """Pairwise Hellinger distances between the rows of ``p`` and the rows of ``q``.

    Parameters
    ----------
    p : ndarray of shape (n_p, n_terms)
        Distributions (nonnegative rows that sum to 1).
    q : ndarray of shape (n_q, n_terms)
        Distributions over the same terms.

    Returns
    -------
    ndarray of shape (n_p, n_q), float64
        ``sqrt(0.5 * sum_w (sqrt(p[i, w]) - sqrt(q[j, w])) ** 2)``, in [0, 1] for distributions.

    Raises
    ------
    InvalidParameterError
        Not 2-d, negative or non-finite values, or different numbers of terms.

    Examples
    --------
    >>> hellinger(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])).tolist()
    [[0.0, 1.0]]
    """
    a, b = _topic_rows(p, q)
    out: FloatArray = np.sqrt(0.5 * ((np.sqrt(a[:, None, :]) - np.sqrt(b[None, :, :])) ** 2).sum(axis=-1))
    return out


def cosine_distance(p: np.ndarray, q: np.ndarray) -> FloatArray:
    """Pairwise cosine distances ``1 - cos`` between the rows of ``p`` and the rows of ``q``.

    Parameters
    ----------
    p : ndarray of shape (n_p, n_terms)
        Nonnegative rows, none all zero.
    q : ndarray of shape (n_q, n_terms)
        Nonnegative rows over the same terms, none all zero.

    Returns
    -------
    ndarray of shape (n_p, n_q), float64
        In [0, 1] for nonnegative rows; scale-free, so rows need not be normalized.

    Raises
    ------
    InvalidParameterError
        As :func:`hellinger`.

    Examples
    --------
    >>> cosine_distance(np.array([[2.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 3.0]])).tolist()
    [[0.0, 1.0]]
    """
    a, b = _topic_rows(p, q)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    out: FloatArray = 1.0 - a @ b.T
    return out


@dataclass(frozen=True)
class TopicMatch:
    """A one-to-one matching of estimated to true topics, ordered by true topic.

    Attributes
    ----------
    estimated : ndarray of shape (n_matched,), int64
        Index of the estimated topic matched to each true topic of ``true``.
    true : ndarray of shape (n_matched,), int64
        True topics, ascending (all of them when there are at least as many estimated topics).
    distances : ndarray of shape (n_matched,), float64
        Distance of each matched pair.
    """

    estimated: IntArray
    true: IntArray
    distances: FloatArray

    @property
    def worst(self) -> float:
        """The largest matched distance."""
        return float(self.distances.max())


def match_topics(estimated: np.ndarray, true: np.ndarray, *, distance: TopicDistance = "hellinger") -> TopicMatch:
    """Match estimated topics to true ones one to one, minimizing the summed distance (Hungarian method).

    Parameters
    ----------
    estimated : ndarray of shape (n_estimated, n_terms)
        Topic-word rows of a fit (distributions for ``"hellinger"``).
    true : ndarray of shape (n_true, n_terms)
        The known topics.
    distance : {"hellinger", "cosine"}, default "hellinger"
        :func:`hellinger` or :func:`cosine_distance`.

    Returns
    -------
    TopicMatch
        ``min(n_estimated, n_true)`` pairs, ordered by true topic.

    Raises
    ------
    InvalidParameterError
        As :func:`hellinger`, or an unknown ``distance``.

    Notes
    -----
    ``scipy.optimize.linear_sum_assignment`` on the (n_estimated, n_true) distance matrix: no other
    one-to-one matching has a smaller sum of distances. This generalizes sklearn's block-diagonal
    recovery test: a fit recovers planted topics when the worst matched distance is small.

    Examples
    --------
    >>> truth = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> match = match_topics(np.array([[0.0, 1.0], [0.9, 0.1]]), truth)
    >>> match.estimated.tolist(), match.true.tolist()
    ([1, 0], [0, 1])
    """
    if distance == "hellinger":
        dist = hellinger(estimated, true)
    elif distance == "cosine":
        dist = cosine_distance(estimated, true)
    else:
        raise InvalidParameterError(f"distance must be 'hellinger' or 'cosine', got {distance!r}")
    # Imported here: scipy.optimize costs 0.15 s, and every command that fits imports this module.
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(dist)
    order = np.argsort(cols, kind="stable")
    return TopicMatch(estimated=rows[order].astype(np.int64), true=cols[order].astype(np.int64),
                      distances=dist[rows[order], cols[order]])


def worst_matched_distance(estimated: np.ndarray, true: np.ndarray, *, distance: TopicDistance = "hellinger") -> float:
    """Largest distance of the optimal matching of estimated to true topics: the recovery score.

    Parameters
    ----------
    estimated : ndarray of shape (n_estimated, n_terms)
        Topic-word rows of a fit.
    true : ndarray of shape (n_true, n_terms)
        The known topics.
    distance : {"hellinger", "cosine"}, default "hellinger"
        As in :func:`match_topics`.

    Returns
    -------
    float
        ``match_topics(estimated, true, distance=distance).worst``.

    Examples
    --------
    >>> worst_matched_distance(np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    0.0
    """
    return match_topics(estimated, true, distance=distance).worst
