"""Segmentation scores: hand-computed examples and a brute-force comparison of span sets."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.metrics.segmentation import (
    PRF,
    sampled_scores,
    segmentation_scores,
    word_boundaries,
    words_from_boundaries,
)


def spans(words: list[str]) -> set[tuple[int, int]]:
    ends = np.cumsum([0] + [len(w) for w in words]).tolist()
    return set(zip(ends, ends[1:]))


def brute_force(gold: list[list[str]], predicted: list[list[str]]) -> tuple[PRF, PRF, PRF]:
    """Token, boundary and type counts by set intersection, sentence by sentence."""
    token = boundary = PRF(0, 0, 0)
    for g, p in zip(gold, predicted):
        gs, ps = spans(g), spans(p)
        token = token.merge(PRF(len(gs & ps), len(ps), len(gs)))
        gb = {e for _, e in gs} - {len("".join(g))}
        pb = {e for _, e in ps} - {len("".join(p))}
        boundary = boundary.merge(PRF(len(gb & pb), len(pb), len(gb)))
    gt = {w for g in gold for w in g}
    pt = {w for p in predicted for w in p}
    return token, boundary, PRF(len(gt & pt), len(pt), len(gt))


def random_segmentation(text: str, rng: np.random.Generator, p: float) -> list[str]:
    return words_from_boundaries(text, rng.random(len(text) - 1) < p)


def test_hand_computed_example() -> None:
    gold = [["the", "dog", "sat"], ["a", "dog"]]
    predicted = [["thedog", "sat"], ["a", "d", "og"]]
    scores = segmentation_scores(gold, predicted)
    # tokens: "sat" and "a" are right of 5 predicted, 5 gold
    assert (scores.token.n_correct, scores.token.n_predicted, scores.token.n_gold) == (2, 5, 5)
    assert scores.token.f1 == pytest.approx(0.4)
    # internal boundaries: gold {3, 6} and {1}; predicted {6} and {1, 2}
    assert (scores.boundary.n_correct, scores.boundary.n_predicted, scores.boundary.n_gold) == (2, 3, 3)
    # types: gold {the, dog, sat, a}; predicted {thedog, sat, a, d, og}
    assert (scores.type.n_correct, scores.type.n_predicted, scores.type.n_gold) == (2, 5, 4)
    assert scores.type.precision == pytest.approx(0.4) and scores.type.recall == pytest.approx(0.5)


def test_perfect_and_unsegmented() -> None:
    gold = [["in", "the", "beginning"]]
    assert segmentation_scores(gold, gold).token.f1 == 1.0
    whole = segmentation_scores(gold, [["inthebeginning"]])
    assert whole.token.n_correct == 0 and whole.boundary.n_predicted == 0
    assert whole.boundary.precision == 0.0 and whole.boundary.recall == 0.0


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_matches_brute_force_span_sets(p: float) -> None:
    rng = np.random.default_rng(7)
    texts = ["".join(rng.choice(list("ab"), size=rng.integers(1, 12))) for _ in range(150)]
    gold = [random_segmentation(t, rng, 0.4) for t in texts]
    predicted = [random_segmentation(t, rng, p) for t in texts]
    scores = segmentation_scores(gold, predicted)
    assert (scores.token, scores.boundary, scores.type) == brute_force(gold, predicted)


def test_sampled_scores_pool_samples_and_pick_the_max() -> None:
    gold = [["a", "b"], ["cd"]]
    samples = [[["a", "b"], ["ab"], ["ab"]], [["c", "d"]]]
    log_probs = [[-3.0, -1.0, -1.0], [0.0]]
    result = sampled_scores(gold, samples, log_probs)
    # pooled: sentence 1 scored three times (2 + 0 + 0 correct; 2 + 1 + 1 predicted; 3 x 2 gold), sentence 2 once
    assert result.sample_averaged.token == PRF(2, 4 + 2, 6 + 1)
    # the max-probability sample of sentence 1 is the first of the tied ones: ["ab"]
    assert result.max_probability.token == PRF(0, 1 + 2, 2 + 1)
    assert result.n_samples == 3


def test_errors_name_the_sentence() -> None:
    with pytest.raises(InvalidParameterError, match="sentence 1"):
        segmentation_scores([["a"], ["bc"]], [["a"], ["b", "d"]])
    with pytest.raises(InvalidParameterError, match="one per sentence"):
        segmentation_scores([["a"]], [])
    with pytest.raises(InvalidParameterError, match="at least one sample"):
        sampled_scores([["a"]], [[]], [[]])


def test_boundary_helpers_round_trip() -> None:
    assert word_boundaries(["in", "the"]) == [2, 5]
    assert words_from_boundaries("inthe", [0, 1, 0, 0]) == ["in", "the"]
    assert words_from_boundaries("a", []) == ["a"]
    with pytest.raises(InvalidParameterError):
        words_from_boundaries("abc", [1])
