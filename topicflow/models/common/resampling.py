"""Resampling of a weighted particle cloud: which ancestor each new particle copies.

This module owns the four classical resampling schemes compared by Douc and Cappé (2005) and the
effective sample size that decides when to resample. Each scheme maps normalized weights and one
counter-based key to the sorted ancestor indices of the next generation, so a resampling step is a
pure function of ``(seed, STREAM_RESAMPLE, document position)`` and never of call history, threads or
block boundaries. Pure NumPy + numba; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary (Douc and Cappé 2005; Canini, Shi and Griffiths 2009):
    n_particles (P): particles in the cloud
    weights (w, (n_particles,)): normalized importance weights, sum 1
    ancestors (a, (n_particles,)): a_i is the particle that new particle i copies; sorted ascending
    copies (N_p): number of i with a_i = p; every scheme has E[N_p] = P w_p
    effective sample size (ESS): 1 / sum_p w_p^2, between 1 and P
    key: a uint64 from ``counter_key(seed, STREAM_RESAMPLE, epoch, position)``; the scheme reads
        uniforms ``uniform_from_key(key, i)`` for ``i = 0, 1, ...``

References
----------
Douc and Cappé (2005). Comparison of resampling schemes for particle filtering. ISPA 2005, 64-69.
Canini, Shi and Griffiths (2009). Online inference of topics with latent Dirichlet allocation. AISTATS.
Devroye (1986). Non-uniform random variate generation, chapter V.3 (sorted uniforms from spacings).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray, ResamplingScheme
from topicflow.errors import InvalidParameterError
from topicflow.models.common.rng import uniform_from_key

#: Integer codes of the schemes, as numba kernels receive them.
SCHEME_CODES: dict[str, int] = {"multinomial": 0, "residual": 1, "stratified": 2, "systematic": 3}
MULTINOMIAL, RESIDUAL, STRATIFIED, SYSTEMATIC = 0, 1, 2, 3
#: Largest tolerated ``|sum(weights) - 1|`` in the validating wrappers.
WEIGHT_SUM_TOL = 1e-6


@numba.njit(nogil=True, cache=True)
def _sorted_uniforms(scheme_code, key, positions):
    """Fill ``positions`` with the scheme's sorted points in [0, 1) (one per new particle)."""
    n = positions.shape[0]
    if n == 0:
        return
    if scheme_code == SYSTEMATIC:
        shared = uniform_from_key(key, 0)
        for i in range(n):
            positions[i] = (i + shared) / n
    elif scheme_code == STRATIFIED:
        for i in range(n):
            positions[i] = (i + uniform_from_key(key, i)) / n
    else:
        # Sorted iid uniforms without a sort: with E_1..E_{n+1} iid Exp(1) and S_i their partial sums,
        # (S_1/S_{n+1}, ..., S_n/S_{n+1}) are the order statistics of n uniforms (Devroye 1986, V.3).
        total = 0.0
        for i in range(n + 1):
            total += -math.log(1.0 - uniform_from_key(key, i))
        running = 0.0
        for i in range(n):
            running += -math.log(1.0 - uniform_from_key(key, i))
            positions[i] = min(running / total, 1.0) if total > 0.0 else i / n


@numba.njit(nogil=True, cache=True)
def _last_positive(values):
    """Index of the last positive entry of ``values``, or of its largest entry if none is positive."""
    for j in range(values.shape[0] - 1, -1, -1):
        if values[j] > 0.0:
            return j
    return int(np.argmax(values))


@numba.njit(nogil=True, cache=True)
def _walk(values, floor_copies, positions, out):
    """Merge deterministic copies and sorted points into sorted ancestors written to ``out``.

    Particle j first gets ``floor_copies[j]`` copies, then one per point of ``positions * sum(values)``
    that falls in its interval [c_j, c_j + values_j). The last particle with positive value takes every
    point left over, which absorbs round-off when the cumulative sum ends just short of the total.
    """
    total = 0.0
    for j in range(values.shape[0]):
        total += values[j]
    last = _last_positive(values)
    m, written, cum = 0, 0, 0.0
    for j in range(values.shape[0]):
        for _ in range(floor_copies[j]):
            out[written] = j
            written += 1
        upper = cum + values[j]
        while m < positions.shape[0] and (j >= last or positions[m] * total < upper):
            out[written] = j
            written += 1
            m += 1
        cum = upper


@numba.njit(nogil=True, cache=True)
def resample_into(weights, scheme_code, key, out):
    """Draw sorted ancestor indices for a new generation of ``len(weights)`` particles.

    Parameters
    ----------
    weights : ndarray of shape (n_particles,), float64
        Nonnegative, normalized (the kernel divides by their sum, so round-off does not matter).
    scheme_code : int
        ``SCHEME_CODES[scheme]``.
    key : uint64
        ``counter_key(seed, STREAM_RESAMPLE, epoch, position)``; uniform i is ``uniform_from_key(key, i)``.
    out : ndarray of shape (n_particles,), int64
        Receives the ancestor of each new particle, sorted ascending.

    Notes
    -----
    Douc and Cappé (2005), with x_p = P w_p and points u_(1) <= ... <= u_(P) in [0, 1):

    - multinomial: u_(i) are sorted iid uniforms (exponential spacings, uniforms 0..P);
    - residual: floor(x_p) copies of p, then R = P - sum floor(x_p) multinomial draws on the residual
      weights x_p - floor(x_p) (uniforms 0..R);
    - stratified: u_(i) = (i + U_i) / P (uniforms 0..P-1);
    - systematic: u_(i) = (i + U_0) / P (uniform 0).

    Ancestor of point u is the p with sum_{q<p} w_q <= u < sum_{q<=p} w_q. NumPy equivalent (all but
    residual): ``np.minimum(np.searchsorted(np.cumsum(w), u * w.sum(), side="right"), last_positive)``.
    """
    n = weights.shape[0]
    floor_copies = np.zeros(n, dtype=np.int64)
    values = weights.copy()
    n_points = n
    if scheme_code == RESIDUAL:
        total = 0.0
        for j in range(n):
            total += weights[j]
        for j in range(n):
            scaled = weights[j] * n / total
            floor_copies[j] = min(int(math.floor(scaled)), n)
            values[j] = scaled - floor_copies[j]
            n_points -= floor_copies[j]
        n_points = max(n_points, 0)
    positions = np.empty(n_points, dtype=np.float64)
    _sorted_uniforms(MULTINOMIAL if scheme_code == RESIDUAL else scheme_code, key, positions)
    _walk(values, floor_copies, positions, out)


@numba.njit(nogil=True, cache=True)
def effective_sample_size_njit(weights):
    """``(sum w)^2 / sum w^2``, i.e. ``1 / sum w^2`` for normalized weights (callable from kernels)."""
    total = 0.0
    squares = 0.0
    for j in range(weights.shape[0]):
        total += weights[j]
        squares += weights[j] * weights[j]
    return total * total / squares if squares > 0.0 else 0.0


def _check_weights(weights: FloatArray) -> FloatArray:
    """Weights as a contiguous float64 vector, or InvalidParameterError saying what is wrong."""
    values = np.ascontiguousarray(weights, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise InvalidParameterError(f"weights must be a non-empty 1-d array, got shape {values.shape!r}")
    if not np.all(np.isfinite(values)) or np.any(values < 0.0):
        raise InvalidParameterError(f"weights must be finite and nonnegative, got min {values.min()!r}")
    total = float(values.sum())
    if abs(total - 1.0) > WEIGHT_SUM_TOL:
        raise InvalidParameterError(
            f"weights must be normalized (sum 1 within {WEIGHT_SUM_TOL!r}), got sum {total!r}; divide by the sum"
        )
    return values


def parse_scheme(scheme: str) -> int:
    """Integer code of a resampling scheme name, or InvalidParameterError listing the allowed names."""
    if scheme not in SCHEME_CODES:
        raise InvalidParameterError(f"unknown resampling scheme {scheme!r}; expected one of {sorted(SCHEME_CODES)!r}")
    return SCHEME_CODES[scheme]


def resample(weights: FloatArray, scheme: ResamplingScheme, key: int) -> IntArray:
    """Sorted ancestor indices of a resampled particle cloud.

    Parameters
    ----------
    weights : ndarray of shape (n_particles,), float64
        Nonnegative importance weights that sum to 1 (within ``WEIGHT_SUM_TOL``).
    scheme : {"multinomial", "residual", "stratified", "systematic"}
    key : int
        In [0, 2**64), normally ``int(counter_key(seed, STREAM_RESAMPLE, epoch, position))``.

    Returns
    -------
    ndarray of shape (n_particles,), int64
        Ancestor of each new particle, sorted ascending; particle p appears P w_p times on average.

    Raises
    ------
    InvalidParameterError
        Unknown scheme, key out of range, or weights empty, not 1-d, negative, non-finite or not
        normalized.

    Notes
    -----
    Validates once and calls :func:`resample_into` (see its Notes for each scheme). Systematic and
    stratified resampling have lower variance of the copy counts than multinomial; systematic keeps
    every count in [floor(P w_p), ceil(P w_p)] (Douc and Cappé 2005).

    Examples
    --------
    >>> resample(np.array([0.5, 0.5]), "systematic", 7).tolist()
    [0, 1]
    >>> resample(np.array([0.0, 1.0, 0.0]), "multinomial", 3).tolist()
    [1, 1, 1]
    """
    code = parse_scheme(scheme)
    values = _check_weights(weights)
    if not (0 <= int(key) < 2**64):
        raise InvalidParameterError(f"key must be in [0, 2**64), got {key!r}")
    out = np.empty(values.shape[0], dtype=np.int64)
    resample_into(values, code, np.uint64(int(key)), out)
    return out


def effective_sample_size(weights: FloatArray) -> float:
    """Effective sample size ``1 / sum_p w_p^2`` of normalized weights.

    Parameters
    ----------
    weights : ndarray of shape (n_particles,), float64
        Nonnegative, summing to 1 (within ``WEIGHT_SUM_TOL``).

    Returns
    -------
    float
        In [1, n_particles]: P for uniform weights, 1 when one particle holds all the weight.

    Raises
    ------
    InvalidParameterError
        Weights empty, not 1-d, negative, non-finite or not normalized.

    Notes
    -----
    NumPy equivalent: ``weights.sum() ** 2 / np.sum(weights ** 2)``. A particle filter resamples when
    the ESS falls below a threshold (Canini et al. 2009, Algorithm 4).

    Examples
    --------
    >>> effective_sample_size(np.full(4, 0.25))
    4.0
    >>> effective_sample_size(np.array([1.0, 0.0]))
    1.0
    """
    return float(effective_sample_size_njit(_check_weights(weights)))
