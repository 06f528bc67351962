"""G0, the base distribution over strings of infinite-vocabulary LDA (Zhai 2014, sec. 7.2.1).

Checks: a plain-Python reference of the counts, the Lidstone conditionals and the scores; exact
enumeration that G0 sums to 1 over all strings (charset + unknown) within the length bounds, per
length for the n-gram part and overall with zeta; the least-squares zeta against scipy's SLSQP.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy.optimize import minimize

from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.g0 import (
    CharNgramG0,
    g0_total_mass,
    least_squares_moments,
    length_masses,
    log_g0,
    log_ngram,
    train_g0,
    zeta_least_squares,
)

TINY = ["a", "ab", "abc", "ba", "bca", "cab", "aabc", "abca", "bb", "ccc", "cabb", "ab", "bac"]
BOUNDARY = object()  # the reference's padding symbol: distinct from every character


def reference_scores(train: list[str], words: list[str], *, order: int, gamma: float, lo: int,
                     hi: int) -> np.ndarray:
    """Plain-Python G0 from the chapter's definition: dict counts, Lidstone, empirical zeta with add-1/2."""
    kept = [w.lower() for w in train if lo <= len(w) <= hi]
    charset = sorted(set("".join(kept)))
    bins = len(charset) + 1
    counts: Counter[tuple[object, ...]] = Counter()
    totals: Counter[tuple[object, ...]] = Counter()
    unk = object()

    def sym(c: str) -> object:
        return c if c in charset else unk

    for w in kept:
        seq: list[object] = [BOUNDARY] * (order - 1) + list(w)
        for i in range(order - 1, len(seq)):
            ctx = tuple(seq[i - order + 1:i])
            counts[ctx + (seq[i],)] += 1
            totals[ctx] += 1
    n_len = Counter(len(w) for w in kept)
    zeta = {l: (n_len[l] + 0.5) / (len(kept) + 0.5 * (hi - lo + 1)) for l in range(lo, hi + 1)}
    out = []
    for w in words:
        w = w.lower()
        if not lo <= len(w) <= hi:
            out.append(-math.inf)
            continue
        seq = [BOUNDARY] * (order - 1) + [sym(c) for c in w]
        total = math.log(zeta[len(w)])
        for i in range(order - 1, len(seq)):
            ctx = tuple(seq[i - order + 1:i])
            total += math.log((counts[ctx + (seq[i],)] + gamma) / (totals[ctx] + gamma * bins))
        out.append(total)
    return np.array(out)


def all_strings(alphabet: str, length: int) -> list[str]:
    return ["".join(p) for p in itertools.product(alphabet, repeat=length)]


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("gamma", [0.1, 1.0])
def test_scores_match_plain_python_reference(order: int, gamma: float) -> None:
    g0 = train_g0(TINY, order=order, smoothing=gamma, min_length=2, max_length=4)
    probe = TINY + ["cc", "abcd", "dddd", "Abc", "a", "abcab", "zz", "c#a"]
    want = reference_scores(TINY, probe, order=order, gamma=gamma, lo=2, hi=4)
    assert_allclose(log_g0(g0, probe), want, rtol=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_enumeration_every_length_sums_to_one_and_g0_sums_to_one(order: int) -> None:
    # 'abc' is the charset; 'z' stands for the unknown-character bin (any other character scores the same).
    g0 = train_g0(TINY, order=order, smoothing=0.3, min_length=1, max_length=4)
    assert g0.charset == "abc"
    total = 0.0
    for length in range(1, 5):
        strings = all_strings("abcz", length)
        assert_allclose(np.exp(log_ngram(g0, strings)).sum(), 1.0, rtol=1e-12)
        total += np.exp(log_g0(g0, strings)).sum()
    assert_allclose(total, 1.0, rtol=1e-12)
    assert_allclose(length_masses(g0, 4), np.ones(5), rtol=1e-12)
    assert_allclose(g0_total_mass(g0), 1.0, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(words=st.lists(st.text(alphabet="abcd#", min_size=1, max_size=6), min_size=1, max_size=12),
       order=st.integers(1, 4), gamma=st.sampled_from([0.01, 0.5, 3.0]),
       fit=st.sampled_from(["empirical", "least_squares"]))
def test_any_trained_g0_has_total_mass_one(words: list[str], order: int, gamma: float, fit: str) -> None:
    g0 = train_g0(words, order=order, smoothing=gamma, min_length=1, max_length=6, length_fit=fit)
    assert_allclose(length_masses(g0, 6), np.ones(7), rtol=1e-10)
    assert_allclose(g0_total_mass(g0), 1.0, rtol=1e-10)
    assert (g0.zeta >= 0).all() and g0.zeta[0] == 0


def test_enumeration_with_least_squares_zeta_and_length_bounds() -> None:
    g0 = train_g0(TINY, order=2, smoothing=0.5, min_length=2, max_length=3, length_fit="least_squares")
    total = sum(np.exp(log_g0(g0, all_strings("abcz", length))).sum() for length in range(0, 5))
    assert_allclose(total, 1.0, rtol=1e-12)
    assert np.isneginf(log_g0(g0, ["a", "abca", ""])).all()
    assert_allclose(g0_total_mass(g0, 2), g0.zeta[2], rtol=1e-12)


def test_unknown_characters_share_one_bin_and_boundary_differs_from_literal_hash() -> None:
    g0 = train_g0(["#ab", "ab#", "abc"], order=3, min_length=3, max_length=3)
    assert g0.charset == "#abc"
    unknown = log_g0(g0, ["aq€", "ax!", "aé1"])
    assert unknown[0] == unknown[1] == unknown[2]
    # '#' was seen after the boundary context, so '#ab' beats 'cab' although both start unseen-ish.
    g_hash, g_c = log_g0(g0, ["#ab", "cab"])
    assert g_hash > g_c


def test_words_do_not_leak_ngrams_across_word_ends() -> None:
    # The reference concatenates padded words; here every word is padded on its own.
    g0 = train_g0(["abc", "cab", "bca"], order=3, min_length=3, max_length=3)
    assert int(g0.counts.sum()) == 9
    assert g0.counts[:, g0.charset.index("a")].sum() == 3


def test_lowercasing_and_case_kept() -> None:
    words = ["Cat", "cart", "CARE", "dog"]
    low = train_g0(words, min_length=3, max_length=4)
    assert low.charset == "acdegort"
    assert log_g0(low, ["CAT"])[0] == log_g0(low, ["cat"])[0]
    kept = train_g0(words, min_length=3, max_length=4, lowercase=False)
    assert "C" in kept.charset and log_g0(kept, ["Cat"])[0] > log_g0(kept, ["CAt"])[0]


def test_scores_do_not_depend_on_how_words_are_batched() -> None:
    g0 = train_g0(TINY, min_length=1, max_length=5)
    words = TINY + ["", "zzz", "abcab"]
    whole = log_g0(g0, words)
    parts = np.concatenate([log_g0(g0, words[:3]), log_g0(g0, words[3:7]), log_g0(g0, words[7:])])
    one_by_one = np.array([log_g0(g0, [w])[0] for w in words])
    assert_allclose(parts, whole, rtol=0)
    assert_allclose(one_by_one, whole, rtol=0)
    assert log_g0(g0, []).shape == (0,)


def test_huge_smoothing_is_uniform_over_characters_like_the_reference() -> None:
    g0 = train_g0(TINY, smoothing=1e12, min_length=1, max_length=4)
    words = ["abc", "ccc", "zzz", "ab"]
    lengths = np.array([len(w) for w in words])
    assert_allclose(log_ngram(g0, words), -lengths * math.log(4), rtol=1e-9)


def test_drops_and_coverage() -> None:
    g0 = train_g0(["ab", "a", "abc", "abcdef", "abcd"], min_length=3, max_length=4)
    assert (g0.n_words, g0.n_too_short, g0.n_too_long) == (2, 2, 1)
    assert g0.length_counts.tolist() == [0, 0, 0, 1, 1]
    assert_allclose(g0.zeta, [0, 0, 0, 0.5, 0.5])


def test_bad_input_is_refused_with_a_clear_message() -> None:
    with pytest.raises(InvalidParameterError, match="item 1 is 3"):
        train_g0(["abc", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match=r"none of the 2 words has a length in \[3, 20\]"):
        train_g0(["a", "ab"])
    with pytest.raises(InvalidParameterError, match="smoothing"):
        train_g0(["abc"], smoothing=0.0)
    with pytest.raises(InvalidParameterError, match="length_fit"):
        train_g0(["abc"], length_fit="median")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="lower the order"):
        train_g0(["abcdefghijklmnopqrst"], order=6)
    g0 = train_g0(TINY, min_length=1, max_length=4)
    with pytest.raises(InvalidParameterError, match="counts must be non-negative of shape"):
        CharNgramG0.from_counts(charset=g0.charset, order=g0.order + 1, smoothing=0.1, min_length=1, max_length=4,
                                lowercase=True, length_fit="empirical", counts=g0.counts,
                                length_counts=g0.length_counts, log_zeta=g0.log_zeta)
    with pytest.raises(InvalidParameterError, match="log_zeta"):
        CharNgramG0.from_counts(charset=g0.charset, order=g0.order, smoothing=0.1, min_length=1, max_length=4,
                                lowercase=True, length_fit="empirical", counts=g0.counts,
                                length_counts=g0.length_counts, log_zeta=g0.log_zeta + 0.1)
    with pytest.raises(InvalidParameterError, match="sorted"):
        CharNgramG0.from_counts(charset="cba", order=g0.order, smoothing=0.1, min_length=1, max_length=4,
                                lowercase=True, length_fit="empirical", counts=g0.counts,
                                length_counts=g0.length_counts, log_zeta=g0.log_zeta)


# ------------------------------------------------------------------------------------------- zeta


def slsqp_zeta(objective, n: int, *, bounds: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    result = minimize(objective, np.full(n, 1.0 / n), method="SLSQP",
                      bounds=[(0.0, None)] * n if bounds else None,
                      constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1.0}],
                      options={"ftol": 1e-16, "maxiter": 1000})
    assert result.success, result.message
    return np.asarray(result.x)


def test_closed_form_zeta_matches_slsqp_when_no_bound_is_active() -> None:
    expected = np.array([0.30, 0.25, 0.20, 0.10])
    squares = np.array([0.50, 0.40, 0.45, 0.30])
    zeta = zeta_least_squares(expected, squares)
    assert (zeta > 0).all()
    # The chapter's closed form with the stationarity sign: lambda = 2 (sum E/S - 1) / sum 1/S.
    lam = 2 * (np.sum(expected / squares) - 1) / np.sum(1 / squares)
    assert_allclose(zeta, (expected - lam / 2) / squares, rtol=1e-12)
    assert_allclose(np.sum((expected - lam / 2) / squares), 1.0, rtol=1e-12)  # no renormalization needed
    ref = slsqp_zeta(lambda z: np.sum(squares * z * z - 2 * expected * z), 4, bounds=False)
    assert_allclose(zeta, ref, atol=1e-7)


def test_least_squares_zeta_with_active_bounds_matches_slsqp() -> None:
    expected = np.array([1e-3, 4e-4, 1e-4, 1e-6, 0.0])
    squares = np.array([2e-3, 5e-4, 1e-4, 1e-6, 0.0])  # last length: no word, zeta 0
    zeta = zeta_least_squares(expected, squares)

    def objective(z: np.ndarray) -> float:
        return float(np.sum(squares * z * z - 2 * expected * z) * 1e3)

    ref = slsqp_zeta(objective, 5, bounds=True)
    assert_allclose(zeta, ref, atol=1e-6)
    assert zeta[-1] == 0 and (zeta >= 0).all() and math.isclose(zeta.sum(), 1.0)


def test_trained_least_squares_zeta_minimizes_the_chapter_objective() -> None:
    words = ["ab", "ba", "aab", "abb", "bab", "ab", "aaab", "bbba", "abab", "ba", "b", "a"]
    g0 = train_g0(words, order=2, smoothing=0.5, min_length=1, max_length=4, length_fit="least_squares")
    distinct = sorted(set(words))
    p_c = np.array([words.count(w) / len(words) for w in distinct])
    p_ng_distinct = np.exp(log_ngram(g0, distinct))
    len_distinct = np.array([len(w) for w in distinct])

    def objective(z: np.ndarray) -> float:  # sum over the dictionary's distinct words, [Z] sec. 7.2.1
        return float(np.sum((p_c - z[len_distinct - 1] * p_ng_distinct) ** 2))

    ref = slsqp_zeta(objective, 4, bounds=True)
    assert_allclose(g0.zeta[1:], ref, atol=1e-6)
    expected, squares = least_squares_moments(len_distinct, np.log(p_ng_distinct), p_c, 5)
    assert_allclose(zeta_least_squares(expected, squares), g0.zeta, atol=1e-12)
    # Duplicates count in p_C only: S_l sums over distinct words.
    assert_allclose(squares[2], np.sum(p_ng_distinct[len_distinct == 2] ** 2))


def test_reference_sign_of_lambda_is_not_the_minimum() -> None:
    expected = np.array([0.30, 0.25, 0.20, 0.10])
    squares = np.array([0.50, 0.40, 0.45, 0.30])
    lam_ref = 2 * (1 - np.sum(expected / squares)) / np.sum(1 / squares)
    ref_zeta = (expected - lam_ref / 2) / squares
    ref_zeta /= ref_zeta.sum()

    def objective(z: np.ndarray) -> float:
        return float(np.sum(squares * z * z - 2 * expected * z))

    assert objective(zeta_least_squares(expected, squares)) < objective(ref_zeta) - 1e-3


def test_zeta_least_squares_refuses_empty_or_negative() -> None:
    with pytest.raises(InvalidParameterError, match="every S_l is 0"):
        zeta_least_squares(np.zeros(3), np.zeros(3))
    with pytest.raises(InvalidParameterError, match="non-negative"):
        zeta_least_squares(np.array([-1.0]), np.array([1.0]))
