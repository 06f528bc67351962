"""Dirichlet expectations and Newton-Raphson hyperparameter updates."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import gammaln, psi
from scipy.stats import dirichlet as scipy_dirichlet

from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.dirichlet import (
    add_dirichlet_entropy,
    dirichlet_entropy,
    dirichlet_expectation,
    dirichlet_objective,
    exp_dirichlet_expectation_rows,
    newton_alpha,
    newton_symmetric_alpha,
    newton_symmetric_eta,
    posterior_mean,
)


def test_expectations_match_scipy() -> None:
    params = np.random.default_rng(0).gamma(0.5, 2.0, size=(4, 9))
    want = psi(params) - psi(params.sum(axis=1, keepdims=True))
    assert_allclose(dirichlet_expectation(params), want, rtol=1e-13)
    # Compare in log space: exp turns the absolute error of large negative E[log X] into relative error.
    assert_allclose(np.log(exp_dirichlet_expectation_rows(params)), want, rtol=1e-13)
    assert_allclose(dirichlet_expectation(params[0]), want[0], rtol=1e-13)
    with pytest.raises(InvalidParameterError, match="2-d"):
        exp_dirichlet_expectation_rows(params[0])


def _log_theta_suff(alpha_true: np.ndarray, n_docs: int, seed: int) -> np.ndarray:
    theta = np.random.default_rng(seed).dirichlet(alpha_true, size=n_docs)
    return np.log(theta).sum(axis=0)


def test_newton_alpha_recovers_asymmetric_dirichlet() -> None:
    alpha_true = np.array([0.1, 0.3, 0.5, 1.0, 2.0])
    suff = _log_theta_suff(alpha_true, 5000, seed=1)
    alpha, n_iter = newton_alpha(np.ones(5), suff, 5000)
    assert_allclose(alpha, alpha_true, rtol=0.05)
    assert 1 <= n_iter < 100
    # The estimate is a stationary point: the gradient vanishes there.
    gradient = 5000 * (psi(alpha.sum()) - psi(alpha)) + suff
    assert np.max(np.abs(gradient)) < 1e-5 * 5000


@pytest.mark.parametrize("start", [1e-8, 1e-3, 50.0, 1e4])
def test_newton_alpha_stays_positive_from_bad_starts(start: float) -> None:
    alpha_true = np.array([0.05, 0.2, 3.0])
    suff = _log_theta_suff(alpha_true, 2000, seed=2)
    best, _ = newton_alpha(np.ones(3), suff, 2000)
    alpha, _ = newton_alpha(np.full(3, start), suff, 2000, max_iter=500)
    assert np.all(alpha > 0)
    assert dirichlet_objective(alpha, suff, 2000) >= dirichlet_objective(np.full(3, start), suff, 2000)
    assert_allclose(alpha, best, rtol=1e-6)


def test_newton_alpha_from_variational_suff_stats_never_decreases_objective() -> None:
    rng = np.random.default_rng(3)
    gamma = rng.gamma(2.0, 1.0, size=(40, 4)) + 0.01
    suff = (psi(gamma) - psi(gamma.sum(axis=1, keepdims=True))).sum(axis=0)
    start = np.array([10.0, 0.01, 1.0, 3.0])
    alpha, _ = newton_alpha(start, suff, 40)
    assert np.all(alpha > 0)
    assert dirichlet_objective(alpha, suff, 40) >= dirichlet_objective(start, suff, 40)


def test_newton_alpha_rejects_bad_inputs() -> None:
    with pytest.raises(InvalidParameterError, match="positive"):
        newton_alpha(np.array([1.0, -1.0]), np.array([-1.0, -1.0]), 3)
    with pytest.raises(InvalidParameterError, match="same shape"):
        newton_alpha(np.ones(2), np.ones(3), 3)
    with pytest.raises(NumericalError, match="not finite"):
        newton_alpha(np.ones(2), np.array([np.nan, -1.0]), 3)


def test_symmetric_alpha_and_eta() -> None:
    suff = _log_theta_suff(np.full(6, 0.4), 3000, seed=4)
    alpha, _ = newton_symmetric_alpha(1.0, suff, 3000)
    assert abs(alpha - 0.4) < 0.02
    alpha_small_start, _ = newton_symmetric_alpha(1e-6, suff, 3000, max_iter=500)
    assert abs(alpha_small_start - alpha) < 1e-6
    # eta: topics drawn from a symmetric Dirichlet(0.5); with so many pseudo-counts in lambda,
    # E_q[log beta] = log beta to ~1e-8, so the estimate is the Dirichlet MLE of the drawn topics.
    beta = np.random.default_rng(5).dirichlet(np.full(20, 0.5), size=500)
    eta, _ = newton_symmetric_eta(beta * 1e16, 3.0)
    assert abs(eta - 0.5) < 0.025
    with pytest.raises(InvalidParameterError, match="eta"):
        newton_symmetric_eta(beta, 0.0)


# ----------------------------------------------------------------------------- entropy and posterior mean


@pytest.mark.parametrize("n_components", [1, 3, 20])
def test_entropy_matches_scipy_in_both_forms(n_components: int) -> None:
    params = np.random.default_rng(n_components).gamma(0.7, 2.0, size=(6, n_components)) + 0.05
    want = np.array([scipy_dirichlet(row).entropy() if n_components > 1 else 0.0 for row in params])
    assert_allclose(dirichlet_entropy(params), want, rtol=1e-11, atol=1e-12)
    assert_allclose(dirichlet_entropy(params, dirichlet_expectation(params)), dirichlet_entropy(params), rtol=0)
    elog_sum = np.zeros(n_components)
    for row, expected in zip(params, want):
        assert_allclose(add_dirichlet_entropy(row, 2.5, elog_sum) - 2.5, expected, rtol=1e-11, atol=1e-11)
    assert_allclose(elog_sum, dirichlet_expectation(params).sum(axis=0), rtol=1e-12)


def test_entropy_is_the_bound_tail_written_out() -> None:
    gamma = np.array([[0.3, 2.0, 5.5]])
    elog = psi(gamma) - psi(gamma.sum())
    tail = -(gammaln(gamma.sum()) - gammaln(gamma).sum() + np.sum((gamma - 1) * elog))
    assert_allclose(dirichlet_entropy(gamma), [tail], rtol=1e-13)


def test_posterior_mean_of_counts_and_of_parameters() -> None:
    counts = np.array([[3, 0, 1], [0, 0, 0]])
    beta = 0.5
    want = (counts + beta) / (counts.sum(axis=1, keepdims=True) + 3 * beta)
    assert_allclose(posterior_mean(counts, beta), want, rtol=1e-15)
    assert_allclose(posterior_mean(counts, beta, totals=np.array([4, 0])), want, rtol=1e-15)
    lam = counts + beta
    assert_allclose(posterior_mean(lam), lam / lam.sum(axis=1, keepdims=True), rtol=0)
    eta = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 1.0]])
    assert_allclose(posterior_mean(counts, eta), (counts + eta) / (counts + eta).sum(axis=1, keepdims=True),
                    rtol=1e-15)
    assert_allclose(posterior_mean(counts, eta[0]).sum(axis=1), 1.0, rtol=1e-15)
    with pytest.raises(InvalidParameterError, match="2-d"):
        posterior_mean(np.ones(3), 0.1)
