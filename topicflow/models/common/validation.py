"""Checks of hyperparameters shared by the models' ``Params`` dataclasses; each returns the clean value.

Pure Python; messages name the field, the allowed range and the value given.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError


def parse_int(what: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high)`` (no upper bound when ``high`` is None); bools are refused.

    Examples
    --------
    >>> parse_int("GibbsParams.n_topics", np.int64(3), 1)
    3
    """
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not is_int or value < low or (high is not None and value >= high):
        bound = f">= {low}" if high is None else f"in [{low}, {high})"
        raise InvalidParameterError(f"{what} must be an integer {bound}, got {value!r}")
    return int(value)


def parse_float(what: str, value: Any, low: float, high: float, *, open_low: bool) -> float:
    """``value`` as a finite float in ``(low, high]`` (``[low, high]`` unless ``open_low``)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    x = float(value) if ok else math.nan
    if not (math.isfinite(x) and (x > low if open_low else x >= low) and x <= high):
        side = "(" if open_low else "["
        raise InvalidParameterError(f"{what} must be a number in {side}{low}, {high}], got {value!r}")
    return x


def parse_choice(what: str, value: Any, allowed: tuple[str, ...]) -> str:
    """``value`` if it is one of ``allowed``."""
    if value not in allowed:
        raise InvalidParameterError(f"{what} must be one of {list(allowed)!r}, got {value!r}")
    return str(value)


def parse_positive_float(what: str, value: Any) -> float:
    """``value`` as a positive finite float (a symmetric Dirichlet prior, a scale); bools are refused.

    Examples
    --------
    >>> parse_positive_float("GibbsParams.topic_word_prior", np.float32(0.5))
    0.5
    """
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{what} must be a positive finite number, got {value!r}")
    return float(value)


def parse_dirichlet_prior(what: str, value: Any, size: int, *, component: str = "topic") -> FloatArray:
    """A Dirichlet prior as a fresh vector of ``size`` positive finite float64 values.

    Parameters
    ----------
    what : str
        Name of the prior in messages (e.g. ``"GibbsParams.doc_topic_prior"``).
    value : float, sequence of float, ndarray or str
        One value (a symmetric prior, repeated ``size`` times), ``size`` values (one per
        component), or a string of one or ``size`` comma-separated numbers (command-line input).
    size : int
        Number of components (topics for alpha).
    component : str, default "topic"
        What one component is, for messages.

    Returns
    -------
    ndarray of shape (size,), float64
        A new array.

    Raises
    ------
    InvalidParameterError
        A value that is not a number, not positive or not finite, or neither 1 nor ``size`` values.

    Notes
    -----
    NumPy equivalent: ``np.broadcast_to(np.asarray(value, float), (size,)).copy()`` plus the checks.

    Examples
    --------
    >>> parse_dirichlet_prior("alpha", 0.5, 3).tolist()
    [0.5, 0.5, 0.5]
    >>> parse_dirichlet_prior("alpha", "1, 2,3", 3).tolist()
    [1.0, 2.0, 3.0]
    """
    parts = [p for p in value.replace(" ", "").split(",") if p] if isinstance(value, str) else value
    try:
        values = np.array(parts, dtype=np.float64, ndmin=1)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{what} {value!r} is not a number or a list of numbers") from exc
    if values.ndim != 1:
        raise InvalidParameterError(
            f"{what} {value!r} must be one number or a 1-d list of numbers, got shape {values.shape!r}"
        )
    if values.shape[0] not in (1, size):
        raise InvalidParameterError(
            f"{what} {value!r} has {values.size} values; give one value (symmetric) or one per {component} ({size})"
        )
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise InvalidParameterError(f"{what} {value!r}: every value must be a positive finite number")
    return np.broadcast_to(values, (size,)).copy()
