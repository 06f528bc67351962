"""The math of streaming VB: the minibatch prior, lambda = prior + stats, and the column steps replicas follow."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.reference.vb_lda_numpy import alpha_terms_reference, topic_terms_reference
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb import streaming
from topicflow.models.lda.vb.online import TopicWordReplica, alpha_target
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats


def stats_on(term_ids: list[int], seed: int, n_topics: int = 3, lang: str = "en") -> EStepStats:
    rng = np.random.default_rng(seed)
    terms = TopicTermStats(np.array(term_ids, dtype=np.int64), rng.gamma(2.0, 1.0, size=(n_topics, len(term_ids))))
    base = EStepStats.zeros(n_topics, [lang])
    return replace(base, topic_terms={lang: terms}, alpha_suff=np.log(rng.dirichlet(np.ones(n_topics), size=4)).sum(axis=0), n_docs=4,
                   n_tokens=20, doc_elbo=-50.0)


def start_state(eta: float | np.ndarray = 0.1) -> LDAState:
    rng = np.random.default_rng(0)
    return LDAState({"en": rng.gamma(100.0, 0.01, size=(3, 8))}, np.full(3, 0.5), {"en": eta})


def test_the_prior_is_eta_then_the_posterior() -> None:
    state = start_state()
    assert streaming.minibatch_prior(state, 0) == {"en": 0.1}
    assert streaming.minibatch_prior(state, 3)["en"] is state.topic_word_var["en"]


@pytest.mark.parametrize("eta", [0.1, "matrix"])
def test_posterior_is_prior_plus_dense_statistics_bit_for_bit(eta: object) -> None:
    prior = np.random.default_rng(1).gamma(1.0, 1.0, size=(3, 8)) if eta == "matrix" else eta
    stats = stats_on([1, 4, 5], seed=2)
    lam = streaming.posterior_topic_word_var({"en": prior}, stats, {"en": 8})["en"]  # type: ignore[dict-item]
    np.testing.assert_array_equal(lam, np.asarray(prior) + stats.topic_terms["en"].to_dense(8))


def test_a_replica_following_the_column_steps_equals_the_driver() -> None:
    """Including the random start of the first minibatch (reset) and a term that leaves the statistics."""
    state = start_state()
    replica = TopicWordReplica(0, state.topic_word_var, state.topic_word_prior)
    prior = streaming.minibatch_prior(state, 0)
    changed = None
    for j, ids in enumerate(([1, 4, 5], [1, 5], [1, 4, 5, 7])):  # term 4 leaves, then returns with term 7
        state, step = streaming.svb_iteration(state, prior, stats_on(ids, seed=j), doc_topic_prior_mode="fixed",
                                              changed=changed, reset=j == 0)
        replica.apply(step)
        changed = step.term_ids
        np.testing.assert_array_equal(replica.topic_word_var["en"], state.topic_word_var["en"])
    assert replica.version == 3
    # Terms the minibatch never held keep the prior; the next minibatch's prior is this posterior.
    np.testing.assert_array_equal(state.topic_word_var["en"][:, [0, 2, 3, 6]], 0.1)
    prior = streaming.minibatch_prior(state, 1)
    state, step = streaming.svb_iteration(state, prior, stats_on([2], seed=9), doc_topic_prior_mode="fixed")
    replica.apply(step)
    np.testing.assert_array_equal(replica.topic_word_var["en"], state.topic_word_var["en"])
    assert list(step.term_ids["en"]) == [2] and not step.reset


@pytest.mark.parametrize("mode", ["fixed", "auto", "symmetric"])
def test_alpha_moves_as_in_the_batch_m_step(mode: str) -> None:
    state, stats = start_state(), stats_on([0, 1], seed=3)
    new, _ = streaming.svb_iteration(state, {"en": 0.1}, stats, doc_topic_prior_mode=mode)
    np.testing.assert_array_equal(new.doc_topic_prior, alpha_target(state.doc_topic_prior, stats, mode))
    assert (mode == "fixed") == np.array_equal(new.doc_topic_prior, state.doc_topic_prior)


def test_minibatch_elbo_uses_the_minibatch_prior() -> None:
    state, stats = start_state(), stats_on([0, 3], seed=4)
    prior = {"en": np.random.default_rng(5).gamma(2.0, 1.0, size=(3, 8))}
    value = streaming.minibatch_elbo(stats, state, prior)
    expected = stats.doc_elbo + alpha_terms_reference(state.doc_topic_prior, stats.alpha_suff, stats.n_docs)
    expected += topic_terms_reference(state.topic_word_var["en"], prior["en"])
    assert value == pytest.approx(expected, rel=1e-12)
