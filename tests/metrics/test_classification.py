"""Cross-validated accuracy against scikit-learn's own cross_val_score, and the document sample."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline

from topicflow.errors import InvalidParameterError
from topicflow.metrics.classification import (
    check_classes,
    cross_validated_accuracy,
    sample_documents,
)


def labeled_features(seed: int) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    labels = np.array(["sport", "tax", "music"], dtype=object)[rng.integers(0, 3, size=90)]
    centers = {"sport": [0.7, 0.2, 0.1], "tax": [0.1, 0.8, 0.1], "music": [0.2, 0.2, 0.6]}
    theta = np.array([rng.dirichlet(10 * np.array(centers[y])) for y in labels])
    counts = sp.csr_matrix(rng.poisson(3 * np.repeat(theta, 4, axis=1)))
    return theta, labels, counts


def test_accuracy_equals_scikit_learns_cross_val_score() -> None:
    theta, labels, counts = labeled_features(0)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=3)
    got = cross_validated_accuracy(theta, labels, name="theta", seed=3)
    want = cross_val_score(LogisticRegression(max_iter=1000), theta, labels, cv=folds)
    assert got.fold_accuracies == tuple(want) and got.mean_accuracy == want.mean() and got.std_accuracy == want.std()
    assert (got.n_docs, got.n_classes, got.n_features, got.features) == (90, 3, 3, "theta")
    got = cross_validated_accuracy(counts, labels, name="bag", seed=3, transform="tfidf", n_folds=4)
    want = cross_val_score(make_pipeline(TfidfTransformer(), LogisticRegression(max_iter=1000)), counts, labels,
                           cv=StratifiedKFold(n_splits=4, shuffle=True, random_state=3))
    assert got.fold_accuracies == tuple(want)
    assert 0.6 < got.mean_accuracy <= 1.0


def test_classes_must_fill_every_fold() -> None:
    assert check_classes(["a", "b"] * 5, 5).shape == (10,)
    with pytest.raises(InvalidParameterError, match="class 'c' has 2 documents, fewer than the 5 folds"):
        check_classes(["a", "b"] * 5 + ["c", "c"], 5)
    with pytest.raises(InvalidParameterError, match="at least two classes"):
        check_classes(["a"] * 10, 2)
    with pytest.raises(InvalidParameterError, match="n_folds"):
        check_classes(["a", "b"] * 5, 1)
    with pytest.raises(InvalidParameterError, match="transform"):
        cross_validated_accuracy(np.ones((4, 2)), ["a", "b"] * 2, name="x", n_folds=2, transform="idf")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="features hold 3 documents"):
        cross_validated_accuracy(np.ones((3, 2)), ["a", "b"] * 2, name="x", n_folds=2)


def test_sample_is_deterministic_exact_in_size_and_uniform() -> None:
    sample = sample_documents(1000, 100, seed=4)
    assert sample.shape == (100,) and np.all(np.diff(sample) > 0) and sample.max() < 1000
    np.testing.assert_array_equal(sample, sample_documents(1000, 100, seed=4))
    assert not np.array_equal(sample, sample_documents(1000, 100, seed=5))
    # Nested: the first 100 of a 200-document sample ranking are the 100-document sample.
    assert set(sample) <= set(sample_documents(1000, 200, seed=4))
    np.testing.assert_array_equal(sample_documents(5, 9), np.arange(5))
    # Every position is equally likely: over 200 seeds each decile holds about a tenth of the picks
    # (binomial sd of a decile's count, sqrt(20000 * 0.1 * 0.9) = 42; allow 5 sd).
    picks = np.concatenate([sample_documents(1000, 100, seed=s) for s in range(200)])
    assert np.all(np.abs(np.bincount(picks // 100, minlength=10) - 2000) < 5 * 42)
    with pytest.raises(InvalidParameterError, match="max_docs"):
        sample_documents(10, 0)
