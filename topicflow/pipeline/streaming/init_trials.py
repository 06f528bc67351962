"""Initialization of the streaming samplers, and its tuning (May, Clemmer & Van Durme 2014, sec. 3.3).

Every streaming sampler starts from batch collapsed Gibbs on a prefix of the stream (Canini et al.
2009). May et al. run several independent initializations and keep the best: by in-sample NMI when
the prefix has labels, otherwise by held-out perplexity of its last fifth, estimated with the
first-moment particle-learning approximation (Scott & Baldridge 2013). The held-out fifth is the
tail of the prefix, so the sampler that continues from the chosen initialization simply reads the
stream on from where the initialization stopped fitting.

This module owns the trial (fit, then score) and the choice among trials; running trials in parallel
is the pipeline's business. Pure math: no Dask, no I/O.

Glossary:
    prefix: the first documents of the stream, used to initialize
    trial: one batch Gibbs run on the prefix with its own seed
    doc_topic_prior (alpha), topic_word_prior (beta): as in :mod:`topicflow.models.lda.gibbs.sparse`
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topicflow._typing import GibbsInit, InitSelection
from topicflow.errors import InvalidParameterError
from topicflow.metrics.clustering import nmi
from topicflow.metrics.heldout import particle_learning_log_likelihood
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.rng import STREAM_INIT_TRIAL, counter_key
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.gibbs.scores import topic_word_distribution
from topicflow.models.lda.gibbs.state import GibbsParams, GibbsState

#: Share of the prefix held out to score a trial by perplexity (May et al. 2014).
HELD_OUT_FRACTION = 0.2


@dataclass(frozen=True)
class InitTrial:
    """One initialization and how good it looked.

    Attributes
    ----------
    seed : int
        Seed of the trial's Gibbs run.
    score : float
        In-sample NMI (``select="nmi"``) or held-out log-likelihood per token (``"perplexity"``);
        higher is better either way.
    state : GibbsState
        Assignments of the documents the trial was fitted on (the whole prefix for ``"nmi"``, its
        first 80% for ``"perplexity"``).
    n_fitted_docs : int
        Documents in ``state``; the stream continues after them.
    """

    seed: int
    score: float
    state: GibbsState
    n_fitted_docs: int


def trial_seed(run_seed: int, trial: int) -> int:
    """Seed of trial ``trial`` of a run; trial 0 uses the run's own seed, so one trial is no tuning.

    Examples
    --------
    >>> trial_seed(7, 0)
    7
    >>> trial_seed(7, 1) != trial_seed(7, 2)
    True
    """
    if trial == 0:
        return int(run_seed)
    return int(counter_key(run_seed, STREAM_INIT_TRIAL, 0, trial) >> np.uint64(33))


def fitted_prefix_size(n_prefix_docs: int, select: InitSelection, n_trials: int) -> int:
    """Return how many prefix documents a trial fits: all, unless trials are compared by perplexity."""
    if select == "perplexity" and n_trials > 1:
        return max(1, int(round(n_prefix_docs * (1.0 - HELD_OUT_FRACTION))))
    return n_prefix_docs


def run_initialization_trial(
    prefix: DocBlock, params: GibbsParams, *, sweeps: int, select: InitSelection, n_trials: int,
    start: GibbsInit = "sequential",
) -> InitTrial:
    """Fit batch Gibbs on the prefix with ``params.seed`` and score it.

    By default the chain starts from sequential draws (each token from its conditional given the
    tokens before it), which reaches a good likelihood in fewer sweeps than a uniform start;
    ``start="random"`` is the uniform start of standard collapsed Gibbs, as May et al. (2014) ran it.

    Parameters
    ----------
    prefix : DocBlock
        The first documents of the stream (with ``labels`` when ``select="nmi"``).
    params : GibbsParams
        Hyperparameters; ``params.seed`` is the trial's seed (see :func:`trial_seed`).
    sweeps : int
        Gibbs sweeps of the trial.
    select : {"nmi", "perplexity"}
    n_trials : int
        Trials of the run; a single trial is not scored by held-out data and fits the whole prefix.
    start : {"sequential", "random"}, default "sequential"
        Initial assignments of the chain (:func:`topicflow.models.lda.gibbs.chain.initial_state`).

    Returns
    -------
    InitTrial

    Raises
    ------
    InvalidParameterError
        ``select="nmi"`` on documents without labels.
    """
    n_fit = fitted_prefix_size(prefix.n_docs, select, n_trials)
    fitted_docs = prefix.slice(0, n_fit)
    state = run_sweeps(initial_state(fitted_docs, params, init=start), params, sweeps)
    if n_trials == 1:
        score = float("nan")
    elif select == "nmi":
        if prefix.labels is None:
            raise InvalidParameterError(
                "initialization by NMI needs document labels, and this corpus has none; "
                "pass --init-select perplexity or ingest with --label-field"
            )
        score = nmi(prefix.labels, np.argmax(state.doc_topic_counts, axis=1))
    else:
        held_out = prefix.slice(n_fit, prefix.n_docs)
        log_lik, n_tokens = particle_learning_log_likelihood(
            held_out, topic_word_distribution(state), state.doc_topic_prior)
        score = log_lik / max(n_tokens, 1)
    return InitTrial(seed=params.seed, score=score, state=state, n_fitted_docs=n_fit)


def best_trial(scores: list[float]) -> int:
    """Index of the highest score (the first one on ties; NaN never wins unless all are NaN).

    Examples
    --------
    >>> best_trial([0.2, 0.5, 0.5])
    1
    """
    values = np.asarray(scores, dtype=np.float64)
    if np.all(np.isnan(values)):
        return 0
    return int(np.nanargmax(values))
