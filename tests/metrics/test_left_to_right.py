"""The left-to-right estimator: draw for draw against a NumPy reference, and against exact enumeration.

Why the statistical tests hold (tests/reference/left_to_right_numpy.py has the exact quantities):

- With one particle (R = 1), the product of the p_n is an *unbiased* estimate of p(w | Phi, alpha).
  By induction over n: the particle's assignments z_<n, weighted by prod_{m<n} p_m, have the measure
  p(w_<n) p(z_<n | w_<n). The Gibbs sweep of line 6 leaves p(z_<n | w_<n) invariant; multiplying by
  p_n = p(w_n | z_<n) and drawing z_n from p(z_n | w_n, z_<n) gives p(w_<=n) p(z_<=n | w_<=n). So
  E[prod_n p_n] = p(w). The mean over S independent documents (each its own counter-based stream)
  is then within 4 standard errors of p(w) unless a 1-in-15,000 event happened; the draws are fixed
  by the seeds, so the test is deterministic and this was checked once.
- With R > 1 the paper averages over particles at each position before taking the product, which is
  not unbiased and does not converge to p(w) as R grows: it converges to sum_n log mu_n, the
  "algorithm's limit", which we enumerate exactly. With R = 20 (the default and the paper's), the mean
  of the estimate of log p(w) is that limit minus sum_n var_n / (2 R mu_n^2) (delta method) plus
  O(R^-2) terms; the test allows 4 standard errors plus a tenth of that correction for them. For the
  documents below the limit is within 0.03 nats of the exact log p(w), which the last assertion records.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.reference.left_to_right_numpy import (
    algorithm_limit,
    exact_log_likelihood,
    left_to_right,
)
from topicflow.errors import InvalidParameterError
from topicflow.metrics.left_to_right import left_to_right_log_likelihood
from topicflow.models.lda.vb.layout import prepare_topics

RNG = np.random.default_rng(17)
N_TOPICS, N_TERMS = 3, 6
PHI = RNG.dirichlet(np.full(N_TERMS, 0.5), size=N_TOPICS)
ALPHA = np.array([0.3, 0.5, 0.2])
#: Tiny documents (K = 3, length <= 5) for the exact comparisons.
DOCS = [[0], [0, 1], [4, 4], [0, 1, 2], [3, 0, 3, 5], [0, 1, 2, 3, 4]]


def copies(tokens: list[int], n_copies: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_copies`` documents with the same tokens: each has its own position, hence its own draws."""
    return np.arange(n_copies + 1, dtype=np.int64) * len(tokens), np.tile(np.asarray(tokens, dtype=np.int64), n_copies)


def random_docs(n_docs: int, seed: int, max_len: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, max_len + 1, size=n_docs)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), rng.integers(0, N_TERMS, size=lengths.sum())


@pytest.mark.parametrize("n_particles", [1, 3, 20])
def test_kernel_matches_the_numpy_reference_draw_for_draw(n_particles: int) -> None:
    indptr, terms = random_docs(25, seed=n_particles)
    alpha = np.array([0.1, 1.5, 0.7])
    got = left_to_right_log_likelihood(indptr, terms, PHI, alpha, n_particles=n_particles, seed=5, first_doc=40)
    want = left_to_right(indptr, terms, PHI, alpha, n_particles=n_particles, seed=5, first_doc=40)
    np.testing.assert_array_equal(got, want)
    assert got[np.diff(indptr) == 0].tolist() == [0.0] * int(np.sum(np.diff(indptr) == 0))


def test_one_token_is_scored_exactly() -> None:
    got = left_to_right_log_likelihood(np.array([0, 1, 2]), np.array([2, 5]), PHI, ALPHA, n_particles=4)
    want = [math.log(PHI[:, w] @ ALPHA / ALPHA.sum()) for w in (2, 5)]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert exact_log_likelihood([2], PHI, ALPHA) == pytest.approx(want[0], rel=1e-14)


@pytest.mark.parametrize("tokens", DOCS, ids=str)
def test_one_particle_is_unbiased_for_the_exact_likelihood(tokens: list[int]) -> None:
    n_copies = 20_000
    estimate = np.exp(left_to_right_log_likelihood(*copies(tokens, n_copies), PHI, ALPHA, n_particles=1, seed=3))
    exact = math.exp(exact_log_likelihood(tokens, PHI, ALPHA))
    standard_error = estimate.std() / math.sqrt(n_copies)
    assert abs(estimate.mean() - exact) <= 4 * standard_error + 1e-15 * exact, (estimate.mean(), exact, standard_error)


@pytest.mark.parametrize("tokens", DOCS[1:], ids=str)
def test_twenty_particles_approach_the_limit_of_the_algorithm(tokens: list[int]) -> None:
    n_copies, n_particles = 5_000, 20
    estimate = left_to_right_log_likelihood(*copies(tokens, n_copies), PHI, ALPHA, n_particles=n_particles, seed=8)
    means, variances = algorithm_limit(tokens, PHI, ALPHA)
    limit = float(np.sum(np.log(means)))
    correction = -float(np.sum(variances / (2 * n_particles * means**2)))
    standard_error = estimate.std() / math.sqrt(n_copies)
    assert abs(estimate.mean() - (limit + correction)) <= 4 * standard_error + 0.1 * abs(correction), (
        estimate.mean(), limit, correction, standard_error)
    # The limit is not log p(w) (the average over particles comes before the product), but close to it.
    assert abs(limit - exact_log_likelihood(tokens, PHI, ALPHA)) < 0.03


def test_a_document_gets_the_same_estimate_in_any_block_and_other_seeds_differ() -> None:
    indptr, terms = random_docs(12, seed=2)
    whole = left_to_right_log_likelihood(indptr, terms, PHI, ALPHA, seed=1, first_doc=100)
    parts = [left_to_right_log_likelihood(indptr[a:b + 1] - indptr[a], terms[indptr[a]:indptr[b]], PHI, ALPHA,
                                          seed=1, first_doc=100 + a) for a, b in [(0, 5), (5, 6), (6, 12)]]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    other = left_to_right_log_likelihood(indptr, terms, PHI, ALPHA, seed=2, first_doc=100)
    long_docs = np.diff(indptr) > 1
    assert np.all(other[long_docs] != whole[long_docs])


def test_stacked_languages_read_their_own_topics() -> None:
    phi_de = RNG.dirichlet(np.full(4, 0.5), size=N_TOPICS)
    topics = prepare_topics({"en": PHI, "de": phi_de})
    # One document: two English tokens, then two German ones (stacked ids: German id + 6).
    got = left_to_right_log_likelihood(np.array([0, 4]), np.array([1, 2, 6 + 3, 6 + 0]), topics, ALPHA, seed=4)
    want = left_to_right(np.array([0, 4]), np.array([1, 2, 9, 6]), np.hstack([PHI, phi_de]), ALPHA,
                         n_particles=20, seed=4)
    np.testing.assert_array_equal(got, want)


def test_zero_probability_token_gives_minus_infinity() -> None:
    phi = PHI.copy()
    phi[:, 5] = 0.0
    got = left_to_right_log_likelihood(np.array([0, 2, 3]), np.array([0, 5, 1]), phi, ALPHA)
    assert got[0] == -math.inf and np.isfinite(got[1])


def test_bad_inputs_are_refused_with_their_values() -> None:
    indptr, terms = np.array([0, 2]), np.array([0, 1])
    with pytest.raises(InvalidParameterError, match="n_particles"):
        left_to_right_log_likelihood(indptr, terms, PHI, ALPHA, n_particles=0)
    with pytest.raises(InvalidParameterError, match=r"term ids in \[0, 6\)"):
        left_to_right_log_likelihood(indptr, np.array([0, 6]), PHI, ALPHA)
    with pytest.raises(InvalidParameterError, match="token_indptr"):
        left_to_right_log_likelihood(np.array([0, 3]), terms, PHI, ALPHA)
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        left_to_right_log_likelihood(indptr, terms, PHI, np.ones(2))
    with pytest.raises(InvalidParameterError, match="nonnegative"):
        left_to_right_log_likelihood(indptr, terms, -PHI, ALPHA)
    with pytest.raises(InvalidParameterError, match="seed"):
        left_to_right_log_likelihood(indptr, terms, PHI, ALPHA, seed=-1)
