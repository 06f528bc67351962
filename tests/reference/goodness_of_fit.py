"""Goodness-of-fit check shared by the samplers' distribution tests."""
from __future__ import annotations

import numpy as np
from scipy.stats import chisquare


def chi_square_p(observed: np.ndarray, expected_prob: np.ndarray) -> float:
    """Chi-square p-value, with the outcomes of expected count below 5 pooled into one cell."""
    expected = expected_prob * observed.sum()
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        assert obs[-1] == 0
        obs, exp = obs[:-1], exp[:-1]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)
