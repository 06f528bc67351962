"""Tests of topicflow.models.lda.gibbs.sparse against tests/reference/gibbs_numpy.py and exact enumeration.

Why the sweeps are not compared draw for draw with the reference: both sample by inverse CDF with the
same counter-based uniform per token, but the kernel walks the conditional mass in SparseLDA's bucket
order (the word's topics by decreasing n_wk, then the document's topics in order of first use, then
every topic), while the reference walks topics 0..K-1. The same uniform therefore lands on different
topics, and the chains part at the first token where that happens. Making the kernel follow topic
order would need the dense O(K) prefix sum the sparse sampler exists to avoid. So the sampler is
checked in distribution instead:

* the bucket decomposition s + r + q equals the dense normalizer, topic by topic;
* the kernel's draw of a token, over many keyed draws, follows the conditional (chi-square);
* one sweep from a fixed state follows the exact transition law computed by the reference, and
  independent chains follow the exact posterior p(z | w) of an enumerable problem (chi-square);
* n_dk, n_wk and n_k equal the recount from z after every sweep.

Everything deterministic given the assignments (random start, log-likelihood, phi, the fixed points,
fold-in) is compared with the reference exactly or to rounding.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import gibbs_numpy as ref
from tests.reference.corpora import random_block
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.metrics.recovery import match_topics, worst_matched_distance
from topicflow.models.common import blocks as gl_blocks
from topicflow.models.common.blocks import (
    block_from_csr,
    concat_blocks,
    expand_tokens,
    token_docs,
)
from topicflow.models.lda.gibbs import sparse as gl
from topicflow.models.lda.gibbs.chain import (
    initial_state,
    optimize_hyperparameters,
    run_sweeps,
)
from topicflow.models.lda.gibbs.conditional import token_conditional
from topicflow.models.lda.gibbs.fold_in import fold_in
from topicflow.models.lda.gibbs.scores import (
    joint_log_likelihood,
    topic_word_distribution,
)
from topicflow.models.lda.gibbs.sparse import token_buckets
from topicflow.models.lda.gibbs.state import GibbsParams, GibbsState, state_from_topics
from topicflow.testing.corpora import draw_planted_corpus

#: Smallest chi-square p-value accepted; the draws are fixed by their seeds, so a pass is stable.
MIN_P_VALUE = 1e-3


def _assert_counts_consistent(state: GibbsState) -> None:
    doc_topic, term_topic, topic_counts = ref.counts_from_topics(
        state.token_indptr, state.token_terms, state.topics, state.n_terms, state.n_topics)
    assert_array_equal(state.doc_topic_counts, doc_topic)
    assert_array_equal(state.term_topic_counts, term_topic)
    assert_array_equal(state.topic_counts, topic_counts)
    assert state.doc_topic_counts.dtype == np.int32 and state.term_topic_counts.dtype == np.int32
    assert state.topics.dtype == np.int32 and state.topic_counts.dtype == np.int64


def _tiny_block() -> gl_blocks.DocBlock:
    """Two documents, five tokens over three terms: 2**5 assignments at K = 2."""
    return block_from_csr(sp.csr_matrix(np.array([[2, 1, 0], [0, 1, 1]])))


# ----------------------------------------------------------------------------- the conditional


@pytest.mark.parametrize("alpha", [0.3, np.array([0.05, 0.4, 1.5, 0.2, 0.7])])
def test_bucket_decomposition_sums_to_dense_conditional(alpha: float | np.ndarray) -> None:
    block = random_block(12, 30, seed=4, mean_len=8)
    params = GibbsParams(n_topics=5, doc_topic_prior=alpha, topic_word_prior=0.05, seed=2)
    state = run_sweeps(initial_state(block, params), params, 3)
    doc_of = token_docs(state.token_indptr)
    for t in range(0, state.n_tokens, 7):
        buckets = token_buckets(state, t)
        d, w, k = doc_of[t], state.token_terms[t], state.topics[t]
        doc_row, term_row = state.doc_topic_counts[d].copy(), state.term_topic_counts[w].copy()
        totals = state.topic_counts.copy()
        doc_row[k] -= 1
        term_row[k] -= 1
        totals[k] -= 1
        a = params.alpha
        dense = token_conditional(doc_row, term_row, totals, a, 0.05, state.n_terms)
        assert_allclose(buckets.smoothing + buckets.document + buckets.word, dense.sum(), rtol=1e-12)
        assert_allclose(buckets.masses, dense, rtol=1e-12)
        assert_allclose(buckets.masses / buckets.masses.sum(),
                        ref.conditional(doc_row, term_row, totals, a, 0.05, state.n_terms), rtol=1e-12)
        assert_allclose(buckets.smoothing, np.sum(a * 0.05 / (totals + state.n_terms * 0.05)), rtol=1e-12)


@pytest.mark.parametrize("n_topics, alpha, beta", [
    (6, np.array([0.1, 0.3, 0.5, 0.2, 1.0, 0.05]), 0.2),
    (70, np.linspace(0.5, 3.0, 70), 2.0),  # s holds most of the mass: the blocked smoothing walk
])
def test_kernel_draw_follows_the_conditional(n_topics: int, alpha: np.ndarray, beta: float) -> None:
    """The first token of the block, redrawn from one fixed state with 4000 seeds, against eq. (5)."""
    block = random_block(6, 15, seed=9, mean_len=6)
    params = GibbsParams(n_topics=n_topics, doc_topic_prior=alpha, topic_word_prior=beta)
    state = run_sweeps(initial_state(block, params), params, 5)
    buckets = token_buckets(state, 0)
    draws = np.array([run_sweeps(state, GibbsParams(n_topics, alpha, beta, seed=s), 1).topics[0]
                      for s in range(4000)])
    observed = np.bincount(draws, minlength=n_topics)
    assert chi_square_p(observed, buckets.masses / buckets.masses.sum()) > MIN_P_VALUE
    if n_topics > 32:
        assert buckets.smoothing > buckets.word + buckets.document


def test_one_sweep_follows_the_exact_transition_law() -> None:
    block = _tiny_block()
    params = GibbsParams(n_topics=2, doc_topic_prior=0.4, topic_word_prior=0.3)
    state = initial_state(block, params)
    exact = ref.sweep_transition(state.token_indptr, state.token_terms, state.topics, 3, params.alpha, 0.3)
    outcomes = list(exact)
    index = {z: i for i, z in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for seed in range(4000):
        nxt = run_sweeps(state, GibbsParams(2, 0.4, 0.3, seed=seed), 1).topics
        observed[index[tuple(int(k) for k in nxt)]] += 1
    assert chi_square_p(observed, np.array([exact[z] for z in outcomes])) > MIN_P_VALUE


@pytest.mark.parametrize("init", ["random", "sequential", "scvb0"])
def test_chains_reach_the_exact_posterior(init: str) -> None:
    """3000 independent chains of 30 sweeps on 5 tokens, 2 topics, asymmetric alpha, vs enumeration."""
    block = _tiny_block()
    alpha = np.array([0.3, 0.8])
    exact = ref.exact_posterior(*expand_tokens(block), 3, alpha, 0.25)
    outcomes = list(exact)
    index = {z: i for i, z in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for seed in range(3000):
        params = GibbsParams(n_topics=2, doc_topic_prior=alpha, topic_word_prior=0.25, seed=seed)
        final = run_sweeps(initial_state(block, params, init=init), params, 30)  # type: ignore[arg-type]
        observed[index[tuple(int(k) for k in final.topics)]] += 1
    assert chi_square_p(observed, np.array([exact[z] for z in outcomes])) > MIN_P_VALUE


def test_reference_sampler_reaches_the_exact_posterior() -> None:
    """The dense reference itself, as 600 chains of 10 sweeps (it is slow)."""
    block = _tiny_block()
    token_indptr, token_terms = expand_tokens(block)
    alpha = np.array([0.3, 0.8])
    exact = ref.exact_posterior(token_indptr, token_terms, 3, alpha, 0.25)
    outcomes = list(exact)
    index = {z: i for i, z in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for seed in range(600):
        start = ref.random_topics(token_indptr, 2, seed, 0)
        final = ref.gibbs_sweeps(token_indptr, token_terms, start, 3, alpha, 0.25, seed=seed, first_doc=0,
                                 sweeps_done=0, n_sweeps=10)
        observed[index[tuple(int(k) for k in final)]] += 1
    assert chi_square_p(observed, np.array([exact[z] for z in outcomes])) > MIN_P_VALUE


# ----------------------------------------------------------------------------- counts and determinism


@pytest.mark.parametrize("n_topics", [1, 3, 40])
@pytest.mark.parametrize("init", ["random", "sequential", "scvb0"])
def test_counts_equal_recount_after_every_sweep(n_topics: int, init: str) -> None:
    block = random_block(20, 60, seed=5, mean_len=15, empty_rows=(3, 11), max_count=6)
    params = GibbsParams(n_topics=n_topics, doc_topic_prior=0.2, topic_word_prior=0.02, seed=7)
    state = initial_state(block, params, init=init)  # type: ignore[arg-type]
    _assert_counts_consistent(state)
    for sweep in range(1, 9):
        state = run_sweeps(state, params, 1)
        assert state.sweeps_done == sweep
        _assert_counts_consistent(state)


def test_random_start_matches_reference() -> None:
    block = random_block(15, 40, seed=3, first_doc=21)
    params = GibbsParams(n_topics=7, seed=11)
    state = initial_state(block, params)
    token_indptr, token_terms = expand_tokens(block)
    assert_array_equal(state.topics, ref.random_topics(token_indptr, 7, 11, 21))
    assert state.first_doc == 21 and state.sweeps_done == 0
    assert_array_equal(state.token_terms, np.repeat(block.term_ids, block.counts))


def test_random_start_of_a_concatenation_is_the_concatenation() -> None:
    block = random_block(30, 50, seed=8, first_doc=100)
    params = GibbsParams(n_topics=9, seed=4)
    whole = initial_state(block, params)
    parts = [initial_state(block.slice(lo, hi), params) for lo, hi in ((0, 7), (7, 19), (19, 30))]
    assert_array_equal(whole.topics, np.concatenate([p.topics for p in parts]))
    assert_array_equal(whole.doc_topic_counts, np.vstack([p.doc_topic_counts for p in parts]))
    assert_array_equal(whole.term_topic_counts, sum(p.term_topic_counts for p in parts))
    rejoined = concat_blocks([block.slice(0, 13), block.slice(13, 30)])
    assert_array_equal(initial_state(rejoined, params).topics, whole.topics)


@pytest.mark.parametrize("init", ["random", "sequential", "scvb0"])
def test_same_seed_same_chain(init: str) -> None:
    block = random_block(25, 40, seed=6, mean_len=10)
    params = GibbsParams(n_topics=6, doc_topic_prior=0.1, topic_word_prior=0.05, seed=3)
    runs = [run_sweeps(initial_state(block, params, init=init), params, 12,  # type: ignore[arg-type]
                       optimize_every=4, burn_in=3) for _ in range(2)]
    assert_array_equal(runs[0].topics, runs[1].topics)
    assert_array_equal(runs[0].doc_topic_prior, runs[1].doc_topic_prior)
    other_start = initial_state(block, GibbsParams(6, 0.1, 0.05, seed=4), init=init)  # type: ignore[arg-type]
    other = run_sweeps(other_start, params, 12)
    assert not np.array_equal(other.topics, runs[0].topics)


def test_chain_run_in_pieces_equals_chain_run_at_once() -> None:
    """Sweep numbers (and the optimization schedule) are global to the chain, not to the call."""
    block = random_block(25, 40, seed=12, mean_len=10)
    params = GibbsParams(n_topics=5, doc_topic_prior=0.2, topic_word_prior=0.05, seed=8)
    start = initial_state(block, params)
    at_once = run_sweeps(start, params, 11, optimize_every=3, burn_in=2)
    pieces = run_sweeps(run_sweeps(run_sweeps(start, params, 4, optimize_every=3, burn_in=2), params, 1,
                                   optimize_every=3, burn_in=2), params, 6, optimize_every=3, burn_in=2)
    assert pieces.sweeps_done == at_once.sweeps_done == 11
    assert_array_equal(pieces.topics, at_once.topics)
    assert_array_equal(pieces.doc_topic_prior, at_once.doc_topic_prior)
    assert pieces.topic_word_prior == at_once.topic_word_prior
    assert not np.array_equal(at_once.doc_topic_prior, params.alpha)


def test_on_sweep_snapshots_are_the_chain_run_one_sweep_at_a_time() -> None:
    block = random_block(25, 40, seed=12, mean_len=10)
    params = GibbsParams(n_topics=5, doc_topic_prior=0.2, topic_word_prior=0.05, seed=8)
    state = initial_state(block, params)
    seen: list[GibbsState] = []
    final = run_sweeps(state, params, 5, optimize_every=2, burn_in=1, on_sweep=lambda snap: seen.append(
        GibbsState(snap.token_indptr, snap.token_terms, snap.topics.copy(), snap.doc_topic_counts.copy(),
                   snap.term_topic_counts, snap.topic_counts.copy(), snap.first_doc, snap.doc_topic_prior,
                   snap.topic_word_prior, snap.sweeps_done)))
    assert [snap.sweeps_done for snap in seen] == [1, 2, 3, 4, 5]
    for snap in seen:
        state = run_sweeps(state, params, 1, optimize_every=2, burn_in=1)
        for name in ("topics", "doc_topic_counts", "term_topic_counts", "topic_counts", "doc_topic_prior"):
            assert_array_equal(getattr(snap, name), getattr(state, name))
        assert snap.topic_word_prior == state.topic_word_prior
    assert_array_equal(final.topics, seen[-1].topics)


def test_inputs_are_not_modified() -> None:
    block = random_block(10, 20, seed=2)
    params = GibbsParams(n_topics=4)
    state = initial_state(block, params)
    copies = {name: getattr(state, name).copy() for name in ("topics", "doc_topic_counts", "term_topic_counts",
                                                             "topic_counts", "doc_topic_prior")}
    run_sweeps(state, params, 3, optimize_every=1)
    for name, value in copies.items():
        assert_array_equal(getattr(state, name), value)


def test_int64_packed_lists_give_the_same_chain() -> None:
    """The wide packing (used when a term is frequent enough to overflow int32) samples identically."""
    block = random_block(20, 30, seed=13, mean_len=12)
    params = GibbsParams(n_topics=6, seed=5)
    state = run_sweeps(initial_state(block, params), params, 2)
    chains = []
    for dtype in (np.int32, np.int64):
        lists = gl._word_lists(state.term_topic_counts, state.token_terms, 6, dtype=dtype)
        topics, doc_topic, topic_counts = state.topics.copy(), state.doc_topic_counts.copy(), state.topic_counts.copy()
        for sweep in range(3, 6):
            gl._run_sweep(state.token_indptr, state.token_terms, topics, doc_topic, topic_counts, lists,
                          params.alpha, 0.01, 5, sweep, 0, False)
        chains.append(topics)
        assert lists.packed.dtype == dtype
    assert_array_equal(chains[0], chains[1])
    assert_array_equal(chains[0], run_sweeps(state, params, 3).topics)


def test_word_lists_hold_the_nonzero_counts_in_decreasing_order() -> None:
    """Short lists (insertion sort) and long ones (NumPy's sort) alike, with their sizes."""
    rng = np.random.default_rng(3)
    term_topic = (rng.poisson(3.0, size=(5, 40)) * (rng.random((5, 40)) < np.linspace(0.1, 1, 5)[:, None])).astype(
        np.int32)
    token_terms = np.repeat(np.arange(5, dtype=np.int32), term_topic.sum(axis=1))
    lists = gl._word_lists(term_topic, token_terms, 40)
    for w in range(5):
        rows = np.flatnonzero(term_topic[w])
        expected = np.sort((term_topic[w, rows].astype(np.int64) << lists.shift) | rows)[::-1]
        entries = lists.packed[lists.starts[w]:lists.starts[w] + lists.lengths[w]]
        assert_array_equal(entries, expected)
    assert lists.lengths.max() > gl._INSERTION_SORT_MAX >= lists.lengths.min()
    assert_array_equal(gl._term_topic_from_lists(lists, 5, 40), term_topic)


def test_incremental_caches_match_recomputation() -> None:
    """After a sweep, s, its block sums, 1/(n_k + V beta) and the coefficients (updated or restored
    token by token) equal their values recomputed from the final counts."""
    block = random_block(30, 25, seed=20, mean_len=20, max_count=5)
    params = GibbsParams(n_topics=70, doc_topic_prior=np.linspace(0.2, 2.0, 70), topic_word_prior=0.5, seed=3)
    state = run_sweeps(initial_state(block, params), params, 2)
    lists = gl._word_lists(state.term_topic_counts, state.token_terms, 70)
    topics, doc_topic, topic_counts = state.topics.copy(), state.doc_topic_counts.copy(), state.topic_counts.copy()
    inv_denom, coef, s_block = np.empty(70), np.empty(70), np.empty(3)
    ptr = state.token_indptr
    s = gl._sweep(ptr[:-1], ptr[1:], ptr[:-1], ptr[1:], state.token_terms, topics, doc_topic, topic_counts,
                  lists.starts, lists.lengths,
                  lists.packed, lists.shift, params.alpha, 0.5, 25 * 0.5, 3, 3, 0, False, np.zeros(70),
                  np.zeros(26, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), inv_denom, coef, s_block,
                  np.empty(70, dtype=np.int64), np.empty(70, dtype=np.int64), np.empty(70), np.empty(70))
    assert not np.array_equal(topics, state.topics)
    inv = 1.0 / (topic_counts + 25 * 0.5)
    terms = params.alpha * 0.5 * inv
    assert_allclose(inv_denom, inv, rtol=1e-15)
    assert_allclose(coef, params.alpha * inv, rtol=1e-15)
    assert_allclose(s, terms.sum(), rtol=1e-12)
    assert_allclose(s_block, [terms[:32].sum(), terms[32:64].sum(), terms[64:].sum()], rtol=1e-12)


# ----------------------------------------------------------------------------- likelihood, phi, hyperparameters


@pytest.mark.parametrize("alpha", [0.1, np.array([0.2, 0.05, 0.9, 0.3])])
def test_joint_log_likelihood_and_phi_match_reference(alpha: float | np.ndarray) -> None:
    block = random_block(18, 35, seed=14, empty_rows=(2,))
    params = GibbsParams(n_topics=4, doc_topic_prior=alpha, topic_word_prior=0.07)
    state = run_sweeps(initial_state(block, params), params, 4)
    expected = ref.joint_log_likelihood(state.doc_topic_counts, state.term_topic_counts, params.alpha, 0.07)
    assert_allclose(joint_log_likelihood(state), expected, rtol=1e-12)
    phi = topic_word_distribution(state)
    assert phi.shape == (4, 35)
    assert_allclose(phi, ref.topic_word(state.term_topic_counts, 0.07), rtol=1e-14)
    assert_allclose(phi.sum(axis=1), 1.0, rtol=1e-12)


def test_fixed_points_match_reference() -> None:
    block = random_block(40, 60, seed=15, mean_len=20, empty_rows=(5,))
    params = GibbsParams(n_topics=5, doc_topic_prior=np.array([0.3, 0.1, 0.5, 0.2, 0.4]), topic_word_prior=0.1)
    state = run_sweeps(initial_state(block, params), params, 10)
    alpha, beta = optimize_hyperparameters(state)
    assert_allclose(alpha, ref.alpha_fixed_point(state.doc_topic_counts, params.alpha), rtol=1e-6)
    assert_allclose(beta, ref.beta_fixed_point(state.term_topic_counts, 0.1), rtol=1e-6)


def test_optimization_moves_toward_true_hyperparameters() -> None:
    """Known asymmetric alpha and topics drawn from Dirichlet(0.05): each within 25% after 300 sweeps."""
    alpha_true = np.array([0.1, 0.2, 0.4, 0.8])
    planted = draw_planted_corpus(n_docs=600, n_topics=4, n_terms=200, doc_length=80, alpha=alpha_true, seed=5,
                                  block_topics=False)
    block = block_from_csr(planted.counts["default"])
    params = GibbsParams(n_topics=4, doc_topic_prior=0.5, topic_word_prior=0.5, seed=2)
    state = run_sweeps(initial_state(block, params), params, 300, optimize_every=10, burn_in=50)
    match = match_topics(topic_word_distribution(state), planted.topic_word["default"])
    assert match.distances.max() < 0.15
    assert_allclose(state.doc_topic_prior[match.estimated], alpha_true[match.true], rtol=0.25)
    assert abs(state.topic_word_prior - 0.05) < 0.25 * 0.05
    assert abs(state.topic_word_prior - 0.05) < abs(0.5 - 0.05)


# ----------------------------------------------------------------------------- planted topics


def test_recovers_planted_topics() -> None:
    """5 block topics over 50 terms, 400 documents: worst matched Hellinger distance below 0.1."""
    planted = draw_planted_corpus(n_docs=400, n_topics=5, n_terms=50, doc_length=40, alpha=0.3, seed=3)
    block = block_from_csr(planted.counts["default"])
    params = GibbsParams(n_topics=5, doc_topic_prior=0.3, topic_word_prior=0.05, seed=1)
    start = initial_state(block, params)
    state = run_sweeps(start, params, 200)
    assert worst_matched_distance(topic_word_distribution(state), planted.topic_word["default"]) < 0.1
    assert joint_log_likelihood(state) > joint_log_likelihood(start) + 0.5 * block.n_tokens


def test_sequential_start_beats_random_start() -> None:
    planted = draw_planted_corpus(n_docs=200, n_topics=4, n_terms=40, doc_length=30, alpha=0.2, seed=6)
    block = block_from_csr(planted.counts["default"])
    params = GibbsParams(n_topics=4, doc_topic_prior=0.2, topic_word_prior=0.05)
    sequential = initial_state(block, params, init="sequential")
    _assert_counts_consistent(sequential)
    assert joint_log_likelihood(sequential) > joint_log_likelihood(initial_state(block, params))


# ----------------------------------------------------------------------------- fold-in


@pytest.mark.parametrize("n_topics", [1, 4, 70])
def test_fold_in_matches_reference(n_topics: int) -> None:
    block = random_block(12, 30, seed=16, mean_len=10, empty_rows=(4,), first_doc=9)
    phi = np.random.default_rng(0).dirichlet(np.full(30, 0.3), size=n_topics)
    phi[:, 7] = 0.0  # a term no topic uses: the draw falls back as documented
    alpha = np.linspace(0.05, 0.5, n_topics)
    out = fold_in(block, phi, alpha, n_sweeps=5, seed=3)
    token_indptr, token_terms = expand_tokens(block)
    assert out.dtype == np.int32 and out.shape == (12, n_topics)
    assert_array_equal(out, ref.fold_in(token_indptr, token_terms, phi, alpha, seed=3, first_doc=9, n_sweeps=5))
    assert_array_equal(out.sum(axis=1), block.doc_lengths())


def test_fold_in_does_not_depend_on_the_split() -> None:
    block = random_block(20, 30, seed=17, mean_len=10, first_doc=50)
    phi = np.random.default_rng(1).dirichlet(np.full(30, 0.5), size=6)
    whole = fold_in(block, phi, 0.1, seed=2)
    parts = [fold_in(block.slice(lo, hi), phi, 0.1, seed=2) for lo, hi in ((0, 9), (9, 20))]
    assert_array_equal(whole, np.vstack(parts))
    start = fold_in(block, phi, 0.1, n_sweeps=0, seed=2)
    assert not np.array_equal(start, whole)


def test_fold_in_finds_dominant_planted_topics() -> None:
    planted = draw_planted_corpus(n_docs=200, n_topics=5, n_terms=50, doc_length=40, alpha=0.1, seed=7)
    block = block_from_csr(planted.counts["default"])
    counts = fold_in(block, planted.topic_word["default"], 0.1, n_sweeps=5, seed=0)
    assert np.mean(counts.argmax(axis=1) == planted.doc_topic.argmax(axis=1)) > 0.85


# ----------------------------------------------------------------------------- edge cases and validation


def test_one_topic_puts_every_token_in_it() -> None:
    block = random_block(8, 12, seed=18, empty_rows=(0,))
    params = GibbsParams(n_topics=1, doc_topic_prior=0.5, topic_word_prior=0.1)
    for init in ("random", "sequential", "scvb0"):
        start = initial_state(block, params, init=init)  # type: ignore[arg-type]
        state = run_sweeps(start, params, 3, optimize_every=1)
        assert np.all(state.topics == 0)
        assert state.topic_counts.tolist() == [block.n_tokens]
        assert_allclose(joint_log_likelihood(state), ref.joint_log_likelihood(
            state.doc_topic_counts, state.term_topic_counts, state.doc_topic_prior, state.topic_word_prior), rtol=1e-12)
    assert_array_equal(fold_in(block, np.full((1, 12), 1 / 12), 0.5), block.doc_lengths()[:, None])


def test_empty_and_one_token_documents() -> None:
    dense = np.zeros((4, 5), dtype=np.int64)
    dense[1, 3] = 1
    dense[3, [0, 4]] = [2, 1]
    block = block_from_csr(sp.csr_matrix(dense), first_doc=3)
    params = GibbsParams(n_topics=3, seed=1)
    state = run_sweeps(initial_state(block, params, init="sequential"), params, 4, optimize_every=2)
    _assert_counts_consistent(state)
    assert state.token_indptr.tolist() == [0, 0, 1, 1, 4]
    assert state.doc_topic_counts[[0, 2]].sum() == 0 and state.doc_topic_counts[1].sum() == 1
    assert np.isfinite(joint_log_likelihood(state))
    assert np.all(state.doc_topic_prior > 0) and state.topic_word_prior > 0
    folded = fold_in(block, topic_word_distribution(state), state.doc_topic_prior)
    assert folded.sum(axis=1).tolist() == [0, 1, 0, 3]


def test_empty_block() -> None:
    block = block_from_csr(sp.csr_matrix((0, 4), dtype=np.int64))
    params = GibbsParams(n_topics=2)
    state = run_sweeps(initial_state(block, params), params, 2, optimize_every=1)
    assert state.n_tokens == 0 and state.doc_topic_counts.shape == (0, 2)
    assert joint_log_likelihood(state) == 0.0
    assert fold_in(block, np.full((2, 4), 0.25), 0.1).shape == (0, 2)


@pytest.mark.parametrize("kwargs", [
    {"n_topics": 0}, {"n_topics": 2.0}, {"n_topics": True}, {"n_topics": 2, "seed": -1},
    {"n_topics": 2, "doc_topic_prior": 0.0}, {"n_topics": 2, "doc_topic_prior": [0.1, 0.2, 0.3]},
    {"n_topics": 2, "doc_topic_prior": [0.1, np.nan]}, {"n_topics": 2, "topic_word_prior": -0.1},
    {"n_topics": 2, "topic_word_prior": np.inf},
])
def test_params_validation(kwargs: dict) -> None:
    with pytest.raises(InvalidParameterError):
        GibbsParams(**kwargs)


def test_params_keep_the_prior_shape() -> None:
    assert GibbsParams(3, doc_topic_prior=0.2).doc_topic_prior == 0.2
    assert_array_equal(GibbsParams(2, doc_topic_prior=[0.1, 0.3]).alpha, [0.1, 0.3])


def test_call_validation() -> None:
    block = random_block(5, 10, seed=19)
    params = GibbsParams(n_topics=3)
    state = initial_state(block, params)
    with pytest.raises(InvalidParameterError, match="init"):
        initial_state(block, params, init="uniform")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="n_topics"):
        run_sweeps(state, GibbsParams(n_topics=4), 1)
    with pytest.raises(InvalidParameterError, match="n_sweeps"):
        run_sweeps(state, params, -1)
    with pytest.raises(InvalidParameterError, match="token"):
        token_buckets(state, state.n_tokens)
    with pytest.raises(InvalidParameterError, match="topic_word"):
        fold_in(block, np.ones((3, 9)), 0.1)
    with pytest.raises(NumericalError, match="negative or non-finite"):
        fold_in(block, np.full((3, 10), -1.0), 0.1)
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        fold_in(block, np.ones((3, 10)), np.ones(2))
    with pytest.raises(InvalidParameterError, match="topics"):
        state_from_topics(state.token_indptr, state.token_terms, state.topics + 3, 10, params)


def test_state_validation_and_params_round_trip() -> None:
    block = random_block(5, 10, seed=21)
    params = GibbsParams(n_topics=3, doc_topic_prior=[0.1, 0.2, 0.3], topic_word_prior=0.05, seed=9)
    state = initial_state(block, params)
    assert GibbsParams.from_dict(params.to_dict()).to_dict() == params.to_dict()
    assert GibbsParams.from_dict(GibbsParams(2).to_dict()) == GibbsParams(2)
    fields = {name: getattr(state, name) for name in GibbsState.__dataclass_fields__}
    widened = GibbsState(**{**fields, "topics": state.topics.astype(np.int64)})
    assert widened.topics.dtype == np.int32
    for change in ({"topics": state.topics[:-1]}, {"doc_topic_counts": state.doc_topic_counts[:, :2]},
                   {"doc_topic_prior": np.ones(4)}, {"topic_word_prior": 0.0}, {"sweeps_done": -1}):
        with pytest.raises(InvalidParameterError):
            GibbsState(**{**fields, **change})
