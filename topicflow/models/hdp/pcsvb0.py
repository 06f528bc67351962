"""PCSVB0: practical collapsed stochastic variational Bayes for the HDP (Bleier, Algorithm 1).

This module owns PCSVB0's two schedules over the shared token update of
:mod:`topicflow.models.common.cvb0`: word by word (Algorithm 1 as written, optionally clumped) and
by minibatch (Bleier sec. 5's second item of future work, in Foulds et al.'s form). The hyperparameter
step after each document (or minibatch) is :func:`hyper_step` (eqs. 10-12 and 6, on
:mod:`topicflow.models.hdp.sticks`). Pure math: no Dask, no I/O.

Glossary (Bleier): n_kw / n_k. expected topic-word counts and their row sums (``HDPState.topic_word``
/ ``topic_totals`` times ``scale``), n_dk a document's expected topic counts (``doc_topic``), a_k
expected table counts (``tables``), pi the stick weights (eq. 3), alpha, gamma, beta; n and D the
training tokens and documents (``state.n_tokens``, ``state.n_docs``); rho^c, rho^d, rho^h the steps of
n_kw, n_dk and the sticks and hyperparameters.

Decisions (the paper leaves them open; docs/hdp.md lists them):

- Counters. ``state.t_topic_word`` (rho^c) counts tokens word by word (clumped: advances by the count)
  and minibatches in the minibatch form; ``state.t_hyper`` (rho^h) counts documents word by word and
  minibatches in the minibatch form; rho^d counts tokens within the document (reset per document,
  continued through burn-in). All start at 0 and are never reset between passes.
- The prior used for document d is ``alpha * pi`` computed from the state when d starts, i.e. from the
  tables and gamma after document d - 1's step (Algorithm 1 computes pi at line 10 with the old gamma and
  updates gamma at line 11; with spec P4's table statistics pi is a function of (tables, gamma), so it is
  recomputed from the current pair).
- Hyperparameter step per document, in Algorithm 1's order: a <- (1 - rho^h) a + rho^h D e (eqs. 10-11
  as spec P4); sticks re-sorted by a (implicitly: :func:`~topicflow.models.hdp.sticks.stick_order`);
  gamma by eq. 6 from (u, v) of the new tables with the old gamma in v; alpha by eq. 12 at the old alpha,
  floored at ``alpha_floor`` (spec P11). E[1(n_dk >= 1)] is from the document's final pass (spec P8, P9).
- An empty document has E[1(n_dk >= 1)] = 0 (its tables step decays a toward 0, as eq. 10 says) and
  eq. 12, 0/0 there, is skipped; counters still advance.
- ``learn_tables=False`` (keyword of the run functions) freezes the tables: with ``learn_alpha`` and
  ``learn_gamma`` off too, the prior alpha * pi never changes, which is rho^h = 0 (spec 1.9) and makes
  PCSVB0 exactly SCVB0 with the prior alpha * pi.
- Findings on generated data (tests/models/hdp/test_pcsvb0_recovery.py): with Algorithm 1's literal
  settings (burn_in = 0 and a random n_dk start) small corpora end with many duplicated topics and
  inflated table counts; ``burn_in = 1`` and ``doc_start = "zero"`` recover planted topics with about
  the planted number in use. alpha and gamma then still come out high (E[1(n_dk >= 1)] counts the
  duplicates), while fed with exact table statistics the same updates recover them.
- Minibatch form: n_kw <- (1 - rho^c) n_kw + rho^c (n / |M|) sum_{tokens of M} q (Foulds eqs. 9-10);
  tables blended with ``batch_docs`` = the minibatch's documents; alpha <- (1 - rho^h) alpha + rho^h *
  (sum of the minibatch's tables) / (sum of its psi(n_d + alpha) - psi(alpha)) (eq. 12 over the
  minibatch); gamma by eq. 6; each counter advances by one per minibatch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import digamma

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.cvb0 import (
    CVB0Stats,
    GlobalView,
    blend_topic_word,
    make_global_view,
    run_block_word_by_word,
)
from topicflow.models.common.cvb0 import local_minibatch as _local_minibatch
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.models.hdp.sticks import (
    blend_tables,
    gamma_update,
    stick_params,
)

__all__ = [
    "CVB0Stats",
    "GlobalView",
    "PassStats",
    "apply_minibatch",
    "global_view",
    "hyper_step",
    "local_minibatch",
    "run_word_by_word",
]


@dataclass(frozen=True, slots=True)
class PassStats:
    """What one call of :func:`run_word_by_word` processed.

    Attributes
    ----------
    n_docs, n_tokens : int
        Documents and tokens of the block.
    table_sum : float
        Sum over the documents and topics of E[1(n_dk >= 1)] (expected tables used).
    """

    n_docs: int
    n_tokens: int
    table_sum: float


def hyper_step(state: HDPState, table_sums: FloatArray, *, batch_docs: int, digamma_sum: float,
               params: HDPParams, learn_tables: bool = True) -> None:
    """Bleier Algorithm 1 lines 10-11 after a document (or a minibatch of ``batch_docs`` documents), in place.

    Parameters
    ----------
    state : HDPState
        ``tables``, ``gamma``, ``alpha`` and ``t_hyper`` (advanced by one) are updated.
    table_sums : ndarray of shape (T,)
        Sum over the documents of E[1(n_dk >= 1)].
    batch_docs : int
        Documents behind ``table_sums`` (1 word by word).
    digamma_sum : float
        Sum over the documents of psi(n_d + alpha) - psi(alpha) at the current alpha.
    params : HDPParams
    learn_tables : bool, default True
        False keeps the tables (and so the stick order) fixed.

    Notes
    -----
    NumPy equivalent::

        rho = hyper_step.rho(t_hyper)
        a = (1 - rho) * a + rho * D / batch_docs * table_sums                  # eqs. 10-11 (spec P4)
        u, v = stick_params(a, gamma)                                          # eq. 4, sticks re-sorted
        gamma = (T - 1) / sum(psi(u + v) - psi(v))                             # eq. 6
        alpha = max(floor, (1 - rho) * alpha + rho * sum(table_sums) / digamma_sum)   # eq. 12
    """
    rho = params.hyper_step.rho(state.t_hyper)
    if learn_tables:
        state.tables = blend_tables(state.tables, table_sums, n_docs=state.n_docs, batch_docs=batch_docs, rho=rho)
    old_alpha = state.alpha
    if params.learn_gamma:
        u, v = stick_params(state.tables, state.gamma)
        state.gamma = gamma_update(u, v)
    if params.learn_alpha and digamma_sum > 0:
        target = float(np.sum(table_sums)) / digamma_sum
        state.alpha = max(params.alpha_floor, (1.0 - rho) * old_alpha + rho * target)
    state.t_hyper += 1


def run_word_by_word(state: HDPState, block: DocBlock, params: HDPParams, *, doc_topic: FloatArray | None = None,
                     learn_tables: bool = True) -> PassStats:
    """Bleier Algorithm 1 over the block's documents in order, word by word (or clumped), in place.

    Parameters
    ----------
    state : HDPState
        Mutated: n_kw / n_k. per token (eq. 9), tables, gamma, alpha per document (eqs. 10-12, 6),
        counters, ``docs_seen`` and ``tokens_seen``.
    block : DocBlock
    params : HDPParams
        Steps, ``burn_in``, ``doc_start``, ``clumping``, ``seed``, ``learn_alpha``/``learn_gamma``.
    doc_topic : ndarray of shape (block.n_docs, T), optional
        Each document's n_dk to start from, overwritten with its final n_dk (``params.keep_doc_state``;
        :func:`topicflow.models.common.cvb0.start_doc_topic` gives first-visit rows). None starts every
        document by ``params.doc_start``.
    learn_tables : bool, default True
        False freezes the tables (with learn_alpha = learn_gamma = False: rho^h = 0).

    Returns
    -------
    PassStats

    Raises
    ------
    InvalidParameterError
        If the block's vocabulary or ``doc_topic``'s shape does not match.

    Notes
    -----
    :func:`topicflow.models.common.cvb0.run_block_word_by_word` (lines 5-9, eqs. 7-9, numba) with
    :func:`hyper_step` (lines 10-11) after each document. ``tests/reference/collapsed_vb.py`` is the NumPy equivalent.
    """
    def after_document(tables: FloatArray, length: float) -> None:
        hyper_step(state, tables, batch_docs=1, digamma_sum=_digamma_gap(length, state.alpha), params=params,
                   learn_tables=learn_tables)

    table_sum = run_block_word_by_word(state, block, topic_word_step=params.topic_word_step,
                                       doc_step=params.doc_step, burn_in=params.burn_in, doc_start=params.doc_start,
                                       clumping=params.clumping, seed=params.seed, doc_topic=doc_topic,
                                       after_document=after_document)
    return PassStats(n_docs=block.n_docs, n_tokens=block.n_tokens, table_sum=table_sum)


def _digamma_gap(length: float, alpha: float) -> float:
    """psi(n_d + alpha) - psi(alpha) (the denominator of eq. 12)."""
    return float(digamma(length + alpha) - digamma(alpha))


def global_view(state: HDPState, terms: np.ndarray | None = None) -> GlobalView:
    """What a minibatch's workers read: the word factor, the prior alpha * pi and alpha.

    Parameters
    ----------
    state : HDPState
    terms : ndarray of int, optional
        Only these columns of the word factor (e.g. the minibatch's present terms); default all V.

    Returns
    -------
    GlobalView
    """
    return make_global_view(state.topic_word_counts(), state.topic_sums(), state.beta, state.doc_topic_prior(),
                            state.alpha, terms)


def local_minibatch(view: GlobalView, block: DocBlock, params: HDPParams, *,
                    doc_topic: FloatArray | None = None) -> CVB0Stats:
    """The per-partition local step of the minibatch form (global statistics fixed).

    Parameters
    ----------
    view : GlobalView
        From :func:`global_view` at the start of the minibatch.
    block : DocBlock
        One partition of the minibatch.
    params : HDPParams
        ``doc_step``, ``burn_in``, ``doc_start``, ``clumping``, ``seed``.
    doc_topic : ndarray of shape (block.n_docs, T), optional
        Starting n_dk, overwritten in place with the final n_dk.

    Returns
    -------
    CVB0Stats
        Merge the partitions' statistics in a fixed order (:meth:`CVB0Stats.merge_all`).
    """
    return _local_minibatch(view, block, doc_step=params.doc_step, burn_in=params.burn_in,
                            doc_start=params.doc_start, clumping=params.clumping, seed=params.seed,
                            doc_topic=doc_topic)


def apply_minibatch(state: HDPState, stats: CVB0Stats, params: HDPParams, *, learn_tables: bool = True) -> None:
    """The driver's global step after a minibatch, in place.

    Parameters
    ----------
    state : HDPState
    stats : CVB0Stats
        The minibatch's merged statistics (taken at the view's alpha).
    params : HDPParams
    learn_tables : bool, default True

    Raises
    ------
    InvalidParameterError
        If the statistics have another number of topics, or terms outside the vocabulary.

    Notes
    -----
    n_kw <- (1 - rho^c) n_kw + rho^c (n / |M|) sum q (Foulds eqs. 9-10; Bleier eq. 9), tables by
    eqs. 10-11 with ``batch_docs = stats.n_docs``, gamma by eq. 6 and alpha by eq. 12 over the minibatch
    (:func:`hyper_step`); ``t_topic_word`` and ``t_hyper`` advance by one.
    """
    if stats.n_topics != state.truncation:
        raise InvalidParameterError(f"statistics of {stats.n_topics} topics for a model of {state.truncation}")
    if stats.terms.size and (stats.terms[0] < 0 or stats.terms[-1] >= state.n_terms):
        raise InvalidParameterError(f"statistics hold term ids outside [0, {state.n_terms})")
    if stats.n_docs == 0:
        return
    rho = params.topic_word_step.rho(state.t_topic_word)
    state.scale = blend_topic_word(state.topic_word, state.topic_totals, state.scale, stats, float(state.n_tokens),
                                   rho)
    state.t_topic_word += 1
    hyper_step(state, stats.table_sums, batch_docs=stats.n_docs, digamma_sum=stats.digamma_sum, params=params,
               learn_tables=learn_tables)
    state.docs_seen += stats.n_docs
    state.tokens_seen += stats.n_tokens
