"""Resampling schemes: unbiased copy counts, sortedness, bounds, degenerate weights, variance ordering."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from topicflow.errors import InvalidParameterError
from topicflow.models.common.resampling import (
    SCHEME_CODES,
    effective_sample_size,
    effective_sample_size_njit,
    resample,
    resample_into,
)
from topicflow.models.common.rng import STREAM_RESAMPLE, counter_key, uniform_from_key

SCHEMES = sorted(SCHEME_CODES)
N_KEYS = 3000
#: A fixed weight vector with a zero, a dominant particle and non-integer P w_p.
WEIGHTS = np.array([0.31, 0.0, 0.02, 0.17, 0.09, 0.11, 0.005, 0.145, 0.05, 0.1])


def _keys(n: int, seed: int = 0) -> list[int]:
    return [int(counter_key(seed, STREAM_RESAMPLE, 0, i)) for i in range(n)]


def _copies(weights: np.ndarray, scheme: str, n_keys: int = N_KEYS) -> np.ndarray:
    """(n_keys, P) copy counts of each particle over keyed draws."""
    return np.stack([np.bincount(resample(weights, scheme, key), minlength=weights.shape[0])
                     for key in _keys(n_keys)])


def _reference_ancestors(weights: np.ndarray, scheme: str, key: int) -> np.ndarray:
    """Obvious NumPy version: sorted points, inverse CDF by searchsorted (residual handled apart)."""
    n = weights.shape[0]
    k = np.uint64(key)
    if scheme == "residual":
        floors = np.floor(n * weights).astype(np.int64)
        rest = n * weights - floors
        n_rest = n - int(floors.sum())
        draws = _reference_ancestors_from_points(rest, _sorted_iid(k, n_rest)) if n_rest else []
        return np.sort(np.concatenate([np.repeat(np.arange(n), floors), draws]).astype(np.int64))
    if scheme == "systematic":
        points = (np.arange(n) + uniform_from_key(k, 0)) / n
    elif scheme == "stratified":
        points = (np.arange(n) + np.array([uniform_from_key(k, i) for i in range(n)])) / n
    else:
        points = _sorted_iid(k, n)
    return _reference_ancestors_from_points(weights, points)


def _sorted_iid(key: np.uint64, n: int) -> np.ndarray:
    exps = np.array([-math.log(1.0 - uniform_from_key(key, i)) for i in range(n + 1)])
    return np.cumsum(exps)[:n] / exps.sum()


def _reference_ancestors_from_points(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    last = int(np.flatnonzero(values > 0)[-1])
    return np.minimum(np.searchsorted(np.cumsum(values), points * values.sum(), side="right"), last)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_matches_numpy_reference(scheme: str) -> None:
    rng = np.random.default_rng(3)
    for trial, key in enumerate(_keys(40, seed=5)):
        weights = rng.dirichlet(np.full(7 + trial % 5, 0.7))
        assert np.array_equal(resample(weights, scheme, key), _reference_ancestors(weights, scheme, key))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_outputs_sorted_in_range_and_keyed(scheme: str) -> None:
    keys = _keys(50)
    for key in keys:
        out = resample(WEIGHTS, scheme, key)
        assert out.shape == WEIGHTS.shape and out.dtype == np.int64
        assert np.all(np.diff(out) >= 0)
        assert out.min() >= 0 and out.max() < WEIGHTS.shape[0]
        assert not np.any(out == 1), "a zero-weight particle was copied"
        assert np.array_equal(out, resample(WEIGHTS, scheme, key))
    distinct = {tuple(resample(WEIGHTS, scheme, key)) for key in keys}
    assert len(distinct) > 1


@pytest.mark.parametrize("scheme", SCHEMES)
def test_copy_counts_are_unbiased(scheme: str) -> None:
    copies = _copies(WEIGHTS, scheme)
    expected = WEIGHTS.shape[0] * WEIGHTS
    mean = copies.mean(axis=0)
    sem = copies.std(axis=0, ddof=1) / math.sqrt(N_KEYS)
    constant = sem == 0
    # A particle whose count never varies must get exactly P w_p (e.g. a zero weight).
    assert_allclose(mean[constant], expected[constant], atol=1e-12)
    z = np.abs(mean[~constant] - expected[~constant]) / sem[~constant]
    assert z.max() < 4.5, f"{scheme}: z-scores {np.round(z, 2)}"


def test_systematic_and_residual_copy_bounds() -> None:
    scaled = WEIGHTS.shape[0] * WEIGHTS
    systematic = _copies(WEIGHTS, "systematic", 500)
    assert np.all(systematic >= np.floor(scaled)) and np.all(systematic <= np.ceil(scaled))
    residual = _copies(WEIGHTS, "residual", 500)
    assert np.all(residual >= np.floor(scaled))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_degenerate_weights(scheme: str) -> None:
    one_hot = np.zeros(6)
    one_hot[4] = 1.0
    for key in _keys(20):
        assert np.array_equal(resample(one_hot, scheme, key), np.full(6, 4))
    # Weights summing to 1 - 1e-9: the last positive particle absorbs points past the cumulative sum.
    short = np.array([0.5, 0.5 - 1e-9, 0.0])
    for key in _keys(20):
        out = resample(short, scheme, key)
        assert out.max() <= 1 and out.shape == (3,)


@pytest.mark.parametrize("scheme", ["systematic", "residual"])
def test_uniform_weights_copy_each_particle_once(scheme: str) -> None:
    for key in _keys(50):
        assert np.array_equal(resample(np.full(8, 1 / 8), scheme, key), np.arange(8))


@pytest.mark.parametrize("scheme", ["residual", "stratified", "systematic"])
def test_variance_not_above_multinomial(scheme: str) -> None:
    multinomial = _copies(WEIGHTS, "multinomial").var(axis=0, ddof=1).sum()
    # Exact multinomial variance sum_p P w_p (1 - w_p) checks the baseline itself.
    exact = float(np.sum(WEIGHTS.shape[0] * WEIGHTS * (1 - WEIGHTS)))
    assert_allclose(multinomial, exact, rtol=0.1)
    assert _copies(WEIGHTS, scheme).var(axis=0, ddof=1).sum() < 0.8 * multinomial


def test_resample_into_takes_scheme_code_and_fills_out() -> None:
    out = np.full(WEIGHTS.shape[0], -7, dtype=np.int64)
    key = counter_key(1, STREAM_RESAMPLE, 2, 3)
    resample_into(WEIGHTS, SCHEME_CODES["stratified"], key, out)
    assert np.array_equal(out, resample(WEIGHTS, "stratified", int(key)))


def test_effective_sample_size() -> None:
    assert effective_sample_size(np.full(5, 0.2)) == pytest.approx(5.0, rel=1e-14)
    assert effective_sample_size(np.array([0.0, 1.0, 0.0])) == 1.0
    assert effective_sample_size(WEIGHTS) == pytest.approx(1 / np.sum(WEIGHTS**2), rel=1e-14)
    assert effective_sample_size_njit(2 * WEIGHTS) == pytest.approx(1 / np.sum(WEIGHTS**2), rel=1e-14)


@pytest.mark.parametrize(
    ("weights", "scheme", "key", "match"),
    [
        (WEIGHTS, "bootstrap", 0, "unknown resampling scheme"),
        (WEIGHTS * 2, "systematic", 0, "normalized"),
        (np.array([1.5, -0.5]), "systematic", 0, "nonnegative"),
        (np.array([np.nan, 1.0]), "systematic", 0, "finite"),
        (np.array([]), "systematic", 0, "non-empty"),
        (WEIGHTS, "systematic", -1, "key"),
    ],
)
def test_invalid_inputs_raise(weights: np.ndarray, scheme: str, key: int, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        resample(weights, scheme, key)  # type: ignore[arg-type]
