"""Hard assignments of documents to topics."""
from __future__ import annotations

import numpy as np

from topicflow._typing import IntArray
from topicflow.errors import InvalidParameterError


def most_frequent_topics(doc_topic_counts: np.ndarray) -> IntArray:
    """The most frequent topic of each document (ties go to the lowest topic).

    Parameters
    ----------
    doc_topic_counts : ndarray of shape (n_docs, n_topics)
        Tokens of each document assigned to each topic (any real dtype; expected counts work too).

    Returns
    -------
    ndarray of shape (n_docs,), int64
        ``argmax_k doc_topic_counts[d, k]``; a document without tokens gets topic 0.

    Raises
    ------
    InvalidParameterError
        Not 2-d or without topics.

    Notes
    -----
    NumPy equivalent: ``np.argmax(doc_topic_counts, axis=1)`` (which returns the first maximum).
    May et al. (2014) cluster documents this way to compute NMI against gold labels.

    Examples
    --------
    >>> most_frequent_topics(np.array([[1, 3, 3], [0, 0, 0], [5, 0, 1]])).tolist()
    [1, 0, 0]
    """
    counts = np.asarray(doc_topic_counts)
    if counts.ndim != 2 or counts.shape[1] == 0:
        raise InvalidParameterError(
            f"doc_topic_counts must be of shape (n_docs, n_topics) with n_topics >= 1, got {counts.shape!r}"
        )
    return np.argmax(counts, axis=1).astype(np.int64)
