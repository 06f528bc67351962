"""Tests of topicflow.models.lda.gibbs.adlda: the AD-LDA block sweep, its reduction and its hyperparameters.

* Several sweeps over several blocks equal tests/reference/adlda_numpy.py draw for draw (z and n_wk).
* With one block the sampler is the sequential collapsed Gibbs sampler: independent chains reach the
  exact posterior p(z | w) of an enumerable problem (chi-square), and the first sweep equals
  ``run_sweeps`` bit for bit.
* The reduced histograms give the fixed points of the whole state bit for bit, the NumPy digamma
  fixed points to rounding, and the joint log-likelihood of the NumPy reference.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import adlda_numpy
from tests.reference import gibbs_numpy as ref
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import block_from_csr, expand_tokens
from topicflow.models.lda.gibbs.adlda import (
    CountDelta,
    DocHistograms,
    SweepView,
    apply_delta,
    count_histogram,
    joint_log_likelihood,
    optimize_hyperparameters,
    start_block,
    start_block_from_topics,
    sweep_block,
)
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.chain import optimize_hyperparameters as state_optimize
from topicflow.models.lda.gibbs.state import GibbsParams, state_from_topics

MIN_P_VALUE = 1e-3


def _blocks(n_docs: int, n_terms: int, block_size: int, seed: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.4, size=(n_docs, n_terms)).astype(np.int32)
    dense[3] = 0  # an empty document
    csr = sp.csr_matrix(dense)
    out = []
    for start in range(0, n_docs, block_size):
        indptr, terms = expand_tokens(block_from_csr(csr[start:start + block_size], first_doc=start))
        out.append((indptr, terms, start))
    return out


def _start(blocks: list, n_terms: int, n_topics: int, seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    starts = [start_block(indptr, terms, first, n_topics, seed) for indptr, terms, first in blocks]
    term_topic = np.zeros((n_terms, n_topics), dtype=np.int32)
    topic_counts = np.zeros(n_topics, dtype=np.int64)
    apply_delta(term_topic, topic_counts, starts[0].delta.merge(*(s.delta for s in starts[1:])))
    return [s.topics for s in starts], term_topic, topic_counts


def test_sweeps_match_the_numpy_reference() -> None:
    n_terms, n_topics, seed, beta = 25, 4, 3, 0.05
    alpha = np.array([0.1, 0.3, 0.2, 0.5])
    blocks = _blocks(30, n_terms, 7, seed=1)
    topics, term_topic, topic_counts = _start(blocks, n_terms, n_topics, seed)
    ref_topics = [ref.random_topics(indptr, n_topics, seed, first) for indptr, _, first in blocks]
    for mine, theirs in zip(topics, ref_topics):
        assert_array_equal(mine, theirs)
    ref_term_topic = term_topic.astype(np.int64)
    for sweep in (1, 2, 3):
        view = SweepView(term_topic.copy(), topic_counts.copy(), alpha, beta, seed)
        results = [sweep_block(indptr, terms, z, first, view, sweep) for (indptr, terms, first), z in zip(blocks, topics)]
        apply_delta(term_topic, topic_counts, results[0].delta.merge(*(r.delta for r in results[1:])))
        topics = [r.topics for r in results]
        ref_topics, ref_term_topic, doc_topics = adlda_numpy.adlda_sweep(
            [(indptr, terms, z, first) for (indptr, terms, first), z in zip(blocks, ref_topics)], ref_term_topic,
            alpha, beta, seed=seed, sweep=sweep)
        for mine, theirs in zip(topics, ref_topics):
            assert_array_equal(mine, theirs)
        assert_array_equal(term_topic, ref_term_topic)
        assert_array_equal(topic_counts, ref_term_topic.sum(axis=0))
        merged = results[0].histograms.merge(*(r.histograms for r in results[1:]))
        assert_array_equal(merged.length_counts[:1 + max(d.sum(axis=1).max() for d in doc_topics)],
                           np.bincount(np.concatenate([d.sum(axis=1) for d in doc_topics])))
        assert_allclose(joint_log_likelihood(merged, term_topic, topic_counts, alpha, beta),
                        ref.joint_log_likelihood(np.concatenate(doc_topics), ref_term_topic, alpha, beta), rtol=1e-12)


def _tiny() -> tuple[np.ndarray, np.ndarray]:
    """Two documents, five tokens over three terms: 2**5 assignments at K = 2."""
    return expand_tokens(block_from_csr(sp.csr_matrix(np.array([[2, 1, 0], [0, 1, 1]]))))


def test_one_block_reaches_the_exact_posterior() -> None:
    """1200 independent one-block chains of 12 sweeps vs p(z | w) by enumeration (chi-square)."""
    indptr, terms = _tiny()
    alpha, beta = np.array([0.3, 0.8]), 0.25
    exact = ref.exact_posterior(indptr, terms, 3, alpha, beta)
    outcomes = list(exact)
    index = {z: i for i, z in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for seed in range(1200):
        (z,), term_topic, topic_counts = _start([(indptr, terms, 0)], 3, 2, seed)
        for sweep in range(1, 13):
            result = sweep_block(indptr, terms, z, 0, SweepView(term_topic, topic_counts, alpha, beta, seed), sweep)
            apply_delta(term_topic, topic_counts, result.delta)
            z = result.topics
        observed[index[tuple(int(k) for k in z)]] += 1
    assert chi_square_p(observed, np.array([exact[z] for z in outcomes])) > MIN_P_VALUE


def test_one_block_first_sweep_is_the_sequential_sampler() -> None:
    block = block_from_csr(sp.csr_matrix(np.random.default_rng(4).poisson(0.7, size=(12, 9))), first_doc=5)
    params = GibbsParams(n_topics=3, doc_topic_prior=0.2, topic_word_prior=0.1, seed=9)
    state = initial_state(block, params)
    (z,), term_topic, topic_counts = _start([(state.token_indptr, state.token_terms, 5)], 9, 3, 9)
    assert_array_equal(z, state.topics)
    result = sweep_block(state.token_indptr, state.token_terms, z, 5,
                         SweepView(term_topic, topic_counts, params.alpha, 0.1, 9), 1)
    assert_array_equal(result.topics, run_sweeps(state, params, 1).topics)


def test_histograms_give_the_whole_state_fixed_points() -> None:
    blocks = _blocks(40, 20, 9, seed=2)
    topics, term_topic, topic_counts = _start(blocks, 20, 3, seed=5)
    histograms = [DocHistograms.from_doc_topic(
        state_from_topics(indptr, terms, z, 20, GibbsParams(3)).doc_topic_counts) for (indptr, terms, _), z
        in zip(blocks, topics)]
    merged = histograms[2].merge(histograms[0], histograms[3], histograms[1], *histograms[4:])  # any order
    whole = state_from_topics(np.concatenate([[0], np.cumsum(np.concatenate([np.diff(b[0]) for b in blocks]))]),
                              np.concatenate([b[1] for b in blocks]), np.concatenate(topics), 20,
                              GibbsParams(3, doc_topic_prior=np.array([0.2, 0.1, 0.4]), topic_word_prior=0.03))
    alpha, beta = optimize_hyperparameters(merged, term_topic, topic_counts, whole.doc_topic_prior, 0.03,
                                           learn_beta=True)
    want_alpha, want_beta = state_optimize(whole)
    assert_array_equal(alpha, want_alpha)
    assert beta == want_beta
    assert_allclose(alpha, ref.alpha_fixed_point(whole.doc_topic_counts, whole.doc_topic_prior), rtol=1e-6)
    assert_allclose(beta, ref.beta_fixed_point(term_topic, 0.03), rtol=1e-6)
    fixed_alpha, fixed_beta = optimize_hyperparameters(merged, term_topic, topic_counts, whole.doc_topic_prior, 0.03,
                                                       learn_alpha=False)
    assert_array_equal(fixed_alpha, whole.doc_topic_prior)
    assert fixed_beta == 0.03


def test_deltas_merge_exactly_and_apply() -> None:
    a = CountDelta(np.array([1, 4, 7]), np.array([2, -1, 3]), 3)
    b = CountDelta(np.array([4, 5]), np.array([1, 2]), 3)
    merged = b.merge(a)
    assert merged.keys.tolist() == [1, 5, 7] and merged.values.tolist() == [2, 2, 3]
    term_topic, topic_counts = np.zeros((3, 3), dtype=np.int32), np.zeros(3, dtype=np.int64)
    apply_delta(term_topic, topic_counts, merged)
    assert term_topic.tolist() == [[0, 2, 0], [0, 0, 2], [0, 3, 0]]
    assert topic_counts.tolist() == [0, 5, 2]
    with pytest.raises(NumericalError, match="negative"):
        apply_delta(term_topic, topic_counts, CountDelta(np.array([0]), np.array([-1]), 3))


def test_block_errors_and_empty_block() -> None:
    indptr, terms = _tiny()
    (z,), term_topic, topic_counts = _start([(indptr, terms, 0)], 3, 2, 0)
    view = SweepView(term_topic, topic_counts, np.full(2, 0.1), 0.01, 0)
    with pytest.raises(InvalidParameterError, match="sweep must be at least 1"):
        sweep_block(indptr, terms, z, 0, view, 0)
    with pytest.raises(NumericalError, match="out of step"):
        sweep_block(indptr, terms, z, 0, SweepView(np.zeros_like(term_topic), topic_counts, np.full(2, 0.1), 0.01, 0), 1)
    empty = sweep_block(np.zeros(3, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), 0,
                        view, 1)
    assert empty.delta.keys.size == 0 and empty.histograms.length_counts.tolist() == [2]


def test_a_block_is_checked_against_the_counts_cell_by_cell() -> None:
    """One (term, topic) count short by one, or the topic total short, or a z outside [0, K): refused, with
    the view and the block's z untouched; the block's counts exactly: accepted."""
    blocks = _blocks(12, 6, 12, seed=8)
    (indptr, terms, first), = blocks
    (z,), term_topic, topic_counts = _start(blocks, 6, 3, 1)
    alpha = np.full(3, 0.1)
    exact = sweep_block(indptr, terms, z, first, SweepView(term_topic, topic_counts, alpha, 0.01, 1), 1)
    assert exact.topics.shape == z.shape
    w, k = np.argwhere(term_topic > 0)[0]
    short = term_topic.copy()
    short[w, k] -= 1
    saved_z = z.copy()
    with pytest.raises(NumericalError, match="out of step"):
        sweep_block(indptr, terms, z, first, SweepView(short, topic_counts, alpha, 0.01, 1), 1)
    low_total = topic_counts.copy()
    low_total[k] -= 1
    with pytest.raises(NumericalError, match="out of step"):
        sweep_block(indptr, terms, z, first, SweepView(term_topic, low_total, alpha, 0.01, 1), 1)
    bad = z.copy()
    bad[0] = 3
    with pytest.raises(InvalidParameterError, match="outside"):
        sweep_block(indptr, terms, bad, first, SweepView(term_topic, topic_counts, alpha, 0.01, 1), 1)
    assert_array_equal(z, saved_z)


def test_deltas_added_as_they_arrive_equal_the_tree_in_any_order() -> None:
    """The driver adds each block's delta as its task ends: any order gives the tree's counts and histograms."""
    n_terms, n_topics, seed = 25, 4, 5
    blocks = _blocks(40, n_terms, 6, seed=2)
    topics, term_topic, topic_counts = _start(blocks, n_terms, n_topics, seed)
    view = SweepView(term_topic.copy(), topic_counts.copy(), np.full(n_topics, 0.2), 0.05, seed)
    results = [sweep_block(indptr, terms, z, first, view, 1) for (indptr, terms, first), z in zip(blocks, topics)]
    level = list(results)
    deltas, histograms = [r.delta for r in level], [r.histograms for r in level]
    while len(deltas) > 1:  # the tree of fan-in 2 the driver used before
        deltas = [deltas[i].merge(*deltas[i + 1:i + 2]) for i in range(0, len(deltas), 2)]
        histograms = [histograms[i].merge(*histograms[i + 1:i + 2]) for i in range(0, len(histograms), 2)]
    tree_counts, tree_totals = term_topic.copy(), topic_counts.copy()
    apply_delta(tree_counts, tree_totals, deltas[0])
    for order in (range(len(results)), reversed(range(len(results))), np.random.default_rng(0).permutation(len(results))):
        counts, totals, merged = term_topic.copy(), topic_counts.copy(), None
        for i in order:
            apply_delta(counts, totals, results[i].delta)
            merged = results[i].histograms if merged is None else merged.merge(results[i].histograms)
        assert merged is not None
        assert_array_equal(counts, tree_counts)
        assert_array_equal(totals, tree_totals)
        assert_array_equal(merged.pair_keys, histograms[0].pair_keys)
        assert_array_equal(merged.pair_counts, histograms[0].pair_counts)
        assert_array_equal(merged.length_counts, histograms[0].length_counts)
    assert_array_equal(tree_totals, tree_counts.sum(axis=0))
    before = tree_counts.copy()
    with pytest.raises(NumericalError, match="negative"):  # refused whole: nothing is added
        apply_delta(tree_counts, tree_totals, CountDelta(np.array([0, 1]), np.array([1, -10**6], np.int32), n_topics))
    assert_array_equal(tree_counts, before)


def test_histograms_of_long_documents_are_sorted_like_short_ones() -> None:
    """The dense table (short documents) and the sort (a document too long for it) both give the plain count."""
    rng = np.random.default_rng(3)
    doc_topic = rng.poisson(2.0, size=(30, 6)).astype(np.int32)
    long_doc = doc_topic.copy()
    long_doc[0, 2] = 2**22  # K x (longest + 1) cells exceed the table's bound
    for counts in (doc_topic, long_doc):
        found = DocHistograms.from_doc_topic(counts)
        expected: dict[int, int] = {}
        for d in range(counts.shape[0]):
            for k in range(counts.shape[1]):
                if counts[d, k]:
                    key = (k << 32) | int(counts[d, k])
                    expected[key] = expected.get(key, 0) + 1
        assert found.pair_keys.tolist() == sorted(expected)
        assert found.pair_counts.tolist() == [expected[key] for key in sorted(expected)]
        assert_array_equal(found.length_counts, np.bincount(counts.sum(axis=1)))


def test_sparse_bookkeeping_matches_numpy() -> None:
    """The numba helpers of the block bookkeeping give what their NumPy definitions give."""
    rng = np.random.default_rng(4)
    counts = (rng.poisson(0.7, size=(30, 7)) * (rng.random((30, 7)) < 0.5)).astype(np.int32)
    hist = count_histogram(counts)
    expected = np.bincount(counts[counts > 0], minlength=1).astype(np.float64)
    expected[0] = 0.0
    assert_array_equal(hist, expected)
    assert_array_equal(count_histogram(np.zeros((3, 2), np.int32)), [0.0])
    terms = np.sort(rng.choice(100, size=30, replace=False)).astype(np.int64)
    delta = CountDelta.from_dense(terms, counts - np.roll(counts, 1, axis=0))
    rows, cols = np.nonzero(counts - np.roll(counts, 1, axis=0))
    assert_array_equal(delta.keys, terms[rows] * 7 + cols)
    assert_array_equal(delta.values, (counts - np.roll(counts, 1, axis=0))[rows, cols])
    assert delta.values.dtype == np.int32


def test_a_start_from_given_topics_is_the_random_start_given_its_topics() -> None:
    indptr, terms = np.array([0, 3, 3, 7]), np.array([4, 1, 4, 0, 2, 2, 1], dtype=np.int32)
    random = start_block(indptr, terms, 5, 3, seed=2)
    given = start_block_from_topics(indptr, terms, random.topics, 3)
    assert_array_equal(given.topics, random.topics)
    assert_array_equal(given.delta.keys, random.delta.keys)
    assert_array_equal(given.delta.values, random.delta.values)
    assert_array_equal(given.histograms.length_counts, random.histograms.length_counts)
    for bad in (np.full(7, 3, dtype=np.int32), np.full(7, -1, dtype=np.int32), np.zeros(6, dtype=np.int32)):
        with pytest.raises(InvalidParameterError, match="one topic in"):
            start_block_from_topics(indptr, terms, bad, 3)
