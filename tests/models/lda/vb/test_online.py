"""Online VB's step of lambda: one formula for the driver and the servers' replicas, with the dense formula's bits."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb.online import (
    TopicWordReplica,
    TopicWordStep,
    apply_topic_word_step,
    blend,
    online_update,
    topic_word_step,
    topic_word_target,
)
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats

K, V = 3, 12


def random_stats(rng: np.random.Generator, n_docs: int = 5) -> EStepStats:
    ids = np.sort(rng.choice(V, size=5, replace=False)).astype(np.int64)
    terms = TopicTermStats(ids, rng.gamma(1.0, 3.0, size=(K, len(ids))))
    return EStepStats({"en": terms}, rng.normal(-2.0, 0.3, size=K), -10.0, n_docs, 40, 0)


def dense_reference(state: LDAState, stats: EStepStats, *, rho: float, scale: float, new_eta: float | None) -> np.ndarray:
    """The textbook form: blend lambda with eta + scale * stats over every term."""
    eta = state.topic_word_prior["en"]
    target = topic_word_target(stats.topic_terms["en"].to_dense(V), eta, scale)
    if new_eta is not None:
        target = target - float(eta) + new_eta  # type: ignore[arg-type]
    return blend(state.topic_word_var["en"], target, rho)


@pytest.mark.parametrize("prior", ["scalar", "matrix"])
@pytest.mark.parametrize("rho", [1.0, 0.37])
def test_step_has_the_dense_formulas_bits(prior: str, rho: float) -> None:
    rng = np.random.default_rng(0)
    eta = 0.05 if prior == "scalar" else rng.uniform(0.01, 1.0, size=(K, V))
    state = LDAState({"en": rng.gamma(2.0, 1.0, size=(K, V))}, np.full(K, 0.2), {"en": eta})
    stats = random_stats(rng)
    step = TopicWordStep(dict(stats.topic_terms), rho, 40.0, {})
    lam, priors = apply_topic_word_step(state.topic_word_var, state.topic_word_prior, step)
    np.testing.assert_array_equal(lam["en"], dense_reference(state, stats, rho=rho, scale=40.0, new_eta=None))
    assert priors["en"] is eta


@pytest.mark.parametrize("rho", [1.0, 0.37])
def test_step_with_optimized_eta_has_the_dense_formulas_bits(rho: float) -> None:
    rng = np.random.default_rng(1)
    state = LDAState({"en": rng.gamma(2.0, 1.0, size=(K, V))}, np.full(K, 0.2), {"en": 0.05})
    stats = random_stats(rng)
    step = topic_word_step(state, stats, rho=rho, total_docs=200, optimize_topic_word_prior=True)
    assert step.scale == 40.0 and set(step.new_eta) == {"en"} and step.new_eta["en"] != 0.05
    lam, priors = apply_topic_word_step(state.topic_word_var, state.topic_word_prior, step)
    np.testing.assert_array_equal(lam["en"], dense_reference(state, stats, rho=rho, scale=40.0, new_eta=step.new_eta["en"]))
    assert priors["en"] == pytest.approx((1 - rho) * 0.05 + rho * step.new_eta["en"], rel=1e-15)


@pytest.mark.parametrize("optimize_topic_word_prior", [False, True])
def test_replica_following_the_steps_stays_bit_identical_to_the_driver(optimize_topic_word_prior: bool) -> None:
    rng = np.random.default_rng(2)
    state = LDAState({"en": rng.gamma(2.0, 1.0, size=(K, V))}, np.full(K, 0.2), {"en": 0.05})
    replica = TopicWordReplica(7, state.topic_word_var, state.topic_word_prior)
    first = state.topic_word_var["en"].copy()
    for t in range(6):
        stats = random_stats(rng)
        step = topic_word_step(state, stats, rho=(1.0 + t) ** -0.7, total_docs=300, optimize_topic_word_prior=optimize_topic_word_prior)
        state = online_update(state, stats, step, doc_topic_prior_mode="fixed")
        replica.apply(step)
    assert replica.version == 13
    np.testing.assert_array_equal(replica.topic_word_var["en"], state.topic_word_var["en"])
    assert replica.topic_word_prior["en"] == state.topic_word_prior["en"]
    assert not np.array_equal(replica.topic_word_var["en"], first)


def test_replica_copies_lambda_and_the_driver_state_is_never_modified() -> None:
    rng = np.random.default_rng(3)
    lam = rng.gamma(2.0, 1.0, size=(K, V))
    kept = lam.copy()
    replica = TopicWordReplica(0, {"en": lam}, {"en": 0.1})
    stats = random_stats(rng)
    replica.apply(TopicWordStep(dict(stats.topic_terms), 0.5, 10.0, {}))
    np.testing.assert_array_equal(lam, kept)
    new, _ = apply_topic_word_step({"en": lam}, {"en": 0.1}, TopicWordStep(dict(stats.topic_terms), 0.5, 10.0, {}))
    np.testing.assert_array_equal(lam, kept)
    np.testing.assert_array_equal(new["en"], replica.topic_word_var["en"])
