"""Zero-order collapsed variational updates shared by SCVB0 (LDA) and PCSVB0 (HDP).

This module owns the math of the collapsed *stochastic* token update, once, for both families:
the per-token distribution (Bleier eq. 7; Foulds et al. 2013 eq. 5)::

    q_k  proportional to  (n_dk + prior_k) * (n_kw + beta) / (n_k. + V beta)

with ``prior = alpha * pi`` for the HDP and ``prior_k = alpha`` (symmetric) for SCVB0, the document
step (Bleier eq. 8; Foulds eq. 8), the topic-word step (Bleier eq. 9; Foulds eq. 7 with a minibatch of
one token) on the lazy scale (spec P1), the ``log1p`` accumulation of ``E[1(n_dk >= 1)]`` (Sato et al.;
spec P9) and the minibatch statistics (:class:`CVB0Stats`). The hyperparameter steps (sticks, alpha,
gamma) are not here: they are the HDP's (:mod:`topicflow.models.hdp.sticks`). No Dask, no I/O.

Glossary: T topics (the truncation for the HDP), V terms; ``topic_word`` (T, V) = n_kw / scale and
``topic_totals`` (T,) = n_k. / scale (the lazy-scaled statistics of
:class:`topicflow.models.hdp.state.HDPState`); ``n_total`` = n, the training tokens (the scale of the
eq. 9 target); ``doc_topic`` n_dk; ``log_miss`` = sum_i log(1 - q_ik) over a document's last pass.

Decisions (the papers leave them open; docs/hdp.md repeats them):

- Counters. rho^d is indexed by the token's position within the document, starting at 0 for each
  document and continuing through the burn-in passes into the final pass (Foulds et al.'s per-document
  theta schedule; the two public SCVB0 ports we read, a Python port of Foulds' code and MeTA's
  ``lda_scvb``, both count this way). rho^c is indexed by the global counter the caller passes
  (tokens word by word; minibatches in the minibatch form) and is never reset between passes.
- Document start. ``"random"``: n_dk = n_d * (a flat Dirichlet draw) keyed by
  ``counter_key(seed, STREAM_CVB0_DOC_START, 0, global document index)``, drawn as normalized
  standard exponentials (Foulds' random start); ``"zero"``: n_dk = 0; or the caller's rows.
- Burn-in. ``burn_in`` passes update only n_dk; the final pass updates n_dk and the global statistics
  (or, in the minibatch form, accumulates them), and E[1(n_dk >= 1)] comes from the final pass only.
- Clumping (Bleier sec. 5, future work): one update per distinct term with count c equals c
  word-by-word updates with q held fixed: ``x <- keep x + (1 - keep) target`` with
  ``keep = prod_{j<c} (1 - rho_{t+j})`` for n_dk and for n_kw (the other columns decay by ``keep``),
  counters advance by c, and ``log_miss += c log1p(-q)``.
- q is clipped to at most ``1 - 1e-12`` inside ``log1p`` only (spec P9); the updates use q itself.

Kernels use numba's ``error_model="numpy"``: a float division then needs no zero check, which is what
lets LLVM vectorize the O(T) loops of a token (no division here can have a zero denominator: beta > 0).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numba
import numpy as np

from topicflow._typing import DocStart, FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.rng import (
    STREAM_CVB0_DOC_START,
    counter_key,
    uniform_from_key,
)
from topicflow.models.common.special import digamma_array
from topicflow.models.common.step_sizes import PowerStep, keep_after, power_step

#: Fold the lazy scale into the counts when it falls below this (spec P1; HDPState.SCALE_FLOOR).
SCALE_FLOOR = 1e-100
#: q is clipped to this inside log1p(-q) (spec P9).
Q_CLIP = 1.0 - 1e-12

#: Integer codes of the document start inside kernels (random, zero, the caller's rows).
START_RANDOM = 0
START_ZERO = 1
START_GIVEN = 2


def doc_start_code(doc_start: DocStart) -> int:
    """Kernel code of a document start (``"random"`` 0, ``"zero"`` 1).

    Parameters
    ----------
    doc_start : {"random", "zero"}

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        For any other value.
    """
    if doc_start == "random":
        return START_RANDOM
    if doc_start == "zero":
        return START_ZERO
    raise InvalidParameterError(f"doc_start must be 'random' or 'zero', got {doc_start!r}")


# ---------------------------------------------------------------------------------------------- kernels


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _random_doc_start(seed: int, doc: int, length: float, out: FloatArray) -> None:
    """n_dk = n_d * Dirichlet(1, ..., 1) keyed by (seed, document): normalized standard exponentials."""
    key = counter_key(seed, STREAM_CVB0_DOC_START, 0, doc)
    total = 0.0
    for k in range(out.shape[0]):
        draw = -math.log(1.0 - uniform_from_key(key, k))
        out[k] = draw
        total += draw
    if total <= 0.0:
        for k in range(out.shape[0]):
            out[k] = length / out.shape[0]
        return
    for k in range(out.shape[0]):
        out[k] = out[k] * (length / total)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def start_doc_row(code: int, seed: int, doc: int, length: float, given: FloatArray, out: FloatArray) -> None:
    """Fill ``out`` with a document's starting n_dk (random, zero or the caller's row ``given``)."""
    if code == START_RANDOM:
        _random_doc_start(seed, doc, length, out)
    elif code == START_ZERO:
        out[:] = 0.0
    else:
        out[:] = given


@numba.njit(nogil=True, cache=True, error_model="numpy")
def random_doc_start_rows(seed: int, first_doc: int, lengths: IntArray, out: FloatArray) -> None:
    """Fill row d of ``out`` with document ``first_doc + d``'s random start (n_d x flat Dirichlet).

    Parameters
    ----------
    seed : int
    first_doc : int
        Global index of the first row's document.
    lengths : ndarray of shape (n_docs,), int64
        The documents' lengths n_d.
    out : ndarray of shape (n_docs, T), float64
        Written.
    """
    for d in range(out.shape[0]):
        _random_doc_start(seed, first_doc + d, float(lengths[d]), out[d])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _normalize(q: FloatArray) -> None:
    """q /= q.sum(), the sum taken with four partial sums (breaks the add latency chain)."""
    n = q.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    k = 0
    while k + 4 <= n:
        s0 += q[k]
        s1 += q[k + 1]
        s2 += q[k + 2]
        s3 += q[k + 3]
        k += 4
    while k < n:
        s0 += q[k]
        k += 1
    inv = 1.0 / ((s0 + s1) + (s2 + s3))
    for k in range(n):
        q[k] *= inv


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _doc_q(doc_topic: FloatArray, prior: FloatArray, word_factor: FloatArray, q: FloatArray) -> None:
    """Eq. 7 with a precomputed word factor: ``q = normalize((doc_topic + prior) * word_factor)``."""
    for k in range(q.shape[0]):
        q[k] = (doc_topic[k] + prior[k]) * word_factor[k]
    _normalize(q)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _doc_q_lazy(doc_topic: FloatArray, prior: FloatArray, column: FloatArray, totals: FloatArray, scale: float,
                beta: float, v_beta: float, q: FloatArray) -> None:
    """Eq. 7 from the lazy-scaled statistics: ``(n_dk + prior) (s m_kw + beta) / (s m_k + V beta)``, normalized."""
    for k in range(q.shape[0]):
        q[k] = (doc_topic[k] + prior[k]) * (scale * column[k] + beta) / (scale * totals[k] + v_beta)
    _normalize(q)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _keep_and_gain(s: float, tau: float, kappa: float, t: int, count: int) -> tuple[float, float]:
    """(keep, 1 - keep) of ``count`` steps from counter t; for one step exactly (1 - rho, rho)."""
    if count == 1:
        rho = power_step(s, tau, kappa, float(t))
        return 1.0 - rho, rho
    keep = keep_after(s, tau, kappa, float(t), count)
    return keep, 1.0 - keep


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _doc_step(doc_topic: FloatArray, q: FloatArray, length: float, s: float, tau: float, kappa: float,
              t: int, count: int) -> None:
    """Eq. 8, ``count`` times with q fixed: n_dk <- keep n_dk + (1 - keep) n_d q."""
    keep, gain = _keep_and_gain(s, tau, kappa, t, count)
    gain *= length
    for k in range(q.shape[0]):
        doc_topic[k] = keep * doc_topic[k] + gain * q[k]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _add_log_miss(q: FloatArray, count: int, log_miss: FloatArray, miss_prod: FloatArray) -> None:
    """Accumulate ``count * log(1 - min(q, 1 - 1e-12))`` (spec P9) into ``log_miss`` and ``miss_prod``.

    The log is the most expensive operation of a token, so for one token it is split without loss:
    below 1e-4 the series ``-(q + q^2/2 + q^3/3)`` (truncation error q^4/4 < 2.5e-17) is added to
    ``log_miss``; from 1e-4 on, ``1 - q`` (exact to a relative 1e-12) multiplies ``miss_prod``, which
    :func:`_fold_miss` moves into ``log_miss`` every few tokens. Both loops vectorize. A clumped update
    (``count > 1``) adds ``count * log1p(-q)`` directly.
    """
    if count == 1:
        for k in range(q.shape[0]):
            value = q[k]
            small = value < 1e-4
            log_miss[k] -= value * (1.0 + value * (0.5 + value * (1.0 / 3.0))) if small else 0.0
            miss_prod[k] *= 1.0 if small else 1.0 - min(Q_CLIP, value)
    else:
        for k in range(q.shape[0]):
            log_miss[k] += count * math.log1p(-min(Q_CLIP, q[k]))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _fold_miss(log_miss: FloatArray, miss_prod: FloatArray) -> None:
    """log_miss += log(miss_prod); miss_prod = 1 (each factor is >= 1e-12, so 16 tokens cannot underflow)."""
    for k in range(log_miss.shape[0]):
        if miss_prod[k] != 1.0:
            log_miss[k] += math.log(miss_prod[k])
            miss_prod[k] = 1.0


#: Tokens between folds of the product of (1 - q) into the log (1e-12 ** 16 = 1e-192 > the smallest double).
_FOLD_EVERY = 16


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _global_step(column: FloatArray, totals: FloatArray, scale: float, q: FloatArray, n_total: float,
                 s: float, tau: float, kappa: float, t: int, count: int, work: FloatArray,
                 topic_word: FloatArray) -> float:
    """Eq. 9 (and n_k.) ``count`` times with q fixed, on the lazy scale; returns the new scale.

    Every entry decays by ``keep``: ``scale *= keep``; the token's column gains ``(1 - keep) n q``,
    stored divided by the scale. Below 1e-100 the scale is folded into ``work`` (the block's columns,
    ``column`` is one of its rows), ``totals`` and ``topic_word`` (the full (T, V) array).
    """
    keep, gain = _keep_and_gain(s, tau, kappa, t, count)
    scale *= keep
    if scale < SCALE_FLOOR:
        work *= scale
        totals *= scale
        topic_word *= scale
        scale = 1.0
    gain *= n_total / scale
    for k in range(q.shape[0]):
        add = gain * q[k]
        column[k] += add
        totals[k] += add
    return scale


@numba.njit(nogil=True, cache=True, error_model="numpy")
def word_by_word_doc(cols: IntArray, counts: np.ndarray, length: float, doc_topic: FloatArray,
                     prior: FloatArray, work: FloatArray, topic_totals: FloatArray, topic_word: FloatArray,
                     scale: float, beta: float, n_total: float, t_global: int, global_step: FloatArray,
                     doc_step: FloatArray, burn_in: int, clumping: bool, log_miss: FloatArray,
                     with_tables: bool = True) -> float:
    """One document of the word-by-word algorithm (Bleier Algorithm 1, lines 5-9), in place.

    Parameters
    ----------
    cols : ndarray of shape (n_entries,), int64
        Each distinct term's row in ``work``.
    counts : ndarray of shape (n_entries,)
        The terms' counts.
    length : float
        The document's length n_d.
    doc_topic : ndarray of shape (T,)
        The document's n_dk at the start; updated in place (eq. 8).
    prior : ndarray of shape (T,)
        The document prior: alpha * pi (HDP) or alpha (SCVB0).
    work : ndarray of shape (n_cols, T)
        The lazy-scaled n_kw / scale of the block's terms, one contiguous row per term (the working copy
        :class:`WordByWordBlock` gathers from and scatters back to ``topic_word``); updated (eq. 9).
    topic_totals : ndarray of shape (T,)
        The lazy-scaled n_k. / scale, updated.
    topic_word : ndarray of shape (T, V)
        The full lazy-scaled n_kw; only touched when the scale is folded.
    scale : float
    beta : float
    n_total : float
        The training tokens n.
    t_global : int
        The counter of rho^c at the document's first final-pass token.
    global_step, doc_step : ndarray of shape (3,)
        (s, tau, kappa) of rho^c and rho^d.
    burn_in : int
        Passes that update only n_dk before the final pass.
    clumping : bool
        One update per distinct term (count identical updates with q fixed).
    log_miss : ndarray of shape (T,)
        Zeroed, then sum over the final pass of log(1 - q) (times the count).
    with_tables : bool, default True
        False: ``log_miss`` stays zero (SCVB0 needs no table counts; skips a K-loop per token).

    Returns
    -------
    float
        The new scale. rho^c's counter advances by the document's tokens (the caller's).

    Notes
    -----
    NumPy equivalent (word by word, one token of term w; ``tests/reference/collapsed_vb.py``)::

        q = (n_dk + prior) * (n_kw[:, w] + beta) / (n_k + V * beta); q /= q.sum()     # eq. 7
        n_dk = (1 - rho_d) * n_dk + rho_d * n_d * q                                   # eq. 8
        n_kw *= 1 - rho_c; n_kw[:, w] += rho_c * n * q                                # eq. 9
        n_k = (1 - rho_c) * n_k + rho_c * n * q
    """
    v_beta = beta * topic_word.shape[1]
    q = np.empty(prior.shape[0])
    miss_prod = np.ones(prior.shape[0])
    log_miss[:] = 0.0
    t_doc = 0
    t = t_global
    since_fold = 0
    for sweep in range(burn_in + 1):
        final = sweep == burn_in
        for j in range(cols.shape[0]):
            column = work[cols[j]]
            reps = 1 if clumping else counts[j]
            step = counts[j] if clumping else 1
            for _ in range(reps):
                _doc_q_lazy(doc_topic, prior, column, topic_totals, scale, beta, v_beta, q)
                _doc_step(doc_topic, q, length, doc_step[0], doc_step[1], doc_step[2], t_doc, step)
                t_doc += step
                if final:
                    scale = _global_step(column, topic_totals, scale, q, n_total, global_step[0], global_step[1],
                                         global_step[2], t, step, work, topic_word)
                    t += step
                    if with_tables:
                        _add_log_miss(q, step, log_miss, miss_prod)
                        since_fold += 1
                        if since_fold == _FOLD_EVERY:
                            _fold_miss(log_miss, miss_prod)
                            since_fold = 0
    _fold_miss(log_miss, miss_prod)
    return scale


@numba.njit(nogil=True, cache=True, error_model="numpy")
def local_block(indptr: IntArray, cols: IntArray, counts: np.ndarray, first_doc: int, word_factor: FloatArray,
                prior: FloatArray, doc_step: FloatArray, burn_in: int, clumping: bool, start_code: int,
                seed: int, doc_topic: FloatArray, stats: FloatArray, table_sums: FloatArray) -> None:
    """The local step of a minibatch block with the global statistics fixed (Foulds Algorithm 1, inner loop).

    Parameters
    ----------
    indptr : ndarray of shape (n_docs + 1,)
    cols : ndarray of shape (n_entries,), int64
        Each entry's row in ``word_factor`` and ``stats`` (a compact column of the block's terms).
    counts : ndarray of shape (n_entries,)
    first_doc : int
        Global index of the first document (keys the random start).
    word_factor : ndarray of shape (n_cols, T)
        ``(n_kw + beta) / (n_k. + V beta)`` of each compact column, transposed (contiguous per term).
    prior : ndarray of shape (T,)
    doc_step : ndarray of shape (3,)
    burn_in : int
    clumping : bool
    start_code : int
        0 random, 1 zero, 2 the rows of ``doc_topic``.
    seed : int
    doc_topic : ndarray of shape (n_docs, T)
        Read when ``start_code == 2``; always overwritten with each document's final n_dk.
    stats : ndarray of shape (n_cols, T)
        Zeroed by the caller; accumulates ``count * q`` of the final pass per (column, topic).
    table_sums : ndarray of shape (T,)
        Zeroed by the caller; accumulates E[1(n_dk >= 1)] over the documents.

    Notes
    -----
    NumPy equivalent per document: the burn-in and final passes of :func:`word_by_word_doc` with the
    word factor frozen, and in the final pass ``stats[col(w)] += q`` per token instead of eq. 9.
    """
    n_topics = prior.shape[0]
    q = np.empty(n_topics)
    row = np.empty(n_topics)
    log_miss = np.empty(n_topics)
    miss_prod = np.ones(n_topics)
    for d in range(indptr.shape[0] - 1):
        lo = indptr[d]
        hi = indptr[d + 1]
        length = 0.0
        for j in range(lo, hi):
            length += counts[j]
        start_doc_row(start_code, seed, first_doc + d, length, doc_topic[d], row)
        log_miss[:] = 0.0
        t_doc = 0
        since_fold = 0
        for sweep in range(burn_in + 1):
            final = sweep == burn_in
            for j in range(lo, hi):
                col = cols[j]
                reps = 1 if clumping else counts[j]
                step = counts[j] if clumping else 1
                for _ in range(reps):
                    _doc_q(row, prior, word_factor[col], q)
                    _doc_step(row, q, length, doc_step[0], doc_step[1], doc_step[2], t_doc, step)
                    t_doc += step
                    if final:
                        for k in range(n_topics):
                            stats[col, k] += step * q[k]
                        _add_log_miss(q, step, log_miss, miss_prod)
                        since_fold += 1
                        if since_fold == _FOLD_EVERY:
                            _fold_miss(log_miss, miss_prod)
                            since_fold = 0
        _fold_miss(log_miss, miss_prod)
        for k in range(n_topics):
            table_sums[k] += -math.expm1(log_miss[k])
        doc_topic[d, :] = row


def step_array(step: PowerStep) -> FloatArray:
    """(s, tau, kappa) of a schedule, the form the kernels take.

    Parameters
    ----------
    step : PowerStep

    Returns
    -------
    ndarray of shape (3,), float64
    """
    return np.array([step.scale, step.delay, step.power], dtype=np.float64)


def start_doc_topic(block: DocBlock, n_topics: int, *, doc_start: DocStart, seed: int) -> FloatArray:
    """Each document's starting n_dk, (n_docs, T): what a first visit uses (for ``keep_doc_state``).

    Parameters
    ----------
    block : DocBlock
    n_topics : int
    doc_start : {"random", "zero"}
    seed : int

    Returns
    -------
    ndarray of shape (block.n_docs, n_topics), float64
        Row d sums to n_d (random) or is zero.
    """
    out = np.zeros((block.n_docs, n_topics), dtype=np.float64)
    if doc_start_code(doc_start) == START_RANDOM:
        random_doc_start_rows(int(seed), int(block.first_doc), block.doc_lengths(), out)
    return out


# ---------------------------------------------------------------------------------------------- word-by-word driver


class LazyTopicWord(Protocol):
    """The fields of a collapsed state the word-by-word driver reads and updates (HDPState has them)."""

    topic_word: FloatArray
    topic_totals: FloatArray
    scale: float
    beta: float
    n_tokens: int
    t_topic_word: int
    docs_seen: int
    tokens_seen: int

    def doc_topic_prior(self) -> FloatArray: ...


#: Called after each document with (E[1(n_dk >= 1)] of shape (T,), n_d): the HDP's hyperparameter step.
AfterDocument = Callable[[FloatArray, float], None]


def run_block_word_by_word(state: LazyTopicWord, block: DocBlock, *, topic_word_step: PowerStep,
                           doc_step: PowerStep, burn_in: int, doc_start: DocStart, clumping: bool, seed: int,
                           doc_topic: FloatArray | None = None, after_document: AfterDocument | None = None,
                           with_tables: bool = True) -> float:
    """The word-by-word schedule over a block's documents in order (Bleier Algorithm 1, lines 4-12), in place.

    The block's columns of n_kw are gathered into a contiguous (n_cols, T) working copy for the duration
    of the block and scattered back at the end (the (T, V) layout would touch T cache lines per token);
    the values are the same as updating ``state.topic_word`` directly.

    Parameters
    ----------
    state : LazyTopicWord
        ``topic_word``, ``topic_totals``, ``scale``, ``t_topic_word`` (per token), ``docs_seen`` and
        ``tokens_seen`` are updated.
    block : DocBlock
    topic_word_step, doc_step : PowerStep
        The steps rho^c (global token counter) and rho^d (token within the document).
    burn_in : int
    doc_start : {"random", "zero"}
        The start of n_dk when ``doc_topic`` is None.
    clumping : bool
    seed : int
    doc_topic : ndarray of shape (block.n_docs, T), optional
        Starting n_dk rows, overwritten with the final ones.
    after_document : callable, optional
        ``after_document(tables, n_d)`` after each document, before the next one reads
        ``state.doc_topic_prior()``.
    with_tables : bool, default True
        False: skip E[1(n_dk >= 1)] (the HDP's table counts); the return value is then 0 and
        ``after_document`` sees zeros. The statistics n_kw, n_k and n_dk are the same.

    Returns
    -------
    float
        Sum over the documents and topics of E[1(n_dk >= 1)].

    Raises
    ------
    InvalidParameterError
        If the block's vocabulary or ``doc_topic``'s shape does not match the state.
    """
    n_topics, n_terms = state.topic_word.shape
    if block.n_terms != n_terms:
        raise InvalidParameterError(
            f"block of {block.n_docs} documents starting at document {block.first_doc} has a vocabulary of "
            f"{block.n_terms} terms but the model has {n_terms}; use the store the model was fitted on")
    if doc_topic is not None:
        _check_doc_topic(doc_topic, block, n_topics)
    code = START_GIVEN if doc_topic is not None else doc_start_code(doc_start)
    terms, cols = np.unique(block.term_ids.astype(np.int64), return_inverse=True)
    cols = cols.astype(np.int64).reshape(-1)
    work = np.ascontiguousarray(state.topic_word[:, terms].T)
    global_array, doc_array = step_array(topic_word_step), step_array(doc_step)
    lengths = block.doc_lengths()
    row, empty, log_miss = np.zeros(n_topics), np.zeros(n_topics), np.zeros(n_topics)
    table_total = 0.0
    try:
        for d in range(block.n_docs):
            lo, hi = int(block.indptr[d]), int(block.indptr[d + 1])
            length = float(lengths[d])
            start_doc_row(code, seed, block.first_doc + d, length, doc_topic[d] if doc_topic is not None else empty,
                          row)
            state.scale = word_by_word_doc(cols[lo:hi], block.counts[lo:hi], length, row, state.doc_topic_prior(),
                                           work, state.topic_totals, state.topic_word, state.scale, state.beta,
                                           float(state.n_tokens), state.t_topic_word, global_array, doc_array,
                                           burn_in, clumping, log_miss, with_tables)
            state.t_topic_word += int(lengths[d])
            state.docs_seen += 1
            state.tokens_seen += int(lengths[d])
            if doc_topic is not None:
                doc_topic[d] = row
            tables = -np.expm1(log_miss)
            table_total += float(tables.sum())
            if after_document is not None:
                after_document(tables, length)
    finally:
        state.topic_word[:, terms] = work.T
    return table_total


# ---------------------------------------------------------------------------------------------- minibatch form


@dataclass(frozen=True, slots=True)
class CVB0Stats:
    """Statistics of a minibatch's local step: a monoid under :meth:`merge` with :meth:`zeros` as identity.

    Attributes
    ----------
    terms : ndarray of shape (n_cols,), int64
        Sorted distinct term ids the statistics cover (the minibatch's present terms).
    topic_word : ndarray of shape (T, n_cols), float64
        Sum over the minibatch's final-pass tokens of q per (topic, term) (unscaled).
    table_sums : ndarray of shape (T,), float64
        Sum over documents of E[1(n_dk >= 1)].
    digamma_sum : float
        Sum over documents of psi(n_d + alpha) - psi(alpha) at the alpha of the view.
    n_docs, n_tokens : int
        Documents and tokens behind the statistics (|M| is ``n_tokens``).
    """

    terms: IntArray
    topic_word: FloatArray
    table_sums: FloatArray
    digamma_sum: float
    n_docs: int
    n_tokens: int

    @classmethod
    def zeros(cls, n_topics: int) -> CVB0Stats:
        """The identity of :meth:`merge` (no terms, no documents).

        Parameters
        ----------
        n_topics : int

        Returns
        -------
        CVB0Stats
        """
        return cls(terms=np.zeros(0, dtype=np.int64), topic_word=np.zeros((n_topics, 0)),
                   table_sums=np.zeros(n_topics), digamma_sum=0.0, n_docs=0, n_tokens=0)

    @property
    def n_topics(self) -> int:
        return int(self.table_sums.shape[0])

    def topic_totals(self) -> FloatArray:
        """Sum of q per topic over the minibatch's tokens, shape (T,)."""
        out: FloatArray = self.topic_word.sum(axis=1)
        return out

    def merge(self, other: CVB0Stats) -> CVB0Stats:
        """Sum of two statistics (a new value; the union of their terms).

        Parameters
        ----------
        other : CVB0Stats

        Returns
        -------
        CVB0Stats

        Raises
        ------
        InvalidParameterError
            If the numbers of topics differ.
        """
        if other.n_topics != self.n_topics:
            raise InvalidParameterError(
                f"cannot merge statistics of {self.n_topics} and {other.n_topics} topics")
        terms = np.union1d(self.terms, other.terms).astype(np.int64)
        topic_word = np.zeros((self.n_topics, terms.shape[0]))
        topic_word[:, np.searchsorted(terms, self.terms)] += self.topic_word
        topic_word[:, np.searchsorted(terms, other.terms)] += other.topic_word
        return CVB0Stats(terms=terms, topic_word=topic_word, table_sums=self.table_sums + other.table_sums,
                         digamma_sum=self.digamma_sum + other.digamma_sum, n_docs=self.n_docs + other.n_docs,
                         n_tokens=self.n_tokens + other.n_tokens)

    @classmethod
    def merge_all(cls, items: list[CVB0Stats], n_topics: int) -> CVB0Stats:
        """Left fold of :meth:`merge` over ``items`` in the given order (the order fixes the rounding).

        Parameters
        ----------
        items : list of CVB0Stats
        n_topics : int
            T (used when ``items`` is empty).

        Returns
        -------
        CVB0Stats
        """
        out = cls.zeros(n_topics)
        for item in items:
            out = out.merge(item)
        return out


@dataclass(frozen=True, slots=True)
class GlobalView:
    """What a minibatch's local step reads from the global state (fixed during the minibatch).

    Attributes
    ----------
    word_factor : ndarray of shape (T, n_cols), float64
        ``(n_kw + beta) / (n_k. + V beta)`` of every term (``terms is None``) or of ``terms``.
    terms : ndarray of shape (n_cols,), int64, or None
        Sorted term ids of the columns; None means all V terms in order.
    doc_prior : ndarray of shape (T,), float64
        alpha * pi (HDP) or alpha (SCVB0).
    alpha : float
        The concentration the alpha statistics are taken at.
    n_terms : int
        V.
    """

    word_factor: FloatArray
    terms: IntArray | None
    doc_prior: FloatArray
    alpha: float
    n_terms: int

    def columns_of(self, term_ids: np.ndarray) -> IntArray:
        """Columns of ``word_factor`` holding ``term_ids``.

        Parameters
        ----------
        term_ids : ndarray of int

        Returns
        -------
        ndarray of int64

        Raises
        ------
        InvalidParameterError
            If a term is outside the view.
        """
        ids = np.asarray(term_ids, dtype=np.int64)
        if self.terms is None:
            if ids.size and (ids.min() < 0 or ids.max() >= self.n_terms):
                raise InvalidParameterError(f"term ids must lie in [0, {self.n_terms}); the view covers V terms")
            return ids
        cols = np.searchsorted(self.terms, ids)
        cols = np.minimum(cols, max(self.terms.shape[0] - 1, 0))
        if ids.size and (self.terms.shape[0] == 0 or not np.array_equal(self.terms[cols], ids)):
            raise InvalidParameterError("the global view does not cover every term of the block; build it with "
                                        "terms=None or with the block's terms")
        return cols.astype(np.int64)


def make_global_view(topic_word_counts: FloatArray, topic_sums: FloatArray, beta: float, doc_prior: FloatArray,
                     alpha: float, terms: IntArray | None = None) -> GlobalView:
    """The word factor ``(n_kw + beta) / (n_k. + V beta)`` (all columns, or ``terms``) and the prior.

    Parameters
    ----------
    topic_word_counts : ndarray of shape (T, V)
        The expected counts n_kw (true counts, scale folded in).
    topic_sums : ndarray of shape (T,)
        Their row sums n_k..
    beta : float
    doc_prior : ndarray of shape (T,)
    alpha : float
    terms : ndarray of int, optional
        Only these (sorted, distinct) columns.

    Returns
    -------
    GlobalView
    """
    n_terms = int(topic_word_counts.shape[1])
    denom = np.asarray(topic_sums, dtype=np.float64) + n_terms * beta
    if terms is None:
        factor = (topic_word_counts + beta) / denom[:, None]
        cols = None
    else:
        cols = np.unique(np.asarray(terms, dtype=np.int64))
        factor = (topic_word_counts[:, cols] + beta) / denom[:, None]
    return GlobalView(word_factor=np.ascontiguousarray(factor, dtype=np.float64), terms=cols,
                      doc_prior=np.array(doc_prior, dtype=np.float64), alpha=float(alpha), n_terms=n_terms)


def _check_doc_topic(doc_topic: FloatArray, block: DocBlock, n_topics: int) -> None:
    if doc_topic.shape != (block.n_docs, n_topics) or doc_topic.dtype != np.float64:
        raise InvalidParameterError(
            f"doc_topic must be a float64 array of shape {(block.n_docs, n_topics)!r} (one row of n_dk per document "
            f"of the block), got {doc_topic.dtype} {doc_topic.shape!r}")


def local_minibatch(view: GlobalView, block: DocBlock, *, doc_step: PowerStep, burn_in: int, doc_start: DocStart,
                    clumping: bool, seed: int, doc_topic: FloatArray | None = None) -> CVB0Stats:
    """The local step of one block of a minibatch, global statistics fixed (Foulds et al. Algorithm 1).

    Parameters
    ----------
    view : GlobalView
    block : DocBlock
    doc_step : PowerStep
        The step rho^d, indexed per token within each document.
    burn_in : int
        Passes over each document that update only n_dk before the accumulating pass.
    doc_start : {"random", "zero"}
        n_dk's start when ``doc_topic`` is None.
    clumping : bool
    seed : int
    doc_topic : ndarray of shape (block.n_docs, T), optional
        Each document's starting n_dk; overwritten in place with its final n_dk (``keep_doc_state``).

    Returns
    -------
    CVB0Stats
        Over the block's present terms.

    Raises
    ------
    InvalidParameterError
        If ``doc_topic`` has the wrong shape or the view misses a term of the block.
    """
    n_topics = int(view.doc_prior.shape[0])
    terms, cols = np.unique(block.term_ids.astype(np.int64), return_inverse=True)
    factor = np.ascontiguousarray(view.word_factor[:, view.columns_of(terms)].T)
    stats = np.zeros((terms.shape[0], n_topics))
    table_sums = np.zeros(n_topics)
    if doc_topic is None:
        code = doc_start_code(doc_start)
        rows = np.zeros((block.n_docs, n_topics))
    else:
        _check_doc_topic(doc_topic, block, n_topics)
        code = START_GIVEN
        rows = doc_topic
    local_block(block.indptr.astype(np.int64), cols.astype(np.int64).reshape(-1), block.counts,
                int(block.first_doc), factor, view.doc_prior, step_array(doc_step), int(burn_in), bool(clumping),
                code, int(seed), rows, stats, table_sums)
    lengths = block.doc_lengths().astype(np.float64)
    digamma_sum = float(np.sum(digamma_array(lengths + view.alpha) - digamma_array(np.full_like(lengths, view.alpha))))
    return CVB0Stats(terms=terms, topic_word=np.ascontiguousarray(stats.T), table_sums=table_sums,
                     digamma_sum=digamma_sum, n_docs=block.n_docs, n_tokens=block.n_tokens)


def blend_topic_word(topic_word: FloatArray, topic_totals: FloatArray, scale: float, stats: CVB0Stats,
                     n_total: float, rho: float) -> float:
    """Blend n_kw <- (1 - rho) n_kw + rho (n / |M|) sum q on the lazy scale, in place; return the new scale.

    Parameters
    ----------
    topic_word : ndarray of shape (T, V)
        The lazy-scaled n_kw / scale (updated in place).
    topic_totals : ndarray of shape (T,)
        The lazy-scaled n_k. / scale (updated in place).
    scale : float
    stats : CVB0Stats
        The merged minibatch statistics (|M| = ``stats.n_tokens`` > 0).
    n_total : float
        The training tokens n.
    rho : float
        The step rho^c of this minibatch.

    Returns
    -------
    float
        The new scale (folded to 1 when it falls below 1e-100).

    Notes
    -----
    Foulds et al. eqs. 9-10 (Bleier eq. 9 with a minibatch target). NumPy equivalent::

        n_kw = (1 - rho) * n_kw; n_kw[:, terms] += rho * n / |M| * stats.topic_word
    """
    scale *= 1.0 - rho
    if scale < SCALE_FLOOR:
        topic_word *= scale
        topic_totals *= scale
        scale = 1.0
    if stats.n_tokens == 0:
        return scale
    gain = rho * n_total / stats.n_tokens / scale
    topic_word[:, stats.terms] += gain * stats.topic_word
    topic_totals += gain * stats.topic_totals()
    return scale
