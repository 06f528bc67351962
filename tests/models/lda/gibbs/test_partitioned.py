"""Tests of topicflow.models.lda.gibbs.partitioned: partitioned sweeps of the in-memory sampler.

* One sweep follows the exact transition law of the partitioned scheme (enumeration in
  tests/reference/partitioned_numpy.py, n_k stale within an epoch), which differs from the sequential law.
* The chain depends on the number of parts, never on the threads; one part is the sequential sampler.
* The plan: parts balanced by tokens, every token of a document kept in its document.
* On generated data with known topics the partitioned chain recovers them as the sequential one does.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from tests.reference import gibbs_numpy as ref
from tests.reference import partitioned_numpy as pref
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.partitioned import plan_partitions
from topicflow.models.lda.gibbs.scores import joint_log_likelihood
from topicflow.models.lda.gibbs.state import GibbsParams

MIN_P_VALUE = 1e-3


def _tiny_block():
    """Two documents, five tokens over three terms: 2**5 assignments at K = 2."""
    return block_from_csr(sp.csr_matrix(np.array([[2, 1, 0], [0, 1, 1]])))


def test_one_partitioned_sweep_follows_the_exact_transition_law() -> None:
    block = _tiny_block()
    params = GibbsParams(n_topics=2, doc_topic_prior=0.4, topic_word_prior=0.3)
    state = initial_state(block, params)
    plan = plan_partitions(state.token_indptr, state.token_terms, 3, 2)
    assert plan.doc_bounds.tolist() == [0, 1, 2] and plan.word_part.tolist() == [0, 1, 0]
    exact = pref.sweep_transition(state.token_indptr, state.token_terms, state.topics, 3, params.alpha, 0.3,
                                  plan.doc_bounds, plan.word_part)
    sequential = ref.sweep_transition(state.token_indptr, state.token_terms, state.topics, 3, params.alpha, 0.3)
    outcomes = list(exact)
    assert abs(sum(exact.values()) - 1.0) < 1e-12
    assert max(abs(exact[z] - sequential[z]) for z in outcomes) > 1e-3  # a stale n_k changes the law
    index = {z: i for i, z in enumerate(outcomes)}
    observed = np.zeros(len(outcomes))
    for seed in range(4000):
        nxt = run_sweeps(state, GibbsParams(2, 0.4, 0.3, seed=seed), 1, partitions=2).topics
        observed[index[tuple(int(k) for k in nxt)]] += 1
    assert chi_square_p(observed, np.array([exact[z] for z in outcomes])) > MIN_P_VALUE


def _corpus(n_docs: int, n_terms: int, n_topics: int, seed: int) -> tuple[np.ndarray, np.ndarray, object]:
    """Documents drawn from LDA with sparse true topics; returns (true phi, true theta, block)."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_terms, 0.05), size=n_topics)
    theta = rng.dirichlet(np.full(n_topics, 0.2), size=n_docs)
    rows = [np.bincount(rng.choice(n_terms, size=60, p=theta[d] @ phi), minlength=n_terms) for d in range(n_docs)]
    return phi, theta, block_from_csr(sp.csr_matrix(np.array(rows)))


@pytest.mark.parametrize("parts", [2, 3])
def test_the_chain_depends_on_the_parts_not_the_threads(parts: int) -> None:
    _, _, block = _corpus(60, 40, 4, seed=1)
    params = GibbsParams(n_topics=5, doc_topic_prior=0.3, topic_word_prior=0.05, seed=7)
    state = initial_state(block, params)
    one = run_sweeps(state, params, 4, partitions=parts, threads=1)
    for threads in (2, 3, 4):
        other = run_sweeps(state, params, 4, partitions=parts, threads=threads)
        assert_array_equal(other.topics, one.topics)
        assert_array_equal(other.term_topic_counts, one.term_topic_counts)
        assert_array_equal(other.doc_topic_counts, one.doc_topic_counts)
    # in pieces (the callback path too) as at once; the counts those of the assignments
    seen: list[np.ndarray] = []
    pieces = run_sweeps(run_sweeps(state, params, 2, partitions=parts, threads=2), params, 2, partitions=parts,
                        threads=2, on_sweep=lambda s: seen.append(np.array(s.topics)))
    assert_array_equal(pieces.topics, one.topics)
    assert_array_equal(seen[-1], one.topics)
    doc_topic, term_topic, totals = ref.counts_from_topics(state.token_indptr, state.token_terms, one.topics, 40, 5)
    assert_array_equal(one.doc_topic_counts, doc_topic)
    assert_array_equal(one.term_topic_counts, term_topic)
    assert_array_equal(one.topic_counts, totals)
    assert not np.array_equal(one.topics, run_sweeps(state, params, 4).topics)  # P > 1 is another chain
    learned = [run_sweeps(state, params, 6, partitions=parts, threads=t, optimize_every=2) for t in (1, 2)]
    assert_array_equal(learned[0].doc_topic_prior, learned[1].doc_topic_prior)  # Minka's fixed point too
    assert not np.allclose(learned[0].doc_topic_prior, 0.3)
    sequential = run_sweeps(state, params, 4).topics
    assert_array_equal(run_sweeps(state, params, 4, partitions=1, threads=3).topics, sequential)


def test_partitioned_sweeps_with_a_prior_keep_its_rows_with_their_terms() -> None:
    """The sweeps lay the word lists out part by part; a prior's rows must follow their terms: a prior
    that puts all of term w's mass on topic k pulls w's tokens there, on any number of threads."""
    from topicflow.models.lda.gibbs.state import TopicWordPrior

    _, _, block = _corpus(80, 30, 3, seed=4)
    params = GibbsParams(n_topics=3, doc_topic_prior=0.3, topic_word_prior=0.01, seed=1)
    state = initial_state(block, params)
    pseudo = np.zeros((30, 3))
    pseudo[np.arange(30), np.arange(30) % 3] = 1e4  # term w strongly in topic w mod 3
    prior = TopicWordPrior(pseudo, pseudo.sum(axis=0), vocab_size=30)
    runs = [run_sweeps(state, params, 3, prior=prior, partitions=2, threads=t) for t in (1, 2)]
    assert_array_equal(runs[0].topics, runs[1].topics)
    assert (runs[0].topics == state.token_terms % 3).mean() > 0.95
    assert_array_equal(runs[0].term_topic_counts,
                       ref.counts_from_topics(state.token_indptr, state.token_terms, runs[0].topics, 30, 3)[1])


def test_plan_balances_tokens_and_keeps_documents_whole() -> None:
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 30, size=200)
    token_indptr = np.concatenate([[0], np.cumsum(lengths)])
    terms = rng.zipf(1.5, size=int(lengths.sum())) % 300
    plan = plan_partitions(token_indptr, terms, 300, 4)
    vocab = plan.vocabulary_order()
    assert sorted(vocab.tolist()) == list(range(300)) and (np.diff(plan.word_part[vocab]) >= 0).all()
    doc_tokens = np.diff(token_indptr[plan.doc_bounds])
    assert doc_tokens.max() - doc_tokens.min() <= 2 * lengths.max()
    word_tokens = np.bincount(plan.word_part, weights=np.bincount(terms, minlength=300), minlength=4)
    assert word_tokens.max() - word_tokens.min() <= np.bincount(terms).max()
    doc_of = np.repeat(np.arange(200), lengths)
    assert_array_equal(doc_of[plan.order], doc_of)  # a permutation within documents
    assert sorted(plan.order.tolist()) == list(range(int(lengths.sum())))
    for d in range(200):
        for p in range(4):
            run = plan.order[plan.run_lo[p, d]:plan.run_hi[p, d]]
            assert (plan.word_part[terms[run]] == p).all() and (np.diff(run) > 0).all()
    with pytest.raises(InvalidParameterError, match="partitions"):
        plan_partitions(token_indptr, terms, 300, 0)


def test_partitioned_chain_recovers_known_topics() -> None:
    """Generated data: the 2- and 4-part chains find the true topics and reach the sequential chain's fit."""
    phi, _, block = _corpus(300, 60, 4, seed=5)
    params = GibbsParams(n_topics=4, doc_topic_prior=0.2, topic_word_prior=0.05, seed=2)
    state = initial_state(block, params)
    sequential = run_sweeps(state, params, 150)
    base = joint_log_likelihood(sequential) / block.n_tokens
    for parts in (2, 4):
        final = run_sweeps(state, params, 150, partitions=parts, threads=2)
        found = (final.term_topic_counts.T + 0.05) / (final.term_topic_counts.sum(axis=0)[:, None] + 60 * 0.05)
        similarity = np.array([[np.minimum(a, b).sum() for b in phi] for a in found])  # 1 - total variation
        assert similarity.max(axis=0).min() > 0.85
        assert joint_log_likelihood(final) / block.n_tokens > base - 0.02


@pytest.mark.parametrize("rows", [[[3, 0, 1, 0, 0]], [[0, 0, 0, 0, 0], [1, 1, 0, 0, 0]], [[5, 0, 0, 0, 2]] * 3])
def test_more_parts_than_documents_or_words(rows: list[list[int]]) -> None:
    """Empty document or word parts (and empty documents) leave their tasks idle; every token is still
    sampled once per sweep and the counts stay those of the assignments."""
    block = block_from_csr(sp.csr_matrix(np.array(rows)))
    params = GibbsParams(n_topics=3, seed=1)
    state = initial_state(block, params)
    for parts in (2, 4, 7):
        out = run_sweeps(state, params, 3, partitions=parts, threads=2)
        doc_topic, term_topic, totals = ref.counts_from_topics(state.token_indptr, state.token_terms, out.topics, 5, 3)
        assert_array_equal(out.doc_topic_counts, doc_topic)
        assert_array_equal(out.term_topic_counts, term_topic)
        assert_array_equal(out.topic_counts, totals)
