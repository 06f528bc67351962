"""Coherence of one topic from its co-occurrence counts: segmentation, confirmation, aggregation.

Each measure follows gensim 4.4's ``CoherenceModel`` pipeline (segmentation, probability estimation,
confirmation measure, aggregation) step for step, with the same epsilon, logarithm and operation
order, so that values agree with gensim to rounding. The input of every measure is the topic's count
matrix ``C`` (``C[a, b]`` units holding words a and b, ``C[a, a]`` units holding a; units are documents
or windows, see :mod:`topicflow.metrics.cooccurrence`) and the number of units ``N``; probabilities
are ``P(a) = C[a, a] / N``, ``P(a, b) = C[a, b] / N``. Words are in topic order (most probable first).

* ``u_mass`` (Mimno et al. 2011, as gensim smooths it): segmentation one-pre, pairs ``(w_i, w_j)``
  with ``j < i``; ``log((P(w_i, w_j) + eps) / P(w_j))``, taken as 0 when ``P(w_j) = 0``.
* ``c_uci`` (Newman et al. 2010): one-one, all ordered pairs ``i != j``;
  ``PMI = log((P(w_i, w_j) + eps) / (P(w_i) P(w_j)))``.
* ``c_npmi`` (Bouma 2009; Aletras and Stevenson 2013): one-one; ``PMI / -log(P(w_i, w_j) + eps)``.
* ``c_v`` (Röder et al. 2015): one-set, pairs ``(w_i, W)``; the context vector of ``w_i`` is
  ``v_i[j] = NPMI(w_i, w_j) ** gamma`` over the topic's words ``j`` (the diagonal NPMI of a word with
  itself included), the vector of the whole topic is ``u = sum_i v_i``, and the confirmation is the
  cosine ``v_i . u / (|v_i| |u|)``.

Every measure then averages its segments (arithmetic mean; NaN for a topic without segments, as
``numpy.mean([])``), and a model's coherence is the arithmetic mean of its topics' values.
Divisions by zero follow gensim's arithmetic (inf and NaN for the window measures, whose counts are
NumPy integers; 0 for ``u_mass``, whose Python division raises ZeroDivisionError that gensim catches).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from topicflow._typing import FloatArray, IndexArray, IntArray

#: gensim's ``direct_confirmation_measure.EPSILON``, added to joint probabilities before the log.
EPSILON = 1e-12


def one_pre(n: int) -> tuple[IntArray, IntArray]:
    """Segmentation one-pre: pairs ``(i, j)`` with ``j < i``, in gensim's order.

    Parameters
    ----------
    n : int
        Words in the topic.

    Returns
    -------
    first : ndarray of int64
        The conditioned word ``W' = w_i`` of each pair.
    second : ndarray of int64
        The conditioning word ``W* = w_j``, ``j < i``.

    Examples
    --------
    >>> [list(a) for a in one_pre(3)]
    [[1, 2, 2], [0, 0, 1]]
    """
    first, second = np.tril_indices(n, k=-1)
    return first.astype(np.int64), second.astype(np.int64)


def one_one(n: int) -> tuple[IntArray, IntArray]:
    """Segmentation one-one: all ordered pairs ``(i, j)``, ``i != j``, in gensim's order.

    Parameters
    ----------
    n : int
        Words in the topic.

    Returns
    -------
    first : ndarray of int64
        ``W' = w_i`` of each pair.
    second : ndarray of int64
        ``W* = w_j``, ``j != i``.

    Examples
    --------
    >>> [list(a) for a in one_one(3)]
    [[0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1]]
    """
    first, second = np.nonzero(~np.eye(n, dtype=bool))
    return first.astype(np.int64), second.astype(np.int64)


def log_conditional_probability(joint: IntArray, given: IntArray, n_units: int) -> FloatArray:
    """``log((joint / N + eps) / (given / N))``, and 0 where ``given / N`` is 0 (gensim's u_mass confirmation).

    Parameters
    ----------
    joint, given : int arrays of one shape
        Units holding both words, units holding the conditioning word.
    n_units : int
        N.

    Returns
    -------
    ndarray of float64
    """
    joint, given = np.asarray(joint, dtype=np.float64), np.asarray(given, dtype=np.float64)
    if n_units == 0:
        return np.zeros(joint.shape)
    n = float(n_units)
    defined = given > 0
    out = np.zeros(joint.shape)
    out[defined] = np.log((joint[defined] / n + EPSILON) / (given[defined] / n))
    return out


def log_ratio(joint: IntArray, first: IntArray, second: IntArray, n_units: int) -> FloatArray:
    """PMI with gensim's smoothing: ``log((joint / N + eps) / (first / N * (second / N)))``.

    Parameters
    ----------
    joint, first, second : int arrays of one shape
        Units holding both words, units holding each word.
    n_units : int
        N.

    Returns
    -------
    ndarray of float64
        Inf or NaN where a word never occurs, as in gensim.
    """
    n = float(n_units)
    with np.errstate(divide="ignore", invalid="ignore"):
        numerator = np.asarray(joint, np.float64) / n + EPSILON
        denominator = np.asarray(first, np.float64) / n * (np.asarray(second, np.float64) / n)
        return np.log(numerator / denominator)


def normalized_log_ratio(joint: IntArray, first: IntArray, second: IntArray, n_units: int) -> FloatArray:
    """NPMI with gensim's smoothing: :func:`log_ratio` divided by ``-log(joint / N + eps)``.

    Parameters
    ----------
    joint, first, second : int arrays of one shape
        Units holding both words, units holding each word.
    n_units : int
        N.

    Returns
    -------
    ndarray of float64
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return log_ratio(joint, first, second, n_units) / -np.log(
            np.asarray(joint, np.float64) / float(n_units) + EPSILON
        )


def _mean(values: FloatArray) -> float:
    """gensim's aggregation of a topic's segments: ``numpy.mean`` (NaN when there are none)."""
    if values.size == 0:
        return float("nan")
    return float(np.mean(values))


def u_mass(counts: IntArray, n_units: int) -> float:
    """UMass coherence of one topic: mean of :func:`log_conditional_probability` over one-pre pairs.

    Parameters
    ----------
    counts : ndarray of shape (n, n), int
        Document counts among the topic's words (diagonal: each word's document frequency).
    n_units : int
        Documents.

    Returns
    -------
    float
    """
    first, second = one_pre(counts.shape[0])
    diagonal = np.diagonal(counts)
    return _mean(log_conditional_probability(counts[first, second], diagonal[second], n_units))


def c_uci(counts: IntArray, n_units: int) -> float:
    """UCI coherence of one topic: mean PMI over one-one pairs.

    Parameters
    ----------
    counts : ndarray of shape (n, n), int
        Window counts among the topic's words.
    n_units : int
        Windows.

    Returns
    -------
    float
    """
    first, second = one_one(counts.shape[0])
    diagonal = np.diagonal(counts)
    return _mean(log_ratio(counts[first, second], diagonal[first], diagonal[second], n_units))


def c_npmi(counts: IntArray, n_units: int) -> float:
    """NPMI coherence of one topic: mean NPMI over one-one pairs.

    Parameters
    ----------
    counts : ndarray of shape (n, n), int
        Window counts among the topic's words.
    n_units : int
        Windows.

    Returns
    -------
    float
    """
    first, second = one_one(counts.shape[0])
    diagonal = np.diagonal(counts)
    return _mean(normalized_log_ratio(counts[first, second], diagonal[first], diagonal[second], n_units))


def npmi_matrix(counts: IntArray, n_units: int) -> FloatArray:
    """NPMI of every pair of the topic's words, the diagonal (a word with itself) included.

    Parameters
    ----------
    counts : ndarray of shape (n, n), int
    n_units : int

    Returns
    -------
    ndarray of shape (n, n), float64, symmetric
    """
    diagonal = np.diagonal(counts)
    return normalized_log_ratio(counts, diagonal[:, None], diagonal[None, :], n_units)


def c_v(counts: IntArray, n_units: int, *, gamma: float = 1.0) -> float:
    """C_V coherence of one topic: mean cosine of each word's NPMI context vector with the topic's.

    Parameters
    ----------
    counts : ndarray of shape (n, n), int
        Window counts among the topic's words.
    n_units : int
        Windows.
    gamma : float, default 1
        Exponent of the NPMI entries (gensim's CoherenceModel uses 1).

    Returns
    -------
    float
    """
    if counts.shape[0] == 0:
        return float("nan")
    vectors = npmi_matrix(counts, n_units) ** gamma
    whole = vectors.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosines = (vectors @ whole) / (np.sqrt((vectors**2).sum(axis=1)) * np.sqrt((whole**2).sum()))
    return _mean(cosines)


@dataclass(frozen=True, slots=True)
class Measure:
    """One coherence measure as gensim's ``COHERENCE_MEASURES`` composes it.

    Attributes
    ----------
    name : str
    segmentation : str
        ``one_pre``, ``one_one`` or ``one_set``.
    probability : str
        ``boolean_document`` or ``boolean_sliding_window``.
    default_window : int or None
        gensim's ``SLIDING_WINDOW_SIZES`` (None for document measures).
    confirm : callable
        ``confirm(counts (n, n), n_units) -> float``, the topic's value (segments already averaged).
    """

    name: str
    segmentation: str
    probability: str
    default_window: int | None
    confirm: Callable[[IntArray, int], float]

    @property
    def uses_windows(self) -> bool:
        return self.probability == "boolean_sliding_window"


#: The measures by name (gensim's names).
MEASURES: dict[str, Measure] = {
    m.name: m
    for m in (
        Measure("u_mass", "one_pre", "boolean_document", None, u_mass),
        Measure("c_uci", "one_one", "boolean_sliding_window", 10, c_uci),
        Measure("c_npmi", "one_one", "boolean_sliding_window", 10, c_npmi),
        Measure("c_v", "one_set", "boolean_sliding_window", 110, c_v),
    )
}


def arithmetic_mean(values: FloatArray | list[float]) -> float:
    """Average per-topic values as gensim's aggregation does: ``numpy.mean`` (NaN if any topic is NaN).

    Parameters
    ----------
    values : array_like of float
        Per-topic coherence values.

    Returns
    -------
    float
    """
    values = np.asarray(values, dtype=np.float64)
    return float("nan") if values.size == 0 else float(np.mean(values))


def topic_values(measure: Measure, topics: list[IndexArray], matrix_of: Callable[[IndexArray], IntArray],
                 n_units: int) -> list[float]:
    """Each topic's coherence under ``measure``.

    Parameters
    ----------
    measure : Measure
    topics : list of int arrays
        Each topic's words (relevant-word numbers), in topic order.
    matrix_of : callable
        ``matrix_of(ids) -> (n, n)`` count matrix, e.g. ``lambda ids: counts.topic_matrix(ids, pairs)``.
    n_units : int
        Documents or windows counted.

    Returns
    -------
    list of float
    """
    return [measure.confirm(matrix_of(ids), n_units) for ids in topics]
