"""Approximate distributed collapsed Gibbs sampling (AD-LDA) over fixed blocks of documents: the math.

Newman, Asuncion, Smyth and Welling (2009), AD-LDA. The corpus is cut into *blocks* (fixed runs of
documents, defined by the store and a block size, never by workers or partitions). In sweep s, every
block b samples its tokens in document order with the collapsed conditional, against

    n_wk(start of sweep s) - n_wk(b, start)  (the other blocks' counts, frozen)
  + n_wk(b, now)                             (the block's own counts, kept up to date)

which is exactly the streaming-Gibbs form of :func:`topicflow.models.lda.gibbs.chain.run_sweeps` with a
:class:`~topicflow.models.lda.gibbs.state.TopicWordPrior` N_wk = the other blocks' counts and
``vocab_size`` = V: the sparse sampler of :mod:`topicflow.models.lda.gibbs.sparse`, its word lists
holding the block's own counts and its prior lists the frozen rest. A block returns its new z, the
change of its term-topic counts (:class:`CountDelta`, sparse) and the histograms of its document-topic
counts (:class:`DocHistograms`), from which the driver sets alpha (Minka's fixed point) and scores
the joint likelihood without ever seeing a document-topic matrix.

Random numbers: token t of global document g in sweep s uses the t-th uniform of
``counter_key(seed, STREAM_GIBBS, s, g)`` (sweep 0 is the random start), so a block's result depends
only on (seed, s, its documents, the sweep-start counts): the same model for any number of workers,
partitions or threads. With one block the sampler is the exact sequential collapsed Gibbs sampler.

Glossary: K topics, V terms; n_wk term-topic counts (global, ``(V, K)`` int32, term-major),
n_k topic totals, n_dk document-topic counts (block-local only), H_k(n) = #{d : n_dk = n} and
L(n) = #{d : n_d = n} (the histograms), delta keys ``w * K + k``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.special import gammaln

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import present_terms
from topicflow.models.lda.gibbs.chain import (
    HYPER_FLOOR,
    HYPER_MAX_ITER,
    HYPER_TOL,
    _alpha_fixed_point_hist,
    _beta_fixed_point_hist,
)
from topicflow.models.lda.gibbs.sparse import (
    _PriorLists,
    _random_topics,
    _run_sweep,
    _word_lists,
)
from topicflow.models.lda.gibbs.state import _counts_from_topics, _recount
from topicflow.models.lda.state import LDAState

__all__ = ["BlockSweep", "CountDelta", "DocHistograms", "SweepView", "apply_delta", "joint_log_likelihood",
           "lda_view", "optimize_hyperparameters", "sequential_start_block", "start_block", "start_block_from_topics",
           "sweep_block"]

_PAIR_SHIFT = 32
_PAIR_MASK = (1 << _PAIR_SHIFT) - 1
#: Largest (K, longest document + 1) table the histograms of a block are counted in (else: sorted).
_DENSE_HISTOGRAM_CELLS = 1 << 22


@numba.njit(nogil=True, cache=True)
def _histogram_sizes(doc_topic):
    """(largest n_d, largest n_dk) of a block's document-topic counts."""
    longest, largest = 0, 0
    for d in range(doc_topic.shape[0]):
        length = 0
        for k in range(doc_topic.shape[1]):
            n = doc_topic[d, k]
            length += n
            largest = max(largest, n)
        longest = max(longest, length)
    return longest, largest


@numba.njit(nogil=True, cache=True)
def _dense_histograms(doc_topic, longest, width, shift):
    """(sorted pair keys ``k << shift | n``, H_k(n), L(n)) counted in a dense (K, width) table."""
    n_topics = doc_topic.shape[1]
    lengths = np.zeros(longest + 1, dtype=np.int64)
    table = np.zeros((n_topics, width), dtype=np.int64)
    for d in range(doc_topic.shape[0]):
        length = 0
        for k in range(n_topics):
            n = doc_topic[d, k]
            length += n
            if n > 0:
                table[k, n] += 1
        lengths[length] += 1
    n_pairs = 0
    for k in range(n_topics):
        for n in range(width):
            n_pairs += table[k, n] != 0
    keys = np.empty(n_pairs, dtype=np.int64)
    counts = np.empty(n_pairs, dtype=np.int64)
    i = 0
    for k in range(n_topics):  # row-major: keys ascending
        for n in range(width):
            if table[k, n] != 0:
                keys[i] = (np.int64(k) << shift) | n
                counts[i] = table[k, n]
                i += 1
    return keys, counts, lengths


#: Outcomes of :func:`_gather_block_counts`.
_GATHERED, _BAD_TOPIC, _NOT_CONTAINED = 0, 1, 2


@numba.njit(nogil=True, cache=True)
def _gather_block_counts(term_topic, topic_counts, terms, token_indptr, local, topics, counts, totals, doc_topic,
                         with_topics):
    """The block's rows of the global counts (``counts``, ``totals``) and, ``with_topics``, its n_dk.

    With ``with_topics`` also checks that every z is a topic and that the global counts contain the
    block's own (the layer and the counts in step): one pass over the tokens into a table of the
    block's own counts, then one over the table beside the gathered rows. Returns one of the outcomes
    above.
    """
    n_topics = counts.shape[1]
    for i in range(terms.shape[0]):
        row = terms[i]
        for k in range(n_topics):
            counts[i, k] = term_topic[row, k]
    for k in range(n_topics):
        totals[k] = topic_counts[k]
    if not with_topics:
        return _GATHERED
    for t in range(topics.shape[0]):
        if topics[t] < 0 or topics[t] >= n_topics:
            return _BAD_TOPIC
    own = np.zeros(counts.shape, dtype=np.int32)
    own_totals = np.zeros(n_topics, dtype=np.int64)
    _recount(token_indptr, local, topics, doc_topic, own, own_totals)
    for i in range(counts.shape[0]):
        for k in range(n_topics):
            if counts[i, k] < own[i, k]:
                return _NOT_CONTAINED
    for k in range(n_topics):
        if totals[k] < own_totals[k]:
            return _NOT_CONTAINED
    return _GATHERED


@dataclass(frozen=True, slots=True)
class SweepView:
    """What every block of one sweep reads: the global counts at the start of the sweep and the priors.

    Attributes
    ----------
    term_topic : ndarray of shape (n_terms, n_topics), int32
        n_wk summed over every block, term-major.
    topic_counts : ndarray of shape (n_topics,), int64
        n_k.
    alpha : ndarray of shape (n_topics,), float64
    beta : float
    seed : int
    """

    term_topic: Int32Array
    topic_counts: IntArray
    alpha: FloatArray
    beta: float
    seed: int

    @property
    def n_terms(self) -> int:
        return int(self.term_topic.shape[0])

    @property
    def n_topics(self) -> int:
        return int(self.term_topic.shape[1])


def _sum_by_key(keys: IntArray, values: IntArray) -> tuple[IntArray, IntArray]:
    """The distinct ``keys`` (sorted, int64) and the sum of ``values`` over each (exact: integers)."""
    keys = keys.astype(np.int64, copy=False)
    if keys.size == 0:
        return keys, values
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts], np.add.reduceat(values, starts)


@numba.njit(nogil=True, cache=True)
def _dense_delta(terms, delta):
    """Keys ``terms[i] * K + k`` and int32 values of the nonzero ``delta[i, k]``, in row-major order."""
    n_topics = delta.shape[1]
    n = 0
    for i in range(delta.shape[0]):
        for k in range(n_topics):
            n += delta[i, k] != 0
    keys = np.empty(n, dtype=np.int64)
    values = np.empty(n, dtype=np.int32)
    j = 0
    for i in range(delta.shape[0]):
        for k in range(n_topics):
            if delta[i, k] != 0:
                keys[j] = terms[i] * n_topics + k
                values[j] = np.int32(delta[i, k])
                j += 1
    return keys, values


@dataclass(frozen=True, slots=True)
class CountDelta:
    """A sparse change of the term-topic counts: ``n_wk += values[i]`` for ``keys[i] = w * K + k``.

    Attributes
    ----------
    keys : ndarray of shape (n,), int64
        Sorted, distinct.
    values : ndarray of shape (n,), int32
        Nonzero (a change of one count is bounded by the term's tokens; int32 halves what a sweep's
        reduction holds).
    n_topics : int
    """

    keys: IntArray
    values: Int32Array
    n_topics: int

    @classmethod
    def from_dense(cls, terms: IntArray, delta: np.ndarray) -> CountDelta:
        """The nonzero entries of ``delta`` (rows are the global terms ``terms``, sorted ascending).

        Parameters
        ----------
        terms : ndarray of shape (n_rows,), int
        delta : ndarray of shape (n_rows, n_topics), int

        Returns
        -------
        CountDelta
        """
        keys, values = _dense_delta(np.ascontiguousarray(terms, dtype=np.int64), np.ascontiguousarray(delta))
        return cls(keys, values, int(delta.shape[1]))

    def merge(self, *others: CountDelta) -> CountDelta:
        """The sum of this delta and ``others`` (integers: exact in any order).

        Parameters
        ----------
        *others : CountDelta

        Returns
        -------
        CountDelta
        """
        parts = (self, *others)
        keys, sums = _sum_by_key(np.concatenate([p.keys for p in parts]), np.concatenate([p.values for p in parts]))
        keep = sums != 0
        return CountDelta(keys[keep], sums[keep].astype(np.int32), self.n_topics)


@dataclass(frozen=True, slots=True)
class DocHistograms:
    """Histograms of the document-topic counts of some documents (all the alpha update needs).

    Attributes
    ----------
    pair_keys : ndarray of shape (n,), int64
        Sorted distinct ``k << 32 | n`` of the nonzero n_dk.
    pair_counts : ndarray of shape (n,), int64
        H_k(n): documents with n_dk = n.
    length_counts : ndarray of shape (max_length + 1,), int64
        L(n): documents with n_d = n.
    """

    pair_keys: IntArray
    pair_counts: IntArray
    length_counts: IntArray

    @classmethod
    def from_doc_topic(cls, doc_topic: np.ndarray) -> DocHistograms:
        """The histograms of a block's n_dk.

        Parameters
        ----------
        doc_topic : ndarray of shape (n_docs, n_topics), int

        Returns
        -------
        DocHistograms

        Notes
        -----
        Counted in one pass into a dense (K, largest n_dk + 1) table when that table is small
        (the usual case), else by sorting the nonzero ``k << 32 | n_dk``; both give the same arrays.
        """
        doc_topic = np.ascontiguousarray(doc_topic)
        longest, largest = _histogram_sizes(doc_topic)
        width = int(largest) + 1
        if doc_topic.shape[1] * width <= _DENSE_HISTOGRAM_CELLS:
            return cls(*_dense_histograms(doc_topic, int(longest), width, _PAIR_SHIFT))
        lengths = np.bincount(doc_topic.sum(axis=1).astype(np.int64), minlength=1).astype(np.int64)
        docs, topics = np.nonzero(doc_topic)
        pairs = (topics.astype(np.int64) << _PAIR_SHIFT) | doc_topic[docs, topics].astype(np.int64)
        keys, found = np.unique(pairs, return_counts=True)
        return cls(keys.astype(np.int64), found.astype(np.int64), lengths)

    def merge(self, *others: DocHistograms) -> DocHistograms:
        """The histograms of the union of the documents (integers: exact in any order).

        Parameters
        ----------
        *others : DocHistograms

        Returns
        -------
        DocHistograms
        """
        parts = (self, *others)
        distinct, summed = _sum_by_key(np.concatenate([p.pair_keys for p in parts]),
                                       np.concatenate([p.pair_counts for p in parts]))
        lengths = np.zeros(max(p.length_counts.shape[0] for p in parts), dtype=np.int64)
        for p in parts:
            lengths[:p.length_counts.shape[0]] += p.length_counts
        return DocHistograms(distinct, summed.astype(np.int64), lengths)

    def alpha_inputs(self) -> tuple[FloatArray, IntArray, FloatArray, int]:
        """(L(n), keys ``k * width + n``, H_k(n), width) as the fixed point reads them."""
        lengths = np.trim_zeros(self.length_counts, "b")
        topics, counts = self.pair_keys >> _PAIR_SHIFT, self.pair_keys & _PAIR_MASK
        width = int(counts.max(initial=0)) + 1
        return (lengths.astype(np.float64) if lengths.size else np.zeros(1), topics * width + counts,
                self.pair_counts.astype(np.float64), width)


@dataclass(frozen=True, slots=True)
class BlockSweep:
    """What one block's sweep returns.

    Attributes
    ----------
    topics : ndarray of shape (n_tokens,), int32
        The block's new z.
    delta : CountDelta
        Change of the global n_wk (at the random start: the block's counts).
    histograms : DocHistograms
        Of the block's n_dk after the sweep.
    """

    topics: Int32Array
    delta: CountDelta
    histograms: DocHistograms


def _check_tokens(token_indptr: IntArray, token_terms: Int32Array, n_terms: int) -> None:
    if token_indptr.ndim != 1 or token_indptr.shape[0] < 1 or token_indptr[-1] != token_terms.shape[0]:
        raise InvalidParameterError(f"token_indptr must be 1-d and end at n_tokens={token_terms.shape[0]}")
    if token_terms.size and (token_terms.min() < 0 or token_terms.max() >= n_terms):
        raise InvalidParameterError(f"token terms must lie in [0, {n_terms}), got "
                                    f"[{token_terms.min()}, {token_terms.max()}]")


def start_block(token_indptr: IntArray, token_terms: Int32Array, first_doc: int, n_topics: int,
                seed: int) -> BlockSweep:
    """The random start of a block (sweep 0): z uniform on the K topics.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
        Global term ids.
    first_doc : int
        Global position of the block's first document.
    n_topics : int
    seed : int

    Returns
    -------
    BlockSweep
        ``delta`` holds the block's counts n_wk (the global counts are their sum).

    Notes
    -----
    Token t of document g uses the t-th uniform u of ``counter_key(seed, STREAM_GIBBS, 0, g)``,
    ``z = floor(u K)``: :func:`topicflow.models.lda.gibbs.chain.initial_state`'s random start.

    Examples
    --------
    >>> start = start_block(np.array([0, 2, 3]), np.array([0, 1, 1], np.int32), 0, 2, seed=0)
    >>> int(start.delta.values.sum()), start.histograms.length_counts.tolist()
    (3, [0, 1, 1])
    """
    token_indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    token_terms = np.ascontiguousarray(token_terms, dtype=np.int32)
    topics = np.zeros(token_terms.shape[0], dtype=np.int32)
    _random_topics(token_indptr, n_topics, seed, first_doc, topics)
    return start_block_from_topics(token_indptr, token_terms, topics, n_topics)


def start_block_from_topics(token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array,
                            n_topics: int) -> BlockSweep:
    """A block's start (sweep 0) from topics drawn elsewhere (e.g. the SCVB0 start's draw).

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
        Global term ids.
    topics : ndarray of shape (n_tokens,), int32
        The z, each in [0, n_topics).
    n_topics : int

    Returns
    -------
    BlockSweep
        ``delta`` holds the block's counts n_wk.

    Raises
    ------
    InvalidParameterError
        If a topic is outside [0, n_topics) or the shapes differ.
    """
    token_indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    token_terms = np.ascontiguousarray(token_terms, dtype=np.int32)
    topics = np.ascontiguousarray(topics, dtype=np.int32)
    if topics.shape != token_terms.shape or (topics.size and (topics.min() < 0 or topics.max() >= n_topics)):
        raise InvalidParameterError(f"a block's start needs one topic in [0, {n_topics}) per token")
    terms, local = _local_terms(token_terms, int(token_terms.max(initial=-1)) + 1)
    doc_topic, own, _ = _counts_from_topics(token_indptr, local, topics, max(1, terms.shape[0]), n_topics)
    return BlockSweep(topics, CountDelta.from_dense(terms.astype(np.int64), own[:terms.shape[0]]),
                      DocHistograms.from_doc_topic(doc_topic))


@numba.njit(nogil=True, cache=True)
def _lists_delta(terms, own, starts, lengths, packed, shift):
    """Keys ``terms[w] * K + k`` and values of the nonzero n_wk(lists) - own (rows in order: keys sorted).

    ``own`` is overwritten (with own - new), so that no dense copy of the new counts is made.
    """
    n_topics = own.shape[1]
    mask = (1 << shift) - 1
    n = 0
    for w in range(terms.shape[0]):
        for j in range(starts[w], starts[w] + lengths[w]):
            own[w, packed[j] & mask] -= packed[j] >> shift
        for k in range(n_topics):
            if own[w, k] != 0:
                n += 1
    keys = np.empty(n, dtype=np.int64)
    values = np.empty(n, dtype=np.int32)
    i = 0
    for w in range(terms.shape[0]):
        for k in range(n_topics):
            if own[w, k] != 0:
                keys[i] = terms[w] * n_topics + k
                values[i] = np.int32(-own[w, k])
                i += 1
    return keys, values


def _local_terms(token_terms: Int32Array, n_terms: int) -> tuple[IntArray, Int32Array]:
    """The block's distinct terms and each token's position among them (the sweep's renumbered terms)."""
    terms, columns = present_terms(token_terms, n_terms)
    return terms, columns.astype(np.int32)


def sweep_block(token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array, first_doc: int,
                view: SweepView, sweep: int) -> BlockSweep:
    """One AD-LDA sweep of one block against the sweep-start counts ``view``.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
        Global term ids in ``[0, view.n_terms)``.
    topics : ndarray of shape (n_tokens,), int32
        The block's z at the start of the sweep (not modified).
    first_doc : int
        Global position of the block's first document (keys the random numbers).
    view : SweepView
        Global counts at the start of the sweep; they include this block's tokens with ``topics``.
    sweep : int
        Sweep number s >= 1 (the epoch of the random numbers).

    Returns
    -------
    BlockSweep

    Raises
    ------
    InvalidParameterError
        Bad shapes or term ids, ``sweep < 1``.
    NumericalError
        The view does not contain the block's counts (a z layer out of step with the counts).

    Notes
    -----
    Equal, bit for bit, to ``run_sweeps(state, params, 1, prior=TopicWordPrior(N, N_k, V))`` on the
    block's state (its own tokens and counts, ``sweeps_done = s - 1``) with N the other blocks' counts
    ``view.term_topic - n_wk(block)`` restricted to the block's terms: each token of term w in
    document d is redrawn from

        p(z = k | rest) ∝ (n_dk + alpha_k)(n_wk(block) + N_wk + beta) / (n_k(block) + N_k + V beta)

    The block's terms are renumbered 0..n-1 for the sweep, so its memory is O(tokens + n K), not O(V K).

    Examples
    --------
    >>> indptr, terms = np.array([0, 3]), np.array([0, 0, 1], np.int32)
    >>> start = start_block(indptr, terms, 0, 2, seed=1)
    >>> counts = np.zeros((2, 2), np.int32)
    >>> np.add.at(counts.reshape(-1), start.delta.keys, start.delta.values)
    >>> view = SweepView(counts, counts.sum(axis=0).astype(np.int64), np.full(2, 0.1), 0.01, 1)
    >>> int(sweep_block(indptr, terms, start.topics, 0, view, 1).topics.shape[0])
    3
    """
    if sweep < 1:
        raise InvalidParameterError(f"sweep must be at least 1 (0 is the random start), got {sweep!r}")
    return _block_pass(token_indptr, token_terms, topics, first_doc, view, sweep, False)


def sequential_start_block(token_indptr: IntArray, token_terms: Int32Array, first_doc: int,
                           view: SweepView) -> BlockSweep:
    """The sequential ("progressive") start of a block given the counts of the blocks started before it.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
        Global term ids.
    first_doc : int
    view : SweepView
        The counts of every block started before this one (not this block's).

    Returns
    -------
    BlockSweep
        ``delta`` holds the block's counts.

    Notes
    -----
    Token t of document g is drawn, in order, from the collapsed conditional given every token drawn
    before it (this block's earlier tokens and ``view``), with the t-th uniform of
    ``counter_key(seed, STREAM_GIBBS, 0, g)``: started block by block in store order, the whole corpus
    gets the sequential start of :func:`~topicflow.models.lda.gibbs.chain.initial_state`
    (``init="sequential"``), the same for any number of workers. It costs one sweep without
    parallelism and spares the AD-LDA sweeps the slow symmetry breaking of a random start.

    Examples
    --------
    >>> view = SweepView(np.zeros((2, 2), np.int32), np.zeros(2, np.int64), np.full(2, 0.1), 0.01, 0)
    >>> int(sequential_start_block(np.array([0, 3]), np.array([0, 0, 1], np.int32), 0, view).delta.values.sum())
    3
    """
    return _block_pass(token_indptr, token_terms, np.zeros(np.shape(token_terms), dtype=np.int32), first_doc, view,
                       0, True)


def _block_pass(token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array, first_doc: int,
                view: SweepView, epoch: int, progressive: bool) -> BlockSweep:
    token_indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    token_terms = np.ascontiguousarray(token_terms, dtype=np.int32)
    n_topics = view.n_topics
    _check_tokens(token_indptr, token_terms, view.n_terms)
    topics = np.array(topics, dtype=np.int32)
    if topics.shape != token_terms.shape:
        raise InvalidParameterError(f"topics must have shape {token_terms.shape!r}, got {topics.shape!r}")
    terms, local = _local_terms(token_terms, view.n_terms)
    n_local = max(1, terms.shape[0])
    # The block samples against one count table: the sweep-start counts of its terms, which hold the
    # other blocks' counts (frozen) and its own (kept up to date by the sweep).
    counts = np.zeros((n_local, n_topics), dtype=np.int32)
    totals = np.empty(n_topics, dtype=np.int64)  # a copy: the sweep updates it
    doc_topic = np.zeros((token_indptr.shape[0] - 1, n_topics), dtype=np.int32)  # none assigned yet if progressive
    outcome = _gather_block_counts(np.ascontiguousarray(view.term_topic, np.int32),
                                   np.ascontiguousarray(view.topic_counts, np.int64), terms, token_indptr, local,
                                   topics, counts, totals, doc_topic, not progressive)
    if outcome == _BAD_TOPIC:
        raise InvalidParameterError(f"the z of the block starting at document {first_doc} holds topics outside "
                                    f"[0, {n_topics}): the assignment layer was written for another K")
    if outcome == _NOT_CONTAINED:
        raise NumericalError(f"the global counts of sweep {epoch} do not contain the block starting at "
                             f"document {first_doc}: the assignment layer and the counts are out of step")
    lists = _word_lists(counts, local, n_topics, shared=progressive)
    no_prior = _PriorLists(np.zeros(n_topics), np.zeros(n_local + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                           np.zeros(0), view.n_terms)  # empty lists; V beta with the whole vocabulary's V
    _run_sweep(token_indptr, local, topics, doc_topic, totals, lists, np.ascontiguousarray(view.alpha, np.float64),
               float(view.beta), int(view.seed), int(epoch), int(first_doc), progressive, no_prior)
    keys, values = _lists_delta(terms, counts, lists.starts, lists.lengths, lists.packed, lists.shift)
    return BlockSweep(topics, CountDelta(keys, values, n_topics), DocHistograms.from_doc_topic(doc_topic))


@numba.njit(nogil=True, cache=True)
def _apply_delta(flat, topic_counts, keys, values, n_topics):
    """flat[keys] += values and topic_counts[keys % K] += values; False (nothing changed) if a count would
    become negative."""
    for i in range(keys.shape[0]):
        if np.int64(flat[keys[i]]) + values[i] < 0:
            return False
    for i in range(keys.shape[0]):
        flat[keys[i]] += values[i]
        topic_counts[keys[i] % n_topics] += values[i]
    return True


def apply_delta(term_topic: Int32Array, topic_counts: IntArray, delta: CountDelta) -> None:
    """Add a delta to the global counts, in place (deltas may be added in any order: integer sums).

    Parameters
    ----------
    term_topic : ndarray of shape (n_terms, n_topics), int32, C-contiguous
    topic_counts : ndarray of shape (n_topics,), int64
    delta : CountDelta

    Raises
    ------
    NumericalError
        A count would become negative (the counts are then unchanged).
    """
    flat = term_topic.reshape(-1)
    if not np.shares_memory(flat, term_topic):
        raise InvalidParameterError("apply_delta needs C-contiguous term-topic counts")
    if not _apply_delta(flat, topic_counts, np.ascontiguousarray(delta.keys, np.int64),
                        np.ascontiguousarray(delta.values, np.int32), int(delta.n_topics)):
        raise NumericalError("a term-topic count became negative: the block deltas do not match the counts")


def count_histogram(term_topic: np.ndarray) -> FloatArray:
    """Count the (term, topic) pairs by their count: hist[n] = #{(w, k) : n_wk = n} for n >= 1, hist[0] = 0.

    Parameters
    ----------
    term_topic : ndarray of shape (n_terms, n_topics), int

    Returns
    -------
    ndarray of shape (max n_wk + 1,), float64
    """
    return _count_histogram(np.ascontiguousarray(term_topic).reshape(-1))


@numba.njit(nogil=True, cache=True)
def _count_histogram(values):
    """hist[n] = #{i : values[i] = n} for n >= 1, hist[0] = 0 (two passes, no temporary arrays but the result)."""
    largest = 0
    for i in range(values.shape[0]):
        largest = max(largest, values[i])
    counts = np.zeros(largest + 1, dtype=np.int64)
    for i in range(values.shape[0]):
        if values[i] > 0:  # most n_wk are 0: skipping them spares a chain of increments of one bin
            counts[values[i]] += 1
    return counts.astype(np.float64)


def optimize_hyperparameters(histograms: DocHistograms, term_topic: np.ndarray, topic_counts: IntArray,
                             alpha: FloatArray, beta: float, *, learn_alpha: bool = True,
                             learn_beta: bool = False) -> tuple[FloatArray, float]:
    """Estimate alpha (asymmetric) and beta (symmetric) by Minka's fixed points from reduced histograms.

    Parameters
    ----------
    histograms : DocHistograms
        Of every document (merged over blocks).
    term_topic : ndarray of shape (n_terms, n_topics), int
        The global n_wk.
    topic_counts : ndarray of shape (n_topics,), int64
    alpha : ndarray of shape (n_topics,)
        Start of alpha's iteration.
    beta : float
        Start of beta's iteration.
    learn_alpha, learn_beta : bool
        Which to update (the other is returned as given).

    Returns
    -------
    alpha : ndarray of shape (n_topics,), float64
    beta : float

    Notes
    -----
    The same iteration, on the same histograms, as
    :func:`topicflow.models.lda.gibbs.chain.optimize_hyperparameters` on one state holding every
    document: the results are equal bit for bit (Minka 2000; Wallach 2008, sec. 2.4).
    """
    new_alpha = np.array(alpha, dtype=np.float64)
    if learn_alpha:
        lengths, keys, multiplicity, width = histograms.alpha_inputs()
        _alpha_fixed_point_hist(lengths, keys, multiplicity, width, new_alpha, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    new_beta = float(beta)
    if learn_beta:
        new_beta = float(_beta_fixed_point_hist(count_histogram(term_topic), np.asarray(topic_counts, np.int64),
                                                term_topic.shape[0], new_beta, HYPER_MAX_ITER, HYPER_TOL,
                                                HYPER_FLOOR))
    return new_alpha, new_beta


def joint_log_likelihood(histograms: DocHistograms, term_topic: np.ndarray, topic_counts: IntArray,
                         alpha: FloatArray, beta: float) -> float:
    """Compute log p(w, z | alpha, beta) of the whole chain from the reduced histograms and the global counts.

    Parameters
    ----------
    histograms : DocHistograms
        Of every document.
    term_topic : ndarray of shape (n_terms, n_topics), int
    topic_counts : ndarray of shape (n_topics,), int64
    alpha : ndarray of shape (n_topics,)
    beta : float

    Returns
    -------
    float

    Notes
    -----
    Griffiths and Steyvers (2004), eqs. (2)-(3), the sums over documents regrouped by histogram::

        log p(w | z) = sum_k [lgamma(V beta) - lgamma(n_k + V beta)] + sum_n hist(n) [lgamma(n + beta) - lgamma(beta)]
        log p(z)     = sum_(k,n) H_k(n) [lgamma(n + alpha_k) - lgamma(alpha_k)]
                       + sum_n L(n) [lgamma(alpha_sum) - lgamma(n + alpha_sum)]

    Equal (to rounding) to :func:`topicflow.models.lda.gibbs.scores.joint_log_likelihood` of one
    state holding every document.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    n_terms = term_topic.shape[0]
    hist = count_histogram(term_topic)
    n = np.arange(hist.shape[0], dtype=np.float64)
    topic_part = (topic_counts.shape[0] * gammaln(n_terms * beta)
                  - float(gammaln(np.asarray(topic_counts, np.float64) + n_terms * beta).sum())
                  + float((hist[1:] * (gammaln(n[1:] + beta) - gammaln(beta))).sum()))
    topics = histograms.pair_keys >> _PAIR_SHIFT
    counts = (histograms.pair_keys & _PAIR_MASK).astype(np.float64)
    doc_part = float((histograms.pair_counts * (gammaln(counts + alpha[topics]) - gammaln(alpha[topics]))).sum())
    lengths = np.arange(histograms.length_counts.shape[0], dtype=np.float64)
    alpha_sum = float(alpha.sum())
    doc_part += float((histograms.length_counts * (gammaln(alpha_sum) - gammaln(lengths + alpha_sum))).sum())
    total = topic_part + doc_part
    if not math.isfinite(total):
        raise NumericalError("the joint log-likelihood of the Gibbs chain is not finite")
    return float(total)


def lda_view(term_topic: np.ndarray, alpha: np.ndarray, beta: float, language: str) -> LDAState:
    """The chain's counts as an LDA model: lambda = n_wk + beta (each topic's Dirichlet posterior given z).

    alpha is the chain's.

    Parameters
    ----------
    term_topic : ndarray of shape (n_terms, n_topics)
    alpha : ndarray of shape (n_topics,)
    beta : float
    language : str

    Returns
    -------
    LDAState
    """
    return LDAState({language: np.ascontiguousarray(term_topic.T, dtype=np.float64) + beta},
                    np.array(alpha, dtype=np.float64), {language: float(beta)})
