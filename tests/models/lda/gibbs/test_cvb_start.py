"""The SCVB0 start of the Gibbs chain (topicflow.models.lda.gibbs.cvb_start).

Checked four ways:

* the SCVB0 pass (N^theta and N^phi) is the NumPy transcription's (tests/reference/collapsed_vb.py),
  also with an asymmetric alpha and with Foulds' burn-in pass;
* the draw is the NumPy inverse CDF token for token, and over keyed draws it follows q (chi-square,
  independent of the transcription);
* chains that start from it still reach the exact posterior of an enumerable problem
  (tests/models/lda/gibbs/test_gibbs.py, ``test_chains_reach_the_exact_posterior[scvb0]``): the start
  shapes where the chain begins, not where it goes;
* on planted topics it starts closer to them than the random and the sequential start, and the chain
  recovers them within a few sweeps.
"""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import collapsed_vb as ref
from tests.reference import gibbs_numpy as gibbs_ref
from tests.reference.corpora import random_block
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import worst_matched_distance
from topicflow.models.common.blocks import block_from_csr, expand_tokens
from topicflow.models.common.cvb0 import start_doc_topic
from topicflow.models.common.rng import STREAM_GIBBS, uniform_from_key
from topicflow.models.lda import scvb0
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.cvb_start import (
    _draw_topics,
    scvb0_posterior,
)
from topicflow.models.lda.gibbs.scores import (
    joint_log_likelihood,
    topic_word_distribution,
)
from topicflow.models.lda.gibbs.state import GibbsParams, TopicWordPrior
from topicflow.testing.corpora import draw_planted_corpus

K = 5


def _numpy_pass(block, params, burn_in):
    """SCVB0's pass by the NumPy transcription, from the same random starts."""
    settings = scvb0.SCVB0Params(n_topics=params.n_topics, alpha=float(np.mean(params.alpha)),
                                 beta=params.topic_word_prior, burn_in=burn_in, seed=params.seed)
    dense = ref.DenseCollapsed.from_state(scvb0.SCVB0State.initial(
        settings, n_terms=block.n_terms, n_tokens=block.n_tokens, n_docs=block.n_docs))
    starts = start_doc_topic(block, params.n_topics, doc_start=settings.doc_start, seed=settings.seed)
    finals = ref.pcsvb0_pass(dense, block, settings, starts=starts, prior_fixed=params.alpha)
    return np.asarray(finals), dense.n_kw


def _numpy_draw(block, params, doc_topic, topic_word):
    """Every token from (n_dk + alpha) (N_kw + beta) / (N_k + V beta) with the random start's uniforms."""
    token_indptr, token_terms = expand_tokens(block)
    beta, n_terms = params.topic_word_prior, block.n_terms
    factor = (topic_word + beta) / (topic_word.sum(axis=1, keepdims=True) + n_terms * beta)
    topics = np.zeros(token_terms.shape[0], dtype=np.int32)
    for d in range(block.n_docs):
        key = gibbs_ref.counter_key(params.seed, STREAM_GIBBS, 0, block.first_doc + d)
        for i, t in enumerate(range(token_indptr[d], token_indptr[d + 1])):
            cdf = np.cumsum((doc_topic[d] + params.alpha) * factor[:, token_terms[t]])
            u = uniform_from_key(key, i)
            topics[t] = min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), params.n_topics - 1)
    return topics


@pytest.mark.parametrize("burn_in", [0, 1])
@pytest.mark.parametrize("alpha", [0.1, np.array([0.05, 0.1, 0.2, 0.4, 0.8])], ids=["symmetric", "asymmetric"])
def test_posterior_is_one_scvb0_pass_of_the_numpy_transcription(alpha: float | np.ndarray, burn_in: int) -> None:
    block = random_block(25, 30, seed=9, mean_len=9, max_count=3, empty_rows=(4,))
    params = GibbsParams(n_topics=K, doc_topic_prior=alpha, topic_word_prior=0.02, seed=6)
    doc_topic, topic_word = scvb0_posterior(block, params, burn_in=burn_in)
    ref_doc_topic, ref_topic_word = _numpy_pass(block, params, burn_in)
    assert_allclose(topic_word, ref_topic_word, rtol=1e-10, atol=1e-12)
    assert_allclose(doc_topic, ref_doc_topic, rtol=1e-10, atol=1e-12)
    assert_allclose(topic_word.sum(), block.n_tokens, rtol=1e-9)  # N^phi keeps the scale of C
    assert_allclose(doc_topic.sum(axis=1), block.doc_lengths(), rtol=1e-9)


@pytest.mark.parametrize("alpha", [0.1, np.array([0.05, 0.1, 0.2, 0.4, 0.8])], ids=["symmetric", "asymmetric"])
def test_draw_matches_the_numpy_inverse_cdf_token_for_token(alpha: float | np.ndarray) -> None:
    block = random_block(30, 40, seed=2, mean_len=12, first_doc=17, empty_rows=(3,))
    params = GibbsParams(n_topics=K, doc_topic_prior=alpha, topic_word_prior=0.05, seed=8)
    start = initial_state(block, params, init="scvb0")
    doc_topic, topic_word = scvb0_posterior(block, params)
    assert_array_equal(start.topics, _numpy_draw(block, params, doc_topic, topic_word))
    assert start.first_doc == 17 and start.sweeps_done == 0
    doc, term, totals = gibbs_ref.counts_from_topics(start.token_indptr, start.token_terms, start.topics,
                                                     block.n_terms, K)
    assert_array_equal(start.doc_topic_counts, doc)
    assert_array_equal(start.term_topic_counts, term)
    assert_array_equal(start.topic_counts, totals)


def test_draw_follows_the_posterior_it_is_drawn_from() -> None:
    """4000 keyed draws of one token from a fixed posterior: the frequencies match q (chi-square)."""
    doc_topic = np.array([[3.0, 0.5, 1.5, 0.0]])
    alpha = np.array([0.2, 0.5, 1.0, 0.3])
    word_factor = np.array([[0.1, 0.4, 0.2, 0.3]])
    q = (doc_topic[0] + alpha) * word_factor[0]
    token_indptr, token_terms = np.array([0, 1]), np.zeros(1, dtype=np.int32)
    observed = np.zeros(4)
    topics = np.zeros(1, dtype=np.int32)
    for seed in range(4000):
        _draw_topics(token_indptr, token_terms, doc_topic, alpha, word_factor, seed, 0, 0, 1, topics)
        observed[topics[0]] += 1
    assert chi_square_p(observed, q / q.sum()) > 1e-3


def test_start_and_chain_are_the_same_on_any_number_of_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from topicflow.models.common import threads as threads_module

    monkeypatch.setattr(threads_module, "MIN_PARALLEL_ELEMENTS", 1)  # split even this small draw
    block = random_block(40, 50, seed=4, mean_len=15)
    params = GibbsParams(n_topics=8, doc_topic_prior=0.1, topic_word_prior=0.01, seed=3)
    starts = [initial_state(block, params, init="scvb0", threads=threads) for threads in (1, 2, 3)]
    for other in starts[1:]:
        assert_array_equal(other.topics, starts[0].topics)
    chains = [run_sweeps(start, params, 4, partitions=2, threads=threads) for start, threads in zip(starts, (1, 2))]
    assert_array_equal(chains[0].topics, chains[1].topics)


def test_start_lands_near_planted_topics_and_the_chain_recovers_them() -> None:
    """5 planted topics over 50 terms: the start is nearer the truth than the random and the sequential
    start, and 20 sweeps from it recover the truth."""
    planted = draw_planted_corpus(n_docs=400, n_topics=5, n_terms=50, doc_length=40, alpha=0.3, seed=3)
    truth = planted.topic_word["default"]
    block = block_from_csr(planted.counts["default"])
    params = GibbsParams(n_topics=5, doc_topic_prior=0.3, topic_word_prior=0.05, seed=1)
    starts = {init: initial_state(block, params, init=init) for init in ("random", "sequential", "scvb0")}
    scores = {init: joint_log_likelihood(state) for init, state in starts.items()}
    distance = {init: worst_matched_distance(topic_word_distribution(state), truth) for init, state in starts.items()}
    # (the sequential start's log p(w, z) is higher: each draw conditions on the draws before it)
    assert scores["scvb0"] > scores["random"], scores
    assert distance["scvb0"] < min(distance["random"], distance["sequential"]), distance
    state = run_sweeps(starts["scvb0"], params, 20)
    assert worst_matched_distance(topic_word_distribution(state), truth) < 0.1


def test_refused_inputs() -> None:
    block = random_block(5, 10, seed=1)
    params = GibbsParams(n_topics=3)
    prior = TopicWordPrior(np.ones((10, 3)), np.full(3, 10.0), vocab_size=10)
    with pytest.raises(InvalidParameterError, match="no prior"):
        initial_state(block, params, init="scvb0", prior=prior)


def test_empty_block_and_one_topic() -> None:
    import scipy.sparse as sp

    empty = block_from_csr(sp.csr_matrix((0, 4), dtype=np.int64))
    state = initial_state(empty, GibbsParams(n_topics=2), init="scvb0")
    assert state.n_tokens == 0
    block = random_block(6, 8, seed=3, empty_rows=(0, 5))
    one = initial_state(block, GibbsParams(n_topics=1), init="scvb0")
    assert np.all(one.topics == 0) and one.topic_counts.tolist() == [block.n_tokens]
