"""State and hyperparameters of the collapsed Gibbs sampler."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import expand_tokens
from topicflow.models.common.validation import parse_dirichlet_prior, parse_int, parse_positive_float

_MAX_SEED = 2**63


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
        alpha = parse_dirichlet_prior("GibbsParams.doc_topic_prior", self.doc_topic_prior, self.n_topics)
        prior: float | FloatArray = float(alpha[0]) if np.ndim(self.doc_topic_prior) == 0 else alpha
        object.__setattr__(self, "doc_topic_prior", prior)
        object.__setattr__(self, "topic_word_prior",
                           parse_positive_float("GibbsParams.topic_word_prior", self.topic_word_prior))

    @property
    def alpha(self) -> FloatArray:
        """alpha as a fresh ``(n_topics,)`` float64 vector."""
        return parse_dirichlet_prior("GibbsParams.doc_topic_prior", self.doc_topic_prior, self.n_topics)

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
        parse_dirichlet_prior("GibbsState.doc_topic_prior", self.doc_topic_prior, n_topics)
        object.__setattr__(self, "topic_word_prior",
                           parse_positive_float("GibbsState.topic_word_prior", self.topic_word_prior))
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


#: The former name of :func:`topicflow.models.common.blocks.expand_tokens`, kept for existing callers.
tokens_from_block = expand_tokens


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


#: The arrays of a :class:`GibbsState` snapshot, by field name.
STATE_ARRAYS: tuple[str, ...] = ("token_indptr", "token_terms", "topics", "doc_topic_counts", "term_topic_counts",
                                 "topic_counts", "doc_topic_prior")


def to_arrays(state: GibbsState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split a Gibbs state into arrays and JSON-able scalars (a snapshot; never pickled).

    Parameters
    ----------
    state : GibbsState
        The sampler state to save; not modified.

    Returns
    -------
    arrays : dict of str to ndarray
        The fields named in :data:`STATE_ARRAYS`, under their own names.
    meta : dict of str to Any
        ``first_doc``, ``topic_word_prior`` and ``sweeps_done``.
    """
    arrays = {name: np.asarray(getattr(state, name)) for name in STATE_ARRAYS}
    meta = {"first_doc": int(state.first_doc), "topic_word_prior": float(state.topic_word_prior),
            "sweeps_done": int(state.sweeps_done)}
    return arrays, meta


def from_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> GibbsState:
    """Rebuild the state :func:`to_arrays` split: ``from_arrays(*to_arrays(s))`` equals ``s``.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        Every name of :data:`STATE_ARRAYS`.
    meta : mapping of str to Any
        The scalars ``first_doc``, ``topic_word_prior`` and ``sweeps_done``.

    Returns
    -------
    GibbsState
        The saved state (validated like any new state).
    """
    return GibbsState(**{name: np.asarray(arrays[name]) for name in STATE_ARRAYS}, first_doc=int(meta["first_doc"]),
                      topic_word_prior=float(meta["topic_word_prior"]), sweeps_done=int(meta["sweeps_done"]))
