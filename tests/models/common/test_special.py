"""digamma, trigamma and lgamma against scipy."""
from __future__ import annotations

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose
from scipy.special import gammaln, polygamma, psi

from topicflow.models.common.special import (
    DIGAMMA_LGAMMA_FAST_MAX,
    DIGAMMA_LGAMMA_FAST_MIN,
    EXP_DIGAMMA_FAST_MAX,
    digamma,
    digamma_array,
    digamma_lgamma,
    exp_digamma_minus_into,
    gammaln_array,
    trigamma,
    trigamma_array,
)

WIDE = np.concatenate([np.logspace(-300, 300, 4001), np.linspace(1e-4, 40.0, 20001)])


def test_digamma_matches_scipy_over_a_wide_range() -> None:
    got, want = digamma_array(WIDE), psi(WIDE)
    # Relative 1e-14 where |psi| >= 1; absolute 1e-14 around the root of psi near 1.4616.
    assert_allclose(got, want, rtol=1e-14, atol=1e-14)


def test_digamma_special_values_and_negative_arguments() -> None:
    assert abs(digamma(1.0) + 0.5772156649015329) < 1e-14  # -Euler-Mascheroni
    assert np.isnan(digamma(0.0)) and np.isnan(digamma(-3.0)) and np.isnan(digamma(np.nan))
    x = np.array([-0.5, -1.5, -2.25, -7.3])
    assert_allclose(digamma_array(x), psi(x), rtol=1e-12)


def test_trigamma_and_gammaln_match_scipy() -> None:
    x = WIDE[WIDE > 1e-150]
    assert_allclose(trigamma_array(x), polygamma(1, x), rtol=1e-13)
    assert np.isnan(trigamma(-1.0))
    assert_allclose(gammaln_array(WIDE[WIDE < 1e300]), gammaln(WIDE[WIDE < 1e300]), rtol=1e-14, atol=1e-14)
    assert digamma_array(np.ones((2, 3))).shape == (2, 3)


def _exp_digamma_minus(x: np.ndarray, offset: float) -> np.ndarray:
    out = np.empty_like(x)
    exp_digamma_minus_into(x, offset, out)
    return out


def test_exp_digamma_minus_matches_scipy_over_a_wide_range() -> None:
    x = WIDE[WIDE < 1e300]
    for offset in (0.0, 4.5, -2.0):
        got, want = _exp_digamma_minus(x, offset), np.exp(psi(x) - offset)
        normal = want > 1e-306
        # The relative error of exp(psi) is the absolute error of psi, 4e-13 at x ~ 0.002 where psi ~ -500.
        assert_allclose(got[normal], want[normal], rtol=5e-13)
        assert_allclose(got[x >= 0.01], want[x >= 0.01], rtol=1e-13)
        # Where the true value is subnormal the fast path gives 0 (libm a number below 1e-306).
        assert np.all(got[~normal] <= 1e-306)


def test_exp_digamma_minus_takes_the_scalar_path_outside_its_fast_range() -> None:
    x = np.array([np.nan, 0.0, 1e-320, 2.0, 10 * EXP_DIGAMMA_FAST_MAX, 1e300, np.inf])
    got = _exp_digamma_minus(x, 1.5)
    want = np.array([np.exp(digamma(v) - 1.5) for v in x])
    assert_allclose(got, want, rtol=1e-15)
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[-1] == np.inf


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(1e-4, 1e6)), st.floats(-50.0, 50.0))
def test_exp_digamma_minus_gives_each_value_the_same_bits_wherever_it_sits(x: np.ndarray, offset: float) -> None:
    # The vectorized loop body and its scalar remainder must agree to the bit: model arrays filled
    # row by row and column by column rely on it.
    alone = np.array([_exp_digamma_minus(x[i:i + 1], offset)[0] for i in range(len(x))])
    assert np.array_equal(_exp_digamma_minus(x, offset), alone)
    assert np.array_equal(_exp_digamma_minus(x[1:], offset), alone[1:])


@numba.njit
def _pairs(x: np.ndarray, psi_out: np.ndarray, lgamma_out: np.ndarray) -> None:
    for i in range(x.shape[0]):
        psi_out[i], lgamma_out[i] = digamma_lgamma(x[i])


def test_digamma_lgamma_pair_matches_scipy_in_and_outside_its_fast_range() -> None:
    x = np.concatenate([np.logspace(-300, 300, 4001), np.linspace(1e-4, 40.0, 20001),
                        [DIGAMMA_LGAMMA_FAST_MIN, DIGAMMA_LGAMMA_FAST_MAX, 1.0, 2.0, 6.0]])
    got_psi, got_lgamma = np.empty_like(x), np.empty_like(x)
    _pairs(x, got_psi, got_lgamma)
    # Absolute 1e-14 where the value is below 1 in size (the shared shift cancels near lnG's roots
    # at 1 and 2), relative 1e-14 elsewhere.
    assert_allclose(got_psi, psi(x), rtol=1e-14, atol=1e-14)
    assert_allclose(got_lgamma, gammaln(x), rtol=1e-14, atol=1e-14)
    outside = (x < DIGAMMA_LGAMMA_FAST_MIN) | (x > DIGAMMA_LGAMMA_FAST_MAX)
    assert outside.any() and np.array_equal(got_psi[outside], digamma_array(x[outside]))
    assert np.array_equal(got_lgamma[outside], gammaln_array(x[outside]))
