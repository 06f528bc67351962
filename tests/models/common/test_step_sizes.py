"""Robbins-Monro step sizes rho_t = s / (tau + t)^kappa and the clumping identity."""
from __future__ import annotations

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.common.step_sizes import PowerStep, keep_after, power_step
from topicflow.models.hdp.params import (
    PAPER_DOC_STEP,
    PAPER_HYPER_STEP,
    PAPER_TOPIC_WORD_STEP,
)


def test_paper_schedules_first_steps():
    """Bleier sec. 4 with counters starting at 0 (spec 1.3): 10/1000^0.9, 1/10^0.9, 5/100^0.9."""
    assert PAPER_TOPIC_WORD_STEP.rho(0) == pytest.approx(0.01995, abs=1e-5)
    assert PAPER_DOC_STEP.rho(0) == pytest.approx(0.12589, abs=1e-5)
    assert PAPER_HYPER_STEP.rho(0) == pytest.approx(0.07924, abs=1e-5)


@pytest.mark.parametrize("t", [0, 1, 7, 1000, 123456])
def test_rho_is_the_formula(t):
    step = PowerStep(2.0, 30.0, 0.7)
    assert step.rho(t) == pytest.approx(2.0 / (30.0 + t) ** 0.7, rel=1e-15)
    assert power_step(2.0, 30.0, 0.7, float(t)) == step.rho(t)


def test_steps_decrease_and_stay_in_zero_one():
    step = PAPER_TOPIC_WORD_STEP
    values = np.array([step.rho(t) for t in range(0, 10000, 97)])
    assert np.all(np.diff(values) < 0) and np.all((values > 0) & (values <= 1))


@pytest.mark.parametrize("m", [1, 2, 5, 40])
def test_keep_is_the_product_of_one_minus_rho_and_composes_repeated_updates(m):
    step, t = PowerStep(1.0, 10.0, 0.9), 17
    expected = np.prod([1.0 - step.rho(t + j) for j in range(m)])
    assert step.keep(t, m) == pytest.approx(expected, rel=1e-14)
    assert keep_after(1.0, 10.0, 0.9, float(t), m) == step.keep(t, m)
    # m updates x <- (1 - rho) x + rho y with y fixed equal one update with keep (the clumping identity)
    x, y = np.array([3.0, -1.0, 0.5]), np.array([0.2, 0.7, 1.1])
    repeated = x.copy()
    for j in range(m):
        r = step.rho(t + j)
        repeated = (1.0 - r) * repeated + r * y
    keep = step.keep(t, m)
    np.testing.assert_allclose(keep * x + (1.0 - keep) * y, repeated, rtol=1e-13)
    assert step.keep(t, 0) == 1.0


@pytest.mark.parametrize("bad", [(0.0, 10.0, 0.9), (1.0, -1.0, 0.9), (1.0, 10.0, 0.5), (1.0, 10.0, 1.2),
                                 (2.0, 1.0, 0.9), (1.0, 0.0, 0.9)])
def test_invalid_schedules_are_rejected(bad):
    with pytest.raises(InvalidParameterError):
        PowerStep(*bad)


def test_round_trip():
    step = PowerStep(5.0, 100.0, 0.9)
    assert PowerStep.from_dict(step.to_dict()) == step
    assert PowerStep.from_dict({"scale": 1, "delay": 10}) == PowerStep(1.0, 10.0, 0.9)
