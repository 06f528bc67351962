"""Hyperparameter parsers of topicflow.models.common.validation, Dirichlet priors in particular."""
from __future__ import annotations

import math

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.common.validation import parse_dirichlet_prior, parse_positive_float


@pytest.mark.parametrize(("value", "expected"), [
    (0.5, [0.5] * 3), (np.float32(0.25), [0.25] * 3), (2, [2.0] * 3), (np.array(0.5), [0.5] * 3), ([0.7], [0.7] * 3),
    ([1, 2, 3], [1.0, 2.0, 3.0]), (np.array([0.1, 0.2, 0.3]), [0.1, 0.2, 0.3]), ("0.5", [0.5] * 3),
    ("1, 2,3", [1.0, 2.0, 3.0]),
])
def test_dirichlet_prior_accepts_one_value_or_one_per_component(value: object, expected: list[float]) -> None:
    out = parse_dirichlet_prior("alpha", value, 3)
    assert out.dtype == np.float64 and out.shape == (3,) and out.tolist() == expected


def test_dirichlet_prior_returns_a_fresh_array() -> None:
    given = np.array([0.1, 0.2])
    out = parse_dirichlet_prior("alpha", given, 2)
    out[0] = 9.0
    assert given[0] == 0.1


@pytest.mark.parametrize(("value", "message"), [
    ("1,2", "alpha '1,2' has 2 values; give one value (symmetric) or one per topic (3)"),
    (np.ones((3, 1)), "1-d list of numbers, got shape (3, 1)"), ([], "has 0 values"), ("a", "'a' is not a number"), ([0.1, None, 1.0], "every value"),
    (0.0, "every value must be a positive finite number"), (-1.0, "positive"), (math.nan, "positive finite"),
    ([1.0, math.inf, 1.0], "positive finite"),
])
def test_dirichlet_prior_rejects_bad_values_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match="^alpha") as info:
        parse_dirichlet_prior("alpha", value, 3)
    assert message in str(info.value)


def test_positive_float() -> None:
    assert parse_positive_float("beta", np.int64(2)) == 2.0 and isinstance(parse_positive_float("beta", 2), float)
    for bad in (0.0, -0.1, math.inf, math.nan, True, "1", None):
        with pytest.raises(InvalidParameterError, match=r"beta must be a positive finite number, got"):
            parse_positive_float("beta", bad)
