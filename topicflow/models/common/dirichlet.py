"""Dirichlet expectations, entropies, posterior means and Newton-Raphson estimation of Dirichlet hyperparameters.

This module owns the math shared by every model with Dirichlet factors: E_q[log X] of Dirichlet rows
(and its exponential, Hoffman et al. 2010's trick), the entropy of q(theta_d) that ends every
document's bound, the posterior mean of Dirichlet-multinomial rows (the topic-word estimate of every
sampler and of normalized lambda), and the Newton updates of the document-topic prior alpha and the
symmetric topic-word prior eta (Minka 2000; Blei et al. 2003, appendix A.4.2). It must not import
dask, zarr or logging, and it does no I/O.

Glossary:
    params: Dirichlet parameters, rows of shape (..., n_components)
    elog: E_q[log X] = psi(params) - psi(sum(params))
    doc_topic_prior (alpha, (n_topics,)): prior of the document-topic proportions theta
    alpha_suff ((n_topics,)): sum_d E_q[log theta_dk] = sum_d [psi(gamma_dk) - psi(sum_k gamma_dk)]
    topic_word_var (lambda, (n_topics, n_terms)): variational Dirichlet parameters of the topics beta
    topic_word_prior (eta): symmetric prior of the topics
    counts ((n_rows, n_components)): multinomial counts of each row (n_kw of a topic), prior: its Dirichlet prior

References
----------
Blei, Ng and Jordan (2003). Latent Dirichlet allocation. JMLR 3, 993-1022.
Minka (2000). Estimating a Dirichlet distribution. Technical report.
Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.special import (
    digamma,
    digamma_array,
    exp_digamma_minus_into,
    gammaln_array,
    trigamma_array,
)

#: Step halvings tried before a Newton iteration is declared stalled (at the optimum, to rounding).
_MAX_HALVINGS = 60


def dirichlet_expectation(params: FloatArray) -> FloatArray:
    """E[log X] for Dirichlet-distributed rows X ~ Dir(params).

    Parameters
    ----------
    params : ndarray of shape (n_components,) or (n_rows, n_components), float64
        Positive Dirichlet parameters, one distribution per row.

    Returns
    -------
    ndarray of the shape of ``params``, float64

    Notes
    -----
    NumPy equivalent: ``psi(params) - psi(params.sum(-1, keepdims=True))``.

    Examples
    --------
    >>> dirichlet_expectation(np.array([1.0, 1.0])).round(6).tolist()
    [-1.0, -1.0]
    """
    p = np.asarray(params, dtype=np.float64)
    return digamma_array(p) - digamma_array(p.sum(axis=-1, keepdims=True))


@numba.njit(nogil=True, cache=True)
def exp_dirichlet_expectation_into(params, out):
    """Write exp(E[log X]) of one Dirichlet into ``out``: the kernels' form, one row at a time.

    Parameters
    ----------
    params : ndarray of shape (n_components,), float64
        Positive Dirichlet parameters (one gamma_d, or one row of lambda).
    out : ndarray of shape (n_components,), float64
        Written in place.

    Notes
    -----
    NumPy equivalent: ``np.exp(psi(params) - psi(params.sum()))``, with the sum accumulated in index
    order; the VB E-step calls it for exp(E[log theta_d]) and :func:`exp_dirichlet_expectation_rows`
    for every row of lambda, so both give the same bits for the same parameters.
    """
    total = 0.0
    for c in range(params.shape[0]):
        total += params[c]
    exp_digamma_minus_into(params, digamma(total), out)


@numba.njit(nogil=True, cache=True)
def _exp_dirichlet_expectation_rows(params: FloatArray, out: FloatArray) -> None:
    for r in range(params.shape[0]):
        exp_dirichlet_expectation_into(params[r], out[r])


@numba.njit(nogil=True, cache=True)
def _digamma_of_row_sums(params: FloatArray, out: FloatArray) -> None:
    # Summed in the order of _exp_dirichlet_expectation_rows, so both give the same bits.
    for r in range(params.shape[0]):
        total = 0.0
        for c in range(params.shape[1]):
            total += params[r, c]
        out[r] = digamma(total)


@numba.njit(nogil=True, cache=True)
def _exp_dirichlet_expectation_columns(params, psi_totals, columns, out, row_offset):
    # Gathered into contiguous runs so the vectorized exp-digamma applies; a chunk of columns keeps
    # the scattered output rows in cache.
    chunk = 256
    gathered = np.empty(chunk)
    values = np.empty(chunk)
    for start in range(0, columns.shape[0], chunk):
        stop = min(start + chunk, columns.shape[0])
        n = stop - start
        for r in range(params.shape[0]):
            for i in range(n):
                gathered[i] = params[r, columns[start + i]]
            exp_digamma_minus_into(gathered[:n], psi_totals[r], values[:n])
            for i in range(n):
                out[row_offset + columns[start + i], r] = values[i]


def digamma_of_row_sums(params: FloatArray) -> FloatArray:
    """Compute psi(sum of each row) of a 2-d array of Dirichlet parameters, (n_rows,) float64.

    Examples
    --------
    >>> digamma_of_row_sums(np.array([[0.5, 0.5]])).round(6).tolist()
    [-0.577216]
    """
    p = np.ascontiguousarray(params, dtype=np.float64)
    out = np.empty(p.shape[0], dtype=np.float64)
    _digamma_of_row_sums(p, out)
    return out


def exp_dirichlet_expectation_columns(
    params: FloatArray, psi_totals: FloatArray, columns: IntArray, out: np.ndarray, *, row_offset: int = 0
) -> None:
    """Write exp(E[log X]) of the chosen columns, transposed, into rows ``row_offset + column`` of ``out``.

    Parameters
    ----------
    params : ndarray of shape (n_rows, n_components), float64
        Dirichlet parameters (lambda), C-contiguous.
    psi_totals : ndarray of shape (n_rows,), float64
        :func:`digamma_of_row_sums` of ``params``.
    columns : ndarray of shape (n_columns,), int64
        Components to compute (for example the terms present in a minibatch).
    out : ndarray of shape (>= row_offset + n_components, n_rows), float64 or float32
        Written in place at ``out[row_offset + c, r]``; other rows are left as they are.

    Notes
    -----
    NumPy equivalent: ``out[row_offset + columns] = exp(psi(params[:, columns]) - psi_totals[:, None]).T``.
    Each value has the same bits as :func:`exp_dirichlet_expectation_rows` gives it, so an E-step
    that reads only its documents' terms does not depend on which other terms were computed.
    """
    _exp_dirichlet_expectation_columns(params, psi_totals, columns, out, row_offset)


def exp_dirichlet_expectation_rows(params: FloatArray) -> FloatArray:
    """Compute exp(E[log X]) for each row of a 2-d array of Dirichlet parameters.

    Parameters
    ----------
    params : ndarray of shape (n_rows, n_components), float64

    Returns
    -------
    ndarray of shape (n_rows, n_components), float64

    Notes
    -----
    NumPy equivalent: ``np.exp(psi(params) - psi(params.sum(1, keepdims=True)))``; this is
    ``exp_elog_topic_word`` of Hoffman et al. (2010), Algorithm 1, when ``params`` is lambda.

    Examples
    --------
    >>> exp_dirichlet_expectation_rows(np.array([[1.0, 1.0]])).round(6).tolist()
    [[0.367879, 0.367879]]
    """
    p = np.ascontiguousarray(params, dtype=np.float64)
    if p.ndim != 2:
        raise InvalidParameterError(f"params must be 2-d (n_rows, n_components), got shape {p.shape!r}")
    out = np.empty_like(p)
    _exp_dirichlet_expectation_rows(p, out)
    return out


def dirichlet_entropy(params: FloatArray, elog: FloatArray | None = None) -> FloatArray:
    """Entropy -E_q[log q(X)] of each row of Dirichlet parameters.

    Parameters
    ----------
    params : ndarray of shape (n_rows, n_components), float64
        Positive Dirichlet parameters (gamma of a block of documents).
    elog : ndarray of shape (n_rows, n_components), float64, optional
        :func:`dirichlet_expectation` of ``params``, when the caller has it already.

    Returns
    -------
    ndarray of shape (n_rows,), float64

    Notes
    -----
    The theta part of every document's bound (Blei et al. 2003, appendix A.3):
    ``-(lnG(sum p) - sum lnG(p) + sum (p - 1) E[log X])``, vectorized over rows (NumPy's pairwise
    sums). Inside kernels, :func:`add_dirichlet_entropy` adds the same terms one document at a time.

    Examples
    --------
    >>> dirichlet_entropy(np.array([[1.0, 1.0]])).round(12).tolist()  # uniform on a segment of length 1
    [0.0]
    """
    p = np.asarray(params, dtype=np.float64)
    e = dirichlet_expectation(p) if elog is None else elog
    neg_entropy = gammaln_array(p.sum(axis=1)) - gammaln_array(p).sum(axis=1) + np.sum((p - 1.0) * e, axis=1)
    out: FloatArray = -neg_entropy
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def add_dirichlet_entropy(params, value, elog_sum):
    """Add the entropy of Dir(``params``) to ``value``, term by term, and E[log X] to ``elog_sum``.

    Parameters
    ----------
    params : ndarray of shape (n_components,), float64
        One row of positive Dirichlet parameters (gamma_d).
    value : float
        The running bound the entropy is added to.
    elog_sum : ndarray of shape (n_components,), float64
        ``psi(params_k) - psi(sum(params))`` is added to component k, in place (alpha_suff).

    Returns
    -------
    float
        ``value - lnG(sum p) + sum_k [lnG(p_k) - (p_k - 1) E[log X_k]]``, accumulated in that order.

    Notes
    -----
    The numba form of :func:`dirichlet_entropy` for one row, inlined into the E-step kernel; the
    sum of ``params`` and the entropy terms are accumulated in index order.
    """
    total = 0.0
    for k in range(params.shape[0]):
        total += params[k]
    psi_total = digamma(total)
    value -= math.lgamma(total)
    for k in range(params.shape[0]):
        elog = digamma(params[k]) - psi_total
        elog_sum[k] += elog
        value += math.lgamma(params[k]) - (params[k] - 1.0) * elog
    return value


def posterior_mean(counts: np.ndarray, prior: FloatArray | float = 0.0, *,
                   totals: np.ndarray | None = None) -> FloatArray:
    """Posterior mean of each row's Dirichlet given its multinomial counts: ``(counts + prior) / (n + sum prior)``.

    Parameters
    ----------
    counts : ndarray of shape (n_rows, n_components), int or float
        Counts of each row (n_kw of topic k), or the Dirichlet parameters themselves with ``prior=0``
        (lambda: normalized rows); read as float64.
    prior : float or ndarray of shape (n_components,) or (n_rows, n_components), default 0.0
        The Dirichlet prior: a symmetric scalar (beta), or one value per component or per entry.
    totals : ndarray of shape (n_rows,), int or float, optional
        The row sums of ``counts`` when the caller keeps them (n_k); by default ``counts.sum(axis=1)``.

    Returns
    -------
    ndarray of shape (n_rows, n_components), float64
        Rows sum to 1.

    Notes
    -----
    Griffiths and Steyvers (2004), eq. (6): phi_kw = (n_kw + beta) / (n_k + V beta), the topic-word
    estimate of every sampler; with ``prior=0`` it normalizes lambda into the variational posterior
    mean of the topics. A zero scalar prior is not added, so normalizing parameters costs one pass.
    NumPy equivalent: ``(counts + prior) / (counts.sum(1) + prior_sum)[:, None]`` with
    ``prior_sum = V * prior`` for a scalar, else the prior's row sums.

    Examples
    --------
    >>> posterior_mean(np.array([[2.0, 0.0]]), 1.0).tolist()
    [[0.75, 0.25]]
    >>> posterior_mean(np.array([[3.0, 1.0]])).tolist()
    [[0.75, 0.25]]
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2:
        raise InvalidParameterError(f"counts must be 2-d (n_rows, n_components), got shape {c.shape!r}")
    n = c.sum(axis=1) if totals is None else np.asarray(totals, dtype=np.float64)
    if np.ndim(prior) == 0:
        value = float(prior)
        if value == 0.0:
            out: FloatArray = c / n[:, None]
            return out
        numer = c + value
        denom = n + c.shape[1] * value
    else:
        eta = np.asarray(prior, dtype=np.float64)
        numer = c + eta
        denom = n + np.broadcast_to(eta, c.shape).sum(axis=1)
    out = numer / denom[:, None]
    return out


def dirichlet_objective(alpha: FloatArray, alpha_suff: FloatArray, n_docs: int) -> float:
    """Alpha-dependent part of the ELBO: E_q[log p(theta | alpha)] summed over documents.

    Parameters
    ----------
    alpha : ndarray of shape (n_topics,), float64
    alpha_suff : ndarray of shape (n_topics,), float64
        Sufficient statistic sum_d E_q[log theta_dk].
    n_docs : int

    Returns
    -------
    float
        ``n_docs * (lnG(sum(alpha)) - sum(lnG(alpha))) + sum((alpha - 1) * alpha_suff)``.

    Examples
    --------
    >>> dirichlet_objective(np.array([1.0, 1.0]), np.array([-1.0, -1.0]), 1)
    0.0
    """
    a = np.asarray(alpha, dtype=np.float64)
    s = np.asarray(alpha_suff, dtype=np.float64)
    value = n_docs * (math.lgamma(float(a.sum())) - float(gammaln_array(a).sum()))
    return float(value + np.sum((a - 1.0) * s))


def _check_alpha_inputs(alpha: FloatArray, alpha_suff: FloatArray, n_docs: int) -> None:
    if alpha.ndim != 1 or alpha.shape != alpha_suff.shape:
        raise InvalidParameterError(
            f"alpha and alpha_suff must be 1-d of the same shape (n_topics,), got "
            f"{alpha.shape!r} and {alpha_suff.shape!r}"
        )
    if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
        raise InvalidParameterError(f"alpha must be finite and positive, got {alpha!r}")
    if not np.all(np.isfinite(alpha_suff)):
        raise NumericalError(f"alpha_suff is not finite: {alpha_suff!r}; the E-step produced non-finite values")
    if n_docs < 1:
        raise InvalidParameterError(f"n_docs must be a positive integer, got {n_docs!r}")


def _newton_direction(alpha: FloatArray, alpha_suff: FloatArray, n_docs: int) -> FloatArray:
    """Ascent direction -H^{-1} g, with H = diag(q) + z 11^T inverted by Sherman-Morrison."""
    gradient = n_docs * (float(digamma_array(alpha.sum())) - digamma_array(alpha)) + alpha_suff
    q = -n_docs * trigamma_array(alpha)
    z = n_docs * float(trigamma_array(alpha.sum()))
    b = np.sum(gradient / q) / (1.0 / z + np.sum(1.0 / q))
    return -(gradient - b) / q


def newton_alpha(
    alpha: FloatArray,
    alpha_suff: FloatArray,
    n_docs: int,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> tuple[FloatArray, int]:
    """Maximize the alpha part of the ELBO by a guarded Newton-Raphson iteration.

    Parameters
    ----------
    alpha : ndarray of shape (n_topics,), float64
        Starting point; finite and positive.
    alpha_suff : ndarray of shape (n_topics,), float64
        Sufficient statistic sum_d [psi(gamma_dk) - psi(sum_k gamma_dk)], as collected by the E-step.
    n_docs : int
        Number of documents D that contributed to ``alpha_suff``.
    max_iter : int, default 100
    tol : float, default 1e-10
        Stop when the largest relative change max_k |delta_k| / alpha_k falls below ``tol``.

    Returns
    -------
    alpha_new : ndarray of shape (n_topics,), float64
        Positive.
    n_iter : int
        Newton iterations performed.

    Raises
    ------
    InvalidParameterError
        ``alpha`` not positive and finite, shapes differ, or ``n_docs < 1``.
    NumericalError
        ``alpha_suff`` or an iterate is not finite.

    Notes
    -----
    Maximizes f(a) = D (lnG(sum_k a_k) - sum_k lnG(a_k)) + sum_k (a_k - 1) alpha_suff_k, which is
    concave (Minka 2000). Gradient g_k = D (psi(sum a) - psi(a_k)) + alpha_suff_k; Hessian
    H = diag(-D psi'(a_k)) + D psi'(sum a) 11^T. With q = diag part and z the rank-one weight,
    H^{-1} g = (g - b) / q where b = sum(g / q) / (1 / z + sum(1 / q)) (Sherman-Morrison; Blei et al.
    2003, A.2). A full step is halved until every a_k stays positive and f does not decrease.
    NumPy equivalent of one step: ``a - np.linalg.solve(np.diag(q) + z, g)``.

    Examples
    --------
    >>> alpha, n_iter = newton_alpha(np.array([1.0, 1.0]), np.array([-2.0, -2.0]), 1)
    >>> bool(np.all(alpha > 0))
    True
    """
    a = np.array(alpha, dtype=np.float64)
    s = np.asarray(alpha_suff, dtype=np.float64)
    _check_alpha_inputs(a, s, n_docs)
    value = dirichlet_objective(a, s, n_docs)
    for n_iter in range(1, max_iter + 1):
        direction = _newton_direction(a, s, n_docs)
        if not np.all(np.isfinite(direction)):
            raise NumericalError(f"Newton direction for alpha is not finite at alpha={a!r}, alpha_suff={s!r}")
        candidate, cand_value = _backtrack(a, direction, value, lambda x: dirichlet_objective(x, s, n_docs))
        if candidate is None:
            return a, n_iter
        change = float(np.max(np.abs(candidate - a) / a))
        a, value = candidate, cand_value
        if change < tol:
            return a, n_iter
    return a, max_iter


_ROUNDING_SLACK = 1e-13


def _backtrack(
    point: FloatArray, direction: FloatArray, value: float, objective: object
) -> tuple[FloatArray | None, float]:
    """Halve the step until the candidate is positive and does not decrease the objective."""
    step = 1.0
    for _ in range(_MAX_HALVINGS):
        candidate = point + step * direction
        if np.all(candidate > 0):
            cand_value = objective(candidate)  # type: ignore[operator]
            if not math.isfinite(cand_value):
                raise NumericalError(
                    f"Dirichlet objective is not finite at {candidate!r} (from {point!r}, step {step!r})"
                )
            # Near the optimum the objective is flat below rounding, so a strict ">=" would accept or
            # reject Newton's (then quadratically convergent) step by noise and stop ~1e-9 short of the
            # optimum, at a point that depends on the last bits of the statistics.
            if cand_value >= value - _ROUNDING_SLACK * max(1.0, abs(value)):
                return candidate, cand_value
        step *= 0.5
    return None, value


def _newton_symmetric(
    value: float, dim: int, n_groups: int, suff_total: float, max_iter: int, tol: float
) -> tuple[float, int]:
    """Maximize n_groups (lnG(dim a) - dim lnG(a)) + (a - 1) suff_total over scalar a > 0."""

    def objective(x: FloatArray) -> float:
        v = float(x[0])
        return n_groups * (math.lgamma(dim * v) - dim * math.lgamma(v)) + (v - 1.0) * suff_total

    a = np.array([value], dtype=np.float64)
    current = objective(a)
    for n_iter in range(1, max_iter + 1):
        v = float(a[0])
        gradient = n_groups * dim * (float(digamma_array(dim * v)) - float(digamma_array(v))) + suff_total
        hessian = n_groups * dim * (dim * float(trigamma_array(dim * v)) - float(trigamma_array(v)))
        direction = np.array([-gradient / hessian])
        if not np.isfinite(direction[0]):
            raise NumericalError(f"Newton direction is not finite at value={v!r} (dim={dim}, n={n_groups})")
        candidate, cand_value = _backtrack(a, direction, current, objective)
        if candidate is None:
            return v, n_iter
        change = abs(float(candidate[0]) - v) / v
        a, current = candidate, cand_value
        if change < tol:
            return float(a[0]), n_iter
    return float(a[0]), max_iter


def newton_symmetric_alpha(
    alpha: float,
    alpha_suff: FloatArray,
    n_docs: int,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> tuple[float, int]:
    """Newton-Raphson for a symmetric alpha (one scalar shared by all topics).

    Parameters
    ----------
    alpha : float
        Starting value, positive.
    alpha_suff : ndarray of shape (n_topics,), float64
    n_docs : int
    max_iter : int, default 100
    tol : float, default 1e-10
        Relative change at which to stop.

    Returns
    -------
    alpha_new : float
    n_iter : int

    Raises
    ------
    InvalidParameterError
        ``alpha`` not positive and finite, or ``n_docs < 1``.
    NumericalError
        An iterate or ``alpha_suff`` is not finite.

    Notes
    -----
    Maximizes f(a) = D (lnG(K a) - K lnG(a)) + (a - 1) sum_k alpha_suff_k, with
    f'(a) = D K (psi(K a) - psi(a)) + sum_k alpha_suff_k and f''(a) = D K (K psi'(K a) - psi'(a));
    steps are halved as in :func:`newton_alpha`.

    Examples
    --------
    >>> a, _ = newton_symmetric_alpha(0.5, np.array([-3.0, -3.0]), 2)
    >>> a > 0
    True
    """
    s = np.asarray(alpha_suff, dtype=np.float64)
    _check_alpha_inputs(np.array([alpha] * s.shape[0], dtype=np.float64), s, n_docs)
    return _newton_symmetric(float(alpha), int(s.shape[0]), int(n_docs), float(s.sum()), max_iter, tol)


def newton_symmetric_eta(
    topic_word_var: FloatArray,
    eta: float,
    *,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> tuple[float, int]:
    """Newton-Raphson for the symmetric topic-word prior eta of one language.

    Parameters
    ----------
    topic_word_var : ndarray of shape (n_topics, n_terms), float64
        Variational parameters lambda; E_q[log beta_kw] is computed from it.
    eta : float
        Starting value, positive.
    max_iter : int, default 100
    tol : float, default 1e-10

    Returns
    -------
    eta_new : float
    n_iter : int

    Raises
    ------
    InvalidParameterError
        ``eta`` not positive and finite, or ``topic_word_var`` not 2-d.
    NumericalError
        An iterate is not finite.

    Notes
    -----
    Maximizes sum_k [lnG(V eta) - V lnG(eta) + (eta - 1) sum_w E_q[log beta_kw]], the eta part of
    E_q[log p(beta | eta)] (Blei et al. 2003, section 5.4).

    Examples
    --------
    >>> eta, _ = newton_symmetric_eta(np.array([[2.0, 1.0], [1.0, 3.0]]), 0.5)
    >>> eta > 0
    True
    """
    lam = np.asarray(topic_word_var, dtype=np.float64)
    if lam.ndim != 2:
        raise InvalidParameterError(f"topic_word_var must be 2-d (n_topics, n_terms), got shape {lam.shape!r}")
    if not (math.isfinite(eta) and eta > 0):
        raise InvalidParameterError(f"eta must be finite and positive, got {eta!r}")
    suff_total = float(dirichlet_expectation(lam).sum())
    if not math.isfinite(suff_total):
        raise NumericalError("E[log beta] of topic_word_var is not finite; lambda must be positive")
    return _newton_symmetric(float(eta), int(lam.shape[1]), int(lam.shape[0]), suff_total, max_iter, tol)
