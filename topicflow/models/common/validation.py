"""Checks of hyperparameters shared by the models' ``Params`` dataclasses; each returns the clean value.

Pure Python; messages name the field, the allowed range and the value given.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

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
