"""Online (stochastic) variational Bayes for LDA: the step-size schedule and the global updates.

Hoffman, Blei and Bach (2010) treat a minibatch of S documents out of D as a noisy estimate of the
whole corpus: the E-step is the batch one (:func:`topicflow.models.vb_lda.estep_block`, or the hybrid
sampler), and every global parameter moves a step rho_t towards the value the batch M-step would give
if the corpus were D/S copies of the minibatch:

    lambda <- (1 - rho_t) lambda + rho_t (eta + D/S * stats)
    rho_t   = (tau0 + t) ** -kappa          t = minibatches processed before this one

alpha and eta follow the same rule, towards their Newton-Raphson optimum for the scaled minibatch
(the batch M-step's alpha and eta on D/S copies). Hoffman's code takes one Newton step scaled by
rho_t instead; stepping towards the optimum keeps alpha positive without a guard and makes
``kappa = 0, tau0 = 0`` with one minibatch equal to the corpus exactly one batch VB iteration.

Pure NumPy; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary: see :mod:`topicflow.models.vb_lda`; ``scale`` is D/S, ``rho`` the step size.

References
----------
Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.dirichlet import newton_alpha, newton_symmetric_alpha, newton_symmetric_eta
from topicflow.models.lda_model import LDAState
from topicflow.models.vb_lda import EStepStats, alpha_elbo_terms, topic_elbo_terms


@dataclass(frozen=True, slots=True)
class StepSchedule:
    """rho_t = (tau0 + t) ** -kappa.

    Attributes
    ----------
    tau0 : float, default 1.0
        Delay, >= 0: large values slow down the first updates (Hoffman et al. use up to 1024).
    kappa : float, default 0.7
        Forgetting rate, in [0, 1]; (0.5, 1] guarantees convergence, 0 keeps rho_t = 1 (only with
        tau0 in {0, 1}).

    Examples
    --------
    >>> StepSchedule(tau0=1.0, kappa=0.5).rho(3)
    0.5
    """

    tau0: float = 1.0
    kappa: float = 0.7

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tau0) and self.tau0 >= 0):
            raise InvalidParameterError(f"tau0 must be a finite number >= 0, got {self.tau0!r}")
        if not (0.0 <= self.kappa <= 1.0):
            raise InvalidParameterError(f"kappa must be in [0, 1], got {self.kappa!r}")

    def rho(self, t: int) -> float:
        """Step size of the minibatch processed after ``t`` earlier ones (always in (0, 1])."""
        base = self.tau0 + t
        if base == 0:
            return 1.0  # kappa = 0 or the very first step of tau0 = 0: a full step
        value = base ** -self.kappa
        if not 0.0 < value <= 1.0:
            raise InvalidParameterError(
                f"step size (tau0 + t) ** -kappa = {value!r} at t={t} is outside (0, 1]; "
                "use tau0 >= 1 (or kappa = 0)"
            )
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        return {"tau0": self.tau0, "kappa": self.kappa}


def blend(current: FloatArray, target: FloatArray, rho: float) -> FloatArray:
    """(1 - rho) current + rho target; exactly ``target`` when rho = 1."""
    if rho == 1.0:
        return np.array(target, dtype=np.float64)
    return (1.0 - rho) * np.asarray(current, dtype=np.float64) + rho * np.asarray(target, dtype=np.float64)


def topic_word_target(stats_dense: FloatArray, topic_word_prior: FloatArray | float, scale: float) -> FloatArray:
    """eta + scale * stats: the batch M-step as if the corpus were ``scale`` copies of the minibatch."""
    stats = np.asarray(stats_dense, dtype=np.float64)
    if scale != 1.0:
        stats = scale * stats
    return np.asarray(topic_word_prior, dtype=np.float64) + stats


def alpha_target(alpha: FloatArray, stats: EStepStats, mode: str) -> FloatArray:
    """The Newton-Raphson optimum of alpha for the minibatch (invariant to the D/S scaling).

    ``mode`` is ``"auto"`` (asymmetric), ``"symmetric"`` or ``"fixed"`` (returns ``alpha``).
    """
    if mode == "fixed" or stats.n_docs == 0:
        return np.asarray(alpha, dtype=np.float64)
    if mode == "auto":
        return newton_alpha(alpha, stats.alpha_suff, stats.n_docs)[0]
    shared, _ = newton_symmetric_alpha(float(alpha[0]), stats.alpha_suff, stats.n_docs)
    return np.full(len(alpha), shared)


def eta_target(topic_word_var: FloatArray, eta: float) -> float:
    """The Newton-Raphson optimum of a symmetric eta given lambda (one language)."""
    return float(newton_symmetric_eta(topic_word_var, eta)[0])


def online_update(
    state: LDAState, stats: EStepStats, *, rho: float, total_docs: int, alpha_mode: str, optimize_eta: bool
) -> LDAState:
    """Move lambda, alpha and eta a step ``rho`` towards the batch M-step on D/S copies of the minibatch.

    With ``optimize_eta`` the target lambda is shifted to the target eta, exactly as the batch M-step
    shifts lambda to its new eta, so ``rho = 1`` and one minibatch equal to the corpus give the batch
    iteration.
    """
    scale = total_docs / max(stats.n_docs, 1)
    lam, priors = {}, dict(state.topic_word_prior)
    for lang in state.languages:
        eta = state.topic_word_prior[lang]
        target = topic_word_target(stats.topic_terms[lang].to_dense(state.n_terms(lang)), eta, scale)
        if optimize_eta:
            old_eta = float(eta)  # type: ignore[arg-type]
            new_eta = eta_target(target, old_eta)
            target = target - old_eta + new_eta
            priors[lang] = float(blend(np.float64(old_eta), np.float64(new_eta), rho))
        lam[lang] = blend(state.topic_word_var[lang], target, rho)
    alpha = blend(state.doc_topic_prior, alpha_target(state.doc_topic_prior, stats, alpha_mode), rho)
    return state.with_updates(topic_word_var=lam, doc_topic_prior=alpha, topic_word_prior=priors)


def minibatch_bound(
    stats: EStepStats,
    topic_word_var: Mapping[str, FloatArray],
    doc_topic_prior: FloatArray,
    topic_word_prior: Mapping[str, FloatArray | float],
    scale: float,
) -> float:
    """Hoffman et al.'s estimate of the corpus ELBO from one minibatch, before its update.

    ``scale * (document terms + alpha terms of the minibatch) + topic terms`` with the lambda,
    alpha and eta the E-step used. Divide by ``scale * stats.n_tokens`` for a per-word bound.
    """
    value = scale * (stats.doc_elbo + alpha_elbo_terms(doc_topic_prior, stats.alpha_suff, stats.n_docs))
    for lang, lam in topic_word_var.items():
        value += topic_elbo_terms(lam, topic_word_prior[lang])
    return float(value)
