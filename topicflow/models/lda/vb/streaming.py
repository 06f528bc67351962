"""Streaming variational Bayes for LDA (Broderick et al. 2013): the posterior of one minibatch is the prior of the next.

SDA-Bayes with variational Bayes as the primitive A. Minibatch b of documents C_b is fitted by batch
VB with the topic-word prior replaced by the posterior of the minibatches before it:

    lambda_b = A(C_b, lambda_{b-1})       lambda_0 = eta (the model's prior)
    A:  repeat   E-step of C_b under lambda       (the batch E-step, unchanged)
                 lambda <- lambda_{b-1} + stats(C_b)
        until the minibatch's ELBO converges (or max_iter)

so the posterior after the stream is lambda_B = eta + sum_b stats_b, each minibatch's statistics taken
at that minibatch's local optimum. There is no step size and no corpus size D. With one minibatch
holding the whole corpus this is batch VB (same start, same updates, same stopping rule).

alpha is not a random variable of the model, so it has no posterior to carry: with a learned alpha
each local iteration moves it to its Newton-Raphson optimum for the minibatch, as the batch M-step
does (Broderick et al. keep alpha = 1/K fixed: ``doc_topic_prior_mode="fixed"``). eta is only the
prior of the first minibatch, so learning it has no streaming meaning and is refused by the driver.

Pure NumPy; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary: ``prior`` is lambda_{b-1} (or eta before the first minibatch), per language;
see :mod:`topicflow.models.lda.vb.estep` for the rest.

References
----------
Broderick, Boyd, Wibisono, Wilson and Jordan (2013). Streaming variational Bayes. NIPS.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vb.objective import full_elbo
from topicflow.models.lda.vb.online import alpha_target
from topicflow.models.lda.vb.stats import EStepStats


def minibatch_prior(state: LDAState, minibatches_done: int) -> dict[str, FloatArray | float]:
    """The prior of the next minibatch: eta before the first one, else the posterior lambda so far.

    Parameters
    ----------
    state : LDAState
        The model after ``minibatches_done`` minibatches (before any, its random starting lambda).
    minibatches_done : int
        Minibatches already absorbed into ``state.topic_word_var``.

    Returns
    -------
    dict of str to float or ndarray of shape (n_topics, n_terms)
        Per language. The arrays are ``state``'s own (never modified here).

    Examples
    --------
    >>> state = LDAState({"en": np.full((2, 3), 5.0)}, np.ones(2), {"en": 0.1})
    >>> minibatch_prior(state, 0)["en"]
    0.1
    >>> float(minibatch_prior(state, 1)["en"][0, 0])
    5.0
    """
    if minibatches_done == 0:
        return dict(state.topic_word_prior)
    return dict(state.topic_word_var)


def posterior_topic_word_var(
    prior: Mapping[str, FloatArray | float], stats: EStepStats, n_terms: Mapping[str, int]
) -> dict[str, FloatArray]:
    """Compute lambda = prior + stats for every language (the batch M-step with ``prior`` as eta).

    Parameters
    ----------
    prior : mapping of str to float or ndarray of shape (n_topics, n_terms)
        The posterior lambda_{b-1}, or eta (a number or an informed-prior matrix) for the first minibatch.
    stats : EStepStats
        Merged statistics of the minibatch.
    n_terms : mapping of str to int
        Vocabulary size per language.

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms), float64
        New arrays, bit for bit ``mstep_batch(stats.to_dense(), prior)``: columns of terms absent
        from the minibatch are the prior's, the others ``prior + stats`` in one addition.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from topicflow.models.lda.vb.stats import TopicTermStats
    >>> one_term = TopicTermStats(np.array([1]), np.array([[2.0]]))
    >>> stats = replace(EStepStats.zeros(1, ["en"]), topic_terms={"en": one_term})
    >>> posterior_topic_word_var({"en": 0.5}, stats, {"en": 3})["en"].tolist()
    [[0.5, 2.5, 0.5]]
    """
    out = {}
    for lang, eta in prior.items():
        terms = stats.topic_terms[lang]
        lam = np.empty((terms.n_topics, n_terms[lang]), dtype=np.float64)
        lam[...] = eta
        ids = terms.term_ids
        eta_cols = eta if np.ndim(eta) == 0 else np.asarray(eta, dtype=np.float64)[:, ids]
        lam[:, ids] = eta_cols + terms.values
        out[lang] = lam
    return out


@dataclass(frozen=True, slots=True)
class ColumnStep:
    """Set some columns of lambda to given values: how a replica of lambda follows one SVB iteration.

    An SVB iteration changes lambda only in the columns of the minibatch's terms (the rest stay at the
    prior), so this is the size of the minibatch's statistics, not n_topics x n_terms. Only the first
    iteration of a fit starts from the random lambda rather than the prior; its step also ``reset``s
    every other column to eta.

    Attributes
    ----------
    term_ids : dict of str to ndarray of shape (n_changed,), int64
        Columns to set, per language.
    values : dict of str to ndarray of shape (n_topics, n_changed), float64
        Their new values (the driver's own numbers, so replicas match it bit for bit).
    reset : dict of str to float or ndarray of shape (n_topics, n_terms)
        Languages whose whole lambda is first set to this (eta); empty for most steps.
    """

    term_ids: dict[str, IntArray]
    values: dict[str, FloatArray]
    reset: dict[str, FloatArray | float]

    def apply_to(
        self, topic_word_var: Mapping[str, FloatArray], topic_word_prior: Mapping[str, FloatArray | float],
        *, in_place: bool = False,
    ) -> tuple[dict[str, FloatArray], dict[str, FloatArray | float]]:
        """Return lambda with the step applied, and the (unchanged) topic-word priors.

        Parameters
        ----------
        topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms)
            lambda before the step.
        topic_word_prior : mapping of str to float or ndarray
            eta, returned as it is.
        in_place : bool, default False
            Write into ``topic_word_var``'s arrays instead of copies.

        Returns
        -------
        topic_word_var : dict of str to ndarray of shape (n_topics, n_terms)
        topic_word_prior : dict of str to float or ndarray
        """
        out = {}
        for lang, lam in topic_word_var.items():
            new = lam if in_place else np.array(lam, dtype=np.float64)
            if lang in self.reset:
                new[...] = self.reset[lang]
            new[:, self.term_ids[lang]] = self.values[lang]
            out[lang] = new
        return out, dict(topic_word_prior)


def svb_iteration(
    state: LDAState, prior: Mapping[str, FloatArray | float], stats: EStepStats, *, doc_topic_prior_mode: str,
    changed: Mapping[str, IntArray] | None = None, reset: bool = False,
) -> tuple[LDAState, ColumnStep]:
    """The update of one local iteration of primitive A: lambda = prior + stats, alpha to its minibatch optimum.

    Parameters
    ----------
    state : LDAState
        The state the E-step that produced ``stats`` used.
    prior : mapping of str to float or ndarray
        The minibatch's prior (:func:`minibatch_prior`).
    stats : EStepStats
        The minibatch's merged statistics.
    doc_topic_prior_mode : {"auto", "symmetric", "fixed"}
        How alpha moves (the batch M-step's Newton-Raphson, or not at all).
    changed : mapping of str to ndarray of int64, optional
        Columns an earlier step of the same minibatch set, also included in this step (so that a
        replica never keeps a stale column even if a term leaves the statistics).
    reset : bool, default False
        ``state``'s lambda is not the prior outside the minibatch's terms (the random start of the
        first minibatch): the step resets every other column to the prior.

    Returns
    -------
    state : LDAState
        With the new lambda and alpha; eta unchanged.
    step : ColumnStep
        What a replica of ``state``'s lambda needs to reach the new one.

    Notes
    -----
    Broderick et al. (2013), section 3 with Algorithm 2 (batch VB for LDA) as the primitive and
    eta_kv replaced by the posterior parameter of the minibatches so far. NumPy equivalent of lambda
    (tests/reference/svb_numpy.py): ``prior + stats.to_dense()``.
    """
    n_terms = {lang: state.n_terms(lang) for lang in state.languages}
    lam = posterior_topic_word_var(prior, stats, n_terms)
    ids: dict[str, IntArray] = {}
    for lang in state.languages:
        present = np.asarray(stats.topic_terms[lang].term_ids, dtype=np.int64)
        if changed is not None and lang in changed:
            present = np.union1d(present, np.asarray(changed[lang], dtype=np.int64))
        ids[lang] = present
    step = ColumnStep(
        term_ids=ids,
        values={lang: np.ascontiguousarray(lam[lang][:, ids[lang]]) for lang in state.languages},
        reset={lang: prior[lang] for lang in state.languages} if reset else {},
    )
    alpha = alpha_target(state.doc_topic_prior, stats, doc_topic_prior_mode)
    return state.with_updates(topic_word_var=lam, doc_topic_prior=alpha), step


def minibatch_elbo(stats: EStepStats, state: LDAState, prior: Mapping[str, FloatArray | float]) -> float:
    """The ELBO of primitive A on one minibatch, under the prior ``prior``: the quantity its iterations raise.

    Parameters
    ----------
    stats : EStepStats
        The minibatch's statistics, computed under ``state``.
    state : LDAState
        The lambda and alpha the E-step used.
    prior : mapping of str to float or ndarray
        The minibatch's prior.

    Returns
    -------
    float
        ``full_elbo(stats, lambda, alpha, prior)``: documents, alpha and the topic terms
        E_q[log p(beta | prior)] - E_q[log q(beta | lambda)].

    Raises
    ------
    NumericalError
        The value is not finite.
    """
    return full_elbo(stats, state.topic_word_var, state.doc_topic_prior, dict(prior))
