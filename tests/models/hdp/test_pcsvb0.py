"""PCSVB0 (Bleier Algorithm 1): the numba kernels against the literal NumPy transcription, and its invariants."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from tests.reference import collapsed_vb as ref
from tests.reference.corpora import random_block
from topicflow.errors import InvalidParameterError
from topicflow.models.common.cvb0 import CVB0Stats, start_doc_topic, word_by_word_doc
from topicflow.models.common.step_sizes import PowerStep
from topicflow.models.hdp import pcsvb0
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.models.hdp.sticks import expected_tables
from topicflow.models.lda import scvb0

T = 8
V = 40
RTOL = 1e-10


@pytest.fixture(scope="module")
def block():
    """About 20 documents of 5-40 tokens with repeated terms (so clumping matters)."""
    return random_block(20, V, seed=3, mean_len=8, max_count=4)


def fresh(block, params, n_terms=V):
    return HDPState.initial(params, n_terms=n_terms, n_tokens=block.n_tokens, n_docs=block.n_docs)


def assert_state_matches(state, dense):
    np.testing.assert_allclose(state.topic_word_counts(), dense.n_kw, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(state.topic_sums(), dense.n_k, rtol=RTOL)
    np.testing.assert_allclose(state.tables, dense.tables, rtol=RTOL, atol=1e-12 * state.n_docs)
    assert state.alpha == pytest.approx(dense.alpha, rel=RTOL)
    assert state.gamma == pytest.approx(dense.gamma, rel=RTOL)
    assert state.t_topic_word == dense.t_c and state.t_hyper == dense.t_h


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"clumping": True},
        {"burn_in": 1},
        {"doc_start": "zero"},
        {"burn_in": 2, "clumping": True, "doc_start": "zero"},
        {"learn_alpha": False},
        {"truncation": 2},
    ],
    ids=["paper", "clumped", "burn-in", "zero-start", "clumped-burn-in-2", "fixed-alpha", "T=2"],
)
def test_word_by_word_matches_numpy_transcription_over_three_passes(block, changes):
    params = dataclasses.replace(HDPParams(truncation=T, seed=5), **changes)
    state = fresh(block, params)
    dense = ref.DenseCollapsed.from_state(state)
    starts = start_doc_topic(block, params.truncation, doc_start=params.doc_start, seed=params.seed)
    for _ in range(3):
        result = pcsvb0.run_word_by_word(state, block, params)
        ref.pcsvb0_pass(dense, block, params, starts=starts)
        assert_state_matches(state, dense)
    assert result.n_docs == block.n_docs and result.n_tokens == block.n_tokens
    assert state.docs_seen == 3 * block.n_docs and state.tokens_seen == 3 * block.n_tokens
    assert result.table_sum == pytest.approx(float(np.sum(dense.doc_tables[-block.n_docs:])), rel=RTOL)


def test_empty_documents_use_no_tables_and_leave_alpha_alone():
    """An empty document: E[1(n_dk >= 1)] = 0 (tables decay toward 0 for it, as eq. 10 says), and eq. 12,
    0/0 there, is skipped. Kernel and transcription agree on a block with two empty documents."""
    holes = random_block(12, V, seed=4, mean_len=6, empty_rows=(2, 7))
    params = HDPParams(truncation=T, seed=3)
    state = fresh(holes, params)
    dense = ref.DenseCollapsed.from_state(state)
    starts = start_doc_topic(holes, T, doc_start="random", seed=3)
    for _ in range(2):
        pcsvb0.run_word_by_word(state, holes, params)
        ref.pcsvb0_pass(dense, holes, params, starts=starts)
        assert_state_matches(state, dense)
    assert np.all(dense.doc_tables[2] == 0) and np.isfinite(state.alpha)
    stats = pcsvb0.local_minibatch(pcsvb0.global_view(state), holes.slice(2, 3), params)
    assert stats.n_tokens == 0 and np.all(stats.table_sums == 0) and stats.digamma_sum == 0


def test_keep_doc_state_carries_each_documents_counts_between_passes(block):
    params = HDPParams(truncation=T, seed=2, keep_doc_state=True)
    state = fresh(block, params)
    dense = ref.DenseCollapsed.from_state(state)
    doc_topic = start_doc_topic(block, T, doc_start="random", seed=2)
    starts = doc_topic.copy()
    for _ in range(3):
        pcsvb0.run_word_by_word(state, block, params, doc_topic=doc_topic)
        starts = ref.pcsvb0_pass(dense, block, params, starts=starts)
        np.testing.assert_allclose(doc_topic, starts, rtol=RTOL)
        assert_state_matches(state, dense)


def test_lazy_scale_fold_below_1e_100_matches_dense_decay(block):
    """Start with scale 1e-99: the first token folds the scale into the counts (spec P1)."""
    params = HDPParams(truncation=T, seed=1)
    state = fresh(block, params)
    dense = ref.DenseCollapsed.from_state(state)
    state.topic_word /= 1e-99
    state.topic_totals /= 1e-99
    state.scale = 1e-99
    starts = start_doc_topic(block, T, doc_start="random", seed=1)
    pcsvb0.run_word_by_word(state, block, params)
    ref.pcsvb0_pass(dense, block, params, starts=starts)
    assert 1e-100 < state.scale < 1.0  # folded once, then decayed again
    assert_state_matches(state, dense)


def test_expected_tables_from_log1p_equal_one_minus_product():
    rng = np.random.default_rng(0)
    n_topics, n_terms = 6, 12
    topic_word = rng.gamma(1.0, 1.0, size=(n_topics, n_terms)) * 5
    totals = topic_word.sum(axis=1)
    dense = ref.DenseCollapsed(n_kw=topic_word.copy(), n_k=totals.copy(), tables=np.zeros(n_topics), alpha=1.0,
                               gamma=1.0, beta=0.01, n_tokens=300, n_docs=10)
    terms = np.array([0, 3, 4, 9], dtype=np.int64)
    counts = np.array([3, 1, 5, 2], dtype=np.int32)
    prior = np.full(n_topics, 0.2)
    step_c, step_d = np.array([10.0, 1000.0, 0.9]), np.array([1.0, 10.0, 0.9])
    log_miss = np.zeros(n_topics)
    work = np.ascontiguousarray(topic_word[:, terms].T)
    word_by_word_doc(np.arange(4, dtype=np.int64), counts, float(counts.sum()), np.zeros(n_topics), prior, work,
                     totals.copy(), topic_word.copy(), 1.0, 0.01, 300.0, 0, step_c, step_d, 0, False, log_miss)
    n_dk = np.zeros(n_topics)
    params = HDPParams(truncation=n_topics)
    qs = []
    for w, c in zip(terms.tolist(), counts.tolist()):
        for _ in range(c):
            q = dense.q_of(n_dk, prior, w)
            r = ref.rho(params.doc_step, len(qs))
            n_dk = (1 - r) * n_dk + r * counts.sum() * q
            rc = ref.rho(params.topic_word_step, len(qs))
            dense.n_kw *= 1 - rc
            dense.n_kw[:, w] += rc * 300 * q
            dense.n_k = (1 - rc) * dense.n_k + rc * 300 * q
            qs.append(q)
    direct = 1.0 - np.prod(1.0 - np.array(qs), axis=0)
    np.testing.assert_allclose(expected_tables(log_miss), direct, rtol=1e-12, atol=1e-15)
    assert np.all((direct > 0) & (direct < 1))


def test_stick_weights_sum_to_one_after_every_document_and_rows_never_move(block):
    params = HDPParams(truncation=T, seed=4)
    state = fresh(block, params)
    rows_before = state.topic_word_counts()
    orders = []
    for d in range(block.n_docs):
        pcsvb0.run_word_by_word(state, block.slice(d, d + 1), params)
        pi = state.stick_weights()
        assert pi.sum() == pytest.approx(1.0, abs=1e-12) and np.all(pi >= 0)
        order = state.stick_order()
        assert np.all(np.diff(state.tables[order]) <= 0)          # sticks sorted by a_k, non-increasing
        assert sorted(order.tolist()) == list(range(T))
        orders.append(order)
    assert any(not np.array_equal(o, np.arange(T)) for o in orders)  # the sort did reorder at some point
    # Rows are physical topics: the block run equals the per-document run (test above: equals the
    # reference that never moves a row); a row whose topic got no mass has only decayed.
    decay = state.topic_word_counts() / rows_before
    assert np.all(np.isfinite(decay))


def test_frozen_prior_is_scvb0_with_prior_alpha_pi(block):
    """rho^h = 0: tables, alpha, gamma never change and the token updates are SCVB0's with prior alpha * pi."""
    params = HDPParams(truncation=T, seed=6, learn_alpha=False, learn_gamma=False, alpha_init=0.7, gamma_init=1.5)
    state = fresh(block, params)
    state.tables = np.linspace(5.0, 0.0, T)[::-1].copy()     # a non-trivial, unsorted prior
    other = state.copy()
    prior = state.doc_topic_prior()
    for _ in range(3):
        pcsvb0.run_word_by_word(state, block, params, learn_tables=False)
        scvb0.run_word_by_word(other, block, params)   # an HDPState: its prior is alpha * pi
    np.testing.assert_array_equal(state.tables, np.linspace(5.0, 0.0, T)[::-1])
    assert (state.alpha, state.gamma) == (0.7, 1.5)
    np.testing.assert_array_equal(state.doc_topic_prior(), prior)
    np.testing.assert_array_equal(state.topic_word_counts(), other.topic_word_counts())
    # and both equal the SCVB0 transcription with that prior vector
    dense = ref.DenseCollapsed.from_state(fresh(block, params))
    starts = start_doc_topic(block, T, doc_start="random", seed=6)
    for _ in range(3):
        ref.pcsvb0_pass(dense, block, params, starts=starts, prior_fixed=prior)
    np.testing.assert_allclose(state.topic_word_counts(), dense.n_kw, rtol=RTOL, atol=1e-12)


def test_deterministic_given_seed(block):
    params = HDPParams(truncation=T, seed=9)
    runs = []
    for seed in (9, 9, 10):
        p = dataclasses.replace(params, seed=seed)
        state = fresh(block, p)
        pcsvb0.run_word_by_word(state, block, p)
        runs.append(state)
    np.testing.assert_array_equal(runs[0].topic_word_counts(), runs[1].topic_word_counts())
    assert runs[0].alpha == runs[1].alpha and runs[0].gamma == runs[1].gamma
    assert not np.allclose(runs[0].topic_word_counts(), runs[2].topic_word_counts())


def test_random_start_depends_on_the_global_document_only(block):
    whole = start_doc_topic(block, T, doc_start="random", seed=1)
    parts = np.vstack([start_doc_topic(block.slice(a, b), T, doc_start="random", seed=1)
                       for a, b in ((0, 7), (7, 20))])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_allclose(whole.sum(axis=1), block.doc_lengths(), rtol=1e-12)
    assert np.all(start_doc_topic(block, T, doc_start="zero", seed=1) == 0)


@pytest.mark.parametrize("changes", [{}, {"clumping": True, "burn_in": 1}], ids=["plain", "clumped-burn-in"])
def test_minibatch_matches_numpy_transcription_over_three_passes(block, changes):
    params = dataclasses.replace(HDPParams(truncation=T, seed=3), **changes)
    state = fresh(block, params)
    dense = ref.DenseCollapsed.from_state(state)
    starts = start_doc_topic(block, T, doc_start="random", seed=3)
    batches = [(0, 6), (6, 13), (13, 20)]
    for _ in range(3):
        for a, b in batches:
            part = block.slice(a, b)
            view = pcsvb0.global_view(state)
            prior = state.doc_topic_prior()
            stats = pcsvb0.local_minibatch(view, part, params)
            sums, tables, dig, _ = ref.minibatch_local(dense, part, params, starts=starts[a:b], prior=prior)
            dense_stats = np.zeros((T, V))
            dense_stats[:, stats.terms] = stats.topic_word
            np.testing.assert_allclose(dense_stats, sums, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(stats.table_sums, tables, rtol=1e-12)
            assert stats.digamma_sum == pytest.approx(dig, rel=1e-12)
            pcsvb0.apply_minibatch(state, stats, params)
            ref.minibatch_apply(dense, sums, tables, dig, part.n_docs, part.n_tokens, params)
            assert_state_matches(state, dense)


@pytest.mark.parametrize("n_parts", [2, 4])
def test_minibatch_statistics_do_not_depend_on_the_split(block, n_parts):
    params = HDPParams(truncation=T, seed=8, burn_in=1)
    state = fresh(block, params)
    pcsvb0.run_word_by_word(state, block, params)
    view = pcsvb0.global_view(state)
    whole = pcsvb0.local_minibatch(view, block, params)
    edges = np.linspace(0, block.n_docs, n_parts + 1).astype(int)
    parts = [pcsvb0.local_minibatch(view, block.slice(a, b), params) for a, b in itertools.pairwise(edges)]
    merged = CVB0Stats.merge_all(parts, T)
    np.testing.assert_array_equal(merged.terms, whole.terms)
    # The same sums in another order of addition: equal to rounding (a few ulps of each entry).
    np.testing.assert_allclose(merged.topic_word, whole.topic_word, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(merged.table_sums, whole.table_sums, rtol=1e-13)
    assert merged.digamma_sum == pytest.approx(whole.digamma_sum, rel=1e-13)
    assert (merged.n_docs, merged.n_tokens) == (whole.n_docs, whole.n_tokens)
    # merge is associative (up to rounding), zeros is its identity
    left = parts[0].merge(parts[1]).merge(parts[-1])
    right = parts[0].merge(parts[1].merge(parts[-1]))
    np.testing.assert_allclose(left.topic_word, right.topic_word, rtol=1e-13)
    same = CVB0Stats.zeros(T).merge(whole)
    np.testing.assert_array_equal(same.topic_word, whole.topic_word)
    # a view restricted to the block's terms gives the same statistics
    narrow = pcsvb0.global_view(state, terms=whole.terms)
    np.testing.assert_array_equal(pcsvb0.local_minibatch(narrow, block, params).topic_word, whole.topic_word)


def test_clumped_differs_from_word_by_word_by_a_small_bounded_amount():
    """Clumping holds q fixed over a term's c copies, where word by word lets n_dk move between them.

    Between two copies of a term n_dk moves by rho^d_t (n_d q - n_dk) (eq. 8), so q changes by O(rho^d):
    a perturbation of the same kind as the method's own stochastic noise, not a different fixed point.
    On planted data (5 block topics, 82% of entries with count > 1) both runs recover the topics
    (worst Hellinger < 0.2; measured 0.13 and 0.11), and the two runs' estimates of each planted topic
    are within Hellinger 0.2 of each other (measured 0.03-0.11, the size of each run's own error;
    the triangle inequality allows 0.4). Documents whose terms all have count 1 give identical updates.
    """
    from tests.reference.corpora import lda_block
    from topicflow.metrics.recovery import hellinger, match_topics
    from topicflow.models.lda.synth import block_topic_word

    truth = block_topic_word(5, 50, background=1e-3)
    planted = lda_block(300, truth, 0.05, seed=1, doc_len=60)
    estimates = {}
    for clumping in (False, True):
        params = HDPParams(truncation=10, seed=11, clumping=clumping, doc_start="zero", burn_in=1)
        state = fresh(planted, params, n_terms=50)
        for _ in range(5):
            pcsvb0.run_word_by_word(state, planted, params)
        lam = state.topic_word_counts() + state.beta
        topics = lam / lam.sum(axis=1, keepdims=True)
        match = match_topics(topics, truth)
        assert match.worst < 0.2
        estimates[clumping] = topics[match.estimated]
    assert np.diag(hellinger(estimates[False], estimates[True])).max() < 0.2


def test_clumped_equals_word_by_word_when_every_count_is_one(block):
    params = HDPParams(truncation=T, seed=11)
    ones = dataclasses.replace(block, counts=np.ones_like(block.counts))
    a, b = fresh(ones, params), fresh(ones, params)
    pcsvb0.run_word_by_word(a, ones, params)
    pcsvb0.run_word_by_word(b, ones, dataclasses.replace(params, clumping=True))
    np.testing.assert_array_equal(a.topic_word_counts(), b.topic_word_counts())
    assert (a.alpha, a.gamma) == (b.alpha, b.gamma)


def test_alpha_floor_holds_for_one_token_documents():
    from tests.reference.corpora import random_block as rb

    short = rb(30, 10, seed=0, mean_len=1, max_count=1)
    params = HDPParams(truncation=4, alpha_init=1e-3, alpha_floor=1e-3, hyper_step=PowerStep(1.0, 1.0, 0.9))
    state = HDPState.initial(params, n_terms=10, n_tokens=short.n_tokens, n_docs=short.n_docs)
    pcsvb0.run_word_by_word(state, short, params)
    assert state.alpha >= 1e-3 and np.isfinite(state.gamma)


def test_bad_inputs_raise_clear_errors(block):
    params = HDPParams(truncation=T)
    state = fresh(block, params, n_terms=V + 1)
    with pytest.raises(InvalidParameterError, match="vocabulary of 40 terms but the model has 41"):
        pcsvb0.run_word_by_word(state, block, params)
    state = fresh(block, params)
    with pytest.raises(InvalidParameterError, match="doc_topic must be"):
        pcsvb0.run_word_by_word(state, block, params, doc_topic=np.zeros((3, T)))
    stats = pcsvb0.local_minibatch(pcsvb0.global_view(state), block, params)
    with pytest.raises(InvalidParameterError, match="statistics of 8 topics for a model of 9"):
        pcsvb0.apply_minibatch(fresh(block, HDPParams(truncation=9)), stats, params)
    narrow = pcsvb0.global_view(state, terms=np.array([0, 1]))
    with pytest.raises(InvalidParameterError, match="does not cover every term"):
        pcsvb0.local_minibatch(narrow, block, params)
