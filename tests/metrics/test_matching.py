"""Cross-language document matching: divergences, partner ranks, precision at 1 and MRR."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import binomtest

from topicflow.errors import InvalidParameterError
from topicflow.metrics.matching import (
    matching_intervals,
    matching_scores,
    pairwise_divergence,
    partner_ranks,
    wilson_interval,
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


@pytest.mark.parametrize(("successes", "n"), [(69, 89), (0, 7), (7, 7), (180, 217)])
def test_wilson_interval_inverts_the_score_test(successes: int, n: int) -> None:
    """Brute force: the interval is every p whose score test |p_hat - p| <= z sqrt(p (1 - p) / n) accepts;
    scipy's binomtest (method 'wilson') is the independent check."""
    low, high = wilson_interval(successes, n)
    grid = np.linspace(0.0, 1.0, 200_001)
    z = 1.959963984540054
    accepted = grid[np.abs(successes / n - grid) <= z * np.sqrt(grid * (1 - grid) / n)]
    assert low == pytest.approx(accepted.min(), abs=1e-5) and high == pytest.approx(accepted.max(), abs=1e-5)
    ci = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert (low, high) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_matching_intervals_from_ranks() -> None:
    ranks = np.array([1, 1, 3, 1, 2, 1, 7, 1, 1, 4])
    iv = matching_intervals(ranks)
    assert iv.precision_at_1 == wilson_interval(6, 10) and iv.level == 0.95
    reciprocal = [1 / r for r in ranks]
    half = 1.959963984540054 * np.std(reciprocal, ddof=1) / np.sqrt(len(ranks))
    assert iv.mean_reciprocal_rank == pytest.approx((np.mean(reciprocal) - half, min(1.0, np.mean(reciprocal) + half)))
    wider = matching_intervals(ranks, level=0.99)
    assert wider.precision_at_1[0] < iv.precision_at_1[0] and wider.precision_at_1[1] > iv.precision_at_1[1]
    for bad in ([], [0, 1], [1.0, np.nan]):
        with pytest.raises(InvalidParameterError, match="ranks"):
            matching_intervals(bad)
    with pytest.raises(InvalidParameterError, match="level"):
        matching_intervals(ranks, level=1.0)
    with pytest.raises(InvalidParameterError, match="successes"):
        wilson_interval(5, 4)
