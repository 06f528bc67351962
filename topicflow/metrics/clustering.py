"""Clustering scores of documents against gold labels: NMI (named normalisations), ARI and purity.

This module owns the comparison of a clustering (for topic models: each document's most probable or
most frequent topic) with gold labels. Pure NumPy: it must not import dask, zarr or logging, and it
does no I/O.

Glossary:
    contingency (n_ij, (n_classes, n_clusters)): documents of class i put in cluster j
    a_i = sum_j n_ij (class sizes), b_j = sum_i n_ij (cluster sizes), N = sum_ij n_ij
    H(C), H(K): entropies of the classes and of the clusters (natural logs); MI their mutual information

References
----------
Strehl and Ghosh (2002). Cluster ensembles. JMLR 3, 583-617.
Hubert and Arabie (1985). Comparing partitions. Journal of Classification 2, 193-218.
Manning, Raghavan and Schuetze (2008). Introduction to Information Retrieval, section 16.3 (purity).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.assignments import most_frequent_topics

#: How the mutual information is normalised by the two entropies (scikit-learn's ``average_method``).
NMIAverage = Literal["arithmetic", "geometric", "min", "max"]
_AVERAGES: dict[str, Callable[[float, float], float]] = {
    "arithmetic": lambda h_true, h_pred: (h_true + h_pred) / 2.0,
    "geometric": lambda h_true, h_pred: math.sqrt(h_true * h_pred),
    "min": lambda h_true, h_pred: min(h_true, h_pred),
    "max": lambda h_true, h_pred: max(h_true, h_pred),
}


def contingency_table(labels_true: Any, labels_pred: Any) -> IntArray:
    """Count the documents of every (class, cluster) pair.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Any hashable labels (ints, strings).

    Returns
    -------
    ndarray of shape (n_classes, n_clusters), int64
        Rows in sorted class order, columns in sorted cluster order.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length or are not 1-d.

    Examples
    --------
    >>> contingency_table(["a", "a", "b"], [1, 0, 0]).tolist()
    [[1, 1], [1, 0]]
    """
    true = np.asarray(labels_true)
    pred = np.asarray(labels_pred)
    if true.shape != pred.shape or true.ndim != 1:
        raise InvalidParameterError(
            f"labels_true and labels_pred must be 1-d of equal length, got {true.shape!r} and {pred.shape!r}"
        )
    classes, class_idx = np.unique(true, return_inverse=True)
    clusters, cluster_idx = np.unique(pred, return_inverse=True)
    joint = np.bincount(class_idx * clusters.shape[0] + cluster_idx, minlength=classes.shape[0] * clusters.shape[0])
    return joint.reshape(classes.shape[0], clusters.shape[0]).astype(np.int64)


def nmi(labels_true: Any, labels_pred: Any, average_method: NMIAverage = "arithmetic") -> float:
    """Normalized mutual information of two labelings.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Any hashable labels (ints, strings).
    average_method : {"arithmetic", "geometric", "min", "max"}, default "arithmetic"
        The normaliser: ``(H_true + H_pred) / 2`` (Strehl and Ghosh's NMI with the arithmetic mean,
        also called V-measure), ``sqrt(H_true H_pred)`` (Strehl and Ghosh 2002's original), or the
        smaller or larger entropy.

    Returns
    -------
    float
        ``MI / normaliser`` in [0, 1]; 1.0 when both labelings have a single cluster (or are empty),
        0.0 when the mutual information is 0.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length, or ``average_method`` is unknown.

    Notes
    -----
    Same value as ``sklearn.metrics.normalized_mutual_info_score(..., average_method=...)``.
    MI = sum_ij (n_ij / N) log(N n_ij / (a_i b_j)) with contingency counts n_ij, row sums a_i, column
    sums b_j; entropies use natural logs (Strehl and Ghosh 2002).

    Examples
    --------
    >>> round(nmi([0, 0, 1, 1], [1, 1, 0, 0]), 12)
    1.0
    >>> nmi([0, 0, 1, 1], [0, 1, 0, 1])
    0.0
    >>> round(nmi([0, 0, 0, 1], [0, 0, 1, 1], "geometric"), 6)
    0.345592
    """
    if average_method not in _AVERAGES:
        raise InvalidParameterError(
            f"average_method must be one of {sorted(_AVERAGES)}, got {average_method!r}"
        )
    joint = contingency_table(labels_true, labels_pred).astype(np.float64)
    if joint.shape[0] == joint.shape[1] == 1 or joint.size == 0:
        return 1.0
    if 1 in joint.shape:  # one labeling has a single cluster: MI <= its entropy = 0 (exactly, not by rounding)
        return 0.0
    n = float(joint.sum())
    a, b = joint.sum(axis=1), joint.sum(axis=0)
    nz = joint > 0
    outer = np.outer(a, b)[nz]
    mi = float(np.sum(joint[nz] / n * (np.log(joint[nz]) + math.log(n) - np.log(outer))))
    if mi <= 0.0:
        return 0.0
    h_true = -float(np.sum(a / n * np.log(a / n)))
    h_pred = -float(np.sum(b / n * np.log(b / n)))
    normaliser = _AVERAGES[average_method](h_true, h_pred)
    return float(mi / max(normaliser, np.finfo(np.float64).eps))


def adjusted_rand_index(labels_true: Any, labels_pred: Any) -> float:
    """Adjusted Rand index of two labelings (Hubert and Arabie 1985).

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Any hashable labels.

    Returns
    -------
    float
        1.0 for identical partitions (and for fewer than two documents), about 0 for independent
        ones; it can be negative.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length.

    Notes
    -----
    With exact integer pair counts: ``index = sum_ij C(n_ij, 2)``, ``A = sum_i C(a_i, 2)``,
    ``B = sum_j C(b_j, 2)``, ``expected = A B / C(N, 2)``:
    ``ARI = (index - expected) / ((A + B) / 2 - expected)``; 1.0 when the denominator is 0 (the
    partitions agree on every pair). Same value as ``sklearn.metrics.adjusted_rand_score``.

    Examples
    --------
    >>> adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1])
    -0.5
    >>> adjusted_rand_index(["a", "a", "b"], [3, 3, 4])
    1.0
    """
    joint = contingency_table(labels_true, labels_pred)

    def pairs(values: np.ndarray) -> int:
        return sum(int(v) * (int(v) - 1) // 2 for v in values.ravel().tolist())

    index, rows, cols = pairs(joint), pairs(joint.sum(axis=1)), pairs(joint.sum(axis=0))
    n = int(joint.sum())
    all_pairs = n * (n - 1) // 2
    # Multiply through by C(N, 2) so every term is an exact integer.
    numerator = index * all_pairs - rows * cols
    denominator = (rows + cols) * all_pairs - 2 * rows * cols
    if all_pairs == 0 or denominator == 0:
        return 1.0
    return float(2 * numerator / denominator)


def purity(labels_true: Any, labels_pred: Any) -> float:
    """Purity of a clustering: the share of documents in their cluster's most common class.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Gold classes and predicted clusters (any hashable labels).

    Returns
    -------
    float
        ``sum_j max_i n_ij / N`` in (0, 1]; 1.0 for no documents.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length.

    Notes
    -----
    Manning et al. (2008), section 16.3. Not symmetric, and 1.0 whenever every document is its own
    cluster: read it beside NMI and ARI.

    Examples
    --------
    >>> purity(["a", "a", "b", "b", "b"], [0, 0, 0, 1, 1])
    0.8
    """
    joint = contingency_table(labels_true, labels_pred)
    if joint.size == 0:
        return 1.0
    return float(joint.max(axis=0).sum() / joint.sum())


@dataclass(frozen=True, slots=True)
class ClusteringScores:
    """Scores of a clustering against gold labels.

    Attributes
    ----------
    nmi_arithmetic : float
        NMI normalised by the arithmetic mean of the entropies.
    nmi_geometric : float
        NMI normalised by their geometric mean.
    ari : float
        Adjusted Rand index.
    purity : float
    n_docs : int
    n_classes : int
    n_clusters : int
        Distinct predicted clusters (topics that are some document's argmax).
    """

    nmi_arithmetic: float
    nmi_geometric: float
    ari: float
    purity: float
    n_docs: int
    n_classes: int
    n_clusters: int

    def to_dict(self) -> dict[str, Any]:
        """Return the scores as a JSON-able dict.

        Returns
        -------
        dict
        """
        return {name: getattr(self, name) for name in self.__slots__}


def clustering_scores(labels_true: Any, labels_pred: Any) -> ClusteringScores:
    """NMI (arithmetic and geometric), ARI and purity of a clustering against gold labels.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)

    Returns
    -------
    ClusteringScores

    Raises
    ------
    InvalidParameterError
        The labelings differ in length.

    Examples
    --------
    >>> clustering_scores(["a", "a", "b"], [1, 1, 0]).ari
    1.0
    """
    joint = contingency_table(labels_true, labels_pred)
    return ClusteringScores(
        nmi_arithmetic=nmi(labels_true, labels_pred, "arithmetic"),
        nmi_geometric=nmi(labels_true, labels_pred, "geometric"),
        ari=adjusted_rand_index(labels_true, labels_pred), purity=purity(labels_true, labels_pred),
        n_docs=int(joint.sum()), n_classes=int(joint.shape[0]), n_clusters=int(joint.shape[1]),
    )


def argmax_topics(doc_topic: FloatArray) -> IntArray:
    """Each document's most probable topic (the lowest index among ties).

    Parameters
    ----------
    doc_topic : ndarray of shape (n_docs, n_topics)

    Returns
    -------
    ndarray of shape (n_docs,), int64

    Examples
    --------
    >>> argmax_topics(np.array([[0.2, 0.8], [0.5, 0.5]])).tolist()
    [1, 0]
    """
    return np.argmax(np.asarray(doc_topic), axis=1).astype(np.int64)


def nmi_of_counts(labels: np.ndarray, doc_topic_counts: IntArray) -> float:
    """NMI between gold labels and each document's most frequent topic.

    Parameters
    ----------
    labels : array_like of shape (n_docs,)
        Gold labels (any hashable values).
    doc_topic_counts : ndarray of shape (n_docs, n_topics)

    Returns
    -------
    float
        ``nmi(labels, most_frequent_topics(doc_topic_counts))``, in [0, 1].

    Raises
    ------
    InvalidParameterError
        Shapes as in :func:`most_frequent_topics`, or ``labels`` of another length.

    Notes
    -----
    The clustering evaluation of May et al. (2014), also used to pick among initializations.

    Examples
    --------
    >>> round(nmi_of_counts(["a", "a", "b"], np.array([[0, 4], [1, 2], [3, 0]])), 12)
    1.0
    """
    return nmi(np.asarray(labels), most_frequent_topics(doc_topic_counts))
