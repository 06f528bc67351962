"""SCVB0: stochastic collapsed variational Bayes for LDA (Foulds, Boyles, DuBois, Smyth & Welling 2013).

The baseline of Bleier's Fig. 1 (K topics, symmetric alpha = 0.1, beta = 0.01). This module owns
only SCVB0's settings and state and the schedule around the token update; the token update, the
document step, the lazy-scaled topic-word step and the minibatch statistics are the ones PCSVB0 uses
(:mod:`topicflow.models.common.cvb0`), with the fixed prior ``alpha`` per topic instead of ``alpha * pi``.
Pure math: no Dask, no I/O.

Glossary (Foulds et al.): N^phi = n_kw (``topic_word * scale``), N^Z = n_k. (``topic_totals * scale``),
N^theta_j = n_dk, C = n (training tokens), |M| the minibatch's tokens, rho^phi = rho^c (s = 10,
tau = 1000, kappa = 0.9), rho^theta = rho^d (s = 1, tau = 10, kappa = 0.9).

Two schedules:

- minibatch (Foulds' Algorithm 1): :func:`global_view`, :func:`local_minibatch` (per document
  ``burn_in`` passes updating N^theta, then a pass accumulating q), :func:`apply_minibatch`
  (N^phi <- (1 - rho^phi) N^phi + rho^phi (C / |M|) sum q; the counter counts minibatches);
- word by word (:func:`run_word_by_word`): the global update after every token, exactly as PCSVB0
  (Bleier's like-for-like comparison, spec 1.4); the counter counts tokens.

Checked against the sources (search index, 2026-11): the theta step is indexed by the token's position
within its document, reset for each document and continued through the burn-in pass into the final
pass, as in a public Python port of Foulds' code (``stepSize2 = (i + burn * docLength + tau2)^-kappa2``)
and MeTA's ``lda_scvb`` (``t`` runs over both phases of a document); both start N^theta randomly (n_d
times normalized uniforms) and use one burn-in pass. The ports differ on the phi counter (per
minibatch vs per document seen); we count minibatches, as Foulds' text ("after each minibatch").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topicflow._typing import DocStart, FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.cvb0 import (
    CVB0Stats,
    GlobalView,
    blend_topic_word,
    doc_start_code,
    make_global_view,
    run_block_word_by_word,
)
from topicflow.models.common.cvb0 import local_minibatch as _local_minibatch
from topicflow.models.common.rng import STREAM_TOPIC_INIT, doc_generator
from topicflow.models.common.step_sizes import PowerStep
from topicflow.models.hdp.params import PAPER_DOC_STEP, PAPER_TOPIC_WORD_STEP, HDPParams
from topicflow.models.hdp.state import HDPState

__all__ = [
    "CVB0Stats",
    "GlobalView",
    "SCVB0Params",
    "SCVB0State",
    "apply_minibatch",
    "as_scvb0_params",
    "global_view",
    "local_minibatch",
    "run_word_by_word",
]


@dataclass(frozen=True)
class SCVB0Params:
    """Settings of SCVB0 (Foulds et al.'s values, as Bleier sec. 4 uses them).

    Attributes
    ----------
    n_topics : int
        K.
    alpha : float, default 0.1
        Symmetric document-topic prior, per topic (Bleier sec. 4).
    beta : float, default 0.01
        Symmetric topic-word prior.
    topic_word_step : PowerStep, default (10, 1000, 0.9)
        rho^phi.
    doc_step : PowerStep, default (1, 10, 0.9)
        rho^theta, per token within the document.
    burn_in : int, default 1
        Passes over each document updating only N^theta before the accumulating pass (Foulds used one).
    doc_start : {"random", "zero"}, default "random"
    clumping : bool, default False
    seed : int, default 0
    init_shape : float, default 100.0
        N^phi starts as Gamma(init_shape, 1/init_shape) noise rescaled to sum to C (as HDPState).
    """

    n_topics: int
    alpha: float = 0.1
    beta: float = 0.01
    topic_word_step: PowerStep = field(default=PAPER_TOPIC_WORD_STEP)
    doc_step: PowerStep = field(default=PAPER_DOC_STEP)
    burn_in: int = 1
    doc_start: DocStart = "random"
    clumping: bool = False
    seed: int = 0
    init_shape: float = 100.0

    def __post_init__(self) -> None:
        if not (isinstance(self.n_topics, int) and self.n_topics >= 1):
            raise InvalidParameterError(f"n_topics must be a positive integer, got {self.n_topics!r}")
        for name in ("alpha", "beta", "init_shape"):
            if not getattr(self, name) > 0:
                raise InvalidParameterError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not (isinstance(self.burn_in, int) and self.burn_in >= 0):
            raise InvalidParameterError(f"burn_in must be a non-negative integer, got {self.burn_in!r}")
        doc_start_code(self.doc_start)

    def to_hdp_params(self) -> HDPParams:
        """The same settings as HDPParams (truncation = K, alpha_init = alpha; learning switched off).

        Returns
        -------
        HDPParams
        """
        return HDPParams(truncation=max(self.n_topics, 2), topic_word_prior=self.beta, alpha_init=self.alpha,
                         learn_alpha=False, learn_gamma=False, topic_word_step=self.topic_word_step,
                         doc_step=self.doc_step, burn_in=self.burn_in, doc_start=self.doc_start,
                         clumping=self.clumping, seed=self.seed, init_shape=self.init_shape)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"n_topics": self.n_topics, "alpha": self.alpha, "beta": self.beta,
                "topic_word_step": self.topic_word_step.to_dict(), "doc_step": self.doc_step.to_dict(),
                "burn_in": self.burn_in, "doc_start": self.doc_start, "clumping": self.clumping, "seed": self.seed,
                "init_shape": self.init_shape}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> SCVB0Params:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        kwargs = {key: value for key, value in payload.items() if key in cls.__dataclass_fields__}
        for name in ("topic_word_step", "doc_step"):
            if name in kwargs and isinstance(kwargs[name], dict):
                kwargs[name] = PowerStep.from_dict(kwargs[name])
        return cls(**kwargs)


def as_scvb0_params(params: SCVB0Params | HDPParams) -> SCVB0Params:
    """SCVB0 settings from either form (``CollapsedConfig`` carries HDPParams for every method).

    HDPParams read as: ``truncation`` = K, ``alpha_init`` = alpha, ``topic_word_prior`` = beta; steps,
    ``burn_in``, ``doc_start``, ``clumping``, ``seed`` and ``init_shape`` carry over.

    Parameters
    ----------
    params : SCVB0Params or HDPParams

    Returns
    -------
    SCVB0Params
    """
    if isinstance(params, SCVB0Params):
        return params
    return SCVB0Params(n_topics=params.truncation, alpha=params.alpha_init, beta=params.topic_word_prior,
                       topic_word_step=params.topic_word_step, doc_step=params.doc_step, burn_in=params.burn_in,
                       doc_start=params.doc_start, clumping=params.clumping, seed=params.seed,
                       init_shape=params.init_shape)


@dataclass
class SCVB0State(HDPState):
    """SCVB0's state: HDPState's arrays and counters with a fixed symmetric prior alpha per topic.

    ``tables`` and ``gamma`` are unused (kept at 0 and 1); ``t_hyper`` is unused. The prior is
    ``alpha`` per topic (not alpha * pi), so :meth:`to_lda_state` is the LDA model SCVB0 fits.
    """

    @classmethod
    def initial(cls, params: SCVB0Params | HDPParams, *, n_terms: int, n_tokens: int,
                n_docs: int) -> SCVB0State:
        """The random start of N^phi: Gamma(init_shape, 1/init_shape) noise rescaled to sum to C.

        Row k is drawn from ``doc_generator(seed, STREAM_TOPIC_INIT, 0, k)`` (as HDPState.initial).

        Parameters
        ----------
        params : SCVB0Params or HDPParams
        n_terms : int
        n_tokens, n_docs : int

        Returns
        -------
        SCVB0State
        """
        p = as_scvb0_params(params)
        rows = [doc_generator(p.seed, STREAM_TOPIC_INIT, 0, k).gamma(p.init_shape, 1.0 / p.init_shape, size=n_terms)
                for k in range(p.n_topics)]
        topic_word = np.vstack(rows).astype(np.float64)
        topic_word *= float(n_tokens) / float(topic_word.sum())
        return cls(topic_word=topic_word, topic_totals=topic_word.sum(axis=1), scale=1.0,
                   tables=np.zeros(p.n_topics), alpha=float(p.alpha), gamma=1.0, beta=float(p.beta),
                   n_tokens=int(n_tokens), n_docs=int(n_docs))

    def doc_topic_prior(self) -> FloatArray:
        """alpha per topic (symmetric, fixed)."""
        return np.full(self.truncation, self.alpha, dtype=np.float64)

    def stick_weights(self) -> FloatArray:
        """Uniform 1 / K (SCVB0 has no sticks; reported for a uniform read-out)."""
        return np.full(self.truncation, 1.0 / self.truncation, dtype=np.float64)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> SCVB0State:
        """Inverse of :meth:`to_arrays`."""
        state = HDPState.from_arrays(arrays, scalars)
        return cls(**{name: getattr(state, name) for name in state.__dataclass_fields__})

    def copy(self) -> SCVB0State:
        """A deep copy (arrays copied)."""
        arrays, scalars = self.to_arrays()
        return SCVB0State.from_arrays({k: v.copy() for k, v in arrays.items()}, dict(scalars))


def run_word_by_word(state: HDPState, block: DocBlock, params: SCVB0Params | HDPParams, *,
                     doc_topic: FloatArray | None = None) -> int:
    """SCVB0 with a global update after every token (a minibatch of one token), in place.

    Parameters
    ----------
    state : SCVB0State (or any HDPState: its ``doc_topic_prior()`` is the prior)
        Mutated: N^phi / N^Z per token, ``t_topic_word`` (tokens), ``docs_seen``, ``tokens_seen``.
    block : DocBlock
    params : SCVB0Params or HDPParams
    doc_topic : ndarray of shape (block.n_docs, K), optional
        Starting N^theta rows, overwritten with the final ones.

    Returns
    -------
    int
        Tokens processed.

    Raises
    ------
    InvalidParameterError
        If the vocabulary or ``doc_topic``'s shape does not match.

    Notes
    -----
    Per document: :func:`topicflow.models.common.cvb0.run_block_word_by_word` with the prior alpha, the same
    kernel as PCSVB0 (so PCSVB0 with a frozen prior alpha * pi is this with that prior).
    """
    p = as_scvb0_params(params)
    run_block_word_by_word(state, block, topic_word_step=p.topic_word_step, doc_step=p.doc_step, burn_in=p.burn_in,
                           doc_start=p.doc_start, clumping=p.clumping, seed=p.seed, doc_topic=doc_topic)
    return block.n_tokens


def global_view(state: HDPState, terms: np.ndarray | None = None) -> GlobalView:
    """What a minibatch's workers read: the word factor and the prior alpha per topic.

    Parameters
    ----------
    state : SCVB0State
    terms : ndarray of int, optional
        Only these columns; default all V.

    Returns
    -------
    GlobalView
    """
    return make_global_view(state.topic_word_counts(), state.topic_sums(), state.beta, state.doc_topic_prior(),
                            state.alpha, terms)


def local_minibatch(view: GlobalView, block: DocBlock, params: SCVB0Params | HDPParams, *,
                    doc_topic: FloatArray | None = None) -> CVB0Stats:
    """Run Foulds et al.'s local step on one partition of a minibatch (N^phi, N^Z fixed).

    Parameters
    ----------
    view : GlobalView
    block : DocBlock
    params : SCVB0Params or HDPParams
    doc_topic : ndarray of shape (block.n_docs, K), optional
        Starting N^theta rows, overwritten in place with the final ones.

    Returns
    -------
    CVB0Stats
    """
    p = as_scvb0_params(params)
    return _local_minibatch(view, block, doc_step=p.doc_step, burn_in=p.burn_in, doc_start=p.doc_start,
                            clumping=p.clumping, seed=p.seed, doc_topic=doc_topic)


def apply_minibatch(state: HDPState, stats: CVB0Stats, params: SCVB0Params | HDPParams) -> None:
    """N^phi <- (1 - rho^phi) N^phi + rho^phi (C / |M|) sum q, and N^Z alike (Foulds eqs. 9-10), in place.

    Parameters
    ----------
    state : SCVB0State
        ``t_topic_word`` advances by one (per minibatch), ``docs_seen``/``tokens_seen`` by the minibatch.
    stats : CVB0Stats
    params : SCVB0Params or HDPParams

    Raises
    ------
    InvalidParameterError
        If the statistics have another number of topics.
    """
    p = as_scvb0_params(params)
    if stats.n_topics != state.truncation:
        raise InvalidParameterError(f"statistics of {stats.n_topics} topics for a model of {state.truncation}")
    if stats.n_docs == 0:
        return
    rho = p.topic_word_step.rho(state.t_topic_word)
    state.scale = blend_topic_word(state.topic_word, state.topic_totals, state.scale, stats, float(state.n_tokens),
                                   rho)
    state.t_topic_word += 1
    state.docs_seen += stats.n_docs
    state.tokens_seen += stats.n_tokens
