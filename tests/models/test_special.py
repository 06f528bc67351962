"""digamma, trigamma and lgamma against scipy."""
from __future__ import annotations

import numpy as np
from numpy.testing import assert_allclose
from scipy.special import gammaln, polygamma, psi

from topicflow.models.special import digamma, digamma_array, gammaln_array, trigamma, trigamma_array

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
