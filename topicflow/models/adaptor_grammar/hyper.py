"""Empirical-Bayes re-estimation of the Pitman-Yor hyperparameters of an adaptor grammar ([Z] section 8.2.4).

[Z] section 8.2.4 ("Hyperparameter Update") updates "the PCFG hyperparameter alpha, PYGEM hyperparameters a
and b as in Cohen et al. (2010)", and footnote 20 says "all PY hyper-parameters are optimized". Both are
variational EM steps: the hyperparameters maximize the evidence lower bound (eq. A.1) with the variational
parameters held fixed. Of A.1 only the "PY stick" term (eq. A.4) depends on the concentration a_c and the
discount b_c of an adapted nonterminal c. With q(pi'_{c,i}) = Beta(nu1_i, nu2_i) over its K_c sticks
(i = 1..K_c; the prior of stick i is Beta(1 - b, a + i b)) it is

    L(a, b) = sum_i [ log Gamma(1 + a + (i - 1) b) - log Gamma(1 - b) - log Gamma(a + i b)
                      - b E[log pi'_i] + (a + i b - 1) E[log (1 - pi'_i)] ]

with E[log pi'_i] = psi(nu1_i) - psi(nu1_i + nu2_i) and E[log(1 - pi'_i)] = psi(nu2_i) - psi(nu1_i + nu2_i):
the expected log density of K Beta variables. Sticks beyond the truncation have q equal to the prior and add
nothing that depends on (a, b). L is jointly concave in (a, b) (minus the log Beta function is concave in its
two arguments, which are affine in (a, b); the rest is linear), so a Newton iteration with backtracking
reaches its maximum over a > 0, 0 <= b < 1:

- :func:`optimize_pitman_yor` with the discount held fixed at b = 0 (the shipped grammars' value) has the
  closed form a = K / -sum_i E[log(1 - pi'_i)] (dL/da = K / a + sum_i E[log(1 - pi'_i)] since
  psi(1 + a) - psi(a) = 1 / a); with b > 0 held fixed it is a one-dimensional Newton iteration;
- with the discount free it is a two-dimensional projected Newton iteration (the gradient and Hessian of
  :func:`py_stick_gradient` / :func:`py_stick_hessian`); at b = 0 with dL/db <= 0 the bound b >= 0 is
  active and the closed form for a is used.

PyAdaGram (``hybrid.py``, ``optimize_alpha_pi`` / ``optimize_beta_pi``) takes damped Newton steps on the
same gradient and second derivative, a and b separately, and calls only the a step (after every pruning);
its b step exists but is commented out. Here both are optimized jointly when asked ([Z]'s "all PY
hyper-parameters").

The PCFG Dirichlet alpha is deliberately not re-estimated (docs/adaptor_grammar.md, "Hyperparameters"):
each nonterminal has one theta_c ~ Dir(alpha_c) with q(theta_c) = Dir(gamma_c), and E_q[log Dir(theta; alpha)]
is largest at alpha = gamma exactly (Gibbs' inequality), so the empirical-Bayes alpha is the posterior
itself; eq. 8.10 then adds the counts to it again at the next update (PyAdaGram's ``optimize_alpha_theta``
converges there after every pruning, so its prior grows by the data's counts each time).
:func:`dirichlet_objective` is given for the tests that show it.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, polygamma, psi

#: Largest discount the optimizer returns (b must stay < 1).
MAX_DISCOUNT = 1.0 - 1e-6
#: Smallest concentration the optimizer returns (a must stay > 0).
MIN_CONCENTRATION = 1e-6


def stick_expectations(nu1: np.ndarray, nu2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return E[log pi'_i] and E[log(1 - pi'_i)] under q(pi'_i) = Beta(nu1_i, nu2_i).

    Parameters
    ----------
    nu1, nu2 : ndarray of float64, shape (K,)
        The Beta parameters of the K sticks (eqs. 8.11-8.12).

    Returns
    -------
    e_log_v : ndarray of float64, shape (K,)
        E[log pi'_i].
    e_log_1mv : ndarray of float64, shape (K,)
        E[log(1 - pi'_i)].
    """
    nu1 = np.asarray(nu1, dtype=np.float64)
    nu2 = np.asarray(nu2, dtype=np.float64)
    total = psi(nu1 + nu2)
    return psi(nu1) - total, psi(nu2) - total


def py_stick_objective(a: float, b: float, e_log_v: np.ndarray, e_log_1mv: np.ndarray) -> float:
    """Return L(a, b), the sum over sticks of eq. A.4 (module docstring).

    Parameters
    ----------
    a : float
        Concentration (> -b).
    b : float
        Discount in [0, 1).
    e_log_v, e_log_1mv : ndarray of float64, shape (K,)
        :func:`stick_expectations` of sticks 1..K.

    Returns
    -------
    float
    """
    i = np.arange(1, len(e_log_v) + 1, dtype=np.float64)
    q = a + i * b
    return float(np.sum(gammaln(1.0 - b + q) - gammaln(1.0 - b) - gammaln(q) - b * np.asarray(e_log_v)
                        + (q - 1.0) * np.asarray(e_log_1mv)))


def py_stick_gradient(a: float, b: float, e_log_v: np.ndarray, e_log_1mv: np.ndarray) -> np.ndarray:
    """Return the gradient (dL/da, dL/db) of :func:`py_stick_objective`.

    Parameters
    ----------
    a, b : float
        Concentration and discount.
    e_log_v, e_log_1mv : ndarray of float64, shape (K,)
        Stick expectations.

    Returns
    -------
    ndarray of float64, shape (2,)
    """
    i = np.arange(1, len(e_log_v) + 1, dtype=np.float64)
    q = a + i * b
    t = 1.0 - b + q
    d_a = np.sum(psi(t) - psi(q) + e_log_1mv)
    d_b = np.sum((i - 1.0) * psi(t) + psi(1.0 - b) - i * psi(q) - e_log_v + i * e_log_1mv)
    return np.array([d_a, d_b])


def py_stick_hessian(a: float, b: float, n_sticks: int) -> np.ndarray:
    """Return the Hessian of :func:`py_stick_objective` (it does not depend on the sticks' q).

    Parameters
    ----------
    a, b : float
        Concentration and discount.
    n_sticks : int
        K.

    Returns
    -------
    ndarray of float64, shape (2, 2)
        Negative definite for K >= 2 (negative semidefinite for K = 1).
    """
    i = np.arange(1, n_sticks + 1, dtype=np.float64)
    q = a + i * b
    t = 1.0 - b + q
    tt = polygamma(1, t)
    tq = polygamma(1, q)
    h_aa = np.sum(tt - tq)
    h_ab = np.sum((i - 1.0) * tt - i * tq)
    h_bb = np.sum((i - 1.0) ** 2 * tt - i ** 2 * tq) - n_sticks * float(polygamma(1, 1.0 - b))
    return np.array([[h_aa, h_ab], [h_ab, h_bb]])


def _best_concentration(b: float, e_log_v: np.ndarray, e_log_1mv: np.ndarray, a0: float,
                        max_iter: int, tol: float) -> float:
    """Maximize L(., b) over a > 0 for a fixed discount (closed form at b = 0, Newton otherwise)."""
    s = float(np.sum(e_log_1mv))
    if b == 0.0:
        return max(MIN_CONCENTRATION, len(e_log_1mv) / -s) if s < 0.0 else a0
    a = a0
    f = py_stick_objective(a, b, e_log_v, e_log_1mv)
    for _ in range(max_iter):
        g = py_stick_gradient(a, b, e_log_v, e_log_1mv)[0]
        h = py_stick_hessian(a, b, len(e_log_1mv))[0, 0]
        step = -g / h if h < 0.0 else g
        accepted = False
        while abs(step) > 1e-14 * (1.0 + a):
            new = a + step
            if new > MIN_CONCENTRATION:
                f_new = py_stick_objective(new, b, e_log_v, e_log_1mv)
                if f_new >= f:
                    accepted = True
                    break
            step *= 0.5
        if not accepted:
            break
        delta, a, f = new - a, new, f_new
        if abs(delta) <= tol * (1.0 + a):
            break
    return a


def optimize_pitman_yor(nu1: np.ndarray, nu2: np.ndarray, a: float, b: float, *, discount: bool = True,
                        max_iter: int = 100, tol: float = 1e-10) -> tuple[float, float]:
    """Return the (a, b) that maximize the PY stick term of the ELBO for the given q (module docstring).

    Parameters
    ----------
    nu1, nu2 : ndarray of float64, shape (K,)
        The Beta parameters of one adapted nonterminal's sticks.
    a, b : float
        The current concentration and discount (the starting point).
    discount : bool
        Optimize the discount too (jointly); otherwise b stays as given and only a moves.
    max_iter : int
        Newton iterations at most.
    tol : float
        Relative change of a (and absolute change of b) below which the iteration stops.

    Returns
    -------
    a : float
        The maximizing concentration (> 0; unchanged when K = 0).
    b : float
        The maximizing discount in [0, 1) (as given when ``discount`` is False or K = 0).
    """
    e_log_v, e_log_1mv = stick_expectations(nu1, nu2)
    if e_log_v.size == 0:
        return float(a), float(b)
    a, b = float(a), float(b)
    if not discount:
        return _best_concentration(b, e_log_v, e_log_1mv, a, max_iter, tol), b
    f = py_stick_objective(a, b, e_log_v, e_log_1mv)
    for _ in range(max_iter):
        g = py_stick_gradient(a, b, e_log_v, e_log_1mv)
        if b <= 0.0 and g[1] <= 0.0:  # the bound b >= 0 is active: the best a for b = 0
            a_new, b_new = _best_concentration(0.0, e_log_v, e_log_1mv, a, max_iter, tol), 0.0
            f_new = py_stick_objective(a_new, b_new, e_log_v, e_log_1mv)
            if f_new < f:
                break
            done = abs(a_new - a) <= tol * (1.0 + a) and b == 0.0
            a, b, f = a_new, b_new, f_new
            if done:
                break
            continue
        h = py_stick_hessian(a, b, len(e_log_v))
        try:
            direction = -np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            direction = g
        if float(direction @ g) <= 0.0:  # not an ascent direction (numerically indefinite): gradient
            direction = g
        step = 1.0
        accepted = False
        while step > 1e-14:
            a_new = a + step * direction[0]
            b_new = min(max(b + step * direction[1], 0.0), MAX_DISCOUNT)
            if a_new > MIN_CONCENTRATION and a_new + b_new > 0.0:
                f_new = py_stick_objective(a_new, b_new, e_log_v, e_log_1mv)
                if f_new >= f:
                    accepted = True
                    break
            step *= 0.5
        if not accepted:
            break
        done = abs(a_new - a) <= tol * (1.0 + a) and abs(b_new - b) <= tol
        a, b, f = a_new, b_new, f_new
        if done:
            break
    return a, b


def dirichlet_objective(alpha: np.ndarray, gamma: np.ndarray) -> float:
    """Return E_q[log Dir(theta; alpha)] for q(theta) = Dir(gamma) (eq. A.2 of one nonterminal).

    Its maximum over alpha is at alpha = gamma (module docstring), which is why the rule prior alpha is not
    re-estimated.

    Parameters
    ----------
    alpha : ndarray of float64, shape (R_c,)
        Prior of one nonterminal's rules.
    gamma : ndarray of float64, shape (R_c,)
        Its variational Dirichlet.

    Returns
    -------
    float
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    e_log_theta = psi(gamma) - psi(gamma.sum())
    return float(gammaln(alpha.sum()) - gammaln(alpha).sum() + ((alpha - 1.0) * e_log_theta).sum())
