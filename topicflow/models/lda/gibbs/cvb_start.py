"""The SCVB0 start of a Gibbs chain: one pass of collapsed variational Bayes, then z drawn from its posterior.

A uniform start leaves every word's topic list full for the first sweeps, where the sparse sampler is
slowest and where large corpora decide the early perplexity targets (RESULTS, "Issue 22: partitioned
sweeps"); the plain sequential start is sparse at once but settles in worse modes on generated corpora.
This start:

1. runs one word-by-word pass of SCVB0 (Foulds et al. 2013; the kernels of
   :mod:`topicflow.models.common.cvb0`, Foulds' step sizes, N^phi's random start) over the block in
   order, with the chain's own alpha (symmetric or not) and beta and **no burn-in pass** (Foulds used one;
   without it the pass costs half and the chain that follows settles lower: docs/gibbs.md,
   "The SCVB0 start"). It keeps each document's final N^theta_d;
2. draws every token's topic independently from the collapsed variational posterior of that pass,

       q(z = k) ∝ (N^theta_dk + alpha_k) (N^phi_kw + beta) / (N^Z_k + V beta),

   token t of document d with the t-th uniform of ``counter_key(seed, STREAM_GIBBS, 0, first_doc + d)``
   (the uniforms of the random start), by inverse CDF in topic order. The documents are independent, so
   they are drawn on ``threads`` threads with the same result for any number;
3. leaves the counts to the chain: the sweeps that follow are ordinary collapsed Gibbs, so the start
   shapes where the chain begins, never its stationary distribution.

Not from one of the seed papers. Memory during the start: N^theta, D x K float64, beside the chain's own
D x K counts. Pure math: no Dask, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.common.cvb0 import run_block_word_by_word, start_doc_topic
from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key
from topicflow.models.common.threads import run_chunks
from topicflow.models.lda.gibbs.state import GibbsParams, GibbsState, state_from_topics
from topicflow.models.lda.scvb0 import SCVB0Params, SCVB0State

__all__ = ["SCVB0_START_BURN_IN", "SCVB0Pass", "draw_topics", "scvb0_posterior", "scvb0_start", "word_factor"]

#: Passes over each document that update only its N^theta before the pass that also updates N^phi.
SCVB0_START_BURN_IN = 0


@dataclass
class SCVB0Pass:
    """One word-by-word SCVB0 pass in progress.

    The lazy-scaled N^phi that :meth:`visit` carries from block to block, so a pass over consecutive
    blocks equals the pass over their concatenation (the out-of-core start hands it from task to task).
    Create it with :meth:`begin`. The fields are what the word-by-word driver of
    :mod:`topicflow.models.common.cvb0` reads and updates; ``alpha`` is the chain's (possibly asymmetric)
    prior and ``burn_in`` the passes over a document before the one that updates N^phi.
    """

    topic_word: FloatArray
    topic_totals: FloatArray
    scale: float
    beta: float
    n_tokens: int
    alpha: FloatArray
    seed: int
    burn_in: int = SCVB0_START_BURN_IN
    t_topic_word: int = 0
    docs_seen: int = 0
    tokens_seen: int = 0

    @classmethod
    def begin(cls, params: GibbsParams, *, n_terms: int, n_tokens: int,
              burn_in: int = SCVB0_START_BURN_IN) -> SCVB0Pass:
        """The start of a pass over ``n_tokens`` tokens: N^phi as :meth:`SCVB0State.initial` draws it.

        Parameters
        ----------
        params : GibbsParams
            K, alpha, beta and the seed.
        n_terms : int
            V.
        n_tokens : int
            C, the tokens of the whole pass (the scale of N^phi and of its steps).
        burn_in : int, default 0

        Returns
        -------
        SCVB0Pass
        """
        settings = _settings(params.n_topics, params.alpha, params.topic_word_prior, params.seed, burn_in)
        start = SCVB0State.initial(settings, n_terms=n_terms, n_tokens=max(int(n_tokens), 1), n_docs=1)
        return cls(start.topic_word, start.topic_totals, start.scale, start.beta, start.n_tokens,
                   np.ascontiguousarray(params.alpha, dtype=np.float64), params.seed, burn_in)

    def doc_topic_prior(self) -> FloatArray:
        """alpha_k, the Gibbs chain's document-topic prior."""
        return self.alpha

    def visit(self, block: DocBlock) -> FloatArray:
        """Carry the pass over ``block``'s documents in order; return their final N^theta rows.

        Parameters
        ----------
        block : DocBlock
            The next documents of the pass (its ``first_doc`` keys their random N^theta starts).

        Returns
        -------
        ndarray of shape (block.n_docs, K)
        """
        settings = _settings(self.alpha.shape[0], self.alpha, self.beta, self.seed, self.burn_in)
        doc_topic = start_doc_topic(block, self.alpha.shape[0], doc_start=settings.doc_start, seed=self.seed)
        if block.n_tokens:
            run_block_word_by_word(self, block, topic_word_step=settings.topic_word_step,
                                   doc_step=settings.doc_step, burn_in=self.burn_in, doc_start=settings.doc_start,
                                   clumping=settings.clumping, seed=self.seed, doc_topic=doc_topic,
                                   with_tables=False)
        return doc_topic

    def expected_counts(self) -> FloatArray:
        """N^phi, shape (K, V), unscaled."""
        return self.topic_word * self.scale


def _settings(n_topics: int, alpha: FloatArray, beta: float, seed: int, burn_in: int) -> SCVB0Params:
    """SCVB0's settings for the pass (the prior it applies is :meth:`SCVB0Pass.doc_topic_prior`, alpha_k;
    the scalar ``alpha`` here only has to be valid)."""
    return SCVB0Params(n_topics=int(n_topics), alpha=float(np.mean(alpha)), beta=float(beta), burn_in=burn_in,
                       seed=seed)


def scvb0_posterior(block: DocBlock, params: GibbsParams, *,
                    burn_in: int = SCVB0_START_BURN_IN) -> tuple[FloatArray, FloatArray]:
    """One SCVB0 pass over ``block``: each document's N^theta and the expected topic-word counts N^phi.

    Parameters
    ----------
    block : DocBlock
        Visited in order.
    params : GibbsParams
        K, alpha, beta and the seed. The rest are :class:`~topicflow.models.lda.scvb0.SCVB0Params`'
        defaults (Foulds et al.'s step sizes, random starts of N^phi and N^theta drawn from the seed).
    burn_in : int, default 0
        Passes over a document updating only its N^theta first (Foulds et al. use 1).

    Returns
    -------
    doc_topic : ndarray of shape (block.n_docs, K)
        N^theta_d after the document's pass (each row sums to the document's length).
    topic_word : ndarray of shape (K, block.n_terms)
        N^phi after the whole pass (it sums to the block's tokens).

    Notes
    -----
    NumPy equivalent, token by token in document order (``tests/reference/collapsed_vb.py``)::

        q = (n_dk + alpha) * (N[:, w] + beta) / (N.sum(1) + V * beta); q /= q.sum()
        n_dk = (1 - rho_d) * n_dk + rho_d * n_d * q
        N *= 1 - rho_c; N[:, w] += rho_c * C * q
    """
    state = SCVB0Pass.begin(params, n_terms=block.n_terms, n_tokens=block.n_tokens, burn_in=burn_in)
    doc_topic = state.visit(block)
    return doc_topic, state.expected_counts()


def word_factor(topic_word: FloatArray, beta: float) -> FloatArray:
    """(N^phi_kw + beta) / (N^Z_k + V beta), term-major: shape (V, K), the layout of the draw."""
    n_terms = topic_word.shape[1]
    return np.ascontiguousarray(((topic_word + beta) / (topic_word.sum(axis=1, keepdims=True) + n_terms * beta)).T)


@numba.njit(nogil=True, cache=True)
def _draw_topics(token_indptr: IntArray, token_terms: Int32Array, doc_topic: FloatArray, alpha: FloatArray,
                 word_factor: FloatArray, seed: int, first_doc: int, start: int, stop: int,
                 topics: Int32Array) -> None:
    """z_t ~ (doc_topic[d] + alpha) * word_factor[w_t] by inverse CDF in topic order, documents [start, stop)."""
    n_topics = alpha.shape[0]
    cumulative = np.empty(n_topics)
    for d in range(start, stop):
        key = counter_key(seed, STREAM_GIBBS, 0, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            row = word_factor[token_terms[t]]
            running = 0.0
            for k in range(n_topics):
                running += (doc_topic[d, k] + alpha[k]) * row[k]
                cumulative[k] = running
            x = uniform_from_key(key, t - lo) * running
            chosen = n_topics - 1
            for k in range(n_topics):
                if cumulative[k] > x:
                    chosen = k
                    break
            topics[t] = chosen


def draw_topics(token_indptr: IntArray, token_terms: Int32Array, doc_topic: FloatArray, factor: FloatArray,
                params: GibbsParams, first_doc: int, *, threads: int | None = 1) -> Int32Array:
    """Every token's topic from ``(doc_topic[d] + alpha) * factor[w]`` by inverse CDF, documents on threads.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
    doc_topic : ndarray of shape (n_docs, K)
        N^theta of the documents.
    factor : ndarray of shape (V, K)
        :func:`word_factor`.
    params : GibbsParams
        The chain's alpha and seed.
    first_doc : int
        Global index of the first document (keys its uniforms).
    threads : int or None, default 1
        The result does not depend on it.

    Returns
    -------
    ndarray of shape (n_tokens,), int32
    """
    topics = np.zeros(token_terms.shape[0], dtype=np.int32)
    alpha = np.ascontiguousarray(params.alpha, dtype=np.float64)
    indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    terms = np.ascontiguousarray(token_terms, dtype=np.int32)

    def draw(start: int, stop: int) -> None:
        _draw_topics(indptr, terms, doc_topic, alpha, factor, params.seed, int(first_doc), start, stop, topics)

    run_chunks(draw, indptr.shape[0] - 1, work=terms.shape[0] * params.n_topics, threads=threads)
    return topics


def scvb0_start(block: DocBlock, params: GibbsParams, *, threads: int | None = 1,
                burn_in: int = SCVB0_START_BURN_IN) -> GibbsState:
    """The chain's first state: every token's topic drawn from one SCVB0 pass's posterior.

    Parameters
    ----------
    block : DocBlock
    params : GibbsParams
    threads : int or None, default 1
        Threads drawing the documents' topics (None: the cores of this process). The state does not
        depend on it.
    burn_in : int, default 0
        See :func:`scvb0_posterior`.

    Returns
    -------
    GibbsState
        ``sweeps_done = 0``; counts recounted from the drawn topics.

    Notes
    -----
    NumPy equivalent of the draw, given :func:`scvb0_posterior`'s ``doc_topic`` and ``topic_word``::

        factor = (topic_word + beta) / (topic_word.sum(1, keepdims=True) + V * beta)   # (K, V)
        cdf = np.cumsum((doc_topic[d] + alpha) * factor[:, w])
        z = min(np.searchsorted(cdf, u * cdf[-1], side="right"), K - 1)
    """
    doc_topic, topic_word = scvb0_posterior(block, params, burn_in=burn_in)
    token_indptr, token_terms = expand_tokens(block)
    first_doc = int(block.first_doc)
    topics = draw_topics(token_indptr, token_terms, doc_topic, word_factor(topic_word, params.topic_word_prior),
                         params, first_doc, threads=threads)
    return state_from_topics(token_indptr, token_terms, topics, block.n_terms, params, first_doc=first_doc)
