"""Robbins-Monro step sizes ``rho_t = s / (tau + t) ** kappa`` of the collapsed stochastic methods.

SCVB0 (Foulds et al. 2013, sec. 3) and PCSVB0 (Bleier, sec. 4) write their schedules in this form
with ``kappa = 0.9``; online VB's ``(tau0 + t) ** -kappa`` (:mod:`topicflow.models.lda.vb.online`) is
the case ``s = 1``. The counter ``t`` starts at 0, so the first step is ``s / tau ** kappa``.

Clumping applies ``m`` identical updates ``x <- (1 - rho_t) x + rho_t y`` with ``y`` held fixed; they
compose to ``x <- keep * x + (1 - keep) * y`` with ``keep = prod_{j<m} (1 - rho_{t+j})``
(:func:`keep_after`), which is what lets one update per distinct term equal ``m`` word-by-word ones
whenever ``q`` does not change in between.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba

from topicflow.errors import InvalidParameterError


@numba.njit(nogil=True, cache=True)
def power_step(s: float, tau: float, kappa: float, t: float) -> float:
    """``s / (tau + t) ** kappa``: the step at counter ``t`` (numba-callable)."""
    return s / (tau + t) ** kappa


@numba.njit(nogil=True, cache=True)
def keep_after(s: float, tau: float, kappa: float, t: float, m: int) -> float:
    """``prod_{j<m} (1 - rho_{t+j})``: what ``m`` consecutive steps from counter ``t`` keep of the old value."""
    keep = 1.0
    for j in range(m):
        keep *= 1.0 - s / (tau + t + j) ** kappa
    return keep


@dataclass(frozen=True, slots=True)
class PowerStep:
    """The schedule ``rho_t = scale / (delay + t) ** power``.

    Attributes
    ----------
    scale : float
        ``s``; positive.
    delay : float
        ``tau``; non-negative, and ``scale / delay ** power <= 1`` so that every step is a convex blend.
    power : float, default 0.9
        ``kappa`` in (0.5, 1] (Robbins-Monro conditions); both papers use 0.9.
    """

    scale: float
    delay: float
    power: float = 0.9

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise InvalidParameterError(f"step scale s must be positive, got {self.scale!r}")
        if not self.delay >= 0:
            raise InvalidParameterError(f"step delay tau must be non-negative, got {self.delay!r}")
        if not 0.5 < self.power <= 1.0:
            raise InvalidParameterError(f"step power kappa must lie in (0.5, 1], got {self.power!r}")
        if self.delay == 0 or self.scale / self.delay ** self.power > 1.0:
            raise InvalidParameterError(
                f"the first step s / tau^kappa = {self.scale!r} / {self.delay!r}^{self.power!r} exceeds 1; "
                "raise tau or lower s so that every step blends old and new statistics")

    def rho(self, t: float) -> float:
        """The step at counter ``t`` (``t >= 0``)."""
        return float(power_step(self.scale, self.delay, self.power, float(t)))

    def keep(self, t: float, m: int) -> float:
        """What ``m`` consecutive steps starting at counter ``t`` keep of the old value."""
        return float(keep_after(self.scale, self.delay, self.power, float(t), int(m)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"scale": self.scale, "delay": self.delay, "power": self.power}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> PowerStep:
        """Inverse of :meth:`to_dict`."""
        return cls(float(payload["scale"]), float(payload["delay"]), float(payload.get("power", 0.9)))
