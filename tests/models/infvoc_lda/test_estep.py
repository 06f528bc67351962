"""Tests of topicflow.models.infvoc_lda.estep: the hybrid Gibbs E-step of eq. 7.2.

* Draw for draw against the plain-loop reference tests/reference/infvoc.py (same counter-keyed uniforms):
  kept counts and last-sweep counts are equal as integers.
* The result does not depend on how a minibatch's documents are split into partitions (merge of the parts).
* Merge is commutative, associative and has ``zeros`` as identity.
* Exact distribution: on a 2-topic, 3-token document, many independent chains' final states (z1, z2, z3)
  follow the enumerated product of eq. 7.2's factors (Dirichlet-multinomial in n_k times the word weights),
  by a chi-square test.
* Fold-in rows sum to 1; token translation of an ordered block; clear errors.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy.special import gammaln

from tests.models.infvoc_lda.test_tos import random_state
from tests.reference import infvoc as ref
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import OrderedBlock
from topicflow.models.infvoc_lda.estep import (
    InfVocStats,
    estep_documents,
    fold_in,
    words_from_ordered_block,
)
from topicflow.models.infvoc_lda.params import InfVocParams
from topicflow.models.infvoc_lda.tos import PreparedWeights, prepare_weights

MIN_P_VALUE = 1e-3


def random_docs(rng: np.random.Generator, n_docs: int, n_words: int, max_len: int = 12) -> list[list[int]]:
    return [rng.integers(0, n_words, rng.integers(0, max_len + 1)).tolist() for _ in range(n_docs)]


def csr(docs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.concatenate(([0], np.cumsum([len(d) for d in docs]))).astype(np.int64)
    return indptr, np.array([w for d in docs for w in d], dtype=np.int64)


def test_estep_matches_reference_draw_for_draw() -> None:
    rng = np.random.default_rng(5)
    state = random_state(rng, n_topics=3, n_words=12, size=7)
    docs = random_docs(rng, 9, 16)  # words 12..15 are outside every TOS (eq. 7.4)
    params = InfVocParams(n_topics=3, burn_in=3, samples=4, seed=17, doc_topic_prior=0.3)
    indptr, words = csr(docs)
    prepared = prepare_weights(state, words)
    stats, gamma = estep_documents(indptr, words, prepared, params, first_doc=40, minibatch=6)
    ref_state = ref.RefState([[list(e) for e in zip(*map(list, state.topic_tos(k)))] for k in range(3)],
                             [{} for _ in range(3)])
    present, W = ref.weights(ref_state, words.tolist())
    np.testing.assert_allclose(prepared.weights, W, rtol=1e-12, atol=1e-300)
    kept, last = ref.estep(docs, 40, present, prepared.weights.tolist(), 3, 0.3, 17, 6, 3, 4)
    want = np.zeros_like(stats.kept_counts)
    for (w, k), v in kept.items():
        want[np.searchsorted(stats.word_ids, w), k] = v
    assert_array_equal(stats.kept_counts, want)
    assert_array_equal(gamma, 0.3 + np.array(last, dtype=float))
    assert stats.n_docs == 9 and stats.n_tokens == len(words) and stats.kept_counts.sum() == 4 * len(words)
    # with the reference's own weights the draws are the same too (weights agree to the last bits)
    kept_own, _ = ref.estep(docs, 40, present, W, 3, 0.3, 17, 6, 3, 4)
    assert kept_own == kept


@pytest.mark.parametrize("cuts", [[4], [1, 2, 7], [0, 9]])
def test_estep_does_not_depend_on_the_split(cuts: list[int]) -> None:
    rng = np.random.default_rng(6)
    state = random_state(rng, n_topics=4, n_words=10, size=6)
    docs = random_docs(rng, 9, 14)
    params = InfVocParams(n_topics=4, seed=3)
    indptr, words = csr(docs)
    prepared = prepare_weights(state, words)
    whole, gamma = estep_documents(indptr, words, prepared, params, first_doc=100, minibatch=2)
    merged, gammas = InfVocStats.zeros(4, params.samples), []
    for lo, hi in itertools.pairwise([0, *cuts, 9]):
        part_indptr, part_words = csr(docs[lo:hi])
        stats, g = estep_documents(part_indptr, part_words, prepared, params, first_doc=100 + lo, minibatch=2)
        merged, _ = merged.merge(stats), gammas.append(g)
    assert_array_equal(merged.word_ids, whole.word_ids)
    assert_array_equal(merged.kept_counts, whole.kept_counts)
    assert (merged.n_docs, merged.n_tokens) == (whole.n_docs, whole.n_tokens)
    assert_array_equal(np.concatenate(gammas), gamma)


def test_merge_is_a_commutative_monoid() -> None:
    rng = np.random.default_rng(7)
    parts = [InfVocStats(np.sort(rng.choice(20, 5, replace=False)), rng.integers(0, 9, (5, 3)).astype(float),
                         int(rng.integers(1, 5)), int(rng.integers(1, 50)), 5) for _ in range(3)]
    a, b, c = parts
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    for x, y in [(left, right), (a.merge(b), b.merge(a)), (a.merge(InfVocStats.zeros(3, 5)), a)]:
        assert_array_equal(x.word_ids, y.word_ids)
        assert_array_equal(x.kept_counts, y.kept_counts)
        assert (x.n_docs, x.n_tokens) == (y.n_docs, y.n_tokens)
    with pytest.raises(InvalidParameterError, match="cannot merge"):
        a.merge(InfVocStats.zeros(3, 4))


def test_chains_follow_the_enumerated_distribution_of_eq_7_2() -> None:
    """p(z) ∝ prod_k Gamma(n_k + alpha) / Gamma(alpha) * prod_n W[w_n, z_n]; eq. 7.2 is its full conditional."""
    n_chains, alpha = 4000, 0.7
    W = np.array([[1.0, 0.25], [0.3, 1.0], [1.0, 0.8]])  # three distinct words, K = 2
    # every chain is its own document with its own three word ids, so kept counts (M = 1) give its final z
    prepared = PreparedWeights(np.arange(3 * n_chains), np.log(np.tile(W, (n_chains, 1))), np.tile(W, (n_chains, 1)))
    params = InfVocParams(n_topics=2, doc_topic_prior=alpha, burn_in=4, samples=1, seed=2)
    indptr = np.arange(0, 3 * n_chains + 1, 3)
    stats, _ = estep_documents(indptr, np.arange(3 * n_chains), prepared, params, first_doc=0, minibatch=1)
    z = stats.kept_counts[:, 1].reshape(n_chains, 3).astype(int)
    observed = np.bincount(z @ np.array([4, 2, 1]), minlength=8)
    probs = np.zeros(8)
    for code, config in enumerate(itertools.product([0, 1], repeat=3)):
        n = np.bincount(config, minlength=2)
        probs[code] = np.exp(np.sum(gammaln(n + alpha) - gammaln(alpha)) + sum(np.log(W[i, k]) for i, k in enumerate(config)))
    probs /= probs.sum()
    assert chi_square_p(observed, probs) > MIN_P_VALUE
    # the one-token conditional of the kernel's rule is the ratio of the enumerated joint
    z_rest, k_counts = (1, 0), np.array([1, 1])
    cond = (k_counts + alpha) * W[0]
    joint = np.array([probs[4 * k + 2 * z_rest[0] + z_rest[1]] for k in (0, 1)])
    np.testing.assert_allclose(cond / cond.sum(), joint / joint.sum(), rtol=1e-12)


def test_fold_in_rows_sum_to_one_and_unseen_words_are_allowed() -> None:
    rng = np.random.default_rng(8)
    state = random_state(rng)
    indptr, words = csr([[0, 1, 99], [5, 5, 5, 1000]])
    theta = fold_in(state, indptr, words, InfVocParams(n_topics=3))
    assert theta.shape == (2, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    again = fold_in(state, indptr, words, InfVocParams(n_topics=3))
    assert_array_equal(theta, again)


def test_words_from_ordered_block_and_errors() -> None:
    block = OrderedBlock(np.array([0, 2, 5]), np.array([1, -2, 0, -1, -2], np.int32),
                         np.array(["emu", "yak"], dtype=object), np.array(["a", "b"], dtype=object), 0, 2)
    assert words_from_ordered_block(block, np.array([10, 11]), np.array([20, 21])).tolist() == [11, 21, 10, 20, 21]
    with pytest.raises(InvalidParameterError, match="out-of-vocabulary strings"):
        words_from_ordered_block(block, np.array([10, 11]), np.array([20]))
    with pytest.raises(InvalidParameterError, match="term word ids"):
        words_from_ordered_block(block, np.array([10]), np.array([20, 21]))
    params = InfVocParams(n_topics=3)
    prepared = prepare_weights(random_state(np.random.default_rng(0)), np.array([1, 2]))
    with pytest.raises(InvalidParameterError, match="word id 7 .* no prepared weight"):
        estep_documents(np.array([0, 2]), np.array([1, 7]), prepared, params, first_doc=0, minibatch=1)
    with pytest.raises(InvalidParameterError, match="indptr"):
        estep_documents(np.array([0, 3]), np.array([1, 2]), prepared, params, first_doc=0, minibatch=1)
    with pytest.raises(InvalidParameterError, match="topics"):
        estep_documents(np.array([0, 2]), np.array([1, 2]), prepared, InfVocParams(n_topics=2), first_doc=0,
                        minibatch=1)


def test_empty_partition_is_the_identity() -> None:
    state = random_state(np.random.default_rng(9))
    params = InfVocParams(n_topics=3)
    indptr, words = csr([[1, 2, 2], [], [4]])
    prepared = prepare_weights(state, words)
    whole, gamma = estep_documents(indptr, words, prepared, params, first_doc=5, minibatch=3)
    empty, empty_gamma = estep_documents(np.array([0]), np.zeros(0, np.int64), prepared, params, first_doc=8,
                                         minibatch=3)
    assert empty.n_docs == 0 and empty.kept_counts.shape == (0, 3) and empty_gamma.shape == (0, 3)
    merged = empty.merge(whole)
    assert_array_equal(merged.kept_counts, whole.kept_counts)
    assert_array_equal(gamma[1], params.alpha)  # an empty document keeps the prior
    with pytest.raises(InvalidParameterError, match="word id 1 .* no prepared weight"):
        estep_documents(indptr, words, prepare_weights(state, np.zeros(0, np.int64)), params, first_doc=0,
                        minibatch=1)
