"""Topic translation consistency: brute force on small random models, edge cases and bad input."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.metrics.translation import top_term_ids, translation_consistency


def _brute_force(a: np.ndarray, b: np.ndarray, pairs: list[tuple[int, int]], n: int) -> tuple[list[float], ...]:
    """The definition, word by word, with Python sets and sorted()."""
    links = set(pairs)

    def top(row: np.ndarray) -> list[int]:
        return sorted(range(len(row)), key=lambda w: (-row[w], w))[:n]

    a_to_b, b_to_a, cov_a, cov_b = [], [], [], []
    for row_a, row_b in zip(a, b, strict=True):
        ta, tb = top(row_a), top(row_b)
        a_to_b.append(sum(any((w, v) in links for v in tb) for w in ta) / n)
        b_to_a.append(sum(any((w, v) in links for w in ta) for v in tb) / n)
        cov_a.append(sum(any(p[0] == w for p in links) for w in ta) / n)
        cov_b.append(sum(any(p[1] == v for p in links) for v in tb) / n)
    return a_to_b, b_to_a, cov_a, cov_b


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k, va, vb, n = 4, 9, 7, 3
    a = rng.dirichlet(np.full(va, 0.5), size=k)
    b = rng.dirichlet(np.full(vb, 0.5), size=k)
    a[0, 2] = a[0, 5] = a[0].max()  # a tie: the lower term id ranks first
    pairs = [(int(rng.integers(va)), int(rng.integers(vb))) for _ in range(12)]
    pairs += pairs[:3]  # duplicates count once
    result = translation_consistency(a, b, np.array(pairs), top_n=n, languages=("de", "en"))
    a_to_b, b_to_a, cov_a, cov_b = _brute_force(a, b, pairs, n)
    np.testing.assert_allclose(result.a_to_b, a_to_b)
    np.testing.assert_allclose(result.b_to_a, b_to_a)
    np.testing.assert_allclose(result.per_topic, (np.array(a_to_b) + np.array(b_to_a)) / 2)
    np.testing.assert_allclose(result.covered_a, cov_a)
    np.testing.assert_allclose(result.covered_b, cov_b)
    assert result.mean == pytest.approx(np.mean(result.per_topic))
    assert result.n_pairs == len(set(pairs))
    summary = result.to_dict()
    assert summary["de_to_en"] == pytest.approx(np.mean(a_to_b)) and summary["en_to_de"] == pytest.approx(np.mean(b_to_a))


def test_directions_differ_when_one_word_has_several_translations() -> None:
    # three German top words all translate English term 0; the other English top words have none
    de = np.array([[0.4, 0.3, 0.2, 0.1]])
    en = np.array([[0.5, 0.3, 0.2, 0.0]])
    result = translation_consistency(de, en, [[0, 0], [1, 0], [2, 0]], top_n=3)
    assert result.a_to_b == (1.0,) and result.b_to_a == (pytest.approx(1 / 3),)
    assert result.mean == pytest.approx(2 / 3)


def test_perfect_and_zero_consistency() -> None:
    rng = np.random.default_rng(5)
    words = rng.dirichlet(np.ones(6), size=3)
    identity = [(w, w) for w in range(6)]
    same = translation_consistency(words, words, identity, top_n=2)
    assert same.mean == 1.0 and same.covered_a == (1.0, 1.0, 1.0)
    # the only translations link a top word to a word outside the other language's top words
    ranked = np.array([[3.0, 2.0, 1.0, 0.0]])
    far = translation_consistency(ranked, ranked, [(0, 3), (3, 0)], top_n=2)
    assert far.mean == 0.0 and far.covered_a == (0.5,) and far.covered_b == (0.5,)
    assert translation_consistency(words, words, [], top_n=2).mean == 0.0


def test_order_only_matters_not_the_scale() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.gamma(1.0, size=(3, 8)), rng.gamma(1.0, size=(3, 5))
    pairs = [(0, 1), (3, 4), (5, 0), (7, 2)]
    one = translation_consistency(a, b, pairs, top_n=4)
    scaled = translation_consistency(a * 100.0, np.log1p(b), pairs, top_n=4)
    assert one == scaled


def test_top_term_ids_break_ties_by_term_id() -> None:
    assert top_term_ids([[1.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]], 3).tolist() == [[1, 2, 0], [0, 1, 2]]


def test_top_n_equal_to_the_vocabulary_counts_every_linked_word() -> None:
    a, b = np.ones((1, 3)), np.ones((1, 2))
    result = translation_consistency(a, b, [(0, 1)], top_n=2)
    assert result.a_to_b == (0.5,) and result.b_to_a == (0.5,)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"topic_word_a": np.ones(4)}, "topic_word_a must be 2-d"),
    ({"topic_word_b": np.ones((3, 5))}, "topic_word_a has 2 topics but topic_word_b 3"),
    ({"topic_word_a": np.array([[1.0, np.nan, 0, 0], [1, 1, 1, 1]])}, "non-finite value at topic 0, term 1"),
    ({"top_n": 0}, r"top_n must be an integer in \[1, 4\]"),
    ({"top_n": 5}, r"top_n must be an integer in \[1, 4\]"),
    ({"top_n": 2.0}, "top_n must be an integer"),
    ({"pairs": [[0, 1, 2]]}, r"pairs must have shape \(n_pairs, 2\)"),
    ({"pairs": [[0.0, 1.0]]}, "integer term ids"),
    ({"pairs": [[0, 1], [4, 0]]}, "pairs row 1: term id 4 of language a is outside its vocabulary"),
    ({"pairs": [[0, -1]]}, "pairs row 0: term id -1 of language b"),
])
def test_bad_input_is_named(kwargs: dict, message: str) -> None:
    args = {"topic_word_a": np.ones((2, 4)), "topic_word_b": np.ones((2, 5)), "pairs": [[0, 1]], "top_n": 2}
    args.update(kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        translation_consistency(args.pop("topic_word_a"), args.pop("topic_word_b"), args.pop("pairs"), **args)
