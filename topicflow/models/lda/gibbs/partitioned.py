"""Partitioned sweeps: the in-memory collapsed Gibbs sampler on several threads (Yan et al. 2009).

The documents are cut into P contiguous parts (balanced by tokens) and the vocabulary into P parts
(balanced by tokens: words by decreasing frequency, each to the part with the fewest tokens so far).
A sweep is P *epochs*; in epoch l, task j samples the tokens of document part j whose words are in
word part (j + l) mod P. The P tasks of an epoch touch disjoint documents (rows of n_dk), disjoint
words (word lists, rows of n_wk) and disjoint tokens, so they run at once on threads (the sweep kernel
releases the GIL) with no locks, and every token is sampled once per sweep. Only n_k is shared: each
task samples against its own copy, taken at the start of the epoch and kept up to date with its own
draws, and the copies' changes are added to n_k when the epoch ends. This is the partitioned scheme of
Yan, Xu and Qi (2009, "Parallel inference for latent Dirichlet allocation on graphics processing
units") that tomotopy calls ``ParallelScheme.PARTITION``. Within a task the draw is the sequential
sparse sampler's (:mod:`topicflow.models.lda.gibbs.sparse`); the chain differs from the sequential
one by the order in which a sweep visits the tokens (a document's tokens in P runs, one per epoch) and
by n_k being up to one epoch stale (against a whole sweep for AD-LDA's n_wk), and is the sequential
sampler for P = 1.

Determinism: P, not the number of threads, defines the chain. Each document's tokens are reordered
(stably) by word part once, the k-th token of document d's run in word part p draws the k-th uniform
of ``counter_key(seed, STREAM_GIBBS, sweep P + p, first_doc + d)``, and the n_k changes are integer
sums. So a given seed and P give the same chain on any number of threads.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from topicflow._typing import IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.lda.gibbs.sparse import _PriorLists, _run_sweep_ranges, _WordLists

__all__ = ["PartitionPlan", "PartitionedSweeper", "plan_partitions"]


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """How a state's tokens are split for partitioned sweeps.

    Attributes
    ----------
    n_parts : int
        P.
    doc_bounds : ndarray of shape (P + 1,), int64
        Document part j is documents ``doc_bounds[j]:doc_bounds[j + 1]``.
    word_part : ndarray of shape (n_terms,), int64
        The part of every term.
    order : ndarray of shape (n_tokens,), int64
        The sweep's token order: position i of the reordered tokens is token ``order[i]`` of the state
        (a permutation within each document: stable by word part).
    run_lo, run_hi : ndarray of shape (P, n_docs), int64
        Document d's tokens in word part p are reordered positions ``run_lo[p, d]:run_hi[p, d]``.
    """

    n_parts: int
    doc_bounds: IntArray
    word_part: IntArray
    order: IntArray
    run_lo: IntArray
    run_hi: IntArray

    def vocabulary_order(self) -> IntArray:
        """The terms part by part (by id within a part): the order in which the sweeps lay out the word lists.

        Returns
        -------
        ndarray of shape (n_terms,), int64
        """
        return np.lexsort((np.arange(self.word_part.shape[0]), self.word_part)).astype(np.int64)


def plan_partitions(token_indptr: IntArray, token_terms: np.ndarray, n_terms: int, n_parts: int) -> PartitionPlan:
    """Split documents and words into ``n_parts`` parts each, balanced by tokens.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int
    n_terms : int
    n_parts : int
        P, at least 1.

    Returns
    -------
    PartitionPlan

    Raises
    ------
    InvalidParameterError
        ``n_parts`` below 1.

    Examples
    --------
    >>> plan = plan_partitions(np.array([0, 3, 5]), np.array([0, 1, 0, 1, 1]), 2, 2)
    >>> plan.doc_bounds.tolist(), plan.word_part.tolist(), plan.order.tolist()
    ([0, 1, 2], [1, 0], [1, 0, 2, 3, 4])
    """
    if int(n_parts) != n_parts or n_parts < 1:
        raise InvalidParameterError(f"partitions must be an integer of at least 1, got {n_parts!r}")
    n_parts = int(n_parts)
    token_indptr = np.asarray(token_indptr, dtype=np.int64)
    terms = np.asarray(token_terms, dtype=np.int64)
    n_docs = token_indptr.shape[0] - 1
    total = int(token_indptr[-1])
    # Document parts: contiguous, cut where the running token count crosses j / P of the total.
    cuts = np.searchsorted(token_indptr, np.arange(1, n_parts) * (total / n_parts), side="left")
    doc_bounds = np.concatenate([[0], np.clip(cuts, 0, n_docs), [n_docs]]).astype(np.int64)
    doc_bounds = np.maximum.accumulate(doc_bounds)
    # Word parts: words by decreasing frequency (then id), each to the lightest part (then the lowest).
    frequency = np.bincount(terms, minlength=n_terms).astype(np.int64)
    word_part = _assign_words(np.lexsort((np.arange(n_terms), -frequency)).astype(np.int64), frequency, n_parts)
    order, bounds = _order_by_part(token_indptr, terms, word_part, n_parts)
    run_lo = np.ascontiguousarray(bounds[:, :-1].T)
    run_hi = np.ascontiguousarray(bounds[:, 1:].T)
    return PartitionPlan(n_parts, doc_bounds, word_part, order, run_lo, run_hi)


@numba.njit(nogil=True, cache=True)
def _assign_words(by_frequency, frequency, n_parts):
    """Each word, in the given order, to the part with the fewest tokens so far (the lowest on a tie)."""
    word_part = np.zeros(frequency.shape[0], dtype=np.int64)
    load = np.zeros(n_parts, dtype=np.int64)
    for w in by_frequency:
        part = 0
        for p in range(1, n_parts):
            if load[p] < load[part]:
                part = p
        word_part[w] = part
        load[part] += frequency[w]
    return word_part


@numba.njit(nogil=True, cache=True)
def _order_by_part(token_indptr, terms, word_part, n_parts):
    """Every document's tokens stably grouped by word part: (order, bounds) with document d's run of part
    p at ``bounds[d, p]:bounds[d, p + 1]`` (a counting sort per document)."""
    n_docs = token_indptr.shape[0] - 1
    order = np.empty(terms.shape[0], dtype=np.int64)
    bounds = np.empty((n_docs, n_parts + 1), dtype=np.int64)
    fill = np.empty(n_parts, dtype=np.int64)
    for d in range(n_docs):
        lo, hi = token_indptr[d], token_indptr[d + 1]
        fill[:] = 0
        for t in range(lo, hi):
            fill[word_part[terms[t]]] += 1
        bounds[d, 0] = lo
        for p in range(n_parts):
            bounds[d, p + 1] = bounds[d, p] + fill[p]
            fill[p] = bounds[d, p]
        for t in range(lo, hi):
            p = word_part[terms[t]]
            order[fill[p]] = t
            fill[p] += 1
    return order, bounds


class PartitionedSweeper:
    """Runs partitioned sweeps on the reordered tokens with a pool of threads (see the module docstring).

    Parameters
    ----------
    plan : PartitionPlan
    token_indptr : ndarray of shape (n_docs + 1,), int64
    terms : ndarray of shape (n_tokens,), int32
        In the plan's order.
    threads : int
        Threads running an epoch's tasks (1: in the calling thread). Never changes the chain.
    """

    def __init__(self, plan: PartitionPlan, token_indptr: IntArray, terms: np.ndarray, threads: int) -> None:
        self.plan = plan
        self.terms = terms
        self.doc_start = np.ascontiguousarray(token_indptr[:-1], dtype=np.int64)
        self.doc_end = np.ascontiguousarray(token_indptr[1:], dtype=np.int64)
        self.threads = max(1, int(threads))
        self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def close(self) -> None:
        """Stop the pool."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def sweep(self, topics: np.ndarray, doc_topic: np.ndarray, topic_counts: np.ndarray, lists: _WordLists,
              prior: _PriorLists, alpha: np.ndarray, beta: float, seed: int, sweep: int, first_doc: int) -> None:
        """Sweep ``sweep`` (numbered from 1) in place: ``topics`` in the plan's order, the counts and the lists."""
        plan, n_parts = self.plan, self.plan.n_parts

        def task(j: int, p: int, counts: np.ndarray) -> None:
            lo, hi = int(plan.doc_bounds[j]), int(plan.doc_bounds[j + 1])
            if lo < hi:
                _run_sweep_ranges(plan.run_lo[p, lo:hi], plan.run_hi[p, lo:hi], self.doc_start[lo:hi],
                                  self.doc_end[lo:hi], self.terms, topics, doc_topic[lo:hi], counts, lists, alpha,
                                  beta, seed, sweep * n_parts + p, first_doc + lo, False, prior)

        for epoch in range(n_parts):
            start = topic_counts.copy()
            copies = [start.copy() for _ in range(n_parts)]
            jobs = [(j, (j + epoch) % n_parts, copies[j]) for j in range(n_parts)]
            if self.pool is None:
                for job in jobs:
                    task(*job)
            else:
                for future in [self.pool.submit(task, *job) for job in jobs]:
                    future.result()
            for counts in copies:
                topic_counts += counts - start
