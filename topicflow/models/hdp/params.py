"""Settings of the collapsed HDP methods, with the paper's values as defaults (Bleier, sec. 4).

Glossary: T truncation (the number of sticks, not the number of topics), beta the symmetric
topic-word prior, alpha the document concentration, gamma the top-level concentration, ``rho^c``
the step of the topic-word statistics n_kw, ``rho^d`` of the document statistics n_dk and ``rho^h``
of the sticks and hyperparameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from topicflow._typing import DocStart
from topicflow.errors import InvalidParameterError
from topicflow.models.common.step_sizes import PowerStep

#: Bleier sec. 4: rho^c with s = 10, tau = 1000; rho^d with s = 1, tau = 10; rho^h with s = 5, tau = 100.
PAPER_TOPIC_WORD_STEP = PowerStep(10.0, 1000.0, 0.9)
PAPER_DOC_STEP = PowerStep(1.0, 10.0, 0.9)
PAPER_HYPER_STEP = PowerStep(5.0, 100.0, 0.9)


@dataclass(frozen=True)
class HDPParams:
    """Model and inference settings of PCSVB0 and PCVB0.

    Attributes
    ----------
    truncation : int, default 200
        T, the number of sticks (Bleier sec. 4: T = 200). Only T - 1 sticks have (u, v); pi_bar_T = 1.
    topic_word_prior : float, default 0.01
        beta (Bleier sec. 4, all algorithms).
    alpha_init, gamma_init : float, default 1.0
        Starting document and top-level concentrations (the paper gives none; spec P7).
    learn_alpha, learn_gamma : bool, default True
        Point-estimate updates by eqs. 5/12 and 6; False keeps the starting value.
    alpha_floor : float, default 1e-3
        Lower bound of alpha after each update (eq. 12 is unstable for very short documents; spec P11).
    topic_word_step, doc_step, hyper_step : PowerStep
        rho^c, rho^d, rho^h (paper values by default).
    burn_in : int, default 0
        Extra passes over a document's words that update only n_dk before the pass that updates the
        global statistics (Algorithm 1 has none; Foulds et al. used one). E[1(n_dk >= 1)] comes from
        the last pass only.
    doc_start : {"random", "zero"}, default "random"
        n_dk of a document the first time it is seen: n_d times a draw from a flat Dirichlet keyed by
        (seed, document) (Foulds et al.'s random start), or zero.
    keep_doc_state : bool, default False
        Keep each document's n_dk between passes (Algorithm 1, line 1 initializes n_dk once, before
        its loop over passes); False starts it afresh by ``doc_start`` on every visit, as a stream must.
    clumping : bool, default False
        One update per distinct term of a document, applied as ``count`` word-by-word updates with q
        held fixed (Bleier sec. 5's first item of future work).
    seed : int, default 0
        Keys the random start of the topic-word statistics and of every document.
    init_shape : float, default 100.0
        n_kw starts as Gamma(init_shape, 1/init_shape) noise rescaled so that it sums to the number of
        training tokens n (spec P2, P7).
    """

    truncation: int = 200
    topic_word_prior: float = 0.01
    alpha_init: float = 1.0
    gamma_init: float = 1.0
    learn_alpha: bool = True
    learn_gamma: bool = True
    alpha_floor: float = 1e-3
    topic_word_step: PowerStep = field(default=PAPER_TOPIC_WORD_STEP)
    doc_step: PowerStep = field(default=PAPER_DOC_STEP)
    hyper_step: PowerStep = field(default=PAPER_HYPER_STEP)
    burn_in: int = 0
    doc_start: DocStart = "random"
    keep_doc_state: bool = False
    clumping: bool = False
    seed: int = 0
    init_shape: float = 100.0

    def __post_init__(self) -> None:
        if not (isinstance(self.truncation, int) and self.truncation >= 2):
            raise InvalidParameterError(f"truncation must be an integer >= 2, got {self.truncation!r}")
        for name in ("topic_word_prior", "alpha_init", "gamma_init", "alpha_floor", "init_shape"):
            if not getattr(self, name) > 0:
                raise InvalidParameterError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not (isinstance(self.burn_in, int) and self.burn_in >= 0):
            raise InvalidParameterError(f"burn_in must be a non-negative integer, got {self.burn_in!r}")
        if self.doc_start not in ("random", "zero"):
            raise InvalidParameterError(f"doc_start must be 'random' or 'zero', got {self.doc_start!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (kept in the model file's settings)."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            out[item.name] = value.to_dict() if isinstance(value, PowerStep) else value
        return out

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> HDPParams:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        known = {item.name for item in fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, value in payload.items():
            if name not in known:
                continue
            kwargs[name] = PowerStep.from_dict(value) if name.endswith("_step") else value
        return cls(**kwargs)
