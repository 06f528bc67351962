"""Streaming Gibbs sampling with decay (SGS) for LDA: one minibatch at a time, old counts as the prior.

This module owns the math of Gao, Chen and Zhu (2016), Algorithm 2. Documents arrive in minibatches.
For minibatch t, collapsed Gibbs runs on that minibatch's tokens only, with the topic-word prior
``beta + N_wk``, where N holds the decayed topic-word counts of the minibatches before it; when the
minibatch is done, its counts n_wk (of the final sample) are folded in and everything decays once:

    N <- decay * (N + n(minibatch t))

Assignments of earlier minibatches are not kept. Each minibatch starts from "sampling from the
posterior", in one of two readings of Gao et al.'s section 3.1 (:data:`SGS_INITS`), or from a uniform
start, then sweeps until its training perplexity has not improved for ``patience`` sweeps, or
``max_iter`` sweeps.

The paper writes the decay two ways: its recurrence ``beta_t = lambda (beta_{t-1} + n_t)`` (section
2.2) decays the prior beta with the counts, its Algorithm 4 (``N <- lambda (N + Delta N)``, prior
``beta + N``) decays the counts only. ``decay_beta=False`` (the default) is Algorithm 4; with
``decay_beta=True`` the prior of minibatch t (t minibatches done before it) is
``beta lambda^t + N``, which is the recurrence exactly (:func:`prior_beta`). The sampler is the SparseLDA kernel of
:mod:`topicflow.models.lda.gibbs.sparse` with a :class:`~topicflow.models.lda.gibbs.state.TopicWordPrior`, and the
counter-based random numbers are those of batch Gibbs (``STREAM_GIBBS``, keyed by sweep and global
document), so one minibatch holding the whole corpus with ``decay = 1`` and a uniform start is batch
collapsed Gibbs, draw for draw.

The update of N (:func:`apply_delta`) is shared with the parameter server of the distributed form
(DSGS, Algorithm 4, in :mod:`topicflow.pipeline.streaming.dsgs`): a worker computes
:func:`minibatch_delta` against the rows it fetched, the server applies it. Pure NumPy + numba: no
dask, distributed, zarr, logging or I/O here.

Glossary (Gao et al. 2016; Griffiths and Steyvers 2004):
    term_topic_counts (N_wk, (n_terms, n_topics), float64): decayed topic-word counts of the
        minibatches seen, term-major like :class:`~topicflow.models.lda.gibbs.state.GibbsState`
    topic_counts (N_k, (n_topics,), float64): N summed over terms, decayed with it
    delta (n_wk, (n_rows, n_topics), int32): counts of one minibatch's final sample, for the rows
        ``term_ids`` of the terms it uses
    decay (lambda): applied once per minibatch, in (0, 1]; 1 keeps every count forever
    doc_topic_prior (alpha), topic_word_prior (beta): symmetric beta; the prior of minibatch t is
        beta + N_wk, so ``topic_word_var = N + beta`` is the model's lambda
    perplexity: exp(-mean log sum_k theta_dk phi_kw) of the minibatch's own tokens, with
        theta_dk = (n_dk + alpha_k) / (n_d + alpha_sum), phi_kw = (n_wk + N_wk + beta) / (n_k + N_k + V beta)

References
----------
Gao, Chen and Zhu (2016). Streaming Gibbs sampling for LDA model. arXiv:1601.01142.
Griffiths and Steyvers (2004). Finding scientific topics. PNAS 101, 5228-5235.
Yao, Mimno and McCallum (2009). Efficient methods for topic model inference on streaming document
collections. KDD.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray, SGSInit, SGSStopReason
from topicflow.errors import InvalidParameterError
from topicflow.models.common.assignments import most_frequent_topics
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.common.dirichlet import posterior_mean
from topicflow.models.common.validation import parse_int
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps, run_sweeps_until
from topicflow.models.lda.gibbs.state import (
    GibbsParams,
    GibbsState,
    TopicWordPrior,
    state_from_topics,
)

#: How each minibatch's assignments start (Gao et al. 2016, section 3.1, "sampling from posterior"):
#:
#: * ``"posterior-token"``: every token drawn in order from its conditional given the prior, the
#:   documents of the minibatch before it and the earlier tokens of its own document (one sequential
#:   pass: the default, and what ``"posterior"`` meant before both readings existed);
#: * ``"posterior-document"``: document by document, z_d drawn from p(z_d | w_d, prior and the
#:   documents before it), approximated by that sequential pass over d followed by ``init_sweeps``
#:   Gibbs sweeps over d alone, before d's counts join the posterior of the next document;
#: * ``"random"``: uniform on the topics.
SGS_INITS: tuple[str, ...] = ("posterior-token", "posterior-document", "random")
#: Older names of the starts, read from saved settings.
SGS_INIT_ALIASES = {"posterior": "posterior-token"}
#: Why a minibatch's sweeps ended.
StopReason = SGSStopReason
#: Smallest topic-word prior :func:`prior_beta` returns (``beta lambda^t`` would underflow to 0 on
#: long streams with ``decay_beta``, and the sampler needs beta > 0).
BETA_FLOOR = 1e-300
#: Added to the seed for the random numbers of the ``"posterior-document"`` start, so its sweeps
#: over one document never reuse the uniforms of the minibatch's own sweeps.
_DOC_INIT_SEED_OFFSET = 0x5D0C_1A1F_0B5E_ED01

#: Version of the layout written by :func:`to_arrays`.
STATE_FORMAT_VERSION = 1
_MAX_SEED = 2**63


@dataclass(frozen=True, slots=True)
class SGSParams:
    """Hyperparameters of streaming Gibbs sampling.

    Attributes
    ----------
    n_topics : int
        K, at least 1.
    doc_topic_prior : float or ndarray of shape (n_topics,), default 0.1
        alpha, as in :class:`~topicflow.models.lda.gibbs.state.GibbsParams`.
    topic_word_prior : float, default 0.01
        beta, symmetric, positive.
    decay : float, default 1.0
        lambda in (0, 1]: after each minibatch ``N <- decay * (N + n)``.
    max_iter : int, default 100
        Most Gibbs sweeps per minibatch (after its initialization), at least 1.
    patience : int, default 10
        Stop a minibatch once its training perplexity has not improved on its best value for this
        many sweeps (Gao et al. use 10).
    init : {"posterior-token", "posterior-document", "random"}, default "posterior-token"
        Start of each minibatch's assignments (see :data:`SGS_INITS`; ``"posterior"`` is read as
        ``"posterior-token"``).
    seed : int, default 0
        Seed of the counter-based random numbers, in [0, 2**63).
    init_sweeps : int, default 5
        ``init="posterior-document"``: Gibbs sweeps over each document alone after its sequential
        draw, at least 0 (0 has the law of ``"posterior-token"``).
    decay_beta : bool, default False
        Decay the prior beta with the counts: the prior after t minibatches is ``beta decay^t + N``
        (section 2.2's recurrence) instead of ``beta + N`` (Algorithm 4).

    Raises
    ------
    InvalidParameterError
        A field outside its allowed values.

    Examples
    --------
    >>> SGSParams(n_topics=4, decay=0.9).gibbs_params().alpha
    array([0.1, 0.1, 0.1, 0.1])
    """

    n_topics: int
    doc_topic_prior: float | FloatArray = 0.1
    topic_word_prior: float = 0.01
    decay: float = 1.0
    max_iter: int = 100
    patience: int = 10
    init: SGSInit = "posterior-token"
    seed: int = 0
    init_sweeps: int = 5
    decay_beta: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_iter", parse_int("SGSParams.max_iter", self.max_iter, 1))
        object.__setattr__(self, "patience", parse_int("SGSParams.patience", self.patience, 1))
        object.__setattr__(self, "seed", parse_int("SGSParams.seed", self.seed, 0, _MAX_SEED))
        object.__setattr__(self, "init_sweeps", parse_int("SGSParams.init_sweeps", self.init_sweeps, 0))
        object.__setattr__(self, "init", parse_sgs_init(self.init))
        if not isinstance(self.decay_beta, (bool, np.bool_)):
            raise InvalidParameterError(f"SGSParams.decay_beta must be True or False, got {self.decay_beta!r}")
        object.__setattr__(self, "decay_beta", bool(self.decay_beta))
        decay = self.decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float, np.floating, np.integer)) \
                or not 0.0 < float(decay) <= 1.0:
            raise InvalidParameterError(f"SGSParams.decay must be a number in (0, 1], got {decay!r}")
        object.__setattr__(self, "decay", float(decay))
        gibbs = GibbsParams(n_topics=self.n_topics, doc_topic_prior=self.doc_topic_prior,
                            topic_word_prior=self.topic_word_prior, seed=self.seed)
        object.__setattr__(self, "n_topics", gibbs.n_topics)
        object.__setattr__(self, "doc_topic_prior", gibbs.doc_topic_prior)
        object.__setattr__(self, "topic_word_prior", gibbs.topic_word_prior)

    @property
    def alpha(self) -> FloatArray:
        """alpha as a fresh ``(n_topics,)`` float64 vector."""
        return self.gibbs_params().alpha

    def gibbs_params(self) -> GibbsParams:
        """The parameters of the per-minibatch collapsed Gibbs sampler."""
        return GibbsParams(n_topics=self.n_topics, doc_topic_prior=self.doc_topic_prior,
                           topic_word_prior=self.topic_word_prior, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        prior = self.doc_topic_prior
        return {"n_topics": self.n_topics, "topic_word_prior": self.topic_word_prior, "decay": self.decay,
                "max_iter": self.max_iter, "patience": self.patience, "init": self.init, "seed": self.seed,
                "init_sweeps": self.init_sweeps, "decay_beta": self.decay_beta,
                "doc_topic_prior": prior if isinstance(prior, float) else [float(a) for a in prior]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SGSParams:
        """Inverse of :meth:`to_dict`."""
        prior = data["doc_topic_prior"]
        return cls(n_topics=data["n_topics"], doc_topic_prior=prior if np.ndim(prior) == 0 else np.asarray(prior),
                   topic_word_prior=data["topic_word_prior"], decay=data["decay"], max_iter=data.get("max_iter", data.get("max_iters")),
                   patience=data["patience"], init=data["init"], seed=data["seed"],
                   init_sweeps=data.get("init_sweeps", 5), decay_beta=data.get("decay_beta", False))


def parse_sgs_init(init: object) -> SGSInit:
    """The start named ``init``, with older names read as their new ones.

    Parameters
    ----------
    init : str
        One of :data:`SGS_INITS` or :data:`SGS_INIT_ALIASES`.

    Returns
    -------
    str
        One of :data:`SGS_INITS`.

    Raises
    ------
    InvalidParameterError
        Any other value.

    Examples
    --------
    >>> parse_sgs_init("posterior")
    'posterior-token'
    """
    name = SGS_INIT_ALIASES.get(init, init) if isinstance(init, str) else init
    if name not in SGS_INITS:
        raise InvalidParameterError(f"the SGS start must be one of {', '.join(SGS_INITS)}, got {init!r}")
    return name  # type: ignore[return-value]


def prior_beta(params: SGSParams, minibatches_done: int) -> float:
    """The symmetric part of the topic-word prior after ``minibatches_done`` minibatches.

    Parameters
    ----------
    params : SGSParams
    minibatches_done : int
        Minibatches folded into N so far (t).

    Returns
    -------
    float
        ``beta`` (counts-only decay, Algorithm 4), or ``max(beta * decay ** t, BETA_FLOOR)`` with
        ``params.decay_beta`` (the recurrence ``beta_t = decay (beta_{t-1} + n_t)`` of section 2.2,
        whose symmetric part after t steps is ``beta decay^t``).

    Examples
    --------
    >>> prior_beta(SGSParams(n_topics=2, topic_word_prior=0.1, decay=0.5, decay_beta=True), 2)
    0.025
    >>> prior_beta(SGSParams(n_topics=2, topic_word_prior=0.1, decay=0.5), 2)
    0.1
    """
    beta = float(params.topic_word_prior)
    if not params.decay_beta or params.decay == 1.0:
        return beta
    return max(beta * params.decay ** int(minibatches_done), BETA_FLOOR)


@dataclass(frozen=True, slots=True)
class SGSState:
    """The decayed topic-word counts of a stream and how far it got.

    Attributes
    ----------
    term_topic_counts : ndarray of shape (n_terms, n_topics), float64
        N_wk, term-major.
    topic_counts : ndarray of shape (n_topics,), float64
        N_k, updated by the same recursion as N (equal to ``term_topic_counts.sum(axis=0)`` up to
        rounding).
    minibatches_done : int
    docs_seen : int
        Documents observed; a stream read in store order resumes at this position.
    tokens_seen : int

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit, or negative counters.

    Notes
    -----
    ``__post_init__`` converts the arrays to float64 (copying only when needed) and checks shapes,
    not contents (they come from :func:`empty_state` and :func:`observe_minibatch`);
    :func:`from_arrays` checks contents too.
    """

    term_topic_counts: FloatArray
    topic_counts: FloatArray
    minibatches_done: int = 0
    docs_seen: int = 0
    tokens_seen: int = 0

    def __post_init__(self) -> None:
        counts = np.ascontiguousarray(self.term_topic_counts, dtype=np.float64)
        totals = np.ascontiguousarray(self.topic_counts, dtype=np.float64)
        if counts.ndim != 2 or counts.shape[1] < 1 or totals.shape != (counts.shape[1],):
            raise InvalidParameterError(
                f"SGSState: term_topic_counts must have shape (n_terms, n_topics) and topic_counts (n_topics,); "
                f"got {counts.shape!r} and {totals.shape!r}"
            )
        object.__setattr__(self, "term_topic_counts", counts)
        object.__setattr__(self, "topic_counts", totals)
        for name in ("minibatches_done", "docs_seen", "tokens_seen"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InvalidParameterError(f"SGSState.{name} must be an integer >= 0, got {value!r}")
            object.__setattr__(self, name, int(value))

    @property
    def n_terms(self) -> int:
        return int(self.term_topic_counts.shape[0])

    @property
    def n_topics(self) -> int:
        return int(self.term_topic_counts.shape[1])


@dataclass(frozen=True, slots=True)
class SGSDiagnostics:
    """What happened in one minibatch.

    Attributes
    ----------
    first_doc : int
        Global position of the minibatch's first document.
    n_docs, n_tokens : int
    n_terms_used : int
        Distinct terms of the minibatch: the rows of its delta.
    iterations : int
        Gibbs sweeps run after the initialization.
    perplexity : float
        Training perplexity of the final sample (NaN for a minibatch without tokens).
    trace : tuple of float
        Training perplexity after the initialization, then after every sweep.
    stop_reason : {"no_improvement", "max_iter", "empty"}
    doc_topics : ndarray of shape (n_docs,), int64
        Each document's most frequent topic in the final sample (0 for an empty document), for NMI.
    """

    first_doc: int
    n_docs: int
    n_tokens: int
    n_terms_used: int
    iterations: int
    perplexity: float
    trace: tuple[float, ...]
    stop_reason: StopReason
    doc_topics: IntArray


# ----------------------------------------------------------------------------- state


def empty_state(n_terms: int, params: SGSParams) -> SGSState:
    """The state of a stream before its first minibatch: N = 0.

    Parameters
    ----------
    n_terms : int
        Vocabulary size V, at least 1 (it grows with :func:`grow_vocabulary`).
    params : SGSParams

    Returns
    -------
    SGSState

    Examples
    --------
    >>> empty_state(3, SGSParams(n_topics=2)).term_topic_counts.shape
    (3, 2)
    """
    if isinstance(n_terms, bool) or not isinstance(n_terms, (int, np.integer)) or n_terms < 1:
        raise InvalidParameterError(f"n_terms must be an integer >= 1, got {n_terms!r}")
    return SGSState(np.zeros((int(n_terms), params.n_topics)), np.zeros(params.n_topics))


def grow_vocabulary(state: SGSState, n_terms: int) -> SGSState:
    """The state with a vocabulary of ``n_terms``; the new terms have zero counts.

    Parameters
    ----------
    state : SGSState
    n_terms : int
        At least ``state.n_terms`` (vocabularies only grow: new terms are appended).

    Returns
    -------
    SGSState
        New arrays (the state itself when ``n_terms == state.n_terms``).

    Raises
    ------
    InvalidParameterError
        ``n_terms`` below the state's.

    Examples
    --------
    >>> state = grow_vocabulary(empty_state(2, SGSParams(n_topics=3)), 5)
    >>> state.n_terms, float(state.term_topic_counts[2:].sum())
    (5, 0.0)
    """
    if isinstance(n_terms, bool) or not isinstance(n_terms, (int, np.integer)) or n_terms < state.n_terms:
        raise InvalidParameterError(
            f"n_terms must be an integer >= the state's {state.n_terms} terms (vocabularies only grow), got {n_terms!r}"
        )
    if n_terms == state.n_terms:
        return state
    counts = np.zeros((int(n_terms), state.n_topics))
    counts[: state.n_terms] = state.term_topic_counts
    return SGSState(counts, state.topic_counts.copy(), state.minibatches_done, state.docs_seen, state.tokens_seen)


def to_arrays(state: SGSState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The state as numeric arrays and JSON-able metadata (for npz + JSON; never pickle).

    Parameters
    ----------
    state : SGSState

    Returns
    -------
    arrays : dict of str to ndarray
        ``term_topic_counts`` and ``topic_counts`` (the state's arrays, not copies).
    meta : dict
        ``kind``, ``format_version`` and the counters.

    Examples
    --------
    >>> arrays, meta = to_arrays(empty_state(2, SGSParams(n_topics=3)))
    >>> sorted(arrays), meta["kind"], meta["docs_seen"]
    (['term_topic_counts', 'topic_counts'], 'sgs', 0)
    """
    arrays = {"term_topic_counts": state.term_topic_counts, "topic_counts": state.topic_counts}
    meta = {"kind": "sgs", "format_version": STATE_FORMAT_VERSION, "minibatches_done": state.minibatches_done,
            "docs_seen": state.docs_seen, "tokens_seen": state.tokens_seen}
    return arrays, meta


def from_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> SGSState:
    """Inverse of :func:`to_arrays`, with the contents checked (this is where saved data comes back in).

    Parameters
    ----------
    arrays : mapping of str to ndarray
    meta : mapping

    Returns
    -------
    SGSState

    Raises
    ------
    InvalidParameterError
        Another kind or a newer format, missing arrays, or negative or non-finite counts.

    Examples
    --------
    >>> state = from_arrays(*to_arrays(empty_state(2, SGSParams(n_topics=3))))
    >>> state.n_terms, state.n_topics
    (2, 3)
    """
    if meta.get("kind") != "sgs" or int(meta.get("format_version", 0)) > STATE_FORMAT_VERSION:
        raise InvalidParameterError(
            f"not a streaming-Gibbs state of format <= {STATE_FORMAT_VERSION}: kind {meta.get('kind')!r}, "
            f"format_version {meta.get('format_version')!r}"
        )
    missing = [name for name in ("term_topic_counts", "topic_counts") if name not in arrays]
    if missing:
        raise InvalidParameterError(f"streaming-Gibbs state lacks the arrays {missing!r}")
    state = SGSState(np.array(arrays["term_topic_counts"], dtype=np.float64),
                     np.array(arrays["topic_counts"], dtype=np.float64), meta["minibatches_done"],
                     meta["docs_seen"], meta["tokens_seen"])
    for values in (state.term_topic_counts, state.topic_counts):
        if values.size and not (np.all(np.isfinite(values)) and values.min() >= 0):
            raise InvalidParameterError("streaming-Gibbs state holds negative or non-finite counts")
    return state


def topic_word_var(state: SGSState, params: SGSParams) -> FloatArray:
    """The model's Dirichlet parameters of the topics, lambda = N + beta_t (the next minibatch's prior).

    ``beta_t`` is :func:`prior_beta` after ``state.minibatches_done`` minibatches (beta itself unless
    ``params.decay_beta``).

    Parameters
    ----------
    state : SGSState
    params : SGSParams

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64

    Examples
    --------
    >>> topic_word_var(empty_state(2, SGSParams(n_topics=1, topic_word_prior=0.5)), SGSParams(1, 0.1, 0.5)).tolist()
    [[0.5, 0.5]]
    """
    out: FloatArray = state.term_topic_counts.T + prior_beta(params, state.minibatches_done)
    return out


def topic_word_distribution(state: SGSState, params: SGSParams) -> FloatArray:
    """Compute phi = lambda normalized by rows: the topics the next minibatch's prior stands for.

    :func:`topicflow.models.common.dirichlet.posterior_mean` of lambda = N + beta.
    """
    return posterior_mean(topic_word_var(state, params))


# ----------------------------------------------------------------------------- one minibatch


def minibatch_terms(block: DocBlock) -> IntArray:
    """The distinct term ids of a minibatch, ascending: the rows its prior and delta use.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> minibatch_terms(block_from_csr(sp.csr_matrix(np.array([[0, 2, 0, 1], [0, 1, 0, 0]])))).tolist()
    [1, 3]
    """
    return np.unique(block.term_ids).astype(np.int64)


def has_stalled(trace: Sequence[float], patience: int) -> bool:
    """Stopping policy: the last ``patience`` values brought no improvement on the best one.

    Parameters
    ----------
    trace : sequence of float
        Training perplexities, oldest first.
    patience : int

    Returns
    -------
    bool
        True when the first minimum of ``trace`` is at least ``patience`` entries before its end.

    Examples
    --------
    >>> has_stalled([9.0, 5.0, 6.0, 5.0], 2), has_stalled([9.0, 5.0, 6.0, 5.0], 3)
    (True, False)
    """
    return len(trace) - 1 - int(np.argmin(np.asarray(trace))) >= patience


def _local_block(block: DocBlock, terms: IntArray) -> DocBlock:
    """The block with term ids renumbered 0..len(terms) - 1 (order kept, so rows stay sorted)."""
    local = np.searchsorted(terms, block.term_ids).astype(np.int32)
    return DocBlock(block.indptr, local, block.counts, block.doc_ids, block.first_doc, max(1, terms.shape[0]),
                    block.language, block.labels, block.timestamps)


def _check_inputs(block: DocBlock, prior_rows: FloatArray, topic_counts: FloatArray, params: SGSParams,
                  vocab_size: int) -> tuple[FloatArray, FloatArray, IntArray]:
    terms = minibatch_terms(block)
    rows = np.ascontiguousarray(prior_rows, dtype=np.float64)
    totals = np.ascontiguousarray(topic_counts, dtype=np.float64)
    if rows.shape != (terms.shape[0], params.n_topics) or totals.shape != (params.n_topics,):
        raise InvalidParameterError(
            f"minibatch starting at document {block.first_doc}: prior_rows must have shape "
            f"({terms.shape[0]}, {params.n_topics}) (one row per term of minibatch_terms(block)) and topic_counts "
            f"({params.n_topics},); got {rows.shape!r} and {totals.shape!r}"
        )
    if block.n_terms > vocab_size:
        raise InvalidParameterError(
            f"minibatch starting at document {block.first_doc} has a vocabulary of {block.n_terms} terms but "
            f"vocab_size is {vocab_size}; grow the counts first (grow_vocabulary)"
        )
    return rows, totals, terms


def _document_posterior_start(local: DocBlock, gibbs: GibbsParams, prior: TopicWordPrior,
                              init_sweeps: int) -> GibbsState:
    """The ``"posterior-document"`` start: each document drawn given the prior and the documents before it.

    Document d (in block order) gets the sequential draw of :func:`initial_state` against the prior
    plus the counts of documents 0..d-1, then ``init_sweeps`` sweeps over d alone against the same
    counts (a Gibbs chain whose target is p(z_d | w_d, prior, z_0..z_{d-1})); its counts are then added.
    Its random numbers are keyed by a seed offset from the minibatch's, per global document.
    """
    token_indptr, token_terms = expand_tokens(local)
    topics = np.empty(token_terms.shape[0], dtype=np.int32)
    running = np.zeros((max(1, local.n_terms), gibbs.n_topics))
    running_totals = prior.topic_counts.copy()
    doc_gibbs = GibbsParams(n_topics=gibbs.n_topics, doc_topic_prior=gibbs.doc_topic_prior,
                            topic_word_prior=gibbs.topic_word_prior,
                            seed=(gibbs.seed + _DOC_INIT_SEED_OFFSET) % _MAX_SEED)
    for d in range(local.n_docs):
        doc = local.slice(d, d + 1)
        if doc.n_tokens == 0:
            continue
        terms = np.unique(doc.term_ids)
        doc_local = _local_block(doc, terms.astype(np.int64))
        doc_prior = TopicWordPrior(prior.term_topic[terms] + running[terms], running_totals, prior.vocab_size)
        state = initial_state(doc_local, doc_gibbs, init="sequential", prior=doc_prior)
        if init_sweeps:
            state = run_sweeps(state, doc_gibbs, init_sweeps, prior=doc_prior)
        topics[token_indptr[d]:token_indptr[d + 1]] = state.topics
        running[terms] += state.term_topic_counts[: terms.shape[0]]
        running_totals = running_totals + state.topic_counts
    return state_from_topics(token_indptr, token_terms, topics, local.n_terms, gibbs, first_doc=int(local.first_doc))


def _initial_minibatch_state(local: DocBlock, gibbs: GibbsParams, params: SGSParams,
                             prior: TopicWordPrior) -> GibbsState:
    if params.init == "posterior-document":
        return _document_posterior_start(local, gibbs, prior, params.init_sweeps)
    return initial_state(local, gibbs, init="sequential" if params.init == "posterior-token" else "random",
                         prior=prior)


def sample_minibatch(
    block: DocBlock, prior_rows: FloatArray, topic_counts: FloatArray, params: SGSParams, *, vocab_size: int,
    beta: float | None = None,
) -> tuple[GibbsState, SGSDiagnostics]:
    """Collapsed Gibbs on one minibatch with the prior ``beta + N`` (Gao et al. 2016, Algorithm 2, steps 3-8).

    Parameters
    ----------
    block : DocBlock
        The minibatch; its ``first_doc`` keys the random numbers of each document.
    prior_rows : ndarray of shape (n_rows, n_topics), float64
        N_wk of the terms ``minibatch_terms(block)``, in that order.
    topic_counts : ndarray of shape (n_topics,), float64
        N_k over the whole vocabulary.
    params : SGSParams
    vocab_size : int
        V (for ``V beta``), at least ``block.n_terms``.
    beta : float, optional
        The symmetric part of the prior (default ``params.topic_word_prior``; :func:`prior_beta`
        gives it for a stream with ``decay_beta``).

    Returns
    -------
    state : GibbsState
        The final sample, with term ids renumbered: local term i is ``minibatch_terms(block)[i]``.
    diagnostics : SGSDiagnostics

    Raises
    ------
    InvalidParameterError
        Shapes that do not fit, or ``vocab_size < block.n_terms``.

    Notes
    -----
    The start is :func:`~topicflow.models.lda.gibbs.chain.initial_state` (``"sequential"`` with the prior
    for ``init="posterior-token"``, ``"random"`` for ``"random"``) or, for ``"posterior-document"``,
    that sequential draw one document at a time followed by ``init_sweeps`` sweeps over the document
    alone (see :data:`SGS_INITS`); the sweeps are
    :func:`~topicflow.models.lda.gibbs.chain.run_sweeps_until` with the policy :func:`has_stalled`, at most
    ``max_iter`` of them. Renumbering the terms changes no draw: the sampler's order depends on
    counts and topics, never on term ids. NumPy equivalent of one draw::

        p = (n_dk + alpha) * (n_wk + N_wk + beta) / (n_k + N_k + V * beta)

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[3, 0], [0, 2]])))
    >>> state, diag = sample_minibatch(block, np.zeros((2, 2)), np.zeros(2), SGSParams(n_topics=2), vocab_size=2)
    >>> int(state.term_topic_counts.sum()), diag.n_tokens, diag.iterations >= 1
    (5, 5, True)
    """
    rows, totals, terms = _check_inputs(block, prior_rows, topic_counts, params, vocab_size)
    gibbs = params.gibbs_params()
    if beta is not None and beta != gibbs.topic_word_prior:
        gibbs = GibbsParams(n_topics=gibbs.n_topics, doc_topic_prior=gibbs.doc_topic_prior, topic_word_prior=beta,
                            seed=gibbs.seed)
    local = _local_block(block, terms)
    prior = TopicWordPrior(rows if terms.shape[0] else np.zeros((1, params.n_topics)), totals, vocab_size)
    state = _initial_minibatch_state(local, gibbs, params, prior)
    if state.n_tokens == 0:
        diagnostics = SGSDiagnostics(int(block.first_doc), block.n_docs, 0, 0, 0, math.nan, (), "empty",
                                     most_frequent_topics(state.doc_topic_counts))
        return state, diagnostics
    patience = params.patience
    state, trace = run_sweeps_until(state, gibbs, params.max_iter, lambda tr: has_stalled(tr, patience), prior=prior)
    reason: StopReason = "no_improvement" if has_stalled(trace, patience) else "max_iter"
    diagnostics = SGSDiagnostics(int(block.first_doc), block.n_docs, state.n_tokens, int(terms.shape[0]),
                                 len(trace) - 1, trace[-1], trace, reason,
                                 most_frequent_topics(state.doc_topic_counts))
    return state, diagnostics


def minibatch_delta(
    block: DocBlock, prior_rows: FloatArray, topic_counts: FloatArray, params: SGSParams, *, vocab_size: int,
    beta: float | None = None,
) -> tuple[IntArray, Int32Array, SGSDiagnostics]:
    """The counts one minibatch adds to N: what a DSGS worker pushes to the server.

    Parameters
    ----------
    block : DocBlock
        The minibatch, as in :func:`sample_minibatch`.
    prior_rows : ndarray of shape (n_rows, n_topics), float64
        N_wk of the terms ``minibatch_terms(block)``, in that order.
    topic_counts : ndarray of shape (n_topics,), float64
        N_k over the whole vocabulary.
    params : SGSParams
        Sampler settings.
    vocab_size : int
        V (for ``V beta``), at least ``block.n_terms``.
    beta : float, optional
        The symmetric part of the prior, as in :func:`sample_minibatch`.

    Returns
    -------
    term_ids : ndarray of shape (n_rows,), int64
        ``minibatch_terms(block)``, ascending.
    delta : ndarray of shape (n_rows, n_topics), int32
        Counts n_wk of the final sample for those terms (every row sums to the term's count in the
        minibatch).
    diagnostics : SGSDiagnostics

    Raises
    ------
    InvalidParameterError
        As :func:`sample_minibatch`.

    Notes
    -----
    The delta is sparse by rows: it costs ``n_rows * n_topics * 4`` bytes against
    ``n_terms * n_topics * 8`` for a dense update of N (Gao et al. 2016, section 2.4: communication
    proportional to the minibatch's vocabulary).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[0, 3, 0], [0, 0, 2]])))
    >>> rows, delta, _ = minibatch_delta(block, np.zeros((2, 2)), np.zeros(2), SGSParams(n_topics=2), vocab_size=3)
    >>> rows.tolist(), delta.sum(axis=1).tolist()
    ([1, 2], [3, 2])
    """
    state, diagnostics = sample_minibatch(block, prior_rows, topic_counts, params, vocab_size=vocab_size, beta=beta)
    terms = minibatch_terms(block)
    return terms, state.term_topic_counts[: terms.shape[0]], diagnostics


def apply_delta(
    counts: FloatArray, delta_rows: IntArray, delta_values: np.ndarray, decay: float, *, topic_counts: FloatArray,
    out: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Fold one minibatch's counts into N and decay: ``N <- decay * (N + delta)`` (Algorithm 2, step 9).

    Parameters
    ----------
    counts : ndarray of shape (n_terms, n_topics), float64
        N.
    delta_rows : ndarray of shape (n_rows,), int
        Distinct term ids in ``[0, n_terms)``.
    delta_values : ndarray of shape (n_rows, n_topics), int or float
        The minibatch's counts for those terms (finite, >= 0).
    decay : float
        Decay factor lambda in (0, 1], applied once, to every row (also the rows the minibatch did
        not use).
    topic_counts : ndarray of shape (n_topics,), float64
        N_k, updated the same way: ``decay * (N_k + delta.sum(axis=0))``.
    out : (ndarray, ndarray), optional
        Where to write the new N and N_k (they may be ``counts`` and ``topic_counts`` themselves, for
        an in-place update: the parameter server's). Default: new arrays.

    Returns
    -------
    counts : ndarray of shape (n_terms, n_topics), float64
        The new N (``out[0]`` when given).
    topic_counts : ndarray of shape (n_topics,), float64
        The new N_k (``out[1]`` when given).

    Raises
    ------
    InvalidParameterError
        Shapes, rows that repeat or fall outside ``[0, n_terms)``, negative or non-finite values, or a
        decay outside (0, 1].

    Notes
    -----
    The rows get ``N[rows] + delta`` first and the whole matrix is then multiplied by ``decay``
    (skipped when it is 1), so the result is bitwise ``decay * (N + delta)`` elementwise, whoever
    applies it. The one place this update is written down: SGS, its DSGS server and the tests use it.

    Examples
    --------
    >>> counts, totals = apply_delta(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1]), np.array([[2, 0]]), 0.5,
    ...                              topic_counts=np.array([4.0, 6.0]))
    >>> counts.tolist(), totals.tolist()
    ([[0.5, 1.0], [2.5, 2.0]], [3.0, 3.0])
    """
    counts = np.asarray(counts)
    rows = np.asarray(delta_rows)
    values = np.asarray(delta_values)
    totals = np.asarray(topic_counts)
    _check_delta(counts, rows, values, totals, decay)
    if out is None:
        out = (counts.astype(np.float64, copy=True), totals.astype(np.float64, copy=True))
    else:
        if out[0].shape != counts.shape or out[1].shape != totals.shape or out[0].dtype != np.float64 \
                or out[1].dtype != np.float64:
            raise InvalidParameterError("out must be two float64 arrays shaped like counts and topic_counts")
        if out[0] is not counts:
            np.copyto(out[0], counts)
        if out[1] is not totals:
            np.copyto(out[1], totals)
    new_counts, new_totals = out
    if rows.shape[0]:
        new_counts[rows] += values
        new_totals += values.sum(axis=0)
    if decay != 1.0:
        new_counts *= decay
        new_totals *= decay
    return new_counts, new_totals


def _check_delta(counts: np.ndarray, rows: np.ndarray, values: np.ndarray, totals: np.ndarray, decay: float) -> None:
    problems = []
    if counts.ndim != 2 or totals.shape != (counts.shape[1],):
        problems.append(f"counts {counts.shape!r} and topic_counts {totals.shape!r} do not fit")
    elif rows.ndim != 1 or values.shape != (rows.shape[0], counts.shape[1]):
        problems.append(f"delta rows {rows.shape!r} and values {values.shape!r} do not fit counts {counts.shape!r}")
    elif rows.shape[0]:
        if not np.issubdtype(rows.dtype, np.integer) or rows.min() < 0 or rows.max() >= counts.shape[0]:
            problems.append(f"delta rows must be integer term ids in [0, {counts.shape[0]})")
        elif np.unique(rows).shape[0] != rows.shape[0]:
            problems.append("delta rows repeat a term id")
        if not (np.all(np.isfinite(values)) and values.min() >= 0):
            problems.append("delta values must be finite and >= 0")
    if isinstance(decay, bool) or not isinstance(decay, (int, float, np.floating)) or not 0.0 < decay <= 1.0:
        problems.append(f"decay must be in (0, 1], got {decay!r}")
    if problems:
        raise InvalidParameterError("apply_delta: " + "; ".join(problems))


def observe_minibatch(
    state: SGSState, block: DocBlock, params: SGSParams, *, copy: bool = True,
) -> tuple[SGSState, SGSDiagnostics]:
    """One step of streaming Gibbs: sample the minibatch against N, then fold it in with decay.

    Parameters
    ----------
    state : SGSState
        The counts of the minibatches before this one; grown first if the block has a larger vocabulary.
    block : DocBlock
        The next minibatch (its ``first_doc`` is its global position in the stream).
    params : SGSParams
    copy : bool, default True
        With False the state's arrays are updated in place and shared by the returned state, as
        scikit-learn's ``copy`` flags do (for drivers that own the state; the input state must not be
        used afterwards).

    Returns
    -------
    state : SGSState
        ``minibatches_done``, ``docs_seen`` and ``tokens_seen`` advanced.
    diagnostics : SGSDiagnostics

    Raises
    ------
    InvalidParameterError
        Term ids or counts the sampler rejects.

    Notes
    -----
    Gao et al. (2016), Algorithm 2: :func:`minibatch_delta` against the rows
    ``state.term_topic_counts[minibatch_terms(block)]`` (with ``beta = prior_beta(params,
    state.minibatches_done)``), then :func:`apply_delta` with ``decay``. A minibatch without tokens
    still decays N once.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> params = SGSParams(n_topics=2, decay=0.5)
    >>> block = block_from_csr(sp.csr_matrix(np.array([[3, 0], [0, 2]])))
    >>> state, diag = observe_minibatch(empty_state(2, params), block, params)
    >>> float(state.term_topic_counts.sum()), state.docs_seen, diag.stop_reason in ("no_improvement", "max_iter")
    (2.5, 2, True)
    """
    if block.n_terms > state.n_terms:
        state = grow_vocabulary(state, block.n_terms)
        copy = False  # the grown arrays are new already
    terms = minibatch_terms(block)
    rows, delta, diagnostics = minibatch_delta(block, state.term_topic_counts[terms], state.topic_counts, params,
                                               vocab_size=state.n_terms,
                                               beta=prior_beta(params, state.minibatches_done))
    out = None if copy else (state.term_topic_counts, state.topic_counts)
    counts, totals = apply_delta(state.term_topic_counts, rows, delta, params.decay, topic_counts=state.topic_counts,
                                 out=out)
    new = SGSState(counts, totals, state.minibatches_done + 1, state.docs_seen + block.n_docs,
                   state.tokens_seen + diagnostics.n_tokens)
    return new, diagnostics
