"""Re-estimation of the Pitman-Yor a, b ([Z] section 8.2.4, footnote 20): objective, Newton, optimum, recovery."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize
from scipy.special import betaln, digamma

from tests.models.adaptor_grammar.test_inside import TOY
from topicflow.io.models.adaptor_grammar import grammar_from_saved, grammar_saved_model
from topicflow.models.adaptor_grammar import parse_grammar
from topicflow.models.adaptor_grammar.hyper import (
    dirichlet_objective,
    optimize_pitman_yor,
    py_stick_gradient,
    py_stick_hessian,
    py_stick_objective,
    stick_expectations,
)
from topicflow.models.adaptor_grammar.online import (
    OnlineParams,
    fit_minibatch,
    initial_state,
    optimize_hyperparameters,
    seed_state,
    variational_parameters,
)


def _reference_objective(a: float, b: float, nu1: np.ndarray, nu2: np.ndarray) -> float:
    """Plain NumPy: sum_i E_q[log Beta(v_i; 1 - b, a + i b)] with q = Beta(nu1_i, nu2_i) (eq. A.4)."""
    total = 0.0
    for i in range(1, len(nu1) + 1):
        e_log_v = digamma(nu1[i - 1]) - digamma(nu1[i - 1] + nu2[i - 1])
        e_log_1mv = digamma(nu2[i - 1]) - digamma(nu1[i - 1] + nu2[i - 1])
        alpha, beta = 1.0 - b, a + i * b
        total += (alpha - 1.0) * e_log_v + (beta - 1.0) * e_log_1mv - betaln(alpha, beta)
    return float(total)


def _reference_grid(grid_a: np.ndarray, grid_b: np.ndarray, nu1: np.ndarray, nu2: np.ndarray) -> np.ndarray:
    """The same objective on a grid (broadcast over a x b x sticks)."""
    e_log_v = digamma(nu1) - digamma(nu1 + nu2)
    e_log_1mv = digamma(nu2) - digamma(nu1 + nu2)
    i = np.arange(1, len(nu1) + 1)
    alpha = (1.0 - grid_b)[None, :, None]
    beta = grid_a[:, None, None] + grid_b[None, :, None] * i
    return np.sum((alpha - 1.0) * e_log_v + (beta - 1.0) * e_log_1mv - betaln(alpha, beta), axis=2)


@pytest.fixture(scope="module")
def sticks() -> tuple[np.ndarray, np.ndarray]:
    """Forty sticks' q with a decreasing tail, as a TNG sorted by use has."""
    rng = np.random.default_rng(3)
    counts = np.sort(rng.gamma(0.5, 40.0, 40))[::-1]
    nu1 = 1.0 - 0.2 + counts
    nu2 = 30.0 + 0.2 * np.arange(1, 41) + (np.cumsum(counts[::-1])[::-1] - counts)
    return nu1, nu2


def test_objective_gradient_and_hessian_match_finite_differences(sticks: tuple[np.ndarray, np.ndarray]) -> None:
    nu1, nu2 = sticks
    e_v, e_w = stick_expectations(nu1, nu2)
    for a, b in [(30.0, 0.2), (3.0, 0.0), (500.0, 0.7)]:
        assert py_stick_objective(a, b, e_v, e_w) == pytest.approx(_reference_objective(a, b, nu1, nu2), rel=1e-12)
        h_a, h_b = 1e-4 * a, 1e-6
        fd = np.array([
            (_reference_objective(a + h_a, b, nu1, nu2) - _reference_objective(a - h_a, b, nu1, nu2)) / (2 * h_a),
            (_reference_objective(a, b + h_b, nu1, nu2) - _reference_objective(a, b - h_b, nu1, nu2)) / (2 * h_b)
            if b > 0 else (_reference_objective(a, b + h_b, nu1, nu2) - _reference_objective(a, b, nu1, nu2)) / h_b,
        ])
        grad = py_stick_gradient(a, b, e_v, e_w)
        np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-4)
        hess = py_stick_hessian(a, b, len(nu1))
        fd_h = np.column_stack([
            (py_stick_gradient(a + h_a, b, e_v, e_w) - py_stick_gradient(a - h_a, b, e_v, e_w)) / (2 * h_a),
            (py_stick_gradient(a, b + h_b, e_v, e_w) - py_stick_gradient(a, b, e_v, e_w)) / h_b,
        ])
        np.testing.assert_allclose(hess, fd_h, rtol=1e-3, atol=1e-6)
        assert np.all(np.linalg.eigvalsh(hess) < 0)  # concave: one maximum


def test_optimum_matches_a_brute_force_grid(sticks: tuple[np.ndarray, np.ndarray]) -> None:
    nu1, nu2 = sticks
    a, b = optimize_pitman_yor(nu1, nu2, 100.0, 0.0)
    grid_a = np.exp(np.linspace(np.log(0.5), np.log(500.0), 240))
    grid_b = np.linspace(0.0, 0.95, 96)
    values = _reference_grid(grid_a, grid_b, nu1, nu2)
    i, j = np.unravel_index(np.argmax(values), values.shape)
    best = _reference_objective(a, b, nu1, nu2)
    assert best >= values[i, j] - 1e-9  # no grid point is better
    assert a == pytest.approx(grid_a[i], rel=0.03) and b == pytest.approx(grid_b[j], abs=0.01)
    g = py_stick_gradient(a, b, *stick_expectations(nu1, nu2))
    assert abs(g[0]) < 1e-6 * len(nu1) and (abs(g[1]) < 1e-5 * len(nu1) or (b == 0.0 and g[1] <= 0))
    # a alone (b fixed): closed form at b = 0, Newton at b = 0.3; each the best point of a 1-D grid
    for fixed in (0.0, 0.3):
        a1, b1 = optimize_pitman_yor(nu1, nu2, 7.0, fixed, discount=False)
        assert b1 == fixed
        line = _reference_grid(grid_a, np.array([fixed]), nu1, nu2)[:, 0]
        assert _reference_objective(a1, fixed, nu1, nu2) >= line.max() - 1e-9
        assert a1 == pytest.approx(grid_a[np.argmax(line)], rel=0.03)


def test_recovers_a_and_b_of_sticks_drawn_from_a_known_pitman_yor() -> None:
    """Independent check: q a near point mass at sticks drawn from Beta(1 - b, a + i b); the estimate
    recovers (a, b), and scipy's Nelder-Mead on the same objective finds no better point."""
    rng = np.random.default_rng(11)
    n = 2000
    i = np.arange(1, n + 1)
    for a_true, b_true in [(80.0, 0.0), (20.0, 0.4)]:
        v = rng.beta(1.0 - b_true, a_true + i * b_true)
        sharp = 1e6 / np.minimum(v, 1.0 - v)  # q sharp around v however small v is
        nu1, nu2 = sharp * v, sharp * (1.0 - v)
        a_hat, b_hat = optimize_pitman_yor(nu1, nu2, 1000.0, 0.0)
        # a is weakly identified once b > 0 (the late sticks' prior is dominated by i b): wide tolerance
        tol = 0.1 if b_true == 0.0 else 0.35
        assert a_hat == pytest.approx(a_true, rel=tol) and b_hat == pytest.approx(b_true, abs=0.05)
        log_v, log_w = stick_expectations(nu1, nu2)

        def nll(x: np.ndarray) -> float:
            a, b = float(np.exp(x[0])), float(np.clip(x[1], 0.0, 0.999))
            return -float(np.sum(-b * log_v + (a + i * b - 1.0) * log_w - betaln(1.0 - b, a + i * b)))

        for start in (np.array([np.log(10.0), 0.1]), np.array([np.log(a_hat), b_hat])):
            ref = optimize.minimize(nll, start, method="Nelder-Mead",
                                    options={"xatol": 1e-9, "fatol": 1e-10, "maxiter": 1500})
            assert -nll(np.array([np.log(a_hat), b_hat])) >= -ref.fun - 1e-9 * abs(ref.fun)  # nothing better
        a_only, _ = optimize_pitman_yor(nu1, nu2, 1.0, b_true, discount=False)
        assert a_only == pytest.approx(a_true, rel=tol)


def test_rule_prior_optimum_is_the_posterior() -> None:
    """Why alpha is not re-estimated: E_q[log Dir(theta; alpha)] peaks at alpha = gamma."""
    gamma = np.array([3.5, 120.0, 0.7, 14.0])
    best = dirichlet_objective(gamma, gamma)
    rng = np.random.default_rng(0)
    for _ in range(50):
        assert dirichlet_objective(gamma * rng.lognormal(0.0, 0.5, 4), gamma) < best


def test_hook_runs_after_pruning_and_the_seed_pass_and_recomputes_nu() -> None:
    grammar = parse_grammar(TOY).bind("abc")
    texts = ["abca", "cab", "abab", "ca", "bcab", "aab"]
    xs = [grammar.encode(t) for t in texts]
    out = {}
    for mode in ("none", "a", "ab"):
        params = OnlineParams(corpus_size=30, tau=1.0, kappa=0.6, prune_every=2, n_samples=3, seed=4,
                              optimize_hyper=mode)
        state = initial_state(grammar, seed=4)
        state, _ = fit_minibatch(state, xs[:3], [0, 1, 2], params)
        assert state.grammar is grammar  # no pruning yet: nothing re-estimated
        state, _ = fit_minibatch(state, xs[3:], [3, 4, 5], params)
        out[mode] = state
    np.testing.assert_array_equal(out["none"].grammar.pitman_yor_a, grammar.pitman_yor_a)
    plain = out["none"]
    params = OnlineParams(corpus_size=30, tau=1.0, kappa=0.6, prune_every=2, n_samples=3, seed=4)
    for mode, discount in (("a", False), ("ab", True)):
        new = out[mode]
        for m in range(len(plain.tngs)):
            a, b = optimize_pitman_yor(plain.nu1[m], plain.nu2[m], grammar.pitman_yor_a[m], grammar.pitman_yor_b[m],
                                       discount=discount)
            assert new.grammar.pitman_yor_a[m] == pytest.approx(a, rel=1e-12)
            assert new.grammar.pitman_yor_b[m] == pytest.approx(b, abs=1e-12)
        assert not np.array_equal(new.grammar.pitman_yor_a, grammar.pitman_yor_a)
        again = variational_parameters(new, params)
        for m in range(len(new.tngs)):
            np.testing.assert_allclose(new.nu2[m], again.nu2[m], rtol=1e-14)
    assert optimize_hyperparameters(plain, replace(params, optimize_hyper="none")) is plain
    # after the seed pass too: the seeded state of "ab" is the seeded state of "none", re-estimated
    seeded = {mode: seed_state(initial_state(grammar, seed=4), xs, range(len(xs)),
                               replace(params, optimize_hyper=mode))[0] for mode in ("none", "ab")}
    assert seeded["none"].grammar is grammar
    expected = optimize_hyperparameters(seeded["none"], replace(params, optimize_hyper="ab"))
    assert not np.array_equal(expected.grammar.pitman_yor_a, grammar.pitman_yor_a)
    for m in range(len(grammar.pitman_yor_a)):
        a, b = optimize_pitman_yor(seeded["none"].nu1[m], seeded["none"].nu2[m], grammar.pitman_yor_a[m],
                                   grammar.pitman_yor_b[m], discount=True)
        assert seeded["ab"].grammar.pitman_yor_a[m] == expected.grammar.pitman_yor_a[m] == pytest.approx(a, rel=1e-12)
        assert seeded["ab"].grammar.pitman_yor_b[m] == pytest.approx(b, abs=1e-12)
        np.testing.assert_array_equal(seeded["ab"].nu2[m], expected.nu2[m])
    # the re-estimated a, b travel with a saved model; models saved before the option keep a, b fixed
    saved = grammar_saved_model(out["ab"], params, grammar_text=TOY)
    loaded, loaded_params, _ = grammar_from_saved(saved)
    np.testing.assert_array_equal(loaded.grammar.pitman_yor_a, out["ab"].grammar.pitman_yor_a)
    np.testing.assert_array_equal(loaded.grammar.pitman_yor_b, out["ab"].grammar.pitman_yor_b)
    assert loaded_params.optimize_hyper == "ab"
    old_info = replace(saved.info, online={k: v for k, v in saved.info.online.items() if k != "optimize_hyper"})
    assert grammar_from_saved(replace(saved, info=old_info))[1].optimize_hyper == "none"
    with pytest.raises(ValueError, match="optimize_hyper"):
        OnlineParams(corpus_size=3, optimize_hyper="alpha")  # type: ignore[arg-type]
