"""Tests of topicflow.models.infvoc_lda.tos: stick expectations (eqs. 7.3-7.4), prepared weights, read-outs, snapshot.

* E[log beta_kt] and the unseen-word weight against a direct NumPy transcription of spec 3.3 (P1's corrected
  form, P2's remaining stick), and Jensen: sum_t exp(E[log beta_kt]) + exp(remaining) <= 1.
* The printed (misprinted) eq. 7.3 differs from the implemented one exactly by psi(nu2_t) - psi(nu1_t + nu2_t).
* Expected probabilities E[beta] plus the remaining stick sum to 1; top words are sorted by E[beta].
* Prepared weights equal E[log beta] at the TOS position or the remaining value, per topic; snapshot round trip.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import digamma

from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.params import InfVocParams
from topicflow.models.infvoc_lda.tos import (
    InfVocState,
    empty_state,
    expected_log_sticks,
    expected_topic_words,
    prepare_weights,
    top_words,
    tos_positions,
)


def random_state(rng: np.random.Generator, n_topics: int = 3, n_words: int = 12, size: int = 7) -> InfVocState:
    """A state with random TOS orders of ``size`` words out of ``n_words`` and random nu, ranks for some words."""
    words = np.concatenate([rng.permutation(n_words)[:size] for _ in range(n_topics)]).astype(np.int64)
    rank_words = [np.sort(rng.choice(n_words, size=5, replace=False)) for _ in range(n_topics)]
    return InfVocState(
        tos_indptr=np.arange(n_topics + 1, dtype=np.int64) * size, tos_words=words,
        nu1=rng.uniform(0.5, 20.0, n_topics * size), nu2=rng.uniform(0.5, 300.0, n_topics * size),
        rank_indptr=np.arange(n_topics + 1, dtype=np.int64) * 5, rank_words=np.concatenate(rank_words).astype(np.int64),
        rank_log=rng.normal(-20.0, 3.0, n_topics * 5), rank_log_offset=-0.25, n_updates=4,
    )


def direct_elog(nu1: np.ndarray, nu2: np.ndarray) -> tuple[np.ndarray, float]:
    """Spec 3.3 term by term: psi(nu1_t) - psi(nu1_t + nu2_t) + sum_{s<t} [psi(nu2_s) - psi(nu1_s + nu2_s)]."""
    out = np.array([digamma(nu1[t]) - digamma(nu1[t] + nu2[t])
                    + np.sum(digamma(nu2[:t]) - digamma(nu1[:t] + nu2[:t])) for t in range(len(nu1))])
    return out, float(np.sum(digamma(nu2) - digamma(nu1 + nu2)))


@pytest.mark.parametrize("size", [0, 1, 2, 9, 40])
def test_expected_log_sticks_match_spec_formula(size: int) -> None:
    rng = np.random.default_rng(size)
    nu1, nu2 = rng.uniform(0.2, 30.0, size), rng.uniform(0.2, 4000.0, size)
    elog, remaining = expected_log_sticks(nu1, nu2)
    want, want_rest = direct_elog(nu1, nu2)
    assert_allclose(elog, want, rtol=1e-12, atol=1e-12)
    assert remaining == pytest.approx(want_rest, rel=1e-12, abs=1e-12)
    # Jensen: E[log beta] <= log E[beta], and the E[beta] plus the remaining stick sum to 1
    assert np.sum(np.exp(elog)) + np.exp(remaining) <= 1.0 + 1e-12


def test_printed_eq_7_3_differs_by_the_term_at_t() -> None:
    """P1: the printed form also adds psi(nu2_t) of position t itself; the implemented form does not."""
    nu1, nu2 = np.array([2.0, 3.0, 5.0]), np.array([7.0, 11.0, 13.0])
    elog, _ = expected_log_sticks(nu1, nu2)
    printed = np.array([digamma(nu1[t]) + np.sum(digamma(nu2[: t + 1])) - np.sum(digamma(nu1[: t + 1] + nu2[: t + 1]))
                        for t in range(3)])
    assert_allclose(printed - elog, digamma(nu2), rtol=1e-12)


def test_expected_topic_words_sum_to_one_and_top_words_sorted() -> None:
    state = random_state(np.random.default_rng(1))
    for k in range(state.n_topics):
        words, probs, remaining = expected_topic_words(state, k)
        _, nu1, nu2 = state.topic_tos(k)
        direct = [nu1[t] / (nu1[t] + nu2[t]) * np.prod(nu2[:t] / (nu1[:t] + nu2[:t])) for t in range(len(nu1))]
        assert_allclose(probs, direct, rtol=1e-12)
        assert probs.sum() + remaining == pytest.approx(1.0, abs=1e-12)
        assert_array_equal(words, state.topic_tos(k)[0])
    tops = top_words(state, 4)
    for k, (words, probs) in enumerate(tops):
        assert len(words) == 4 and np.all(np.diff(probs) <= 0)
        all_words, all_probs, _ = expected_topic_words(state, k)
        assert_array_equal(np.sort(probs)[::-1], np.sort(all_probs)[::-1][:4])


def test_prepared_weights_are_eq_7_3_or_7_4_per_topic() -> None:
    state = random_state(np.random.default_rng(2))
    words = np.array([11, 0, 3, 3, 20, 5])
    prepared = prepare_weights(state, words)
    assert_array_equal(prepared.word_ids, [0, 3, 5, 11, 20])
    positions = tos_positions(state, prepared.word_ids)
    for k in range(state.n_topics):
        tos_words, nu1, nu2 = state.topic_tos(k)
        want, rest = direct_elog(nu1, nu2)
        for i, w in enumerate(prepared.word_ids):
            where = np.flatnonzero(tos_words == w)
            assert positions[k, i] == (where[0] if where.size else -1)
            expected = want[where[0]] if where.size else rest
            assert prepared.log_weights[i, k] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    shifted = prepared.log_weights - prepared.log_weights.max(axis=1, keepdims=True)
    assert_allclose(prepared.weights, np.exp(shifted), rtol=1e-15)
    assert_array_equal(prepared.weights.max(axis=1), 1.0)
    with pytest.raises(InvalidParameterError, match="word ids must be >= 0"):
        prepare_weights(state, np.array([-1, 2]))


def test_snapshot_round_trip_is_exact_and_json_able() -> None:
    state = random_state(np.random.default_rng(3))
    arrays, scalars = state.to_arrays()
    back = InfVocState.from_arrays(arrays, json.loads(json.dumps(scalars)))
    for name in arrays:
        assert_array_equal(getattr(back, name), arrays[name])
        assert getattr(back, name).dtype == arrays[name].dtype
    assert (back.rank_log_offset, back.n_updates) == (state.rank_log_offset, state.n_updates)
    broken = dict(arrays, tos_words=np.zeros_like(arrays["tos_words"]))
    with pytest.raises(InvalidParameterError, match="holds a word twice"):
        InfVocState.from_arrays(broken, scalars)
    with pytest.raises(InvalidParameterError, match="lacks arrays"):
        InfVocState.from_arrays({"nu1": arrays["nu1"]}, scalars)


def test_empty_state_weights_are_flat() -> None:
    prepared = prepare_weights(empty_state(4), np.array([2, 9]))
    assert_array_equal(prepared.log_weights, 0.0)
    assert_array_equal(prepared.weights, 1.0)


def test_g0_variant_of_the_unseen_weight() -> None:
    """Spec P2's variant: remaining + psi(1) - psi(1 + alpha^beta) + log G0(w) outside the TOS; eq. 7.3 inside."""
    state = random_state(np.random.default_rng(4))
    log_g0 = np.linspace(-30.0, -5.0, 25)
    params = InfVocParams(n_topics=3, stick_concentration=500.0, unseen_weight="g0")
    words = np.array([0, 3, 7, 20, 24])
    plain, variant = prepare_weights(state, words), prepare_weights(state, words, params, log_g0=log_g0)
    positions = tos_positions(state, words)
    extra = digamma(1.0) - digamma(501.0) + log_g0[words]
    for k in range(3):
        outside = positions[k] < 0
        assert_allclose(variant.log_weights[outside, k], plain.log_weights[outside, k] + extra[outside], rtol=1e-12)
        assert_array_equal(variant.log_weights[~outside, k], plain.log_weights[~outside, k])
    assert_array_equal(prepare_weights(state, words, InfVocParams(n_topics=3)).log_weights, plain.log_weights)
    with pytest.raises(InvalidParameterError, match="needs log_g0"):
        prepare_weights(state, words, params)
