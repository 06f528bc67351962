"""Settings shared by the estimators of the collapsed variational methods: ``HDP`` and ``LDA(method="scvb0")``.

Step-size schedules are given as ``(s, tau)`` or ``(s, tau, kappa)`` tuples (``rho_t = s / (tau + t) ** kappa``,
Bleier sec. 4 and Foulds et al. 2013) and become :class:`~topicflow.models.common.step_sizes.PowerStep`.
"""
from __future__ import annotations

from typing import Any

from topicflow.api._base import Parsed
from topicflow.errors import InvalidParameterError
from topicflow.models.common.step_sizes import PowerStep

#: Bleier sec. 4: (s, tau) of rho^c (n_kw), rho^d (n_dk) and rho^h (sticks and hyperparameters); kappa = 0.9.
PAPER_STEPS = {"topic_word_step": (10.0, 1000.0), "doc_step": (1.0, 10.0), "hyper_step": (5.0, 100.0)}
PAPER_STEP_POWER = 0.9


def parse_step(value: Any, power: float = PAPER_STEP_POWER) -> PowerStep:
    """A step-size schedule ``(s, tau)`` (or ``(s, tau, kappa)``, or a ``PowerStep``) as a :class:`PowerStep`.

    Parameters
    ----------
    value : tuple of 2 or 3 numbers, str "s,tau[,kappa]" or PowerStep
        ``rho_t = s / (tau + t) ** kappa``.
    power : float, default 0.9
        ``kappa`` when ``value`` gives only ``(s, tau)``.

    Returns
    -------
    PowerStep

    Raises
    ------
    InvalidParameterError
        Not two or three positive numbers, or a first step ``s / tau ** kappa`` above 1.
    """
    if isinstance(value, PowerStep):
        return value
    if isinstance(value, str):
        value = tuple(part.strip() for part in value.split(","))
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise InvalidParameterError(f"a step-size schedule is (s, tau) or (s, tau, kappa), got {value!r}")
    try:
        numbers = [float(v) for v in value]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"a step-size schedule is (s, tau) or (s, tau, kappa) numbers, got {value!r}") from None
    if len(numbers) == 2:
        numbers.append(float(power))
    return PowerStep(numbers[0], numbers[1], numbers[2])


STEP_CONSTRAINT = Parsed(parse_step, "(s, tau) or (s, tau, kappa) with s > 0, tau >= 0, kappa in (0.5, 1] and s / tau^kappa <= 1")


#: Bleier sec. 4: the document-topic prior of SCVB0 (a fixed symmetric alpha).
SCVB0_ALPHA = 0.1


def step_tuple(step: PowerStep) -> tuple[float, ...]:
    """A schedule as an estimator parameter: ``(s, tau)``, or ``(s, tau, kappa)`` when kappa is not 0.9.

    Parameters
    ----------
    step : PowerStep

    Returns
    -------
    tuple of float
    """
    if step.power == PAPER_STEP_POWER:
        return (step.scale, step.delay)
    return (step.scale, step.delay, step.power)
