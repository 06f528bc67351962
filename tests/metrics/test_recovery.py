"""Topic recovery metrics: pairwise distances and the Hungarian matching of estimated to true topics."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import cosine_distance, hellinger, match_topics, worst_matched_distance


def _topics(n_topics: int, n_terms: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(n_terms, 0.3), size=n_topics)


def test_hellinger_is_the_textbook_distance() -> None:
    p, q = _topics(3, 8, 0), _topics(4, 8, 1)
    dist = hellinger(p, q)
    assert dist.shape == (3, 4)
    for i, j in itertools.product(range(3), range(4)):
        bhattacharyya = np.sum(np.sqrt(p[i] * q[j]))
        assert_allclose(dist[i, j], np.sqrt(max(0.0, 1.0 - bhattacharyya)), rtol=1e-10)
    assert_allclose(np.diag(hellinger(p, p)), 0.0, atol=1e-15)
    assert hellinger(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))[0, 0] == 1.0


def test_cosine_distance_ignores_scale() -> None:
    p, q = _topics(2, 5, 2), _topics(3, 5, 3)
    dist = cosine_distance(7.0 * p, q)
    for i, j in itertools.product(range(2), range(3)):
        assert_allclose(dist[i, j], 1.0 - p[i] @ q[j] / np.linalg.norm(p[i]) / np.linalg.norm(q[j]), rtol=1e-12)


@pytest.mark.parametrize("distance", ["hellinger", "cosine"])
def test_matching_finds_the_best_permutation(distance: str) -> None:
    true = _topics(5, 30, 4)
    noisy = 0.8 * true + 0.2 * _topics(5, 30, 5)
    permutation = np.array([3, 0, 4, 1, 2])
    estimated = noisy[permutation]  # estimated topic i is true topic permutation[i]
    match = match_topics(estimated, true, distance=distance)  # type: ignore[arg-type]
    assert match.true.tolist() == [0, 1, 2, 3, 4]
    assert (permutation[match.estimated] == match.true).all()
    metric = hellinger if distance == "hellinger" else cosine_distance
    full = metric(estimated, true)
    brute = min(sum(full[perm[k], k] for k in range(5)) for perm in itertools.permutations(range(5)))
    assert_allclose(match.distances.sum(), brute, rtol=1e-12)
    assert_allclose(match.distances, full[match.estimated, match.true], rtol=0)
    assert match.worst == worst_matched_distance(estimated, true, distance=distance) == match.distances.max()  # type: ignore[arg-type]


def test_more_estimated_than_true_topics() -> None:
    true = _topics(2, 10, 6)
    estimated = np.vstack([_topics(2, 10, 7), true[::-1]])
    match = match_topics(estimated, true)
    assert match.true.tolist() == [0, 1] and match.estimated.tolist() == [3, 2]
    assert worst_matched_distance(estimated, true) < 1e-7


def test_bad_inputs() -> None:
    with pytest.raises(InvalidParameterError, match="same|one vocabulary"):
        match_topics(_topics(2, 5, 0), _topics(2, 6, 0))
    with pytest.raises(InvalidParameterError, match="nonnegative"):
        hellinger(-_topics(2, 5, 0), _topics(2, 5, 0))
    with pytest.raises(InvalidParameterError, match="2-d"):
        hellinger(np.ones(3), np.ones((1, 3)))
    with pytest.raises(InvalidParameterError, match="distance"):
        match_topics(_topics(2, 5, 0), _topics(2, 5, 0), distance="kl")  # type: ignore[arg-type]
