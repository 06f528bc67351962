"""The SparseLDA sweep kernels of collapsed Gibbs sampling (Griffiths & Steyvers 2004; Yao et al. 2009).

This module owns the sparse sampler: packed per-word topic lists, cached bucket coefficients and the
sweep over one in-memory block. The state is in :mod:`~topicflow.models.lda.gibbs.state`, the chain
(initialization, sweeps, hyperparameters) in :mod:`~topicflow.models.lda.gibbs.chain`, the scores in
:mod:`~topicflow.models.lda.gibbs.scores` and fold-in in :mod:`~topicflow.models.lda.gibbs.fold_in`.
It is also the initializer of the streaming samplers, which take its token arrays and assignments,
and the per-minibatch sampler of streaming Gibbs (:mod:`topicflow.models.lda.streaming.sgs`), through an
optional :class:`TopicWordPrior`: float pseudo-counts N_wk added to n_wk (and N_k to n_k), so that the
topics' prior is beta + N (Gao, Chen and Zhu 2016). Without a prior every result is bit for bit what
it was before priors existed. The training perplexity of a block (the stopping rule of streaming
Gibbs) is computed from the sampler's own buckets. Pure NumPy + numba: it must not import dask,
distributed, zarr or logging, and does no I/O.

A draw costs O(K_d + K_w) instead of O(K), in the manner of SparseLDA (Yao, Mimno and McCallum 2009):
the conditional mass splits into a smoothing bucket s (all topics, rarely visited), a document bucket
r (topics used in the document) and a topic-word bucket q (topics used by the word). s (with its sums
per block of 32 topics) and r are updated per token, and 1 / (n_k + V beta) and (n_dk + alpha_k) /
(n_k + V beta) are cached per topic; q is summed over the word's topic list, kept sorted by decreasing
count so that the search for the drawn topic usually stops after a few entries. When the draw keeps
the token's topic (most draws once the chain has mixed) the saved caches are restored and the lists
are left alone. One sweep is one call of ``_sweep``; the word lists live for a whole :func:`run_sweeps`.
A prior joins the word bucket: q also sums (n_dk + alpha_k) N_wk / (n_k + N_k + V beta) over the
term's nonzero N_wk (a second list per term, fixed during the run, sorted by decreasing N_wk), while
s and r keep their form with N_k added to the denominators; so every bucket stays sparse.

Glossary (Griffiths and Steyvers 2004; Yao et al. 2009):
    n_tokens, token_indptr, token_terms: the documents' tokens (w_i), document d owning
        ``token_indptr[d]:token_indptr[d + 1]``
    topics (z, (n_tokens,)): the topic of each token
    doc_topic_counts (n_dk, (n_docs, n_topics)): tokens of document d with topic k
    term_topic_counts (n_wk, (n_terms, n_topics)): tokens of term w with topic k
    topic_counts (n_k, (n_topics,)): tokens with topic k
    doc_topic_prior (alpha, (n_topics,)); alpha_sum: sum_k alpha_k
    topic_word_prior (beta): symmetric; beta_sum = n_terms * beta
    inv_denom (1 / (n_k + V beta)), coef ((n_dk + alpha_k) / (n_k + V beta)): cached per topic
    s = sum_k alpha_k beta / (n_k + V beta); r = sum_k n_dk beta / (n_k + V beta);
    q = sum_k (n_dk + alpha_k) n_wk / (n_k + V beta); s + r + q is the normalizer of the conditional
    word list: per term, its nonzero n_wk packed as ``(n_wk << shift) | k``, sorted by decreasing n_wk
    topic_word (phi, (n_topics, n_terms)): (n_wk + beta) / (n_k + V beta)
    prior (N_wk, N_k, V): pseudo-counts of a :class:`TopicWordPrior` (0 without one); with a prior,
        every n_wk + beta above reads n_wk + N_wk + beta and every n_k + V beta reads n_k + N_k + V beta
    prior list: per term, its nonzero N_wk (topics and values), by decreasing N_wk

References
----------
Griffiths and Steyvers (2004). Finding scientific topics. PNAS 101, 5228-5235.
Yao, Mimno and McCallum (2009). Efficient methods for topic model inference on streaming document
collections. KDD.
Minka (2000). Estimating a Dirichlet distribution. Technical report.
Wallach (2008). Structured topic models for language. PhD thesis, University of Cambridge, ch. 2.
May, Clemmer and Van Durme (2014). Particle filter rejuvenation and latent Dirichlet allocation. ACL
(evaluation of held-out documents with 5 fold-in sweeps).
Gao, Chen and Zhu (2016). Streaming Gibbs sampling for LDA model. arXiv:1601.01142.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.categorical import draw_uniform
from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key
from topicflow.models.common.validation import parse_int
from topicflow.models.lda.gibbs.state import GibbsState, TopicWordPrior, _check_prior

#: The smoothing bucket keeps its sum per block of 2**SMOOTHING_BLOCK_BITS topics, so a draw from it
#: steps over blocks first (about K/32 + 32 steps instead of K).
SMOOTHING_BLOCK_BITS = 5



# ----------------------------------------------------------------------------- word lists


#: Lists longer than this are sorted by NumPy's sort instead of insertion (the early sweeps of a random
#: start, and AD-LDA blocks, whose lists hold every block's topics, build many long lists).
_INSERTION_SORT_MAX = 16


@numba.njit(nogil=True, cache=True)
def _build_word_lists(term_topic, starts, lengths, shift, packed):
    """Fill each term's list with its nonzero ``(n_wk << shift) | k``, sorted by decreasing value."""
    for w in range(term_topic.shape[0]):
        base = starts[w]
        n = 0
        for k in range(term_topic.shape[1]):
            if term_topic[w, k] > 0:
                packed[base + n] = (np.int64(term_topic[w, k]) << shift) | k
                n += 1
        lengths[w] = n
        if n > _INSERTION_SORT_MAX:  # distinct values: one order, whichever sort
            packed[base:base + n].sort()
            for i in range(n // 2):
                packed[base + i], packed[base + n - 1 - i] = packed[base + n - 1 - i], packed[base + i]
        else:
            for i in range(base + 1, base + n):  # insertion sort, decreasing
                value = packed[i]
                j = i
                while j > base and packed[j - 1] < value:
                    packed[j] = packed[j - 1]
                    j -= 1
                packed[j] = value


@numba.njit(nogil=True, cache=True)
def _word_list_sizes(term_topic, token_terms):
    """Per term: its tokens (frequency), its total count n_w and its number of nonzero n_wk, in one
    pass over the rows (what :func:`_word_lists` sizes the lists from)."""
    n_terms = term_topic.shape[0]
    freq = np.zeros(n_terms, dtype=np.int64)
    for t in range(token_terms.shape[0]):
        freq[token_terms[t]] += 1
    totals = np.zeros(n_terms, dtype=np.int64)
    nonzero = np.zeros(n_terms, dtype=np.int64)
    for w in range(n_terms):
        total, count = 0, 0
        for k in range(term_topic.shape[1]):
            value = term_topic[w, k]
            total += value
            count += value != 0
        totals[w], nonzero[w] = total, count
    return freq, totals, nonzero


@numba.njit(nogil=True, cache=True)
def _scatter_word_lists(starts, lengths, shift, packed, term_topic):
    """term_topic[w, k] = n_wk from the packed lists (term_topic zero on entry)."""
    mask = (1 << shift) - 1
    for w in range(term_topic.shape[0]):
        for j in range(starts[w], starts[w] + lengths[w]):
            term_topic[w, packed[j] & mask] = packed[j] >> shift


@numba.njit(nogil=True, cache=True, inline="always")
def _word_decrement_at(packed, base, n, j, shift):
    """n_wk -= 1 for the entry at absolute position j of the list at ``base`` (length n); the entry
    sinks past the larger ones. Returns (new length, its final position)."""
    value = packed[j] - (1 << shift)
    end = base + n - 1
    while j < end and packed[j + 1] > value:
        packed[j] = packed[j + 1]
        j += 1
    packed[j] = value
    return (n - 1 if (value >> shift) == 0 else n), j


@numba.njit(nogil=True, cache=True, inline="always")
def _word_increment(packed, base, n, k, shift, mask, j):
    """n_wk += 1 for topic k at absolute position j, or, if j < 0, searched for (appended with count 0
    when absent); the entry rises past the smaller ones. Returns the new length."""
    if j < 0:
        j = base
        end = base + n
        while j < end and (packed[j] & mask) != k:
            j += 1
        if j == end:
            packed[j] = k
            n += 1
    value = packed[j] + (1 << shift)
    while j > base and packed[j - 1] < value:
        packed[j] = packed[j - 1]
        j -= 1
    packed[j] = value
    return n


# ----------------------------------------------------------------------------- the sweep


@numba.njit(nogil=True, cache=True, inline="always")
def _word_mass(packed, base, n, shift, mask, coef, k_old, q_cum):
    """(q, position of k_old): q = sum over the word's list of coef_k n_wk, where the entry of k_old
    (the token being resampled, -1 if none) counts one less; q_cum[i] is the sum of the first i + 1."""
    q = 0.0
    pos = base
    for j in range(base, base + n):
        entry = packed[j]
        k = entry & mask
        hit = k == k_old
        if hit:
            pos = j
        q += coef[k] * np.float64((entry >> shift) - hit)
        q_cum[j - base] = q
    return q, pos


@numba.njit(nogil=True, cache=True, inline="always")
def _search_word(x, q_cum, n):
    """Index in the word's list of the first running sum of q above x (x < q, so one is)."""
    i = 0
    while i < n - 1 and q_cum[i] <= x:
        i += 1
    return i


@numba.njit(nogil=True, cache=True, inline="always")
def _walk_doc(x, doc_list, n_list, doc_topic, d, beta, inv_denom):
    """Topic of the document's list where the running sum of n_dk beta / (n_k + V beta) first exceeds x."""
    for i in range(n_list - 1):
        k = doc_list[i]
        x -= doc_topic[d, k] * beta * inv_denom[k]
        if x < 0.0:
            return k
    return doc_list[n_list - 1]


@numba.njit(nogil=True, cache=True, inline="always")
def _walk_smoothing(x, alpha, beta, inv_denom, s_block):
    """First topic where the running sum of alpha_k beta / (n_k + V beta) exceeds x: whole blocks are
    skipped by their sums, then the walk goes on topic by topic (past the block's end if rounding
    left x at or above the block's last partial sum)."""
    n_topics = alpha.shape[0]
    b, last = 0, s_block.shape[0] - 1
    while b < last and x >= s_block[b]:
        x -= s_block[b]
        b += 1
    for k in range(b << SMOOTHING_BLOCK_BITS, n_topics - 1):
        x -= alpha[k] * beta * inv_denom[k]
        if x < 0.0:
            return k
    return n_topics - 1


@numba.njit(nogil=True, cache=True, inline="always")
def _shift_topic(k, delta, d, s, r, doc_topic, topic_counts, topic_prior, alpha, beta,
                 beta_sum, inv_denom, coef, s_block):
    """Add ``delta`` (+1 or -1) tokens of document d to topic k: counts, inv_denom_k, coef_k, and s, its
    block sum and r updated by the change of their k-th term. Returns (s, r)."""
    inv_old = inv_denom[k]
    n_old = doc_topic[d, k]
    n_new = n_old + delta
    doc_topic[d, k] = n_new
    topic_counts[k] += delta
    inv = 1.0 / (topic_counts[k] + topic_prior[k] + beta_sum)  # + 0.0 without a prior: same bits
    inv_denom[k] = inv
    s_change = alpha[k] * beta * (inv - inv_old)
    s += s_change
    s_block[k >> SMOOTHING_BLOCK_BITS] += s_change
    r += beta * (n_new * inv - n_old * inv_old)
    coef[k] = (n_new + alpha[k]) * inv
    return s, r


@numba.njit(nogil=True, cache=True, inline="always")
def _doc_list_remove(doc_list, n_list, k):
    i = 0
    while doc_list[i] != k:
        i += 1
    doc_list[i] = doc_list[n_list - 1]
    return n_list - 1


@numba.njit(nogil=True, cache=True)
def _reset_topic_caches(topic_counts, topic_prior, alpha, beta, beta_sum,
                        inv_denom, coef, s_block, listed):
    """inv_denom, coef outside any document, s's block sums, the ``listed`` marks cleared; returns s
    (summed in k order)."""
    s = 0.0
    s_block[:] = 0.0
    for k in range(alpha.shape[0]):
        inv_denom[k] = 1.0 / (topic_counts[k] + topic_prior[k] + beta_sum)
        coef[k] = alpha[k] * inv_denom[k]
        s += alpha[k] * beta * inv_denom[k]
        s_block[k >> SMOOTHING_BLOCK_BITS] += alpha[k] * beta * inv_denom[k]
        listed[k] = -1
    return s


@numba.njit(nogil=True, cache=True, inline="always")
def _start_doc(topics, lo, hi, doc_topic, d, alpha, beta,
               inv_denom, coef, doc_list, listed):
    """List the document's topics (in order of first use), set their coef; returns (list length, r)."""
    n_list = 0
    r = 0.0
    for t in range(lo, hi):
        k = topics[t]
        if listed[k] != d:
            listed[k] = d
            doc_list[n_list] = k
            n_list += 1
            n = doc_topic[d, k]
            r += n * beta * inv_denom[k]
            coef[k] = (n + alpha[k]) * inv_denom[k]
    return n_list, r


@numba.njit(nogil=True, cache=True, inline="always")
def _prior_mass(p_topics, p_values, lo, hi, coef, p_cum):
    """q_prior = sum over the word's prior list of coef_k N_wk; p_cum[i] is the sum of the first i + 1."""
    q = 0.0
    for j in range(lo, hi):
        q += coef[p_topics[j]] * p_values[j]
        p_cum[j - lo] = q
    return q


@numba.njit(nogil=True, cache=True)
def _sweep(doc_lo, doc_hi, doc_start, doc_end, token_terms, topics, doc_topic, topic_counts,
           starts, lengths, packed, shift, alpha, beta, beta_sum, seed, epoch, first_doc, progressive,
           topic_prior, p_indptr, p_topics, p_values, inv_denom, coef, s_block, doc_list, listed, q_cum, p_cum):
    """One Gibbs sweep over the tokens ``doc_lo[d]:doc_hi[d]`` of every document d in order (row d of
    ``doc_topic``; the document's tokens are ``doc_start[d]:doc_end[d]``, the same range unless a
    partitioned sweep samples part of them); with ``progressive`` the tokens are unassigned on entry (and
    the counts zero) and each is drawn given the tokens before it. Returns s as updated token by token
    (the caches are left as at the end of the sweep, for tests).

    The prior pseudo-counts N_wk of term w are ``p_values[p_indptr[w]:p_indptr[w + 1]]`` (topics
    ``p_topics``), and ``topic_prior[k]`` = N_k; they join the word bucket, so s and r keep their form.
    With empty lists and zero totals every floating-point operation gives the batch sampler's bits.
    Token t of document d draws the ``(t - doc_lo[d])``-th uniform of ``counter_key(seed, STREAM_GIBBS,
    epoch, first_doc + d)``.
    """
    s = _reset_topic_caches(topic_counts, topic_prior, alpha, beta, beta_sum, inv_denom, coef, s_block, listed)
    mask = (1 << shift) - 1
    n_tokens = token_terms.shape[0]
    touched = 0
    for d in range(doc_lo.shape[0]):
        key = counter_key(seed, STREAM_GIBBS, epoch, first_doc + d)
        lo, hi = doc_lo[d], doc_hi[d]
        if lo == hi:
            continue
        n_list, r = 0, 0.0
        if not progressive:
            n_list, r = _start_doc(topics, doc_start[d], doc_end[d], doc_topic, d, alpha, beta, inv_denom, coef,
                                   doc_list, listed)
        for t in range(lo, hi):
            # Remove token t (topic k_old, -1 if unassigned), draw its topic k, add it back. The body
            # stays in the loop: helpers nested in an inlined helper are not inlined by numba, and
            # the resulting calls made the sampler 1.5-2x slower.
            k_old = -1 if progressive else topics[t]
            w = token_terms[t]
            base, n = starts[w], lengths[w]
            if t + 1 < n_tokens:
                # Read the head of the next token's word list now: the likely cache miss (lists are read
                # in the order of the tokens' terms, all over ``packed``) then overlaps this token's draw
                # instead of stalling the next one (8% less time per sweep measured; nothing changes).
                touched += packed[starts[token_terms[t + 1]]]
            s_saved, r_saved, inv_saved, coef_saved, block_saved = s, r, 0.0, 0.0, 0.0
            if k_old >= 0:
                inv_saved, coef_saved = inv_denom[k_old], coef[k_old]
                block_saved = s_block[k_old >> SMOOTHING_BLOCK_BITS]
                s, r = _shift_topic(k_old, -1, d, s, r, doc_topic, topic_counts, topic_prior, alpha, beta, beta_sum,
                                    inv_denom, coef, s_block)
            q, pos = _word_mass(packed, base, n, shift, mask, coef, k_old, q_cum)
            p_lo, p_hi, q_prior = 0, 0, 0.0
            if p_topics.shape[0] > 0:  # no prior: skip the lookup (a cache miss per token)
                p_lo, p_hi = p_indptr[w], p_indptr[w + 1]
                q_prior = _prior_mass(p_topics, p_values, p_lo, p_hi, coef, p_cum)
            # Without a prior q_prior is 0.0, and q + 0.0 == q, x - q - 0.0 == x - q exactly.
            x = uniform_from_key(key, t - lo) * (q + q_prior + r + s)
            j = -1
            if x < q:
                j = base + _search_word(x, q_cum, n)
                k = packed[j] & mask
            elif x - q < q_prior:
                k = p_topics[p_lo + _search_word(x - q, p_cum, p_hi - p_lo)]
            elif n_list > 0 and x - q - q_prior < r:
                k = _walk_doc(x - q - q_prior, doc_list, n_list, doc_topic, d, beta, inv_denom)
            else:
                k = _walk_smoothing(x - q - q_prior - r, alpha, beta, inv_denom, s_block)
            if k == k_old:  # common once the chain mixes: restore the saved caches exactly
                doc_topic[d, k] += 1
                topic_counts[k] += 1
                inv_denom[k], coef[k] = inv_saved, coef_saved
                s, r, s_block[k >> SMOOTHING_BLOCK_BITS] = s_saved, r_saved, block_saved
            else:
                if k_old >= 0:  # k_old leaves the document's list if unused; its word entry sinks
                    if doc_topic[d, k_old] == 0:
                        n_list = _doc_list_remove(doc_list, n_list, k_old)
                    n, sunk = _word_decrement_at(packed, base, n, pos, shift)
                    if pos < j <= sunk:  # the entries it sank past moved up by one
                        j -= 1
                s, r = _shift_topic(k, 1, d, s, r, doc_topic, topic_counts, topic_prior, alpha, beta, beta_sum,
                                    inv_denom, coef, s_block)
                if doc_topic[d, k] == 1:
                    doc_list[n_list] = k
                    n_list += 1
                lengths[w] = _word_increment(packed, base, n, k, shift, mask, j)
            topics[t] = k
        for i in range(n_list):
            coef[doc_list[i]] = alpha[doc_list[i]] * inv_denom[doc_list[i]]
    if touched == -1:  # never (entries are >= 0): keeps the touches from being optimized away
        s += 0.0
    return s


# ----------------------------------------------------------------------------- initialization


@numba.njit(nogil=True, cache=True)
def _random_topics(token_indptr, n_topics, seed, first_doc, topics):
    """z_t = floor(u_t K) with u_t the t-th uniform of counter_key(seed, STREAM_GIBBS, 0, first_doc + d)."""
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, 0, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            topics[t] = draw_uniform(uniform_from_key(key, t - lo), n_topics)


@dataclass(frozen=True, slots=True)
class _WordLists:
    """Per-term sorted lists of nonzero n_wk, packed as ``(n_wk << shift) | k`` (see module glossary)."""

    starts: IntArray  #: (n_terms,) offset of each term's list in ``packed``
    lengths: IntArray  #: (n_terms,) number of nonzero topics of each term
    packed: np.ndarray  #: (sum_w min(K, freq_w),) int32 or int64
    shift: int


def _word_lists(
    term_topic: Int32Array, token_terms: Int32Array, n_topics: int, dtype: type | None = None, *,
    shared: bool = False,
) -> _WordLists:
    """Lists of capacity min(K, frequency of w) filled from ``term_topic`` (zeros give empty lists).

    ``term_topic`` may count other tokens than ``token_terms`` (other blocks'; seen where n_w differs
    from the frequency, or said by ``shared=True``): such a term's capacity is min(K, its topics + its
    frequency).

    The packed dtype is int32 (half the cache footprint) unless a count could overflow its field, then
    int64; ``dtype`` forces one (tests).
    """
    n_terms = term_topic.shape[0]
    freq, totals, nonzero = _word_list_sizes(term_topic, token_terms)
    # When ``term_topic`` counts the block's tokens only (the in-memory sampler) or none yet (the
    # progressive start), a term's list never holds more than min(K, frequency) topics. When it also
    # counts other tokens (the AD-LDA block sweep; n_w differs from the frequency unless the caller
    # says so), a term holds at most its topics now plus one per token of the block, and its counts
    # reach at most n_w + frequency.
    others = np.ones(n_terms, dtype=bool) if shared else totals != freq
    capacity = np.minimum(np.where(others, nonzero + freq, freq), n_topics)
    starts = np.zeros(n_terms, dtype=np.int64)
    np.cumsum(capacity[:-1], out=starts[1:])
    shift = max(1, int(n_topics - 1).bit_length())
    if dtype is None:
        largest = max(int(freq.max(initial=0)), int((totals + freq)[others].max(initial=0)))
        dtype = np.int32 if largest < 2 ** (31 - shift) else np.int64
    packed: np.ndarray = np.zeros(max(1, int(capacity.sum())), dtype=dtype)
    lengths = np.zeros(n_terms, dtype=np.int64)
    _build_word_lists(term_topic, starts, lengths, shift, packed)
    return _WordLists(starts, lengths, packed, shift)


def _term_topic_from_lists(lists: _WordLists, n_terms: int, n_topics: int) -> Int32Array:
    term_topic = np.zeros((n_terms, n_topics), dtype=np.int32)
    _scatter_word_lists(lists.starts, lists.lengths, lists.shift, lists.packed, term_topic)
    return term_topic


def _n_smoothing_blocks(n_topics: int) -> int:
    return ((n_topics - 1) >> SMOOTHING_BLOCK_BITS) + 1


@dataclass(frozen=True, slots=True)
class _PriorLists:
    """A :class:`TopicWordPrior` in the sweep's layout: per term, its nonzero N_wk by decreasing value."""

    topic_prior: FloatArray  #: (n_topics,) N_k
    indptr: IntArray  #: (n_terms + 1,) term w's entries are ``indptr[w]:indptr[w + 1]``
    topics: IntArray  #: (n_entries,) k of each entry
    values: FloatArray  #: (n_entries,) N_wk of each entry, > 0
    vocab_size: int  #: V of V beta


def _prior_lists(prior: TopicWordPrior | None, n_terms: int, n_topics: int) -> _PriorLists:
    """The lists of ``prior`` (sorted by term, then decreasing N_wk, then topic); empty without one."""
    if prior is None:
        return _PriorLists(np.zeros(n_topics), np.zeros(n_terms + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                           np.zeros(0), n_terms)
    rows, topics = np.nonzero(prior.term_topic)
    values = prior.term_topic[rows, topics]
    order = np.lexsort((topics, -values, rows))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_terms), out=indptr[1:])
    return _PriorLists(prior.topic_counts, indptr, topics[order].astype(np.int64), values[order], prior.vocab_size)


def _run_sweep(
    token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array, doc_topic: Int32Array,
    topic_counts: IntArray, lists: _WordLists, alpha: FloatArray, beta: float, seed: int, epoch: int,
    first_doc: int, progressive: bool, prior: _PriorLists | None = None,
) -> None:
    """One sweep (numbered ``epoch``) of ``_sweep`` in place on the given arrays, with fresh scratch.

    Without ``prior`` the lists are empty and V is the number of terms of the word lists."""
    _run_sweep_ranges(token_indptr[:-1], token_indptr[1:], token_indptr[:-1], token_indptr[1:], token_terms, topics,
                      doc_topic, topic_counts, lists, alpha, beta, seed, epoch, first_doc, progressive, prior)


def _run_sweep_ranges(
    doc_lo: IntArray, doc_hi: IntArray, doc_start: IntArray, doc_end: IntArray, token_terms: Int32Array,
    topics: Int32Array, doc_topic: Int32Array, topic_counts: IntArray, lists: _WordLists, alpha: FloatArray,
    beta: float, seed: int, epoch: int, first_doc: int, progressive: bool, prior: _PriorLists | None = None,
) -> None:
    """:func:`_run_sweep` over the tokens ``doc_lo[d]:doc_hi[d]`` of each document d (whose tokens are
    ``doc_start[d]:doc_end[d]``), as a partitioned sweep's task samples part of every document."""
    n_topics, n_terms = alpha.shape[0], lists.lengths.shape[0]
    if prior is None:
        prior = _prior_lists(None, n_terms, n_topics)
    _sweep(doc_lo, doc_hi, doc_start, doc_end, token_terms, topics, doc_topic, topic_counts, lists.starts,
           lists.lengths, lists.packed, lists.shift, alpha, beta, prior.vocab_size * beta, seed, epoch, first_doc,
           progressive, prior.topic_prior, prior.indptr, prior.topics, prior.values,
           np.empty(n_topics), np.empty(n_topics), np.empty(_n_smoothing_blocks(n_topics)),
           np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.int64), np.empty(n_topics),
           np.empty(n_topics))


def _check_block(block: DocBlock) -> None:
    if block.n_terms < 1:
        raise InvalidParameterError(f"block starting at document {block.first_doc} has n_terms={block.n_terms}; "
                                    "expected at least 1")
    if block.term_ids.size and (block.term_ids.min() < 0 or block.term_ids.max() >= block.n_terms):
        raise InvalidParameterError(
            f"block starting at document {block.first_doc}: term ids must lie in [0, {block.n_terms}), got "
            f"[{block.term_ids.min()}, {block.term_ids.max()}]"
        )
    if block.counts.size and block.counts.min() < 1:
        raise InvalidParameterError(f"block starting at document {block.first_doc} has a count below 1")


# ----------------------------------------------------------------------------- bucket inspection


@numba.njit(nogil=True, cache=True)
def _token_buckets(token_indptr, token_terms, topics, doc_topic, topic_counts,
                   starts, lengths, packed, shift, topic_prior, p_indptr, p_topics, p_values, alpha, beta, beta_sum,
                   d, t, s_blocks, masses):
    """The sweep's buckets for token t of document d, with the same helpers as ``_sweep``; mutates
    its (copied) inputs. masses[k] = topic k's part of s + r + q. Returns (s, r, q), q with the prior."""
    n_topics = alpha.shape[0]
    inv_denom, coef, s_block = np.empty(n_topics), np.empty(n_topics), np.empty(s_blocks)
    doc_list, listed = np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.int64)
    mask = (1 << shift) - 1
    s = _reset_topic_caches(topic_counts, topic_prior, alpha, beta, beta_sum, inv_denom, coef, s_block, listed)
    n_list, r = _start_doc(topics, token_indptr[d], token_indptr[d + 1], doc_topic, d, alpha, beta, inv_denom,
                           coef, doc_list, listed)
    k_old = topics[t]
    s, r = _shift_topic(k_old, -1, d, s, r, doc_topic, topic_counts, topic_prior, alpha, beta, beta_sum, inv_denom,
                        coef, s_block)
    w = token_terms[t]
    base, n = starts[w], lengths[w]
    q, _ = _word_mass(packed, base, n, shift, mask, coef, k_old, np.empty(max(n, 1)))
    p_lo, p_hi = p_indptr[w], p_indptr[w + 1]
    q += _prior_mass(p_topics, p_values, p_lo, p_hi, coef, np.empty(max(p_hi - p_lo, 1)))
    for k in range(n_topics):
        masses[k] = alpha[k] * beta * inv_denom[k]
    for i in range(n_list):
        masses[doc_list[i]] += doc_topic[d, doc_list[i]] * beta * inv_denom[doc_list[i]]
    for j in range(base, base + n):
        k = packed[j] & mask
        masses[k] += coef[k] * np.float64((packed[j] >> shift) - (k == k_old))
    for j in range(p_lo, p_hi):
        masses[p_topics[j]] += coef[p_topics[j]] * p_values[j]
    return s, r, q


@dataclass(frozen=True, slots=True)
class TokenBuckets:
    """The sparse sampler's decomposition of one token's conditional (see :func:`token_buckets`).

    Attributes
    ----------
    smoothing : float
        s = sum_k alpha_k beta / (n_k + N_k + V beta).
    document : float
        r = sum_k n_dk beta / (n_k + N_k + V beta).
    word : float
        q = sum_k (n_dk + alpha_k) (n_wk + N_wk) / (n_k + N_k + V beta) (N = 0 without a prior).
    masses : ndarray of shape (n_topics,), float64
        Each topic's part of s + r + q, i.e. the unnormalized conditional.
    """

    smoothing: float
    document: float
    word: float
    masses: FloatArray


def token_buckets(state: GibbsState, token: int, *, prior: TopicWordPrior | None = None) -> TokenBuckets:
    """The bucket masses the sampler uses to redraw one token, counts excluding that token.

    Parameters
    ----------
    state : GibbsState
    token : int
        Index into ``state.topics``, in ``[0, n_tokens)``.
    prior : TopicWordPrior, optional
        Pseudo-counts, one row per term of the state.

    Returns
    -------
    TokenBuckets

    Raises
    ------
    InvalidParameterError
        ``token`` out of range, or a prior of another shape.

    Notes
    -----
    Yao et al. (2009), eq. (2): with all counts excluding the token,
    ``(n_dk + alpha_k)(n_wk + N_wk + beta) / (n_k + N_k + V beta)`` splits into
    ``alpha_k beta / (...)`` (s), ``n_dk beta / (...)`` (r) and ``(n_dk + alpha_k)(n_wk + N_wk) / (...)``
    (q), with q and r summed over the word's (and its prior's) and the document's nonzero topics
    only. Computed by the sweep's own helpers (per-topic caches, document list, word and prior
    lists), for tests and diagnostics.

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 2]), np.array([0, 1], np.int32), np.array([0, 1], np.int32),
    ...                           2, GibbsParams(n_topics=2, doc_topic_prior=1.0, topic_word_prior=1.0))
    >>> buckets = token_buckets(state, 0)
    >>> round(buckets.smoothing + buckets.document + buckets.word, 12), buckets.masses.round(6).tolist()
    (1.166666666667, [0.5, 0.666667])
    """
    token = parse_int("token", token, 0, max(state.n_tokens, 1))
    if token >= state.n_tokens:
        raise InvalidParameterError(f"token must lie in [0, {state.n_tokens}), got {token!r}")
    _check_prior(prior, state.n_terms, state.n_topics)
    d = int(np.searchsorted(state.token_indptr, token, side="right") - 1)
    lists = _word_lists(state.term_topic_counts, state.token_terms, state.n_topics)
    pl = _prior_lists(prior, state.n_terms, state.n_topics)
    masses = np.zeros(state.n_topics)
    beta = float(state.topic_word_prior)
    s, r, q = _token_buckets(state.token_indptr, state.token_terms, state.topics, state.doc_topic_counts.copy(),
                             state.topic_counts.copy(), lists.starts, lists.lengths, lists.packed, lists.shift,
                             pl.topic_prior, pl.indptr, pl.topics, pl.values,
                             np.asarray(state.doc_topic_prior, dtype=np.float64), beta, pl.vocab_size * beta, d, token,
                             _n_smoothing_blocks(state.n_topics), masses)
    return TokenBuckets(float(s), float(r), float(q), masses)
