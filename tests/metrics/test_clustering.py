"""NMI (named normalisations), ARI and purity against scikit-learn and by hand."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from topicflow.errors import InvalidParameterError
from topicflow.metrics.clustering import (
    adjusted_rand_index,
    argmax_topics,
    clustering_scores,
    contingency_table,
    nmi,
    purity,
)

CASES = [
    ([0, 0, 1, 1], [1, 1, 0, 0]),
    ([0, 0, 1, 1], [0, 1, 0, 1]),
    ([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]),
    (["a", "a", "b", "c", "c", "c", "b"], [5, 5, 5, 7, 7, 9, 9]),
    ([1, 1, 1], [2, 2, 2]),
    ([0, 1, 2], [0, 0, 0]),
    ([0, 1, 2, 3], [0, 1, 2, 3]),
    ([3], [4]),
]


def random_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    return rng.integers(0, rng.integers(1, 8), size=n), rng.integers(0, rng.integers(1, 12), size=n)


@pytest.mark.parametrize("case", CASES + [random_case(s) for s in range(20)], ids=lambda c: str(len(c[0])))
@pytest.mark.parametrize("average", ["arithmetic", "geometric", "min", "max"])
def test_nmi_equals_scikit_learn(case: tuple, average: str) -> None:
    labels_true, labels_pred = case
    want = normalized_mutual_info_score(labels_true, labels_pred, average_method=average)
    assert nmi(labels_true, labels_pred, average) == pytest.approx(want, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("case", CASES + [random_case(s) for s in range(20)], ids=lambda c: str(len(c[0])))
def test_ari_equals_scikit_learn(case: tuple) -> None:
    labels_true, labels_pred = case
    assert adjusted_rand_index(labels_true, labels_pred) == pytest.approx(
        adjusted_rand_score(labels_true, labels_pred), rel=1e-12, abs=1e-15)


def test_purity_by_hand() -> None:
    # Manning et al. (2008), figure 16.4: clusters of 6, 6 and 5 documents whose majority classes
    # (x, o, diamond) hold 5, 4 and 3 of them: purity (5 + 4 + 3) / 17.
    labels = ["x"] * 5 + ["o"] + ["x"] + ["o"] * 4 + ["d"] + ["x"] * 2 + ["d"] * 3
    clusters = [1] * 6 + [2] * 6 + [3] * 5
    assert purity(labels, clusters) == pytest.approx(12 / 17, rel=1e-15)
    assert purity([0, 1, 2], [0, 1, 2]) == 1.0 and purity([], []) == 1.0


def test_geometric_and_arithmetic_nmi_differ_by_hand() -> None:
    # true [0,0,0,1], pred [0,0,1,1]: H_true = H(3/4, 1/4), H_pred = log 2,
    # MI = H_true + H_pred - H_joint with joint (1/2, 1/4, 1/4).
    h_true = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    h_pred = np.log(2)
    mi = h_true + h_pred + (0.5 * np.log(0.5) + 2 * 0.25 * np.log(0.25))
    assert nmi([0, 0, 0, 1], [0, 0, 1, 1], "arithmetic") == pytest.approx(mi / ((h_true + h_pred) / 2), rel=1e-14)
    assert nmi([0, 0, 0, 1], [0, 0, 1, 1], "geometric") == pytest.approx(mi / np.sqrt(h_true * h_pred), rel=1e-14)


def test_scores_bundle_and_argmax() -> None:
    theta = np.array([[0.7, 0.3], [0.6, 0.4], [0.2, 0.8], [0.5, 0.5]])
    assert argmax_topics(theta).tolist() == [0, 0, 1, 0]
    scores = clustering_scores(["a", "a", "b", "b"], argmax_topics(theta))
    assert scores.purity == 0.75 and scores.n_classes == 2 and scores.n_clusters == 2 and scores.n_docs == 4
    assert scores.ari == pytest.approx(adjusted_rand_score([0, 0, 1, 1], [0, 0, 1, 0]))
    assert set(scores.to_dict()) == {"nmi_arithmetic", "nmi_geometric", "ari", "purity", "n_docs", "n_classes",
                                     "n_clusters"}
    assert contingency_table(["a", "b", "a"], [1, 1, 0]).tolist() == [[1, 1], [0, 1]]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="equal length"):
        adjusted_rand_index([0, 1], [0])
    with pytest.raises(InvalidParameterError, match="average_method"):
        nmi([0, 1], [0, 1], "harmonic")  # type: ignore[arg-type]
