"""The report's math: top terms, topic sizes, mergeable document summaries, evolution across versions.

References are plain NumPy on whole arrays (sort everything, count everything); the matching is also
checked against an exhaustive search over every one-to-one assignment.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from topicflow.errors import InvalidParameterError
from topicflow.metrics.topic_summary import (
    TopicDocStats,
    align_topics,
    doc_top_terms,
    doc_topic_stats,
    evolution_step,
    model_topic_shares,
    term_counts,
    top_terms,
    topic_lineages,
)
from topicflow.models.common.blocks import block_from_csr


def test_top_terms_match_a_full_sort_with_ties_to_the_smaller_id() -> None:
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 4, size=(5, 12)).astype(float)  # many ties
    terms, probs = top_terms(rows, 6)
    for k in range(5):
        expected = sorted(range(12), key=lambda w: (-rows[k, w], w))[:6]
        assert terms[k].tolist() == expected
        np.testing.assert_array_equal(probs[k], rows[k, expected])
    assert top_terms(rows, 50)[0].shape == (5, 12)
    with pytest.raises(InvalidParameterError):
        top_terms(rows, 0)


def test_model_shares_are_the_counts_without_the_prior() -> None:
    counts = {"en": np.array([[3.0, 1.0, 0.0], [0.0, 0.0, 4.0]]), "de": np.array([[0.0, 2.0], [6.0, 0.0]])}
    eta = {"en": 0.5, "de": np.array([[0.1, 0.2], [0.3, 0.4]])}
    lam = {lang: counts[lang] + eta[lang] for lang in counts}
    shares = model_topic_shares(lam, eta)
    np.testing.assert_allclose(shares, [6 / 16, 10 / 16])
    np.testing.assert_allclose(model_topic_shares({"en": np.full((4, 3), 0.5)}, {"en": 0.5}), 0.25)


def test_term_counts_and_doc_top_terms_match_the_dense_matrix() -> None:
    rng = np.random.default_rng(1)
    dense = rng.poisson(0.7, size=(9, 15)).astype(np.int32)
    block = block_from_csr(sp.csr_matrix(dense))
    np.testing.assert_array_equal(term_counts(block), dense.sum(axis=0))
    for row in range(9):
        expected = sorted(np.flatnonzero(dense[row]).tolist(), key=lambda w: (-dense[row, w], w))[:4]
        assert doc_top_terms(block, row, 4).tolist() == expected


def brute_top_documents(theta: np.ndarray, n_top: int) -> list[list[tuple[int, float]]]:
    """Every document sorted per topic by (-theta, position)."""
    return [sorted(((d, float(theta[d, k])) for d in range(theta.shape[0])), key=lambda p: (-p[1], p[0]))[:n_top]
            for k in range(theta.shape[1])]


def summary_of_parts(theta: np.ndarray, lengths: np.ndarray, cuts: list[int], n_top: int) -> TopicDocStats:
    bounds = [0, *cuts, theta.shape[0]]
    ids = np.array([f"d{i}" for i in range(theta.shape[0])], dtype=object)
    parts = [doc_topic_stats(theta[a:b], lengths[a:b], ids[a:b], a, n_top) for a, b in itertools.pairwise(bounds)]
    return TopicDocStats.merge_all(parts)


@given(st.integers(1, 40), st.integers(1, 5), st.integers(1, 6), st.lists(st.integers(0, 40), max_size=5),
       st.integers(0, 2**16))
def test_any_split_of_the_documents_gives_the_brute_force_summary(n_docs: int, n_topics: int, n_top: int,
                                                                  cuts: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(n_topics, 0.5), size=n_docs)
    theta[rng.random(n_docs) < 0.3] = np.full(n_topics, 1.0 / n_topics)  # exact ties
    lengths = rng.integers(0, 50, size=n_docs)
    merged = summary_of_parts(theta, lengths, sorted({c for c in cuts if 0 < c < n_docs}), n_top)
    np.testing.assert_allclose(merged.topic_tokens, theta.T @ lengths)
    assert (merged.n_tokens, merged.n_docs) == (int(lengths.sum()), n_docs)
    expected = brute_top_documents(theta, n_top)
    for k in range(n_topics):
        assert [(p, w) for p, _, w in merged.top_documents(k)] == expected[k]
        assert [d for _, d, _ in merged.top_documents(k)] == [f"d{p}" for p, _ in expected[k]]


def test_merge_is_commutative_with_zeros_as_identity() -> None:
    rng = np.random.default_rng(2)
    theta = rng.dirichlet(np.ones(3), size=10)
    ids = np.array([f"d{i}" for i in range(10)], dtype=object)
    a = doc_topic_stats(theta[:4], np.arange(4), ids[:4], 0, 3)
    b = doc_topic_stats(theta[4:], np.arange(4, 10), ids[4:], 4, 3)
    for left, right in ((a.merge(b), b.merge(a)), (a.merge(TopicDocStats.zeros(3, 3)), a),
                        (TopicDocStats.zeros(3, 3).merge(b), b)):
        np.testing.assert_array_equal(left.top_position, right.top_position)
        np.testing.assert_array_equal(left.top_weight, right.top_weight)
        np.testing.assert_allclose(left.topic_tokens, right.topic_tokens)
    with pytest.raises(InvalidParameterError, match="cannot merge"):
        a.merge(TopicDocStats.zeros(3, 2))
    np.testing.assert_allclose(a.merge(b).shares(), (theta.T @ np.arange(10)) / (theta.T @ np.arange(10)).sum())


def exhaustive_match(distance: np.ndarray) -> tuple[int, ...]:
    """The permutation (later topic of each earlier topic) with the least summed distance, by enumeration."""
    n = distance.shape[0]
    return min(itertools.permutations(range(n)), key=lambda perm: sum(distance[i, perm[i]] for i in range(n)))


def hellinger_dense(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.array([[np.sqrt(0.5 * np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)) for b in q] for a in p])


@pytest.mark.parametrize("seed", range(4))
def test_evolution_matches_the_exhaustive_assignment_and_splits_by_threshold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    earlier = rng.dirichlet(np.full(20, 0.2), size=5)
    perm = rng.permutation(5)
    later = 0.85 * earlier[perm] + 0.15 * rng.dirichlet(np.full(20, 0.2), size=5)
    later[2] = rng.dirichlet(np.full(20, 0.2))  # a topic replaced by an unrelated one
    distance = hellinger_dense(earlier, later)
    best = exhaustive_match(distance)
    threshold = 0.45
    step = evolution_step(earlier, later, threshold=threshold)
    np.testing.assert_allclose(step.distance_matrix, distance, atol=1e-12)
    expected = sorted((i, best[i]) for i in range(5) if distance[i, best[i]] <= threshold)
    assert sorted(map(tuple, step.matched.tolist())) == expected
    assert step.new.tolist() == sorted(set(range(5)) - {j for _, j in expected})
    assert step.vanished.tolist() == sorted(set(range(5)) - {i for i, _ in expected})
    assert 2 in step.new.tolist()
    np.testing.assert_allclose(step.distances, [distance[i, j] for i, j in step.matched.tolist()])
    with pytest.raises(InvalidParameterError):
        evolution_step(earlier, later, threshold=1.5)


def test_evolution_with_more_or_fewer_topics_and_lineages() -> None:
    eye = np.eye(4)
    v1, v2, v3 = eye[[0, 1, 2]], eye[[1, 0, 2, 3]], eye[[3, 1]]
    first, second = evolution_step(v1, v2, threshold=0.5), evolution_step(v2, v3, threshold=0.5)
    assert first.matched.tolist() == [[1, 0], [0, 1], [2, 2]] and first.new.tolist() == [3]
    assert second.matched.tolist() == [[3, 0], [0, 1]] and second.vanished.tolist() == [1, 2]
    assert second.new.tolist() == []
    lineages = topic_lineages([first, second], [3, 4, 2])
    assert lineages == [[None, 3, 0], [1, 0, 1], [0, 1, None], [2, 2, None]]
    with pytest.raises(InvalidParameterError):
        topic_lineages([first], [3, 4, 2])


def test_align_topics_puts_versions_over_the_union_of_their_terms() -> None:
    a = {"en": (np.array([[0.5, 0.5]]), np.array(["x", "y"], dtype=object)),
         "de": (np.array([[1.0, 0.0]]), np.array(["x", "z"], dtype=object))}
    b = {"en": (np.array([[0.25, 0.75]]), np.array(["y", "w"], dtype=object)),
         "de": (np.array([[0.0, 1.0]]), np.array(["x", "z"], dtype=object))}
    left, right = align_topics([a, b])
    np.testing.assert_allclose(left.sum(axis=1), 1.0)
    np.testing.assert_allclose(right.sum(axis=1), 1.0)
    # Hellinger of the aligned rows is the root mean square of the per-language distances.
    en = hellinger_dense(np.array([[0.5, 0.5, 0.0]]), np.array([[0.0, 0.25, 0.75]]))[0, 0]
    de = 1.0
    np.testing.assert_allclose(hellinger_dense(left, right)[0, 0], np.sqrt((en**2 + de**2) / 2))
