"""Dirichlet expectations and Newton-Raphson hyperparameter updates."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import psi

from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.dirichlet import (
    dirichlet_expectation,
    dirichlet_objective,
    exp_dirichlet_expectation_rows,
    newton_alpha,
    newton_symmetric_alpha,
    newton_symmetric_eta,
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
