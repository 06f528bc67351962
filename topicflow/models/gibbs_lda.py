"""Collapsed Gibbs sampling for LDA over one in-memory block of documents, with a sparse sampler.

This module owns the batch collapsed Gibbs sampler of Griffiths and Steyvers (2004): the token arrays
and count matrices of a :class:`GibbsState`, its random and sequential initializations, sweeps with
optional hyperparameter optimization (Minka's fixed point on count histograms, Wallach 2008), the joint
log-likelihood, the topic-word point estimate, and fold-in of held-out documents with the topics fixed.
It is also the initializer of the streaming samplers, which take its token arrays and assignments,
and the per-minibatch sampler of streaming Gibbs (:mod:`topicflow.models.streaming_gibbs`), through an
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
May, Cheung, Ellis and Walker (2014). Streaming and online LDA (evaluation of held-out documents
with 5 fold-in sweeps).
Gao, Chen and Zhu (2016). Streaming Gibbs sampling for LDA model. arXiv:1601.01142.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.blocks import DocBlock
from topicflow.models.hybrid_estep import (
    SMOOTHING_CHUNK,
    _add_token,
    _draw_topic,
    _expand_tokens,
    _remove_token,
    _smoothing_chunks,
)
from topicflow.models.rng import STREAM_FOLD_IN, STREAM_GIBBS, counter_key, uniform_from_key
from topicflow.models.special import digamma
from topicflow.models.validation import parse_int
from topicflow.models.vb_lda import _present_terms

_MAX_SEED = 2**63
#: Iterations and relative tolerance of the fixed-point solvers for alpha and beta.
HYPER_MAX_ITER = 100
HYPER_TOL = 1e-7
#: Smallest value the fixed point may give alpha_k or beta (an unused topic would drive alpha_k to 0).
HYPER_FLOOR = 1e-10
#: The smoothing bucket keeps its sum per block of 2**SMOOTHING_BLOCK_BITS topics, so a draw from it
#: steps over blocks first (about K/32 + 32 steps instead of K).
SMOOTHING_BLOCK_BITS = 5

GibbsInit = Literal["random", "sequential"]


def _parse_alpha(value: float | FloatArray, n_topics: int, owner: str) -> FloatArray:
    alpha = np.asarray(value, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(n_topics, float(alpha))
    if alpha.shape != (n_topics,) or not np.all(np.isfinite(alpha)) or not np.all(alpha > 0):
        raise InvalidParameterError(
            f"{owner}doc_topic_prior must be a positive finite scalar or {n_topics} positive finite values, "
            f"got {value!r}"
        )
    return alpha


def _parse_beta(value: float, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{owner}topic_word_prior must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class GibbsParams:
    """Hyperparameters of the collapsed Gibbs sampler.

    Attributes
    ----------
    n_topics : int
        Number of topics K, at least 1.
    doc_topic_prior : float or ndarray of shape (n_topics,), default 0.1
        alpha: a positive scalar (symmetric, stored as a float) or one positive value per topic
        (asymmetric, stored as a float64 vector); :attr:`alpha` is always the ``(n_topics,)`` vector.
    topic_word_prior : float, default 0.01
        beta, symmetric, positive.
    seed : int, default 0
        Seed of the counter-based random numbers, in [0, 2**63).

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> GibbsParams(n_topics=3).alpha
    array([0.1, 0.1, 0.1])
    """

    n_topics: int
    doc_topic_prior: float | FloatArray = 0.1
    topic_word_prior: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_topics", parse_int("GibbsParams.n_topics", self.n_topics, 1))
        object.__setattr__(self, "seed", parse_int("GibbsParams.seed", self.seed, 0, _MAX_SEED))
        alpha = _parse_alpha(self.doc_topic_prior, self.n_topics, "GibbsParams.")
        prior: float | FloatArray = float(alpha[0]) if np.ndim(self.doc_topic_prior) == 0 else alpha
        object.__setattr__(self, "doc_topic_prior", prior)
        object.__setattr__(self, "topic_word_prior", _parse_beta(self.topic_word_prior, "GibbsParams."))

    @property
    def alpha(self) -> FloatArray:
        """alpha as a fresh ``(n_topics,)`` float64 vector."""
        return _parse_alpha(self.doc_topic_prior, self.n_topics, "GibbsParams.")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        prior = self.doc_topic_prior
        return {"n_topics": self.n_topics, "seed": self.seed, "topic_word_prior": self.topic_word_prior,
                "doc_topic_prior": prior if isinstance(prior, float) else [float(a) for a in prior]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GibbsParams:
        """Inverse of :meth:`to_dict`."""
        prior = data["doc_topic_prior"]
        return cls(n_topics=data["n_topics"], doc_topic_prior=prior if np.ndim(prior) == 0 else np.asarray(prior),
                   topic_word_prior=data["topic_word_prior"], seed=data["seed"])


@dataclass(frozen=True, slots=True)
class GibbsState:
    """Token assignments and count matrices of one block under collapsed Gibbs sampling.

    Attributes
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
        Tokens of document d are ``token_indptr[d]:token_indptr[d + 1]``.
    token_terms : ndarray of shape (n_tokens,), int32
        Term id w_i of each token.
    topics : ndarray of shape (n_tokens,), int32
        Topic z_i of each token.
    doc_topic_counts : ndarray of shape (n_docs, n_topics), int32
        n_dk.
    term_topic_counts : ndarray of shape (n_terms, n_topics), int32
        n_wk, term-major so that one term's row is contiguous.
    topic_counts : ndarray of shape (n_topics,), int64
        n_k.
    first_doc : int
        Global position of document 0; the random numbers are keyed by ``first_doc + d``.
    doc_topic_prior : ndarray of shape (n_topics,), float64
        Current alpha (changes when hyperparameters are optimized).
    topic_word_prior : float
        Current beta.
    sweeps_done : int
        Gibbs sweeps run since the initialization; sweep s of :func:`run_sweeps` is sweep
        ``sweeps_done + s + 1`` of the chain and draws its numbers from that epoch.

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit together, a non-positive prior or a negative ``sweeps_done``.

    Notes
    -----
    ``__post_init__`` converts the arrays to the dtypes above (copying only when they differ) and
    checks shapes, not contents: states come from :func:`initial_state` and :func:`run_sweeps`,
    which keep the counts equal to the recount from ``topics``. Build a state from assignments of
    another origin with :func:`state_from_topics`, which recounts.
    """

    token_indptr: IntArray
    token_terms: Int32Array
    topics: Int32Array
    doc_topic_counts: Int32Array
    term_topic_counts: Int32Array
    topic_counts: IntArray
    first_doc: int
    doc_topic_prior: FloatArray
    topic_word_prior: float
    sweeps_done: int

    def __post_init__(self) -> None:
        for name, dtype in (("token_indptr", np.int64), ("token_terms", np.int32), ("topics", np.int32),
                            ("doc_topic_counts", np.int32), ("term_topic_counts", np.int32),
                            ("topic_counts", np.int64), ("doc_topic_prior", np.float64)):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        n_tokens, n_topics = self.token_terms.shape[0], self.topic_counts.shape[0]
        n_docs = self.token_indptr.shape[0] - 1
        problems = [
            f"{name} has shape {getattr(self, name).shape!r}, expected {shape!r}"
            for name, shape in (("token_indptr", (n_docs + 1,)), ("token_terms", (n_tokens,)),
                                ("topics", (n_tokens,)), ("doc_topic_counts", (n_docs, n_topics)),
                                ("term_topic_counts", (self.term_topic_counts.shape[0], n_topics)),
                                ("topic_counts", (n_topics,)), ("doc_topic_prior", (n_topics,)))
            if getattr(self, name).shape != shape
        ]
        if n_docs < 0 or self.token_indptr[-1] != n_tokens:
            problems.append(f"token_indptr must end at n_tokens={n_tokens}")
        if problems or n_topics < 1:
            raise InvalidParameterError("GibbsState: " + "; ".join(problems or ["no topics"]))
        _parse_alpha(self.doc_topic_prior, n_topics, "GibbsState.")
        object.__setattr__(self, "topic_word_prior", _parse_beta(self.topic_word_prior, "GibbsState."))
        object.__setattr__(self, "first_doc", parse_int("GibbsState.first_doc", self.first_doc, 0, _MAX_SEED))
        object.__setattr__(self, "sweeps_done",
                           parse_int("GibbsState.sweeps_done", self.sweeps_done, 0, _MAX_SEED))

    @property
    def n_docs(self) -> int:
        return int(self.token_indptr.shape[0] - 1)

    @property
    def n_terms(self) -> int:
        return int(self.term_topic_counts.shape[0])

    @property
    def n_topics(self) -> int:
        return int(self.topic_counts.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.token_terms.shape[0])


@dataclass(frozen=True, slots=True)
class TopicWordPrior:
    """Topic-word pseudo-counts added to a block's own counts: the prior of streaming Gibbs sampling.

    With a prior, the conditional of a token of term w in document d becomes

        p(z = k | rest) ∝ (n_dk + alpha_k) (n_wk + N_wk + beta) / (n_k + N_k + V beta)

    where n counts the block's tokens and N the pseudo-counts (Gao, Chen and Zhu 2016: the decayed
    counts of earlier minibatches, so that ``beta + N`` is the Dirichlet prior of the topics).

    Attributes
    ----------
    term_topic : ndarray of shape (n_terms, n_topics), float64
        N_wk for the block's terms (row w is term w of the block or state), finite and >= 0.
    topic_counts : ndarray of shape (n_topics,), float64
        N_k, summed over the whole vocabulary (including terms the block does not use), finite, >= 0.
    vocab_size : int
        V in ``V beta``, at least ``n_terms``: the block may hold only some of the vocabulary's terms.

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit, negative or non-finite values, or ``vocab_size < n_terms``.

    Examples
    --------
    >>> prior = TopicWordPrior(np.array([[2.0, 0.0]]), np.array([5.0, 1.0]), vocab_size=10)
    >>> prior.n_terms, prior.n_topics
    (1, 2)
    """

    term_topic: FloatArray
    topic_counts: FloatArray
    vocab_size: int

    def __post_init__(self) -> None:
        term_topic = np.ascontiguousarray(self.term_topic, dtype=np.float64)
        topic_counts = np.ascontiguousarray(self.topic_counts, dtype=np.float64)
        if term_topic.ndim != 2 or topic_counts.shape != (term_topic.shape[1],) or term_topic.shape[1] < 1:
            raise InvalidParameterError(
                f"TopicWordPrior: term_topic must have shape (n_terms, n_topics) and topic_counts (n_topics,); "
                f"got {term_topic.shape!r} and {topic_counts.shape!r}"
            )
        for name, values in (("term_topic", term_topic), ("topic_counts", topic_counts)):
            if values.size and not (np.all(np.isfinite(values)) and values.min() >= 0):
                raise InvalidParameterError(f"TopicWordPrior: {name} must be finite and >= 0")
        vocab_size = parse_int("TopicWordPrior.vocab_size", self.vocab_size, max(1, term_topic.shape[0]))
        object.__setattr__(self, "term_topic", term_topic)
        object.__setattr__(self, "topic_counts", topic_counts)
        object.__setattr__(self, "vocab_size", vocab_size)

    @property
    def n_terms(self) -> int:
        return int(self.term_topic.shape[0])

    @property
    def n_topics(self) -> int:
        return int(self.term_topic.shape[1])


def _check_prior(prior: TopicWordPrior | None, n_terms: int, n_topics: int) -> None:
    if prior is not None and (prior.n_terms, prior.n_topics) != (n_terms, n_topics):
        raise InvalidParameterError(
            f"the prior has shape {(prior.n_terms, prior.n_topics)!r} but the block or state has {n_terms} terms "
            f"and {n_topics} topics; give one prior row per term of the block"
        )


# ----------------------------------------------------------------------------- tokens and counts


def tokens_from_block(block: DocBlock) -> tuple[IntArray, Int32Array]:
    """Expand a block's CSR counts into one entry per token.

    Parameters
    ----------
    block : DocBlock

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
        Tokens of document d are ``token_indptr[d]:token_indptr[d + 1]``.
    token_terms : ndarray of shape (n_tokens,), int32
        Each document's terms in CSR order (ascending term id), each repeated by its count.

    Notes
    -----
    NumPy equivalent: ``np.repeat(block.term_ids, block.counts)``, with the document boundaries
    ``np.cumsum(counts per document)``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> indptr, terms = tokens_from_block(block_from_csr(sp.csr_matrix(np.array([[2, 0, 1], [0, 0, 0]]))))
    >>> indptr.tolist(), terms.tolist()
    ([0, 3, 3], [0, 0, 2])
    """
    counts = block.counts.astype(np.int64)
    per_entry = np.concatenate([[0], np.cumsum(counts)])
    token_indptr = per_entry[block.indptr.astype(np.int64)]
    token_terms = np.repeat(block.term_ids.astype(np.int32), counts)
    return token_indptr.astype(np.int64), token_terms


@numba.njit(nogil=True, cache=True)
def _recount(token_indptr, token_terms, topics, doc_topic, term_topic, topic_counts):
    """Add every token's indicator to n_dk, n_wk and n_k (all zero on entry)."""
    for d in range(token_indptr.shape[0] - 1):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            k = topics[t]
            doc_topic[d, k] += 1
            term_topic[token_terms[t], k] += 1
            topic_counts[k] += 1


def _counts_from_topics(
    token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array, n_terms: int, n_topics: int
) -> tuple[Int32Array, Int32Array, IntArray]:
    doc_topic = np.zeros((token_indptr.shape[0] - 1, n_topics), dtype=np.int32)
    term_topic = np.zeros((n_terms, n_topics), dtype=np.int32)
    topic_counts = np.zeros(n_topics, dtype=np.int64)
    _recount(token_indptr, token_terms, topics, doc_topic, term_topic, topic_counts)
    return doc_topic, term_topic, topic_counts


def state_from_topics(
    token_indptr: IntArray, token_terms: Int32Array, topics: Int32Array, n_terms: int, params: GibbsParams,
    *, first_doc: int = 0, sweeps_done: int = 0,
) -> GibbsState:
    """A state with the given assignments and the counts recounted from them.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int64
    token_terms : ndarray of shape (n_tokens,), int32
        Term ids in ``[0, n_terms)``.
    topics : ndarray of shape (n_tokens,), int32
        Topics in ``[0, params.n_topics)``.
    n_terms : int
    params : GibbsParams
        Gives K and the current alpha and beta.
    first_doc : int, default 0
    sweeps_done : int, default 0

    Returns
    -------
    GibbsState

    Raises
    ------
    InvalidParameterError
        Shapes, ids or offsets do not fit.

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 2]), np.array([1, 1], np.int32), np.array([0, 1], np.int32),
    ...                           3, GibbsParams(n_topics=2))
    >>> state.term_topic_counts.tolist()
    [[0, 0], [1, 1], [0, 0]]
    """
    token_indptr = np.ascontiguousarray(token_indptr, dtype=np.int64)
    token_terms = np.ascontiguousarray(token_terms, dtype=np.int32)
    topics = np.ascontiguousarray(topics, dtype=np.int32)
    n_terms = parse_int("n_terms", n_terms, 1)
    first_doc = parse_int("first_doc", first_doc, 0, _MAX_SEED)
    sweeps_done = parse_int("sweeps_done", sweeps_done, 0, _MAX_SEED)
    n_tokens = token_terms.shape[0]
    if (token_indptr.ndim != 1 or token_indptr.shape[0] < 1 or token_indptr[0] != 0
            or token_indptr[-1] != n_tokens or np.any(np.diff(token_indptr) < 0)):
        raise InvalidParameterError(
            f"token_indptr must be 1-d, start at 0, be non-decreasing and end at n_tokens={n_tokens}; got "
            f"shape {token_indptr.shape!r}"
            + (f" from {token_indptr[0]} to {token_indptr[-1]}" if token_indptr.size else "")
        )
    if topics.shape != (n_tokens,):
        raise InvalidParameterError(f"topics must have shape ({n_tokens},), got {topics.shape!r}")
    if n_tokens and (token_terms.min() < 0 or token_terms.max() >= n_terms):
        raise InvalidParameterError(
            f"token_terms must lie in [0, {n_terms}), got [{token_terms.min()}, {token_terms.max()}]"
        )
    if n_tokens and (topics.min() < 0 or topics.max() >= params.n_topics):
        raise InvalidParameterError(f"topics must lie in [0, {params.n_topics}), got [{topics.min()}, {topics.max()}]")
    doc_topic, term_topic, topic_counts = _counts_from_topics(token_indptr, token_terms, topics, n_terms,
                                                              params.n_topics)
    return GibbsState(token_indptr, token_terms, topics, doc_topic, term_topic, topic_counts, first_doc,
                      params.alpha, params.topic_word_prior, sweeps_done)


# ----------------------------------------------------------------------------- word lists


@numba.njit(nogil=True, cache=True)
def _build_word_lists(term_topic, starts, lengths, shift, packed):
    """Fill each term's list with its nonzero ``(n_wk << shift) | k``, sorted by decreasing value."""
    for w in range(term_topic.shape[0]):
        base = starts[w]
        n = 0
        for k in range(term_topic.shape[1]):
            if term_topic[w, k] > 0:
                value = (np.int64(term_topic[w, k]) << shift) | k
                j = n  # insertion sort: lists are at most K long and built once per run
                while j > 0 and packed[base + j - 1] < value:
                    packed[base + j] = packed[base + j - 1]
                    j -= 1
                packed[base + j] = value
                n += 1
        lengths[w] = n


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
def _sweep(token_indptr, token_terms, topics, doc_topic, topic_counts,
           starts, lengths, packed, shift, alpha, beta, beta_sum, seed, epoch, first_doc, progressive,
           topic_prior, p_indptr, p_topics, p_values, inv_denom, coef, s_block, doc_list, listed, q_cum, p_cum):
    """One Gibbs sweep over every token in order; with ``progressive`` the tokens are unassigned on
    entry (and the counts zero) and each is drawn given the tokens before it. Returns s as updated
    token by token (the caches are left as at the end of the sweep, for tests).

    The prior pseudo-counts N_wk of term w are ``p_values[p_indptr[w]:p_indptr[w + 1]]`` (topics
    ``p_topics``), and ``topic_prior[k]`` = N_k; they join the word bucket, so s and r keep their form.
    With empty lists and zero totals every floating-point operation gives the batch sampler's bits.
    """
    s = _reset_topic_caches(topic_counts, topic_prior, alpha, beta, beta_sum, inv_denom, coef, s_block, listed)
    mask = (1 << shift) - 1
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, epoch, first_doc + d)
        lo, hi = token_indptr[d], token_indptr[d + 1]
        n_list, r = 0, 0.0
        if not progressive:
            n_list, r = _start_doc(topics, lo, hi, doc_topic, d, alpha, beta, inv_denom, coef, doc_list, listed)
        for t in range(lo, hi):
            # Remove token t (topic k_old, -1 if unassigned), draw its topic k, add it back. The body
            # stays in the loop: helpers nested in an inlined helper are not inlined by numba, and
            # the resulting calls made the sampler 1.5-2x slower.
            k_old = -1 if progressive else topics[t]
            w = token_terms[t]
            base, n = starts[w], lengths[w]
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
    return s


# ----------------------------------------------------------------------------- initialization


@numba.njit(nogil=True, cache=True)
def _random_topics(token_indptr, n_topics, seed, first_doc, topics):
    """z_t = floor(u_t K) with u_t the t-th uniform of counter_key(seed, STREAM_GIBBS, 0, first_doc + d)."""
    for d in range(token_indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, 0, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            topics[t] = min(int(uniform_from_key(key, t - lo) * n_topics), n_topics - 1)


@dataclass(frozen=True, slots=True)
class _WordLists:
    """Per-term sorted lists of nonzero n_wk, packed as ``(n_wk << shift) | k`` (see module glossary)."""

    starts: IntArray  #: (n_terms,) offset of each term's list in ``packed``
    lengths: IntArray  #: (n_terms,) number of nonzero topics of each term
    packed: np.ndarray  #: (sum_w min(K, freq_w),) int32 or int64
    shift: int


def _word_lists(
    term_topic: Int32Array, token_terms: Int32Array, n_topics: int, dtype: type | None = None
) -> _WordLists:
    """Lists of capacity min(K, frequency of w) filled from ``term_topic`` (zeros give empty lists).

    The packed dtype is int32 (half the cache footprint) unless a count could overflow its field, then
    int64; ``dtype`` forces one (tests).
    """
    n_terms = term_topic.shape[0]
    freq = np.bincount(token_terms, minlength=n_terms).astype(np.int64)
    capacity = np.minimum(freq, n_topics)
    starts = np.zeros(n_terms, dtype=np.int64)
    np.cumsum(capacity[:-1], out=starts[1:])
    shift = max(1, int(n_topics - 1).bit_length())
    if dtype is None:
        dtype = np.int32 if int(freq.max(initial=0)) < 2 ** (31 - shift) else np.int64
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
    n_topics, n_terms = alpha.shape[0], lists.lengths.shape[0]
    if prior is None:
        prior = _prior_lists(None, n_terms, n_topics)
    _sweep(token_indptr, token_terms, topics, doc_topic, topic_counts, lists.starts, lists.lengths,
           lists.packed, lists.shift, alpha, beta, prior.vocab_size * beta, seed, epoch, first_doc, progressive,
           prior.topic_prior, prior.indptr, prior.topics, prior.values,
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


def initial_state(
    block: DocBlock, params: GibbsParams, *, init: GibbsInit = "random", prior: TopicWordPrior | None = None,
) -> GibbsState:
    """Build the Gibbs state of a block: its tokens with their first topic assignments and counts.

    Parameters
    ----------
    block : DocBlock
        Its ``first_doc`` keys the random numbers of each document.
    params : GibbsParams
        K, alpha, beta and the seed.
    init : {"random", "sequential"}, default "random"
        ``"random"``: each z uniform on the K topics. ``"sequential"``: the tokens are drawn in order
        from the collapsed conditional given the tokens before them (the "progressive" start).
    prior : TopicWordPrior, optional
        Pseudo-counts N_wk (one row per term of the block) that the sequential start conditions on
        as well ("sampling from the posterior" of Gao et al. 2016); the random start ignores them.

    Returns
    -------
    GibbsState
        ``sweeps_done = 0``; alpha and beta from ``params``.

    Raises
    ------
    InvalidParameterError
        ``init`` unknown, term ids outside ``[0, block.n_terms)``, or a prior of another shape.

    Notes
    -----
    Token t of document d (global index g = ``first_doc + d``) uses the t-th uniform u of
    ``counter_key(seed, STREAM_GIBBS, 0, g)``. Random: ``z = floor(u K)``, so the initial state of a
    concatenation of blocks is the concatenation of their initial states. Sequential: u drives the
    sampler of :func:`run_sweeps` on counts that hold only the tokens drawn so far (all previous
    documents of the block, then the earlier tokens of d), so it depends on the block's earlier
    documents. NumPy equivalent of the random start::

        z = np.minimum((u * K).astype(np.int32), K - 1)

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[2, 1], [0, 3]]))), GibbsParams(n_topics=2))
    >>> state.n_tokens, int(state.topic_counts.sum()), state.doc_topic_counts.sum(axis=1).tolist()
    (6, 6, [3, 3])
    """
    if init not in ("random", "sequential"):
        raise InvalidParameterError(f"init must be 'random' or 'sequential', got {init!r}")
    _check_block(block)
    _check_prior(prior, block.n_terms, params.n_topics)
    token_indptr, token_terms = tokens_from_block(block)
    n_topics, first_doc = params.n_topics, int(block.first_doc)
    topics = np.zeros(token_terms.shape[0], dtype=np.int32)
    if init == "random":
        _random_topics(token_indptr, n_topics, params.seed, first_doc, topics)
        return state_from_topics(token_indptr, token_terms, topics, block.n_terms, params, first_doc=first_doc)
    doc_topic = np.zeros((block.n_docs, n_topics), dtype=np.int32)
    topic_counts = np.zeros(n_topics, dtype=np.int64)
    lists = _word_lists(np.zeros((block.n_terms, n_topics), dtype=np.int32), token_terms, n_topics)
    _run_sweep(token_indptr, token_terms, topics, doc_topic, topic_counts, lists, params.alpha,
               params.topic_word_prior, params.seed, 0, first_doc, True, _prior_lists(prior, block.n_terms, n_topics))
    term_topic = _term_topic_from_lists(lists, block.n_terms, n_topics)
    return GibbsState(token_indptr, token_terms, topics, doc_topic, term_topic, topic_counts, first_doc,
                      params.alpha, params.topic_word_prior, 0)


# ----------------------------------------------------------------------------- hyperparameters


@numba.njit(nogil=True, cache=True)
def _topic_count_pairs(doc_topic):
    """Histograms H_k(n) = #{d : n_dk = n} of the nonzero n_dk, run-length encoded: sorted distinct
    keys k * (max_n + 1) + n and their multiplicities (memory O(nonzero n_dk), not O(K max_n))."""
    max_n, nnz = 0, 0
    for d in range(doc_topic.shape[0]):
        for k in range(doc_topic.shape[1]):
            if doc_topic[d, k] > 0:
                nnz += 1
                max_n = max(max_n, doc_topic[d, k])
    keys = np.empty(nnz, dtype=np.int64)
    i = 0
    for d in range(doc_topic.shape[0]):
        for k in range(doc_topic.shape[1]):
            if doc_topic[d, k] > 0:
                keys[i] = k * (max_n + 1) + doc_topic[d, k]
                i += 1
    keys = np.sort(keys)
    distinct = np.empty(nnz, dtype=np.int64)
    multiplicity = np.zeros(nnz)
    n_distinct = 0
    for i in range(nnz):
        if n_distinct == 0 or keys[i] != distinct[n_distinct - 1]:
            distinct[n_distinct] = keys[i]
            n_distinct += 1
        multiplicity[n_distinct - 1] += 1.0
    return distinct[:n_distinct], multiplicity[:n_distinct], max_n + 1


@numba.njit(nogil=True, cache=True)
def _alpha_fixed_point(doc_topic, doc_lengths, alpha, max_iter, tol, floor):
    """Minka's fixed point for an asymmetric Dirichlet from the histograms of n_d and n_dk.

    alpha_k <- alpha_k sum_n H_k(n) D(n; alpha_k) / sum_n H(n) D(n; alpha_sum), with
    D(n; a) = psi(n + a) - psi(a) = sum_{i<n} 1 / (a + i) accumulated along increasing n. Updates
    ``alpha`` in place; returns the number of iterations run.
    """
    max_len = 0
    for d in range(doc_lengths.shape[0]):
        max_len = max(max_len, doc_lengths[d])
    len_hist = np.zeros(max_len + 1)
    for d in range(doc_lengths.shape[0]):
        len_hist[doc_lengths[d]] += 1.0
    keys, multiplicity, width = _topic_count_pairs(doc_topic)
    num = np.zeros(alpha.shape[0])
    for it in range(max_iter):
        alpha_sum = alpha.sum()
        denom, digamma_diff = 0.0, 0.0
        for n in range(1, max_len + 1):
            digamma_diff += 1.0 / (alpha_sum + n - 1)
            denom += len_hist[n] * digamma_diff
        if denom <= 0.0:
            return it
        num[:] = 0.0
        k_prev, n_prev, digamma_diff = -1, 0, 0.0
        for i in range(keys.shape[0]):
            k, n = keys[i] // width, keys[i] % width
            if k != k_prev:
                k_prev, n_prev, digamma_diff = k, 0, 0.0
            for m in range(n_prev, n):
                digamma_diff += 1.0 / (alpha[k] + m)
            n_prev = n
            num[k] += multiplicity[i] * digamma_diff
        change = 0.0
        for k in range(alpha.shape[0]):
            new = max(floor, alpha[k] * num[k] / denom)
            change = max(change, abs(new - alpha[k]) / alpha[k])
            alpha[k] = new
        if change < tol:
            return it + 1
    return max_iter


@numba.njit(nogil=True, cache=True)
def _beta_fixed_point(starts, lengths, packed, shift, topic_counts,
                      n_terms, beta, max_iter, tol, floor):
    """Minka's fixed point for a symmetric Dirichlet over the n_terms words of every topic.

    beta <- beta sum_{w,k} D(n_wk; beta) / (V sum_k D(n_k; V beta)); returns the new beta.
    """
    max_count = 0
    for w in range(lengths.shape[0]):
        if lengths[w] > 0:
            max_count = max(max_count, packed[starts[w]] >> shift)  # lists are sorted: first is largest
    hist = np.zeros(max_count + 1)
    for w in range(lengths.shape[0]):
        for j in range(starts[w], starts[w] + lengths[w]):
            hist[packed[j] >> shift] += 1.0
    for _ in range(max_iter):
        num, digamma_diff = 0.0, 0.0
        for n in range(1, max_count + 1):
            digamma_diff += 1.0 / (beta + n - 1)
            num += hist[n] * digamma_diff
        denom = 0.0
        for k in range(topic_counts.shape[0]):
            denom += digamma(topic_counts[k] + n_terms * beta) - digamma(n_terms * beta)
        if denom <= 0.0 or num <= 0.0:
            return beta
        new = max(floor, beta * num / (n_terms * denom))
        done = abs(new - beta) < tol * beta
        beta = new
        if done:
            break
    return beta


def _optimize_hyper(
    doc_topic: Int32Array, doc_lengths: IntArray, lists: _WordLists, topic_counts: IntArray,
    alpha: FloatArray, beta: float,
) -> tuple[FloatArray, float]:
    new_alpha = alpha.copy()
    _alpha_fixed_point(doc_topic, doc_lengths, new_alpha, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    new_beta = _beta_fixed_point(lists.starts, lists.lengths, lists.packed, lists.shift, topic_counts,
                                 lists.lengths.shape[0], beta, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    return new_alpha, float(new_beta)


def optimize_hyperparameters(state: GibbsState) -> tuple[FloatArray, float]:
    """Fixed-point estimates of alpha (asymmetric) and beta (symmetric) from the state's counts.

    Parameters
    ----------
    state : GibbsState
        Its current alpha and beta are the starting point.

    Returns
    -------
    doc_topic_prior : ndarray of shape (n_topics,), float64
    topic_word_prior : float

    Notes
    -----
    Minka (2000)'s fixed point for the Dirichlet-multinomial likelihood of the counts, iterated to a
    relative change below ``HYPER_TOL`` (at most ``HYPER_MAX_ITER`` times), with the digamma
    differences summed over histograms of the counts (Wallach 2008, section 2.4; as in MALLET)::

        alpha_k <- alpha_k sum_d [psi(n_dk + alpha_k) - psi(alpha_k)]
                           / sum_d [psi(n_d + alpha_sum) - psi(alpha_sum)]
        beta    <- beta sum_{k,w} [psi(n_wk + beta) - psi(beta)]
                        / (V sum_k [psi(n_k + V beta) - psi(V beta)])

    Values are floored at ``HYPER_FLOOR`` (a topic no document uses drives its alpha_k to 0).

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 2, 4]), np.array([0, 0, 1, 1], np.int32),
    ...                           np.array([0, 0, 1, 1], np.int32), 2, GibbsParams(n_topics=2))
    >>> alpha, beta = optimize_hyperparameters(state)
    >>> bool(alpha[0] < 0.1 and beta < 0.01)
    True
    """
    lists = _word_lists(state.term_topic_counts, state.token_terms, state.n_topics)
    doc_lengths = np.diff(state.token_indptr)
    return _optimize_hyper(state.doc_topic_counts, doc_lengths, lists, state.topic_counts,
                           np.asarray(state.doc_topic_prior, dtype=np.float64), state.topic_word_prior)


# ----------------------------------------------------------------------------- sweeps


def run_sweeps(
    state: GibbsState, params: GibbsParams, n_sweeps: int, *, optimize_every: int = 0, burn_in: int = 0,
    prior: TopicWordPrior | None = None,
) -> GibbsState:
    """Run ``n_sweeps`` collapsed Gibbs sweeps over every token of the state.

    Parameters
    ----------
    state : GibbsState
        Not modified. Its ``doc_topic_prior`` and ``topic_word_prior`` are the alpha and beta used.
    params : GibbsParams
        Gives the seed; ``params.n_topics`` must equal the state's.
    n_sweeps : int
        At least 0.
    optimize_every : int, default 0
        If positive, re-estimate alpha and beta (:func:`optimize_hyperparameters`) after every chain
        sweep number ``n = state.sweeps_done + s + 1`` with ``n > burn_in`` and
        ``(n - burn_in) % optimize_every == 0``. Not allowed with a ``prior``.
    burn_in : int, default 0
        Chain sweeps before the first hyperparameter update.
    prior : TopicWordPrior, optional
        Pseudo-counts N_wk, one row per term of the state (see :class:`TopicWordPrior`). Without it
        (the default) the sampler is the batch sampler, bit for bit as it was before priors existed.

    Returns
    -------
    GibbsState
        New arrays; ``sweeps_done`` increased by ``n_sweeps``, alpha and beta as last optimized.
        Its counts hold the state's tokens only, never the prior.

    Raises
    ------
    InvalidParameterError
        Mismatched K, a negative ``n_sweeps``, ``optimize_every`` or ``burn_in``, a prior of another
        shape, or ``optimize_every`` with a prior.

    Notes
    -----
    Griffiths and Steyvers (2004), eq. (5): token i of document d with term w is removed from the
    counts and redrawn from

        p(z_i = k | z_-i, w) ∝ (n_dk + alpha_k) (n_wk + N_wk + beta) / (n_k + N_k + V beta)

    with all counts excluding token i (N = 0 without a prior; V is the prior's ``vocab_size``, else
    the state's ``n_terms``); tokens are visited in document order. The draw uses one
    uniform u, the (t)-th of ``counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, first_doc + d)``
    for the t-th token of d in sweep s, so a chain run in pieces equals the chain run at once. It is
    exact inverse-CDF sampling, but walks the mass in the bucket order of Yao et al. (2009): with
    ``x = u (q + q_N + r + s)``, the topic-word bucket q in the word's list order (decreasing n_wk),
    the prior's part q_N = sum_k (n_dk + alpha_k) N_wk / (n_k + N_k + V beta) over the word's
    nonzero N_wk (by decreasing N_wk), the document bucket r in the document's list order, then the
    smoothing bucket s in topic order (see the module glossary). The topic drawn for a given u
    therefore differs from a dense ``np.searchsorted(np.cumsum(p), u * p.sum())``, but has the same
    distribution. NumPy equivalent (O(K) per token) in ``tests/reference/gibbs_numpy.py`` and, with a
    prior, ``tests/reference/sgs_numpy.py``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> params = GibbsParams(n_topics=2, seed=3)
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[4, 0], [0, 4]]))), params)
    >>> later = run_sweeps(state, params, 10)
    >>> later.sweeps_done, int(later.term_topic_counts.sum())
    (10, 8)
    """
    optimize_every = parse_int("optimize_every", optimize_every, 0)
    burn_in = parse_int("burn_in", burn_in, 0)
    if optimize_every and prior is not None:
        raise InvalidParameterError("optimize_every must be 0 with a prior: the fixed points ignore the pseudo-counts")
    final, _ = _run_chain(state, params, n_sweeps, optimize_every, burn_in, prior, None)
    return final


def run_sweeps_until(
    state: GibbsState, params: GibbsParams, max_sweeps: int, should_stop: Callable[[tuple[float, ...]], bool], *,
    prior: TopicWordPrior | None = None,
) -> tuple[GibbsState, tuple[float, ...]]:
    """Sweep as :func:`run_sweeps` until ``should_stop(trace)`` or ``max_sweeps``, tracing the perplexity.

    Parameters
    ----------
    state : GibbsState
        Not modified.
    params : GibbsParams
    max_sweeps : int
        At least 0.
    should_stop : callable
        A pure policy: ``should_stop(trace) -> bool``, called after every sweep with the trace so far.
    prior : TopicWordPrior, optional

    Returns
    -------
    state : GibbsState
        ``sweeps_done`` increased by the number of sweeps run (``len(trace) - 1``).
    trace : tuple of float
        :func:`training_perplexity` of the input state, then after every sweep.

    Raises
    ------
    InvalidParameterError
        As :func:`run_sweeps`.

    Notes
    -----
    The chain is the one :func:`run_sweeps` runs (same numbers, same sweeps), stopped early; the
    perplexity is computed between sweeps from the sampler's own word lists, without touching them.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> params = GibbsParams(n_topics=2, seed=3)
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[4, 0], [0, 4]]))), params)
    >>> later, trace = run_sweeps_until(state, params, 50, lambda trace: len(trace) > 5)
    >>> later.sweeps_done, len(trace)
    (5, 6)
    """
    return _run_chain(state, params, max_sweeps, 0, 0, prior, should_stop)


def _run_chain(
    state: GibbsState, params: GibbsParams, n_sweeps: int, optimize_every: int, burn_in: int,
    prior: TopicWordPrior | None, should_stop: Callable[[tuple[float, ...]], bool] | None,
) -> tuple[GibbsState, tuple[float, ...]]:
    """The sweep loop shared by :func:`run_sweeps` and :func:`run_sweeps_until` (word lists live throughout)."""
    if params.n_topics != state.n_topics:
        raise InvalidParameterError(f"params.n_topics is {params.n_topics} but the state has {state.n_topics} topics")
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    _check_prior(prior, state.n_terms, state.n_topics)
    topics, doc_topic = state.topics.copy(), state.doc_topic_counts.copy()
    topic_counts = state.topic_counts.astype(np.int64, copy=True)
    lists = _word_lists(state.term_topic_counts, state.token_terms, state.n_topics)
    prior_lists = _prior_lists(prior, state.n_terms, state.n_topics)
    alpha = np.array(state.doc_topic_prior, dtype=np.float64)
    beta = float(state.topic_word_prior)
    doc_lengths = np.diff(state.token_indptr)
    trace: list[float] = []

    def perplexity() -> float:
        return _perplexity_from_lists(state.token_indptr, state.token_terms, doc_topic, topic_counts, lists,
                                      prior_lists, alpha, beta)

    if should_stop is not None:
        trace.append(perplexity())
    done = 0
    while done < n_sweeps:
        sweep = state.sweeps_done + done + 1
        _run_sweep(state.token_indptr, state.token_terms, topics, doc_topic, topic_counts, lists, alpha, beta,
                   params.seed, sweep, state.first_doc, False, prior_lists)
        done += 1
        if optimize_every and sweep > burn_in and (sweep - burn_in) % optimize_every == 0:
            alpha, beta = _optimize_hyper(doc_topic, doc_lengths, lists, topic_counts, alpha, beta)
        if should_stop is not None:
            trace.append(perplexity())
            if should_stop(tuple(trace)):
                break
    term_topic = _term_topic_from_lists(lists, state.n_terms, state.n_topics)
    final = GibbsState(state.token_indptr, state.token_terms, topics, doc_topic, term_topic, topic_counts,
                       state.first_doc, alpha, beta, state.sweeps_done + done)
    return final, tuple(trace)


# ----------------------------------------------------------------------------- training perplexity


@numba.njit(nogil=True, cache=True)
def _training_log_lik(token_indptr, token_terms, doc_topic, topic_counts,
                      starts, lengths, packed, shift, topic_prior, p_indptr, p_topics, p_values, alpha, beta,
                      beta_sum):
    """sum over tokens of log sum_k theta_dk phi_kw, each (document, term) pair computed once.

    theta_dk phi_kw = (n_dk + alpha_k)(n_wk + N_wk + beta) / ((n_d + alpha_sum)(n_k + N_k + V beta)),
    summed over k in the sampler's buckets: s (all topics), r (the document's), and the word's lists.
    """
    n_topics = alpha.shape[0]
    mask = (1 << shift) - 1
    inv = np.empty(n_topics)
    s = 0.0
    for k in range(n_topics):
        inv[k] = 1.0 / (topic_counts[k] + topic_prior[k] + beta_sum)
        s += alpha[k] * beta * inv[k]
    alpha_sum = alpha.sum()
    total = 0.0
    for d in range(token_indptr.shape[0] - 1):
        lo, hi = token_indptr[d], token_indptr[d + 1]
        if hi == lo:
            continue
        r = 0.0
        for k in range(n_topics):
            r += doc_topic[d, k] * beta * inv[k]
        t = lo
        while t < hi:  # a document's tokens are grouped by term (CSR order)
            w = token_terms[t]
            run = 1
            while t + run < hi and token_terms[t + run] == w:
                run += 1
            q = 0.0
            for j in range(starts[w], starts[w] + lengths[w]):
                k = packed[j] & mask
                q += (doc_topic[d, k] + alpha[k]) * np.float64(packed[j] >> shift) * inv[k]
            for j in range(p_indptr[w], p_indptr[w + 1]):
                k = p_topics[j]
                q += (doc_topic[d, k] + alpha[k]) * p_values[j] * inv[k]
            total += run * math.log((s + r + q) / (hi - lo + alpha_sum))
            t += run
    return total


def _perplexity_from_lists(
    token_indptr: IntArray, token_terms: Int32Array, doc_topic: Int32Array, topic_counts: IntArray,
    lists: _WordLists, prior: _PriorLists, alpha: FloatArray, beta: float,
) -> float:
    n_tokens = token_terms.shape[0]
    if n_tokens == 0:
        return math.nan
    log_lik = _training_log_lik(token_indptr, token_terms, doc_topic, topic_counts, lists.starts, lists.lengths,
                                lists.packed, lists.shift, prior.topic_prior, prior.indptr, prior.topics,
                                prior.values, alpha, beta, prior.vocab_size * beta)
    return float(math.exp(-log_lik / n_tokens))


def training_perplexity(state: GibbsState, *, prior: TopicWordPrior | None = None) -> float:
    """Perplexity of the state's own tokens under its point estimates of theta and phi.

    Parameters
    ----------
    state : GibbsState
    prior : TopicWordPrior, optional
        Pseudo-counts added to the topic-word counts, one row per term of the state.

    Returns
    -------
    float
        ``exp(-sum_i log sum_k theta_dk phi_kw / n_tokens)`` (NaN without tokens), with

            theta_dk = (n_dk + alpha_k) / (n_d + alpha_sum)
            phi_kw   = (n_wk + N_wk + beta) / (n_k + N_k + V beta)

    Raises
    ------
    InvalidParameterError
        A prior of another shape.

    Notes
    -----
    The stopping criterion of streaming Gibbs (Gao et al. 2016, section 3): the training
    perplexity of the minibatch. Computed in O(K_d + K_w) per distinct (document, term) pair from
    the sampler's bucket decomposition. NumPy equivalent::

        theta = (n_dk + alpha) / (n_d + alpha.sum())[:, None]
        phi = ((n_wk + N_wk + beta) / (n_k + N_k + V * beta)).T
        np.exp(-np.log((theta[doc_of] * phi[:, token_terms].T).sum(axis=1)).mean())

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 2]), np.array([0, 1], np.int32), np.array([0, 1], np.int32),
    ...                           2, GibbsParams(n_topics=2, doc_topic_prior=1.0, topic_word_prior=1.0))
    >>> round(training_perplexity(state), 12)
    2.0
    """
    _check_prior(prior, state.n_terms, state.n_topics)
    lists = _word_lists(state.term_topic_counts, state.token_terms, state.n_topics)
    return _perplexity_from_lists(state.token_indptr, state.token_terms, state.doc_topic_counts, state.topic_counts,
                                  lists, _prior_lists(prior, state.n_terms, state.n_topics),
                                  np.asarray(state.doc_topic_prior, dtype=np.float64), float(state.topic_word_prior))


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


# ----------------------------------------------------------------------------- likelihood and phi


@numba.njit(nogil=True, cache=True)
def _log_lik_terms(doc_topic, term_topic, topic_counts, alpha, beta):
    """log p(w | z, beta) + log p(z | alpha), skipping zero counts (whose terms cancel)."""
    n_terms, n_topics = term_topic.shape
    beta_sum = n_terms * beta
    total = 0.0
    lg_beta = math.lgamma(beta)
    for k in range(n_topics):
        total += math.lgamma(beta_sum) - math.lgamma(topic_counts[k] + beta_sum)
    for w in range(n_terms):
        for k in range(n_topics):
            if term_topic[w, k] > 0:
                total += math.lgamma(term_topic[w, k] + beta) - lg_beta
    alpha_sum = alpha.sum()
    lg_alpha = np.empty(n_topics)
    for k in range(n_topics):
        lg_alpha[k] = math.lgamma(alpha[k])
    for d in range(doc_topic.shape[0]):
        n_d = 0
        for k in range(n_topics):
            n = doc_topic[d, k]
            if n > 0:
                n_d += n
                total += math.lgamma(n + alpha[k]) - lg_alpha[k]
        total += math.lgamma(alpha_sum) - math.lgamma(n_d + alpha_sum)
    return total


def joint_log_likelihood(state: GibbsState) -> float:
    """Compute log p(w, z | alpha, beta) of the state's assignments.

    Parameters
    ----------
    state : GibbsState

    Returns
    -------
    float

    Notes
    -----
    Griffiths and Steyvers (2004), eqs. (2)-(3), with the state's current alpha (asymmetric allowed)
    and beta::

        log p(w | z) = sum_k [lgamma(V beta) - lgamma(n_k + V beta)
                              + sum_w (lgamma(n_wk + beta) - lgamma(beta))]
        log p(z)     = sum_d [lgamma(alpha_sum) - lgamma(n_d + alpha_sum)
                              + sum_k (lgamma(n_dk + alpha_k) - lgamma(alpha_k))]

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 1]), np.array([0], np.int32), np.array([0], np.int32), 2,
    ...                           GibbsParams(n_topics=1, doc_topic_prior=1.0, topic_word_prior=1.0))
    >>> round(joint_log_likelihood(state), 12)  # p(w = 0 | z) = 1/2 and p(z = 0) = 1
    -0.69314718056
    """
    return float(_log_lik_terms(state.doc_topic_counts, state.term_topic_counts, state.topic_counts,
                                np.asarray(state.doc_topic_prior, dtype=np.float64), float(state.topic_word_prior)))


def topic_word_distribution(state: GibbsState) -> FloatArray:
    """The topics' word distributions phi implied by the counts.

    Parameters
    ----------
    state : GibbsState

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64
        ``phi[k, w] = (n_wk + beta) / (n_k + V beta)``; rows sum to 1.

    Notes
    -----
    Griffiths and Steyvers (2004), eq. (6), the posterior mean of phi given z.

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 1]), np.array([0], np.int32), np.array([0], np.int32), 2,
    ...                           GibbsParams(n_topics=1, topic_word_prior=1.0))
    >>> topic_word_distribution(state).tolist()
    [[0.6666666666666666, 0.3333333333333333]]
    """
    beta = float(state.topic_word_prior)
    numer = state.term_topic_counts.T.astype(np.float64) + beta
    out: FloatArray = numer / (state.topic_counts.astype(np.float64) + state.n_terms * beta)[:, None]
    return out


# ----------------------------------------------------------------------------- fold-in


@numba.njit(nogil=True, cache=True)
def _fold_in_doc(n_tok, tok_col, key_seed, doc, n_sweeps, phi_cols, alpha, chunk_cum,
                 z, doc_counts, nonzero, doc_cum):
    """Random start, then ``n_sweeps`` sweeps of one document's tokens; returns the nonzero-list length."""
    n_topics = alpha.shape[0]
    key = counter_key(key_seed, STREAM_FOLD_IN, 0, doc)
    n_nonzero = 0
    for t in range(n_tok):
        z[t] = min(int(uniform_from_key(key, t) * n_topics), n_topics - 1)
        n_nonzero = _add_token(z[t], doc_counts, nonzero, n_nonzero)
    for sweep in range(1, n_sweeps + 1):
        key = counter_key(key_seed, STREAM_FOLD_IN, sweep, doc)
        for t in range(n_tok):
            n_nonzero = _remove_token(z[t], doc_counts, nonzero, n_nonzero)
            c = tok_col[t]
            z[t] = _draw_topic(uniform_from_key(key, t), c, c, phi_cols, alpha, chunk_cum, SMOOTHING_CHUNK,
                               doc_counts, nonzero, n_nonzero, doc_cum)
            n_nonzero = _add_token(z[t], doc_counts, nonzero, n_nonzero)
    return n_nonzero


@numba.njit(nogil=True, cache=True)
def _fold_in_csr(indptr, term_ids, counts, local_cols, phi_cols,
                 alpha, chunk_cum, first_doc, seed, n_sweeps, out, tok_term, tok_col, z, doc_counts, nonzero,
                 doc_cum):
    """Fold every document in; out[d] = n_dk after the last sweep (out zero on entry)."""
    for d in range(indptr.shape[0] - 1):
        n_tok = _expand_tokens(indptr[d], indptr[d + 1], term_ids, counts, local_cols, tok_term, tok_col)
        n_nonzero = _fold_in_doc(n_tok, tok_col, seed, first_doc + d, n_sweeps, phi_cols, alpha, chunk_cum,
                                 z, doc_counts, nonzero, doc_cum)
        for i in range(n_nonzero):
            k = nonzero[i]
            out[d, k] = doc_counts[k]
            doc_counts[k] = 0


def fold_in(
    block: DocBlock, topic_word: FloatArray, doc_topic_prior: FloatArray | float, *, n_sweeps: int = 5,
    seed: int = 0,
) -> Int32Array:
    """Topic counts of held-out documents by Gibbs sampling with the topics fixed.

    Parameters
    ----------
    block : DocBlock
        Held-out documents; ``block.n_terms`` at most ``topic_word.shape[1]``.
    topic_word : ndarray of shape (n_topics, n_terms), float64
        Topic-word weights phi, finite and >= 0 (rows need not be normalized: each draw normalizes).
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha, positive.
    n_sweeps : int, default 5
        Gibbs sweeps after the random start (May et al. 2014 use 5); 0 returns the random start.
    seed : int, default 0

    Returns
    -------
    ndarray of shape (n_docs, n_topics), int32
        The counts n_dk after the last sweep; rows sum to the documents' lengths.

    Raises
    ------
    InvalidParameterError
        Shapes, alpha, ``n_sweeps`` or ``seed`` do not fit.
    NumericalError
        ``topic_word`` is negative or not finite on a term of the block.

    Notes
    -----
    Per document (global index g = ``first_doc + d``), the tokens are its terms repeated by count in
    CSR order. Token t starts at ``floor(u K)`` with u the t-th uniform of
    ``counter_key(seed, STREAM_FOLD_IN, 0, g)``; in sweep ``s = 1 .. n_sweeps`` it is removed and
    redrawn from ``p(z = k) ∝ (n_dk + alpha_k) phi_kw`` with the t-th uniform of
    ``counter_key(seed, STREAM_FOLD_IN, s, g)``. The draw is the two-bucket inverse CDF of
    :func:`topicflow.models.hybrid_estep.hybrid_estep_block` (document bucket over the used topics in
    increasing order, then the smoothing bucket alpha_k phi_kw in topic order); NumPy equivalent::

        r_cum = np.cumsum(n_d * phi[:, w]); s_cum = np.cumsum(alpha * phi[:, w])
        x = u * (r_cum[-1] + s_cum[-1])
        k = (np.searchsorted(r_cum, x, "right") if x < r_cum[-1]
             else np.searchsorted(s_cum, x - r_cum[-1], "right"))

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[5, 0], [0, 3]])))
    >>> fold_in(block, np.array([[1.0, 0.0], [0.0, 1.0]]), 0.1).tolist()
    [[5, 0], [0, 3]]
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    if phi.ndim != 2 or phi.shape[1] < block.n_terms:
        raise InvalidParameterError(
            f"topic_word must have shape (n_topics, n_terms >= {block.n_terms}), got {phi.shape!r}"
        )
    n_topics = phi.shape[0]
    alpha = _parse_alpha(doc_topic_prior, n_topics, "")
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    seed = parse_int("seed", seed, 0, _MAX_SEED)
    _check_block(block)
    present, local_cols = _present_terms(block.term_ids, block.n_terms)
    phi_cols = np.ascontiguousarray(phi[:, present].T)  # (n_present, K): one term's weights contiguous
    chunk_cum = np.empty((present.shape[0], -(-n_topics // SMOOTHING_CHUNK)))
    n_bad = _smoothing_chunks(np.arange(present.shape[0]), phi_cols, alpha, SMOOTHING_CHUNK, chunk_cum)
    if n_bad or not np.all(np.isfinite(chunk_cum[:, -1] if chunk_cum.size else chunk_cum)):
        raise NumericalError(
            f"topic_word has {n_bad} negative or non-finite values on the terms of the block starting at "
            f"document {block.first_doc} (or alpha * phi overflows); expected finite values >= 0"
        )
    max_tokens = int(np.diff(tokens_from_block(block)[0]).max(initial=0))
    out = np.zeros((block.n_docs, n_topics), dtype=np.int32)
    _fold_in_csr(block.indptr.astype(np.int64), block.term_ids, block.counts, local_cols, phi_cols, alpha,
                 chunk_cum, int(block.first_doc), seed, n_sweeps, out,
                 np.empty(max_tokens, dtype=np.int64), np.empty(max_tokens, dtype=np.int64),
                 np.empty(max_tokens, dtype=np.int64), np.zeros(n_topics, dtype=np.int64),
                 np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.float64))
    return out
