"""Online (stochastic) variational Bayes for LDA: the step-size schedule and the global updates.

Hoffman, Blei and Bach (2010) treat a minibatch of S documents out of D as a noisy estimate of the
whole corpus: the E-step is the batch one (:func:`topicflow.models.lda.vb.estep.estep_block`, or the hybrid
sampler), and every global parameter moves a step rho_t towards the value the batch M-step would give
if the corpus were D/S copies of the minibatch:

    lambda <- (1 - rho_t) lambda + rho_t (eta + D/S * stats)
    rho_t   = (tau0 + t) ** -kappa          t = minibatches processed before this one

alpha and eta follow the same rule, towards their Newton-Raphson optimum for the scaled minibatch
(the batch M-step's alpha and eta on D/S copies). Hoffman's code takes one Newton step scaled by
rho_t instead; stepping towards the optimum keeps alpha positive without a guard and makes
``kappa = 0, tau0 = 0`` with one minibatch equal to the corpus exactly one batch VB iteration.

Pure NumPy; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary: see :mod:`topicflow.models.lda.vb.estep`; ``scale`` is D/S, ``rho`` the step size.

References
----------
Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import numba
import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.dirichlet import (
    newton_alpha,
    newton_symmetric_alpha,
    newton_symmetric_eta,
)
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb.objective import local_elbo_terms, topic_elbo_terms
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats


@dataclass(frozen=True, slots=True)
class StepSchedule:
    """Step-size schedule rho_t = (tau0 + t) ** -kappa.

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


def blend(current: FloatArray | float, target: FloatArray | float, rho: float) -> FloatArray:
    """(1 - rho) current + rho target; exactly ``target`` when rho = 1."""
    if rho == 1.0:
        return np.array(target, dtype=np.float64)
    return (1.0 - rho) * np.asarray(current, dtype=np.float64) + rho * np.asarray(target, dtype=np.float64)


def topic_word_target(stats_dense: FloatArray, topic_word_prior: FloatArray | float, scale: float) -> FloatArray:
    """Compute eta + scale * stats, the batch M-step as if the corpus were ``scale`` minibatch copies."""
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


@dataclass(frozen=True, slots=True)
class TopicWordStep:
    """One minibatch's move of lambda and eta, all a replica of lambda needs to follow the driver.

    Its size is the minibatch's statistics (n_topics x the terms it contains), not n_topics x n_terms:
    E-step servers that keep lambda receive this instead of lambda (:class:`TopicWordReplica`).

    Attributes
    ----------
    topic_terms : dict of str to TopicTermStats
        The minibatch's merged statistics per language.
    rho, scale : float
        Step size and D/S.
    new_eta : dict of str to float
        Target symmetric eta per language when eta is optimized (empty otherwise).
    """

    topic_terms: dict[str, TopicTermStats]
    rho: float
    scale: float
    new_eta: dict[str, float]

    def apply_to(
        self, topic_word_var: Mapping[str, FloatArray], topic_word_prior: Mapping[str, FloatArray | float],
        *, in_place: bool = False,
    ) -> tuple[dict[str, FloatArray], dict[str, FloatArray | float]]:
        """Return lambda and eta moved by this step (:func:`apply_topic_word_step`).

        Parameters
        ----------
        topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms)
            lambda before the step.
        topic_word_prior : mapping of str to float or ndarray
            eta before the step.
        in_place : bool, default False
            Write into ``topic_word_var``'s arrays instead of new ones.

        Returns
        -------
        topic_word_var : dict of str to ndarray of shape (n_topics, n_terms)
        topic_word_prior : dict of str to float or ndarray
        """
        return apply_topic_word_step(topic_word_var, topic_word_prior, self, in_place=in_place)


class ReplicaStep(Protocol):
    """A move of lambda (and eta) that a replica applies with the driver's own formula.

    :class:`TopicWordStep` (online VB) and :class:`topicflow.models.lda.vb.streaming.ColumnStep`
    (streaming VB) implement it.
    """

    def apply_to(
        self, topic_word_var: Mapping[str, FloatArray], topic_word_prior: Mapping[str, FloatArray | float],
        *, in_place: bool = False,
    ) -> tuple[dict[str, FloatArray], dict[str, FloatArray | float]]:
        """Return lambda and eta after the step (in ``topic_word_var``'s arrays when ``in_place``)."""


def topic_word_step(
    state: LDAState, stats: EStepStats, *, rho: float, total_docs: int, optimize_topic_word_prior: bool
) -> TopicWordStep:
    """The step of lambda and eta for ``stats`` (eta's Newton target needs the dense target lambda)."""
    scale = total_docs / max(stats.n_docs, 1)
    new_eta = {}
    if optimize_topic_word_prior:
        for lang in state.languages:
            eta = state.topic_word_prior[lang]
            target = topic_word_target(stats.topic_terms[lang].to_dense(state.n_terms(lang)), eta, scale)
            new_eta[lang] = eta_target(target, float(eta))
    return TopicWordStep(dict(stats.topic_terms), rho, scale, new_eta)


def apply_topic_word_step(
    topic_word_var: Mapping[str, FloatArray], topic_word_prior: Mapping[str, FloatArray | float], step: TopicWordStep,
    *, in_place: bool = False,
) -> tuple[dict[str, FloatArray], dict[str, FloatArray | float]]:
    """Apply lambda <- (1 - rho) lambda + rho target and eta <- (1 - rho) eta + rho new_eta.

    New arrays are returned unless ``in_place``. The target is eta + scale * stats, shifted to the
    new eta as the batch M-step shifts it. Columns of terms absent from the minibatch have target eta
    (or the new eta), so they take one dense pass; only the present columns need the statistics. The
    result has the same bits whether computed in place or not, and as the dense formula
    (:func:`blend` of :func:`topic_word_target`).
    """
    lam_out, priors = {}, dict(topic_word_prior)
    rho = step.rho
    for lang, lam in topic_word_var.items():
        eta = topic_word_prior[lang]
        terms = step.topic_terms[lang]
        ids = terms.term_ids
        cols = topic_word_target(terms.values, eta if np.ndim(eta) == 0 else np.asarray(eta)[:, ids], step.scale)
        base: FloatArray | float = eta
        if lang in step.new_eta:
            old_eta, new_eta = float(eta), step.new_eta[lang]
            cols = cols - old_eta + new_eta
            base = (old_eta - old_eta) + new_eta  # the dense target's value where stats are zero
            priors[lang] = float(blend(np.float64(old_eta), np.float64(new_eta), rho))
        out = lam if in_place else np.empty((lam.shape[0], lam.shape[1]), dtype=np.float64)
        if rho == 1.0:
            out[...] = base
            out[:, ids] = cols
        else:
            eta_matrix = np.ndim(base) == 2
            _blend_columns(lam, out, 1.0 - rho, rho, float(base) if not eta_matrix else 0.0,
                           np.asarray(base, dtype=np.float64) if eta_matrix else _NO_MATRIX, eta_matrix,
                           np.ascontiguousarray(ids, dtype=np.int64), np.ascontiguousarray(cols, dtype=np.float64))
        lam_out[lang] = out
    return lam_out, priors


_NO_MATRIX = np.zeros((1, 1))


@numba.njit(nogil=True, cache=True)
def _blend_columns(lam, out, keep, rho, base, base_matrix, use_matrix, ids, cols):
    """out = keep * lam + rho * target, target = base where a term is absent and ``cols`` where present.

    One pass, safe in place (``out`` may be ``lam``); the same products and sums, in the same order,
    as NumPy's ``(1 - rho) * lam + rho * target``.
    """
    n_topics, n_terms = lam.shape
    for k in range(n_topics):
        p = 0
        for w in range(n_terms):
            if p < ids.shape[0] and ids[p] == w:
                out[k, w] = keep * lam[k, w] + rho * cols[k, p]
                p += 1
            elif use_matrix:
                out[k, w] = lam[k, w] * keep + rho * base_matrix[k, w]
            else:
                out[k, w] = lam[k, w] * keep + rho * base


def online_update(
    state: LDAState, stats: EStepStats, step: TopicWordStep, *, doc_topic_prior_mode: str
) -> LDAState:
    """Move lambda and eta by ``step`` (:func:`topic_word_step`) and alpha a step towards its minibatch optimum.

    With ``optimize_topic_word_prior`` the target lambda is shifted to the target eta, exactly as the batch M-step
    shifts lambda to its new eta, so ``rho = 1`` and one minibatch equal to the corpus give the batch
    iteration.
    """
    lam, priors = apply_topic_word_step(state.topic_word_var, state.topic_word_prior, step)
    alpha = blend(state.doc_topic_prior, alpha_target(state.doc_topic_prior, stats, doc_topic_prior_mode), step.rho)
    return state.with_updates(topic_word_var=lam, doc_topic_prior=alpha, topic_word_prior=priors)


class TopicWordReplica:
    """A copy of lambda and eta kept where E-steps run, moved by :class:`ReplicaStep` values.

    Applying the driver's steps in order reproduces the driver's lambda bit for bit
    (:func:`apply_topic_word_step` is the one formula both use), so only the first call ships lambda.

    Attributes
    ----------
    version : int
        Steps applied since the copy was taken, plus the version it was taken at.
    """

    def __init__(self, version: int, topic_word_var: Mapping[str, FloatArray],
                 topic_word_prior: Mapping[str, FloatArray | float]) -> None:
        self.version = version
        self.topic_word_var = {lang: np.array(lam, dtype=np.float64, order="C") for lang, lam in topic_word_var.items()}
        self.topic_word_prior = dict(topic_word_prior)

    def apply(self, step: ReplicaStep) -> None:
        self.topic_word_var, self.topic_word_prior = step.apply_to(
            self.topic_word_var, self.topic_word_prior, in_place=True)
        self.version += 1


def minibatch_bound(
    stats: EStepStats,
    topic_word_var: Mapping[str, FloatArray],
    doc_topic_prior: FloatArray,
    topic_word_prior: Mapping[str, FloatArray | float],
    scale: float,
) -> float:
    """Hoffman et al.'s estimate of the corpus ELBO from one minibatch, before its update.

    ``scale * local_elbo_terms(stats, alpha) + topic terms`` (document and alpha terms of the
    minibatch scaled to the corpus; :mod:`topicflow.models.lda.vb.objective`) with the lambda,
    alpha and eta the E-step used. Divide by ``scale * stats.n_tokens`` for a per-word bound.
    """
    value = scale * local_elbo_terms(stats, doc_topic_prior)
    for lang, lam in topic_word_var.items():
        value += topic_elbo_terms(lam, topic_word_prior[lang])
    return float(value)
