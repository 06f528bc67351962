"""PCVB0: Sato, Kurihara & Nakagawa (2012)'s practical batch collapsed VB for the HDP (Bleier sec. 2).

Equation numbers are Bleier's; spec section 1.2 is the contract. Glossary: T truncation, V vocabulary
size, q_di the variational distribution of token i of document d over the T topics, n_dk = sum_i q_dik,
n_kw = sum_{d,i: w_di = w} q_dik, n_k. = sum_w n_kw, a_k = sum_d E[1(n_dk >= 1)] (expected tables).

State. PCVB0 keeps q for every token (memory O(tokens x T)). The caller stores it out of core (one
array per shard, see :mod:`topicflow.io.outputs.assignment_scratch`); the functions here work on the q
of one block (or a slice of documents of one block) at a time. A "unit" is one row of q: a token
(word level, the faithful default) or, with clumping, one distinct term of a document with its count c,
all c copies sharing one q (Bleier sec. 5's first item of future work; the counts weight the unit c
times in n_dk, n_kw and the table product ``(1 - q)^c``).

Schedule of one iteration (one pass), chosen so that the model does not depend on how documents are
split into partitions:

- **Jacobi across documents.** Every document reads the same global statistics n_kw, n_k. of the
  previous iteration (the sum of every stored q), alpha, gamma and pi (:class:`PCVB0View`).
- **Sequential within a document.** Tokens are visited in CSR order (ascending term, copies of a term
  consecutive). For token i, eq. 2 uses
  ``n_dk^{-di} = n_dk - q_old`` with n_dk the document's *current* sum (tokens before i already
  updated), ``n_kw^{-di} = n_kw(prev) - q_old + (changes of the earlier tokens of d with the same
  term)`` and ``n_k.^{-di} = n_k.(prev) - q_old + (changes of the earlier tokens of d)``. So a
  document sees its own updates at once and other documents' updates at the next iteration: the
  result of an iteration is a function of the previous iteration's q only, whatever the number of
  partitions or workers. Excluded counts are clipped at 0 (they can dip below by rounding).
- **Statistics of the new q.** Each partition returns ``sum q`` per (topic, term), the table sums
  ``sum_d E[1(n_dk >= 1)] = sum_d [1 - prod_i (1 - q_dik)]`` (accumulated as ``sum log1p(-q)`` with q
  clipped to 1 - 1e-12, spec P9), ``sum_d [psi(n_d + alpha) - psi(alpha)]`` at the alpha it ran with,
  a per-token log-likelihood proxy and the change of q. The statistics are computed from q *as stored*
  (after rounding to the storage dtype), so that the next iteration's "minus the token's own old q"
  removes exactly what the sum contains.
- **Global step** (:func:`update_state`): n_kw and n_k. are set to the sums, a_k to the table sums
  (sticks re-ordered by a_k, :mod:`topicflow.models.hdp.sticks`), alpha by eq. 5 (floored at
  ``alpha_floor``), then gamma by eq. 6 with (u, v) of eq. 4 at the current gamma (spec P6). pi of the
  next iteration is eq. 3 with the new tables and gamma.

Initialization: q of unit j of the document at global position g is a flat-Dirichlet draw,
``E_jk = -log(1 - U_jk)`` normalized over k, with ``U_jk`` the ``(j T + k)``-th uniform of
``counter_key(seed, STREAM_CVB0_DOC_START, 0, g)``; so it depends on the seed and the document only.
The driver's default start ("prior") multiplies the draw by the prior mean of pi before normalizing
(:func:`prior_start_weights`: eq. 3 with no tables and ``gamma_init``), ``q_dik ∝ E_dik pi0_k``; the
"flat" start uses the draw as it is. The paper gives no start (spec P7); see :func:`prior_start_weights`
for why "prior" is the default.
The statistics of this random q set n_kw, n_k. and a_k before the first iteration; alpha and gamma keep
their starting values until the first iteration's step (eq. 5 on random q, which spreads every token
over all T topics, would start alpha far too high).

Log-likelihood proxy (the trace's measure, not a bound): for each token,
``log sum_k theta_dk phi_kw`` with ``theta_dk = (n_dk + alpha pi_k) / (n_d + alpha)`` from the
document's new q and ``phi_kw = (n_kw + beta) / (n_k. + V beta)`` from the previous iteration.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
from scipy.special import digamma

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.common.rng import (
    STREAM_CVB0_DOC_START,
    counter_key,
    uniform_from_key,
)
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.models.hdp.sticks import gamma_update, stick_params, stick_weights
from topicflow.models.lda.vb.stats import TopicTermStats

#: q is clipped to at most this before ``log1p(-q)`` (spec P9).
Q_CLIP = 1.0 - 1e-12
#: Storage dtypes of q: float32 (default: halves the scratch; q is in [0, 1] and a relative rounding of
#: 6e-8 per iteration is far below the change between iterations) or float64 (exact tests).
Q_DTYPES = ("float32", "float64")


# ----------------------------------------------------------------------------- units


def unit_layout(block: DocBlock, clumping: bool) -> tuple[IntArray, IntArray, IntArray]:
    """The rows of q of a block: one per token, or one per (document, distinct term) with clumping.

    Parameters
    ----------
    block : DocBlock
    clumping : bool

    Returns
    -------
    unit_indptr : ndarray of shape (n_docs + 1,), int64
        Units of document d are ``unit_indptr[d]:unit_indptr[d + 1]``.
    unit_terms : ndarray of shape (n_units,), int64
        Term of each unit, ascending within a document.
    unit_counts : ndarray of shape (n_units,), int64
        Copies behind each unit (1 at word level).
    """
    if clumping:
        return (block.indptr.astype(np.int64), block.term_ids.astype(np.int64), block.counts.astype(np.int64))
    indptr, terms = expand_tokens(block)
    return indptr, terms.astype(np.int64), np.ones(terms.shape[0], dtype=np.int64)


def n_units(block: DocBlock, clumping: bool) -> int:
    """Count the rows of q a block needs: its tokens, or its CSR entries with clumping.

    Parameters
    ----------
    block : DocBlock
    clumping : bool

    Returns
    -------
    int
    """
    return int(block.term_ids.shape[0]) if clumping else block.n_tokens


def check_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a q storage dtype name ("float32" or "float64").

    Parameters
    ----------
    dtype : str

    Returns
    -------
    numpy.dtype

    Raises
    ------
    InvalidParameterError
        Any other name.
    """
    if dtype not in Q_DTYPES:
        raise InvalidParameterError(f"q dtype must be one of {list(Q_DTYPES)}, got {dtype!r}")
    return np.dtype(dtype)


# ----------------------------------------------------------------------------- statistics


@dataclass(frozen=True, slots=True)
class PCVB0Stats:
    """Statistics of the q of a set of documents; a monoid under :meth:`merge` (fixed order).

    Attributes
    ----------
    topic_word : TopicTermStats
        ``sum q`` per (topic, term), over the terms present (times the unit counts).
    table_sums : ndarray of shape (T,)
        ``sum_d E[1(n_dk >= 1)]``.
    digamma_sum : float
        ``sum_d [psi(n_d + alpha) - psi(alpha)]`` at the alpha the documents ran with (eq. 5's
        denominator).
    log_likelihood : float
        Sum over tokens of the proxy of the module docstring (0 for statistics of a start).
    q_change : float
        ``sum_tokens sum_k |q_new - q_old|`` (0 for statistics of a start).
    n_docs, n_tokens : int
    """

    topic_word: TopicTermStats
    table_sums: FloatArray
    digamma_sum: float
    log_likelihood: float
    q_change: float
    n_docs: int
    n_tokens: int

    @classmethod
    def zeros(cls, truncation: int) -> PCVB0Stats:
        """The identity of :meth:`merge`.

        Parameters
        ----------
        truncation : int

        Returns
        -------
        PCVB0Stats
        """
        return cls(TopicTermStats.zeros(truncation), np.zeros(truncation), 0.0, 0.0, 0.0, 0, 0)

    def merge(self, other: PCVB0Stats) -> PCVB0Stats:
        """The statistics of both sets of documents (inputs unchanged).

        Parameters
        ----------
        other : PCVB0Stats

        Returns
        -------
        PCVB0Stats
        """
        return PCVB0Stats(self.topic_word.merge(other.topic_word), self.table_sums + other.table_sums,
                          self.digamma_sum + other.digamma_sum, self.log_likelihood + other.log_likelihood,
                          self.q_change + other.q_change, self.n_docs + other.n_docs,
                          self.n_tokens + other.n_tokens)

    @classmethod
    def merge_all(cls, parts: Sequence[PCVB0Stats]) -> PCVB0Stats:
        """Left fold of :meth:`merge` over ``parts`` in their order (topic-word columns in one pass).

        Parameters
        ----------
        parts : sequence of PCVB0Stats
            At least one.

        Returns
        -------
        PCVB0Stats
        """
        if not parts:
            raise InvalidParameterError("merge_all needs at least one PCVB0Stats")
        first = parts[0]
        tables, dsum, loglik, change = first.table_sums, first.digamma_sum, first.log_likelihood, first.q_change
        for part in parts[1:]:
            tables = tables + part.table_sums
            dsum += part.digamma_sum
            loglik += part.log_likelihood
            change += part.q_change
        return PCVB0Stats(TopicTermStats.merge_all([p.topic_word for p in parts]), tables, dsum, loglik, change,
                          sum(p.n_docs for p in parts), sum(p.n_tokens for p in parts))


@dataclass(frozen=True)
class PCVB0View:
    """What every partition reads in an iteration: the previous iteration's global statistics.

    Attributes
    ----------
    term_topic : ndarray of shape (V, T)
        n_kw, term-major (the kernels read one term's T values at a time).
    topic_totals : ndarray of shape (T,)
        n_k..
    prior : ndarray of shape (T,)
        alpha * pi (eq. 3 with the current tables and gamma).
    alpha, beta : float
    """

    term_topic: FloatArray
    topic_totals: FloatArray
    prior: FloatArray
    alpha: float
    beta: float

    @classmethod
    def from_state(cls, state: HDPState) -> PCVB0View:
        """The view of an :class:`HDPState`.

        Parameters
        ----------
        state : HDPState

        Returns
        -------
        PCVB0View
        """
        return cls(np.ascontiguousarray(state.topic_word_counts().T), state.topic_sums(), state.doc_topic_prior(),
                   float(state.alpha), float(state.beta))

    @property
    def truncation(self) -> int:
        return int(self.term_topic.shape[1])

    @property
    def n_terms(self) -> int:
        return int(self.term_topic.shape[0])


def _present(terms: IntArray) -> tuple[IntArray, IntArray]:
    present = np.unique(terms)
    return present.astype(np.int64), np.searchsorted(present, terms).astype(np.int64)


def _digamma_sum(block: DocBlock, alpha: float) -> float:
    lengths = block.doc_lengths().astype(np.float64)
    return float(np.sum(digamma(lengths + alpha) - digamma(alpha)))


def _check_q(q: np.ndarray, rows: int, truncation: int) -> None:
    if q.ndim != 2 or q.shape != (rows, truncation):
        raise InvalidParameterError(f"q has shape {q.shape}, expected ({rows}, {truncation})")
    if q.dtype not in (np.float32, np.float64) or not q.flags.c_contiguous:
        raise InvalidParameterError("q must be a C-contiguous float32 or float64 array")


# ----------------------------------------------------------------------------- start


@numba.njit(nogil=True, cache=True)
def _random_q(unit_indptr, first_doc, seed, stream, out):
    T = out.shape[1]
    for d in range(unit_indptr.shape[0] - 1):
        key = counter_key(seed, stream, 0, first_doc + d)
        for j in range(unit_indptr[d], unit_indptr[d + 1]):
            local = j - unit_indptr[d]
            total = 0.0
            for k in range(T):
                draw = -np.log1p(-uniform_from_key(key, local * T + k))
                out[j, k] = draw
                total += draw
            for k in range(T):
                out[j, k] = out[j, k] / total


def initial_q(block: DocBlock, truncation: int, *, seed: int, clumping: bool, dtype: str = "float64",
              weights: FloatArray | None = None) -> np.ndarray:
    """The random start of q (module docstring): flat-Dirichlet rows keyed by (seed, global document).

    Parameters
    ----------
    block : DocBlock
    truncation : int
        T.
    seed : int
    clumping : bool
    dtype : {"float64", "float32"}
        Storage dtype; rows are drawn in float64 then rounded.
    weights : ndarray of shape (T,), optional
        Multiply each draw by these positive weights before normalizing (the driver's default start
        passes the prior mean of pi, :func:`prior_start_weights`).

    Returns
    -------
    ndarray of shape (n_units, T)
    """
    unit_indptr, _, _ = unit_layout(block, clumping)
    out = np.empty((int(unit_indptr[-1]), truncation), dtype=np.float64)
    _random_q(unit_indptr, int(block.first_doc), int(seed), STREAM_CVB0_DOC_START, out)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (truncation,) or not np.all(w > 0):
            raise InvalidParameterError(f"start weights must be {truncation} positive numbers")
        out *= w
        out /= out.sum(axis=1, keepdims=True)
    return out.astype(check_dtype(dtype), copy=False)


def prior_start_weights(params: HDPParams) -> FloatArray:
    """The prior mean of pi before any table is counted: eq. 3 with ``a = 0`` and ``gamma = gamma_init``.

    With no tables every stick has ``u = 1, v = gamma_init``, so ``pi_bar = 1 / (1 + gamma_init)`` for every
    stick but the last (``pi_bar_T = 1``) and the weights decay geometrically. The driver's default start ("prior") draws
    q around them, so that a fit starts with a few topics and adds more as the data asks, instead of
    spreading every token evenly over all T topics ("flat"), which the table statistics then keep alive.
    Measured on 400 planted documents with K = 10 topics, 40 iterations, three seeds: with T = 100 the
    "prior" start leaves 16-17 topics above 1% of the tokens (the ten largest hold 0.81-0.85) and
    matches the planted topics at mean Hellinger distance 0.10-0.11; the "flat" start leaves 42-46
    (0.28-0.30) at 0.26-0.27, with alpha and gamma driven up to about 7.5 and 17. With T = 30 both
    starts recover the topics but "flat" keeps 26-28 topics above 1%.

    Parameters
    ----------
    params : HDPParams

    Returns
    -------
    ndarray of shape (T,)
        Positive (floored at 1e-300, so that a long geometric tail never underflows to 0).
    """
    return np.maximum(stick_weights(np.zeros(params.truncation), float(params.gamma_init)), 1e-300)


@numba.njit(nogil=True, cache=True)
def _accumulate(unit_indptr, cols, counts, q, out_cols, tables):
    T = q.shape[1]
    log_miss = np.zeros(T)
    for d in range(unit_indptr.shape[0] - 1):
        log_miss[:] = 0.0
        for j in range(unit_indptr[d], unit_indptr[d + 1]):
            c = counts[j]
            col = cols[j]
            for k in range(T):
                value = np.float64(q[j, k])
                out_cols[col, k] += c * value
                log_miss[k] += c * np.log1p(-min(value, 1.0 - 1e-12))
        for k in range(T):
            tables[k] += -np.expm1(log_miss[k])


def block_statistics(block: DocBlock, q: np.ndarray, *, alpha: float, clumping: bool) -> PCVB0Stats:
    """Compute the statistics of a block's q as it stands (the start, before the first iteration).

    Parameters
    ----------
    block : DocBlock
    q : ndarray of shape (n_units, T)
    alpha : float
        The alpha of :attr:`PCVB0Stats.digamma_sum`.
    clumping : bool

    Returns
    -------
    PCVB0Stats
        ``log_likelihood`` and ``q_change`` are 0.
    """
    unit_indptr, terms, counts = unit_layout(block, clumping)
    T = q.shape[1] if q.ndim == 2 else 0
    _check_q(q, int(unit_indptr[-1]), T)
    present, cols = _present(terms)
    out_cols = np.zeros((present.shape[0], T))
    tables = np.zeros(T)
    _accumulate(unit_indptr, cols, counts, q, out_cols, tables)
    return PCVB0Stats(TopicTermStats(present, np.ascontiguousarray(out_cols.T)), tables,
                      _digamma_sum(block, alpha), 0.0, 0.0, block.n_docs, block.n_tokens)


# ----------------------------------------------------------------------------- one iteration


@numba.njit(nogil=True, cache=True)
def _sweep(unit_indptr, terms, cols, counts, q, term_topic, totals, prior, alpha, beta,
           out_cols, tables, scalars):
    T = q.shape[1]
    v_beta = term_topic.shape[0] * beta
    ndk = np.zeros(T)
    dn = np.zeros(T)  # this document's changes of n_k.
    dw = np.zeros(T)  # changes of n_kw by the document's earlier copies of the current term
    p = np.zeros(T)
    log_miss = np.zeros(T)
    inv_totals = 1.0 / (totals + v_beta)
    loglik = 0.0
    change = 0.0
    for d in range(unit_indptr.shape[0] - 1):
        lo, hi = unit_indptr[d], unit_indptr[d + 1]
        ndk[:] = 0.0
        dn[:] = 0.0
        log_miss[:] = 0.0
        n_d = 0.0
        for j in range(lo, hi):
            n_d += counts[j]
            for k in range(T):
                ndk[k] += counts[j] * np.float64(q[j, k])
        previous = -1
        for j in range(lo, hi):
            w = terms[j]
            c = counts[j]
            if w != previous:
                dw[:] = 0.0
                previous = w
            total = 0.0
            for k in range(T):
                old = np.float64(q[j, k])
                a = ndk[k] - old
                a = max(a, 0.0)
                b = term_topic[w, k] - old + dw[k]
                b = max(b, 0.0)
                t = totals[k] - old + dn[k]
                t = max(t, 0.0)
                p[k] = (a + prior[k]) * (b + beta) / (t + v_beta)
                total += p[k]
            col = cols[j]
            for k in range(T):
                old = np.float64(q[j, k])
                q[j, k] = p[k] / total
                new = np.float64(q[j, k])  # as stored (rounded to q's dtype)
                diff = new - old
                ndk[k] += c * diff
                dn[k] += c * diff
                dw[k] += c * diff
                change += c * abs(diff)
                out_cols[col, k] += c * new
                log_miss[k] += c * np.log1p(-min(new, 1.0 - 1e-12))
        for k in range(T):
            tables[k] += -np.expm1(log_miss[k])
        norm = n_d + alpha
        for j in range(lo, hi):
            w = terms[j]
            s = 0.0
            for k in range(T):
                s += (ndk[k] + prior[k]) * (term_topic[w, k] + beta) * inv_totals[k]
            loglik += counts[j] * np.log(s / norm)
    scalars[0] += loglik
    scalars[1] += change


def sweep_block(view: PCVB0View, block: DocBlock, q: np.ndarray, *, clumping: bool) -> PCVB0Stats:
    """One PCVB0 iteration over a block's documents: q updated in place by eq. 2, and its statistics.

    Parameters
    ----------
    view : PCVB0View
        The previous iteration's global statistics.
    block : DocBlock
        The documents (a shard or a slice of one); terms must be below ``view.n_terms``.
    q : ndarray of shape (n_units, T), float32 or float64, C-contiguous
        The documents' q from the previous iteration (see :func:`unit_layout`); overwritten with the
        new q, rounded to its dtype.
    clumping : bool
        Units are (document, distinct term) pairs.

    Returns
    -------
    PCVB0Stats
        Statistics of the new q; ``digamma_sum`` at ``view.alpha``.

    Raises
    ------
    InvalidParameterError
        Shapes disagree or a term is outside the vocabulary.
    """
    unit_indptr, terms, counts = unit_layout(block, clumping)
    T = view.truncation
    _check_q(q, int(unit_indptr[-1]), T)
    if terms.shape[0] and int(terms.max()) >= view.n_terms:
        raise InvalidParameterError(f"term id {int(terms.max())} is outside the model's {view.n_terms} terms")
    present, cols = _present(terms)
    out_cols = np.zeros((present.shape[0], T))
    tables = np.zeros(T)
    scalars = np.zeros(2)
    _sweep(unit_indptr, terms, cols, counts, q, view.term_topic, view.topic_totals, view.prior, view.alpha,
           view.beta, out_cols, tables, scalars)
    return PCVB0Stats(TopicTermStats(present, np.ascontiguousarray(out_cols.T)), tables,
                      _digamma_sum(block, view.alpha), float(scalars[0]), float(scalars[1]),
                      block.n_docs, block.n_tokens)


# ----------------------------------------------------------------------------- global step


def initial_state(params: HDPParams, *, n_terms: int, n_tokens: int, n_docs: int) -> HDPState:
    """The state before the start's statistics arrive: zero counts, alpha and gamma at their ``*_init``.

    Parameters
    ----------
    params : HDPParams
    n_terms, n_tokens, n_docs : int

    Returns
    -------
    HDPState
    """
    T = params.truncation
    return HDPState(topic_word=np.zeros((T, n_terms)), topic_totals=np.zeros(T), scale=1.0, tables=np.zeros(T),
                    alpha=float(params.alpha_init), gamma=float(params.gamma_init),
                    beta=float(params.topic_word_prior), n_tokens=int(n_tokens), n_docs=int(n_docs))


def update_state(state: HDPState, stats: PCVB0Stats, params: HDPParams, *, learn: bool = True) -> None:
    """The global step after an iteration (eqs. 3-6), in place.

    n_kw and n_k. become the sums of q, a_k the table sums; then, if ``learn``, alpha by eq. 5 (with the
    digamma sum taken at the alpha the iteration ran with, floored at ``params.alpha_floor``) when
    ``params.learn_alpha``, and gamma by eq. 6 from (u, v) of eq. 4 at the current gamma when
    ``params.learn_gamma``. Counters ``docs_seen``/``tokens_seen``/``t_hyper`` advance by one pass.

    Parameters
    ----------
    state : HDPState
        Modified in place.
    stats : PCVB0Stats
        The whole corpus's statistics.
    params : HDPParams
    learn : bool, default True
        False for the statistics of the random start (counts and tables only).
    """
    topic_word = stats.topic_word.to_dense(state.n_terms)
    state.topic_word = topic_word
    state.topic_totals = topic_word.sum(axis=1)
    state.scale = 1.0
    state.tables = np.asarray(stats.table_sums, dtype=np.float64).copy()
    state.n_docs, state.n_tokens = int(stats.n_docs), int(stats.n_tokens)
    if learn:
        if params.learn_alpha and stats.digamma_sum > 0:
            state.alpha = max(float(params.alpha_floor), float(stats.table_sums.sum()) / stats.digamma_sum)
        if params.learn_gamma:
            u, v = stick_params(state.tables, state.gamma)
            state.gamma = gamma_update(u, v)
        state.t_hyper += 1
        state.docs_seen += int(stats.n_docs)
        state.tokens_seen += int(stats.n_tokens)
