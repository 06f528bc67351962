"""Cross-language document matching: divergences, partner ranks, precision at 1 and MRR."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from topicflow.errors import InvalidParameterError
from topicflow.metrics.matching import (
    matching_scores,
    pairwise_divergence,
    partner_ranks,
)


def _thetas(seed: int, n: int = 12, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.dirichlet(np.full(k, 0.3), size=n)
    noisy = np.abs(base + rng.normal(0, 0.08, size=base.shape)) + 1e-9
    return base, noisy / noisy.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jensen_shannon_matches_scipy(seed: int) -> None:
    queries, candidates = _thetas(seed)
    candidates[3, 0] = 0.0  # a zero entry: 0 log 0 = 0
    candidates[3] /= candidates[3].sum()
    ours = pairwise_divergence(queries, candidates)
    # scipy returns the Jensen-Shannon *distance*, the square root of the divergence (natural log)
    expected = np.array([[jensenshannon(q, c) ** 2 for c in candidates] for q in queries])
    np.testing.assert_allclose(ours, expected, atol=1e-12)


def test_hellinger_matches_the_definition() -> None:
    queries, candidates = _thetas(3)
    ours = pairwise_divergence(queries, candidates, divergence="hellinger")
    expected = np.array([[np.sqrt(0.5 * np.sum((np.sqrt(q) - np.sqrt(c)) ** 2)) for c in candidates] for q in queries])
    np.testing.assert_allclose(ours, expected, atol=1e-7)


def _brute_force(queries: np.ndarray, candidates: np.ndarray) -> tuple[float, float, list[int]]:
    ranks = []
    for i, q in enumerate(queries):
        d = [jensenshannon(q, c) ** 2 for c in candidates]
        ranks.append(1 + sum(1 for j in range(len(d)) if j != i and d[j] <= d[i]))
    return float(np.mean([r == 1 for r in ranks])), float(np.mean([1 / r for r in ranks])), ranks


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_scores_match_brute_force(seed: int) -> None:
    queries, candidates = _thetas(seed, n=15, k=3)
    p1, mrr, ranks = _brute_force(queries, candidates)
    scores = matching_scores(queries, candidates)
    assert list(scores.ranks) == ranks
    assert scores.precision_at_1 == pytest.approx(p1) and scores.mean_reciprocal_rank == pytest.approx(mrr)
    assert scores.n_pairs == 15 and 0 < scores.mean_reciprocal_rank <= 1


def test_ranks_count_ties_against_the_partner() -> None:
    assert partner_ranks([[0.2, 0.2, 0.5], [0.0, 0.1, 0.3], [0.3, 0.3, 0.3]]).tolist() == [2, 2, 3]
    perfect = np.eye(4) * 0.9 + 0.025
    assert matching_scores(perfect, perfect).precision_at_1 == 1.0
    assert matching_scores(perfect, perfect[::-1]).precision_at_1 == 0.0


@pytest.mark.parametrize(
    ("queries", "candidates", "message"),
    [
        (np.ones((3, 2)), np.ones((3, 4)), "topics"),
        (np.ones((3, 2)), np.ones((2, 2)), "one row per pair"),
        (np.array([[1.0, -0.1]]), np.ones((1, 2)), "nonnegative"),
        (np.zeros((1, 2)), np.ones((1, 2)), "row of zeros"),
        (np.ones(3), np.ones(3), "2-d"),
    ],
)
def test_bad_input_is_refused(queries: np.ndarray, candidates: np.ndarray, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        matching_scores(queries, candidates)
    with pytest.raises(InvalidParameterError, match="divergence"):
        pairwise_divergence(np.ones((1, 2)), np.ones((1, 2)), divergence="kl")  # type: ignore[arg-type]
