"""Topics as features: cross-validated classification accuracy of documents against gold labels.

This module owns the classification half of the topics-as-features evaluation: a scikit-learn
logistic regression scored by stratified k-fold cross-validation, on in-memory features (the
document-topic proportions of a model, or the bag-of-words baseline), and the deterministic sample
of documents those features are collected for. It does no I/O and must not
import dask, zarr or logging; scikit-learn is imported when a score is asked for (it is not one of
topicflow's install requirements).

Glossary:
    features ((n_docs, n_features)): dense document-topic proportions theta, or sparse counts
    labels ((n_docs,)): gold classes (any hashable values)
    fold: one of ``n_folds`` stratified parts; each is scored once by a model fitted on the others
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np

from topicflow._typing import IntArray, choices
from topicflow.errors import InvalidParameterError
from topicflow.models.common.rng import (
    STREAM_EVAL_SAMPLE,
    counter_key,
    uniform_from_key,
)

#: What the classifier sees: the features as given, or tf-idf weights of counts (the baseline).
FeatureTransform = Literal["none", "tfidf"]
#: Folds of the stratified cross-validation unless asked otherwise.
DEFAULT_FOLDS = 5


@dataclass(frozen=True, slots=True)
class ClassificationScores:
    """Cross-validated accuracy of one feature set.

    Attributes
    ----------
    features : str
        What the classifier was given (e.g. ``"doc-topic proportions"``, ``"tf-idf of counts"``).
    mean_accuracy : float
        Mean over folds of the share of correctly labelled test documents.
    std_accuracy : float
        Standard deviation over folds (population, ``ddof=0``, as ``numpy.std``).
    fold_accuracies : tuple of float
        One accuracy per fold, in fold order.
    n_docs : int
    n_classes : int
    n_features : int
    """

    features: str
    mean_accuracy: float
    std_accuracy: float
    fold_accuracies: tuple[float, ...]
    n_docs: int
    n_classes: int
    n_features: int

    def to_dict(self) -> dict[str, Any]:
        """Return the scores as a JSON-able dict.

        Returns
        -------
        dict
        """
        out = {name: getattr(self, name) for name in self.__slots__}
        out["fold_accuracies"] = list(self.fold_accuracies)
        return out


def check_classes(labels: Any, n_folds: int) -> np.ndarray:
    """Return the labels as an array if stratified ``n_folds``-fold cross-validation can use them.

    Parameters
    ----------
    labels : array_like of shape (n_docs,)
    n_folds : int
        At least 2.

    Returns
    -------
    ndarray of shape (n_docs,)

    Raises
    ------
    InvalidParameterError
        ``n_folds < 2``, fewer than two classes, or a class with fewer documents than folds (naming it).

    Examples
    --------
    >>> check_classes(["a", "b", "a", "b"], 2).tolist()
    ['a', 'b', 'a', 'b']
    """
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise InvalidParameterError(f"n_folds must be an integer of at least 2, got {n_folds!r}")
    values = np.asarray(labels)
    classes, sizes = np.unique(values, return_counts=True)
    if classes.shape[0] < 2:
        raise InvalidParameterError(
            f"classification needs at least two classes; the documents have {classes.tolist()!r}"
        )
    smallest = int(np.argmin(sizes))
    if sizes[smallest] < n_folds:
        raise InvalidParameterError(
            f"class {str(classes[smallest])!r} has {int(sizes[smallest])} documents, fewer than the {n_folds} folds "
            "of the stratified cross-validation; use fewer folds (--folds), more documents (--max-docs), or "
            "drop that label from the store"
        )
    return values


def cross_validated_accuracy(
    features: Any,
    labels: Any,
    *,
    name: str,
    n_folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    transform: FeatureTransform = "none",
    inverse_regularization: float = 1.0,
    max_iter: int = 1000,
) -> ClassificationScores:
    """Score logistic regression on ``features`` by stratified k-fold cross-validation.

    Parameters
    ----------
    features : ndarray or scipy sparse matrix of shape (n_docs, n_features)
    labels : array_like of shape (n_docs,)
    name : str
        What the features are (reported as :attr:`ClassificationScores.features`).
    n_folds : int, default 5
        Folds (k) of the stratified k-fold split.
    seed : int, default 0
        Seed of the fold assignment (``StratifiedKFold(shuffle=True, random_state=seed)``).
    transform : {"none", "tfidf"}, default "none"
        ``"tfidf"`` puts scikit-learn's ``TfidfTransformer`` (smooth idf, l2 rows) before the
        classifier, fitted on each training part only.
    inverse_regularization : float, default 1.0
        ``C`` of ``LogisticRegression`` (L2 penalty), positive.
    max_iter : int, default 1000
        Iterations of its lbfgs solver.

    Returns
    -------
    ClassificationScores

    Raises
    ------
    InvalidParameterError
        Shapes differ, a bad ``transform``, ``inverse_regularization`` or class sizes (see
        :func:`check_classes`).
    ImportError
        scikit-learn is not installed.

    Notes
    -----
    Every fold is split the same way for every feature set given the same labels and seed, so a
    model's features and the baseline are scored on the same folds. Equivalent to
    ``sklearn.model_selection.cross_val_score(make_pipeline(..., LogisticRegression(C=C,
    max_iter=max_iter)), X, y, cv=StratifiedKFold(k, shuffle=True, random_state=seed))``.

    Examples
    --------
    >>> x = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]] * 3)
    >>> y = ["a", "a", "b", "b"] * 3
    >>> cross_validated_accuracy(x, y, name="toy", n_folds=3, inverse_regularization=100.0).mean_accuracy
    1.0
    """
    if transform not in choices(FeatureTransform):
        raise InvalidParameterError(f"transform must be one of {list(choices(FeatureTransform))}, got {transform!r}")
    if not (inverse_regularization > 0 and math.isfinite(inverse_regularization)):
        raise InvalidParameterError(f"inverse_regularization (C) must be positive, got {inverse_regularization!r}")
    values = check_classes(labels, n_folds)
    if features.shape[0] != values.shape[0]:
        raise InvalidParameterError(
            f"features hold {features.shape[0]} documents but labels {values.shape[0]}"
        )
    try:
        from sklearn.feature_extraction.text import TfidfTransformer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_score
        from sklearn.pipeline import make_pipeline
    except ImportError as exc:  # pragma: no cover - the test environment has scikit-learn
        raise ImportError(
            "topics-as-features scores need scikit-learn; install it with `pip install scikit-learn`"
        ) from exc
    classifier = LogisticRegression(C=inverse_regularization, max_iter=max_iter)
    model = make_pipeline(TfidfTransformer(), classifier) if transform == "tfidf" else classifier
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    accuracies = cross_val_score(model, features, values, cv=folds, scoring="accuracy")
    return ClassificationScores(
        features=name, mean_accuracy=float(np.mean(accuracies)), std_accuracy=float(np.std(accuracies)),
        fold_accuracies=tuple(float(a) for a in accuracies), n_docs=int(values.shape[0]),
        n_classes=int(np.unique(values).shape[0]), n_features=int(features.shape[1]),
    )


@numba.njit(nogil=True, cache=True)
def _sample_keys(seed, n_docs, out):
    """out[doc] = the uniform number that ranks document ``doc`` in the sample."""
    for doc in range(n_docs):
        out[doc] = uniform_from_key(counter_key(seed, STREAM_EVAL_SAMPLE, 0, doc), 0)


def sample_documents(n_docs: int, max_docs: int | None, *, seed: int = 0) -> IntArray:
    """Choose ``max_docs`` of ``n_docs`` documents at random, the same ones for the same seed.

    Parameters
    ----------
    n_docs : int
        Documents of the store (global positions 0 to ``n_docs - 1``).
    max_docs : int or None
        How many to keep; None or at least ``n_docs`` keeps them all.
    seed : int, default 0
        In [0, 2**63).

    Returns
    -------
    ndarray of shape (min(n_docs, max_docs),), int64
        The chosen global positions, ascending.

    Raises
    ------
    InvalidParameterError
        ``max_docs`` not positive, or a bad seed.

    Notes
    -----
    Document ``doc`` draws ``u = uniform_from_key(counter_key(seed, STREAM_EVAL_SAMPLE, 0, doc), 0)``;
    the ``max_docs`` smallest (ties by position) are kept: a uniform sample without replacement that
    depends on neither the sharding nor the workers. Costs 8 bytes per document of the store.

    Examples
    --------
    >>> sample_documents(10, 3, seed=1).shape, sample_documents(4, None).tolist()
    ((3,), [0, 1, 2, 3])
    """
    if max_docs is not None and (isinstance(max_docs, bool) or max_docs < 1):
        raise InvalidParameterError(f"max_docs must be a positive integer or None, got {max_docs!r}")
    if not (0 <= int(seed) < 2**63):
        raise InvalidParameterError(f"seed must be in [0, 2**63), got {seed!r}")
    if max_docs is None or max_docs >= n_docs:
        return np.arange(n_docs, dtype=np.int64)
    keys = np.empty(n_docs, dtype=np.float64)
    _sample_keys(int(seed), int(n_docs), keys)
    chosen = np.lexsort((np.arange(n_docs), keys))[:max_docs]
    return np.sort(chosen).astype(np.int64)
