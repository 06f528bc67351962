"""Clustering scores of documents against gold labels (NMI)."""
from __future__ import annotations

import math

import numpy as np

from topicflow._typing import IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.assignments import most_frequent_topics


def nmi(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """Normalized mutual information of two labelings, with arithmetic-mean normalization.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n_samples,)
        Any hashable labels (ints, strings).

    Returns
    -------
    float
        ``MI / ((H_true + H_pred) / 2)`` in [0, 1]; 1.0 when both labelings have a single cluster
        (or are empty), 0.0 when the mutual information is 0.

    Raises
    ------
    InvalidParameterError
        The labelings differ in length.

    Notes
    -----
    Same value as ``sklearn.metrics.normalized_mutual_info_score`` (default ``"arithmetic"``).
    MI = sum_ij (n_ij / N) log(N n_ij / (a_i b_j)) with contingency counts n_ij, row sums a_i, column
    sums b_j; entropies use natural logs (Strehl and Ghosh 2002).

    Examples
    --------
    >>> round(nmi([0, 0, 1, 1], [1, 1, 0, 0]), 12)
    1.0
    >>> nmi([0, 0, 1, 1], [0, 1, 0, 1])
    0.0
    """
    true = np.asarray(labels_true)
    pred = np.asarray(labels_pred)
    if true.shape != pred.shape or true.ndim != 1:
        raise InvalidParameterError(
            f"labels_true and labels_pred must be 1-d of equal length, got {true.shape!r} and {pred.shape!r}"
        )
    classes, class_idx = np.unique(true, return_inverse=True)
    clusters, cluster_idx = np.unique(pred, return_inverse=True)
    if classes.shape[0] == clusters.shape[0] == 1 or true.shape[0] == 0:
        return 1.0
    n = float(true.shape[0])
    joint = np.bincount(class_idx * clusters.shape[0] + cluster_idx, minlength=classes.shape[0] * clusters.shape[0])
    joint = joint.reshape(classes.shape[0], clusters.shape[0]).astype(np.float64)
    a, b = joint.sum(axis=1), joint.sum(axis=0)
    nz = joint > 0
    outer = np.outer(a, b)[nz]
    mi = float(np.sum(joint[nz] / n * (np.log(joint[nz]) + math.log(n) - np.log(outer))))
    if mi <= 0.0:
        return 0.0
    h_true = -float(np.sum(a / n * np.log(a / n)))
    h_pred = -float(np.sum(b / n * np.log(b / n)))
    return float(mi / max((h_true + h_pred) / 2.0, np.finfo(np.float64).eps))


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
