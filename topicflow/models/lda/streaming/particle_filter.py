"""Rao-Blackwellized particle filter for LDA over a token stream, with o-LDA and incremental Gibbs as special cases.

This module owns the streaming samplers of Canini, Shi and Griffiths (2009) and the reservoir
rejuvenation of May, Clemmer and Van Durme (2014): a :class:`ParticleCloud` (weights, the shared-lineage
store of every particle's counts and assignments, the rejuvenation source and the stream position)
and :func:`observe`, which feeds it the tokens of a :class:`~topicflow.models.common.blocks.DocBlock`. The
per-token work runs in numba kernels; Python only validates, expands a block and grows arrays when
the lineage store is full. Pure NumPy + numba; must not import dask, distributed, zarr or logging,
and does no I/O (:func:`cloud_to_arrays` returns arrays and JSON-able metadata for ``io`` to write).

Per token i (term w, document d) and particle p, with counts that exclude token i::

    q_p(k) = (n_wk + beta) / (n_k + V beta) * (n_dk + alpha)         proposal (Canini et al., eq. 2)
    weight_p *= sum_k q_p(k) / (n_d + K alpha)                       = P(w_i | z_{i-1}, w_{i-1})
    z_i ~ q_p, then the counts include it.

Then weights are normalized; when ESS = 1 / sum_p w_p^2 < ess_threshold * P the cloud is resampled
(:mod:`topicflow.models.common.resampling`), weights reset to 1/P, and every particle rejuvenates: for r
tokens j drawn from the source (the whole history, a window of recent tokens, or a reservoir of
tokens, :mod:`topicflow.models.common.reservoir`) z_j is redrawn from its full collapsed conditional.
o-LDA is one particle without rejuvenation; incremental Gibbs is one particle that rejuvenates after
every token (``rejuvenate_after="token"``).

Glossary (Canini et al. 2009; May et al. 2014):
    n_topics (K), n_terms (V), n_particles (P)
    doc_topic_prior (alpha), topic_word_prior (beta): symmetric Dirichlet priors
    n_wk (term row), n_k (total row), n_dk (document row): counts stored per particle in the lineage
        store under the row keys ``w``, ``V`` and ``V + 1 + d`` (d the global document position)
    z_j: topic of the token at stream position j, stored under topic key j while j is in the source
    stream position: index of a token over the whole stream, initialization prefix included
    source: the tokens rejuvenation may pick (history / window / reservoir), as (position, term, doc)
    weights (w, (n_particles,)): normalized importance weights; ESS: effective sample size

References
----------
Canini, Shi and Griffiths (2009). Online inference of topics with latent Dirichlet allocation.
AISTATS, PMLR 5:65-72 (Algorithms 2-4; the shared-lineage representation of section 4).
May, Clemmer and Van Durme (2014). Particle filter rejuvenation and latent Dirichlet allocation. ACL.
Griffiths and Steyvers (2004). Finding scientific topics. PNAS 101, 5228-5235.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numba
import numpy as np

from topicflow._typing import (
    FloatArray,
    Int32Array,
    IntArray,
    RejuvenateAfter,
    RejuvenationSource,
    ResamplingScheme,
)
from topicflow.errors import InvalidParameterError
from topicflow.models.common import lineage as lin
from topicflow.models.common.blocks import DocBlock, expand_entries_into
from topicflow.models.common.categorical import draw_dense, draw_uniform
from topicflow.models.common.dirichlet import posterior_mean
from topicflow.models.common.resampling import (
    SCHEME_CODES,
    effective_sample_size_njit,
    resample_into,
)
from topicflow.models.common.reservoir import reservoir_key, reservoir_slot, window_slot
from topicflow.models.common.rng import (
    STREAM_PARTICLE,
    STREAM_REJUVENATE,
    STREAM_RESAMPLE,
    counter_key,
    uniform_from_key,
)
from topicflow.models.common.validation import parse_choice, parse_float, parse_int, parse_positive_float
from topicflow.models.lda.gibbs.conditional import collapsed_conditional
from topicflow.models.lda.gibbs.conditional import token_conditional as gibbs_token_conditional

_MAX_SEED = 2**63
#: ``epoch`` of the token-order shuffle in the STREAM_PARTICLE stream (particles use epochs 0..P-1).
TOKEN_ORDER_EPOCH = 1 << 62
#: Integer codes of the rejuvenation sources, as the kernels receive them.
SOURCE_CODES: dict[str, int] = {"history": 0, "window": 1, "reservoir": 2}
HISTORY, WINDOW, RESERVOIR = 0, 1, 2
#: Largest stream length: counts are int32.
MAX_TOKENS = 2**31 - 1
CLOUD_FORMAT = "topicflow-particle-cloud"
CLOUD_FORMAT_VERSION = 1

# Kernel parameter vectors.
I_TOPICS, I_TERMS, I_SEED, I_SOURCE, I_SOURCE_SIZE, I_STEPS, I_EVERY_TOKEN, I_SCHEME, I_FIRST_POS = range(9)
F_ALPHA, F_BETA, F_ESS = range(3)
# Cursor of the resumable kernel: token in block, phase, rejuvenation particle and step, flag, resamplings,
# and the rejuvenation draws done (one per particle and token of R(i), May et al. 2014's MCMC steps).
C_TOKEN, C_PHASE, C_PARTICLE, C_STEP, C_REJUVENATE, C_RESAMPLED, C_REJUVENATED = range(7)
PROPOSE, WEIGH, MERGE, REJUVENATE = 0, 1, 2, 3


# ------------------------------------------------------------------------------------ parameters


@dataclass(frozen=True, slots=True)
class PFParams:
    """Hyperparameters of the streaming samplers (particle filter, o-LDA, incremental Gibbs).

    Attributes
    ----------
    n_topics : int
        K >= 1.
    n_terms : int
        V >= 1; term ids of observed blocks must be below it.
    doc_topic_prior : float, default 0.1
        alpha > 0 (symmetric).
    topic_word_prior : float, default 0.01
        beta > 0 (symmetric).
    n_particles : int, default 1
        P >= 1.
    ess_threshold : float, default 0.5
        Resample when ESS < ess_threshold * P; in [0, 1] (0: never).
    resampling : {"multinomial", "residual", "stratified", "systematic"}, default "systematic"
    rejuvenation_steps : int, default 0
        r >= 0 tokens redrawn per particle and rejuvenation.
    rejuvenation_source : {"history", "window", "reservoir"}, default "reservoir"
        Where the rejuvenated tokens are drawn from: every token so far, the last ``source_size``
        tokens, or a reservoir of ``source_size`` tokens (Vitter's Algorithm R).
    source_size : int, default 1000
        Capacity of the window or reservoir (>= 1; ignored for "history").
    rejuvenate_after : {"resample", "token"}, default "resample"
        Rejuvenate after each resampling (particle filter) or after every token (incremental Gibbs).
    seed : int, default 0
        In [0, 2**63).

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> PFParams.particle_filter(5, 100, n_particles=8).rejuvenate_after
    'resample'
    >>> PFParams.olda(5, 100).algorithm
    'olda'
    """

    n_topics: int
    n_terms: int
    doc_topic_prior: float = 0.1
    topic_word_prior: float = 0.01
    n_particles: int = 1
    ess_threshold: float = 0.5
    resampling: ResamplingScheme = "systematic"
    rejuvenation_steps: int = 0
    rejuvenation_source: RejuvenationSource = "reservoir"
    source_size: int = 1000
    rejuvenate_after: RejuvenateAfter = "resample"
    seed: int = 0

    def __post_init__(self) -> None:
        owner = "PFParams"
        for name, low, high in (("n_topics", 1, None), ("n_terms", 1, None), ("n_particles", 1, None),
                                ("rejuvenation_steps", 0, None), ("source_size", 1, None), ("seed", 0, _MAX_SEED)):
            object.__setattr__(self, name, parse_int(f"{owner}.{name}", getattr(self, name), low, high))
        for name in ("doc_topic_prior", "topic_word_prior"):
            object.__setattr__(self, name, parse_positive_float(f"{owner}.{name}", getattr(self, name)))
        object.__setattr__(self, "ess_threshold",
                           parse_float(f"{owner}.ess_threshold", self.ess_threshold, 0.0, 1.0, open_low=False))
        parse_choice(f"{owner}.resampling", self.resampling, tuple(SCHEME_CODES))
        parse_choice(f"{owner}.rejuvenation_source", self.rejuvenation_source, tuple(SOURCE_CODES))
        parse_choice(f"{owner}.rejuvenate_after", self.rejuvenate_after, ("resample", "token"))

    @classmethod
    def olda(cls, n_topics: int, n_terms: int, **kwargs: Any) -> PFParams:
        """o-LDA (Canini et al. 2009, Algorithm 2): one particle, each token sampled once, never revisited.

        Nothing is rejuvenated, so the source defaults to a window of one token (minimal memory).
        """
        settings: dict[str, Any] = {"rejuvenation_source": "window", "source_size": 1, **kwargs}
        return cls(n_topics, n_terms, n_particles=1, rejuvenation_steps=0, **settings)

    @classmethod
    def incremental_gibbs(cls, n_topics: int, n_terms: int, rejuvenation_steps: int = 10,
                          **kwargs: Any) -> PFParams:
        """Incremental Gibbs sampler (Algorithm 3): one particle, r tokens redrawn after every token."""
        return cls(n_topics, n_terms, n_particles=1, rejuvenation_steps=rejuvenation_steps,
                   rejuvenate_after="token", **kwargs)

    @classmethod
    def particle_filter(cls, n_topics: int, n_terms: int, n_particles: int = 100,
                        rejuvenation_steps: int = 30, **kwargs: Any) -> PFParams:
        """Particle filter (Algorithm 4) with rejuvenation after each resampling."""
        return cls(n_topics, n_terms, n_particles=n_particles, rejuvenation_steps=rejuvenation_steps,
                   rejuvenate_after="resample", **kwargs)

    @property
    def algorithm(self) -> str:
        """The :data:`~topicflow._typing.StreamAlgorithm` name these settings amount to."""
        if self.n_particles > 1:
            return "pf"
        # One particle is never resampled, so it rejuvenates only when asked to after every token.
        return "incgibbs" if self.rejuvenation_steps > 0 and self.rejuvenate_after == "token" else "olda"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PFParams:
        """Inverse of :meth:`to_dict`."""
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


# ---------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class ParticleCloud:
    """The whole state of a streaming sampler.

    The dataclass is frozen but its arrays are mutable: :func:`observe` may update ``weights``, the
    store and the source in place and returns a new cloud; the caller must not use the old one again.

    Attributes
    ----------
    params : PFParams
        The settings the cloud was built with; :func:`observe` requires the same.
    weights : ndarray of shape (n_particles,), float64
        Normalized importance weights.
    store : LineageStore
        Every particle's term, total and document rows and the topics of the source's tokens.
    source_positions : ndarray of shape (source_capacity,), int64
    source_terms : ndarray of shape (source_capacity,), int32
    source_docs : ndarray of shape (source_capacity,), int64
        The rejuvenation source, (stream position, term, global document) per slot; the first
        :attr:`n_source` slots are filled. "history" is indexed by stream position.
    n_tokens : int
        Tokens seen so far (the initialization prefix included): the next token's stream position.
    next_doc : int
        Smallest global position the next observed document may have.
    """

    params: PFParams
    weights: FloatArray
    store: lin.LineageStore
    source_positions: IntArray
    source_terms: Int32Array
    source_docs: IntArray
    n_tokens: int
    next_doc: int

    @property
    def n_particles(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_source(self) -> int:
        """Filled slots of the rejuvenation source."""
        return _n_filled(self.params, self.n_tokens)


def _n_filled(params: PFParams, n_tokens: int) -> int:
    return n_tokens if params.rejuvenation_source == "history" else min(n_tokens, params.source_size)


@dataclass(frozen=True)
class PFDiagnostics:
    """What one :func:`observe` call saw and did.

    Attributes
    ----------
    n_docs, n_tokens : int
        Documents and tokens processed by the call.
    doc_positions : ndarray of shape (n_docs,), int64
        Global positions of the processed documents.
    doc_topics : ndarray of shape (n_docs,), int64
        argmax_k n_dk of each document when it ended, in the particle of largest weight (first on
        ties); -1 for an empty document.
    log_evidence : float
        sum over tokens of log(sum_p w_p P(w_i | particle p)) with the normalized weights before the
        token: the filter's estimate of log p(w_new | w_old).
    ess_min : float
        Smallest ESS after a token's reweighting (nan without tokens).
    resample_positions : ndarray of shape (n_resamplings,), int64
        Stream positions of the tokens after which the cloud was resampled.
    rejuvenation_steps_done : int
        Rejuvenation draws made by the call, summed over particles (one per particle and token of
        each rejuvenation sequence R(i)); 0 whenever ``rejuvenation_steps`` is 0.
    depth_max, depth_mean, n_nodes, n_entries, nbytes :
        Lineage store size at the end of the call (see :func:`memory_stats`).
    """

    n_docs: int
    n_tokens: int
    doc_positions: IntArray
    doc_topics: IntArray
    log_evidence: float
    ess_min: float
    resample_positions: IntArray
    rejuvenation_steps_done: int
    depth_max: int
    depth_mean: float
    n_nodes: int
    n_entries: int
    nbytes: int


# --------------------------------------------------------------------------------------- kernels


@numba.njit(nogil=True, cache=True)
def _source_slot(source, t, size, seed):
    """Slot token ``t`` takes in the source, or -1 (dropped by the reservoir)."""
    if source == HISTORY:
        return t
    if source == WINDOW:
        return window_slot(t, size)
    return reservoir_slot(t, size, reservoir_key(seed, t))


@numba.njit(nogil=True, cache=True)
def _propose(st, p, t, term, doc_key, ip, fp, q):
    """Draw z_t in particle p from the proposal, add it to the counts; return P(w_t | particle p).

    The particle's leaf must be reserved for 3 row keys, 3 rows and 1 topic key.
    """
    leaf = st.leaf[p]
    n_topics = ip[I_TOPICS]
    rw = lin.writable_row(st, leaf, term)
    rt = lin.writable_row(st, leaf, ip[I_TERMS])
    rd = lin.writable_row(st, leaf, doc_key)
    alpha, beta = fp[F_ALPHA], fp[F_BETA]
    collapsed_conditional(st.rows[rd], st.rows[rw], st.rows[rt], -1, alpha, beta, ip[I_TERMS] * beta, q)
    n_doc = 0
    for k in range(n_topics):
        n_doc += st.rows[rd, k]
    k, total = draw_dense(q, uniform_from_key(counter_key(ip[I_SEED], STREAM_PARTICLE, p, t), 0))
    st.rows[rw, k] += 1
    st.rows[rt, k] += 1
    st.rows[rd, k] += 1
    if _source_slot(ip[I_SOURCE], t, ip[I_SOURCE_SIZE], ip[I_SEED]) >= 0:
        lin.write_topic(st, leaf, t, k)
    return total / (np.float64(n_doc) + n_topics * alpha)


@numba.njit(nogil=True, cache=True)
def _proposal_phase(st, t, term, doc_key, ip, fp, lik, q):
    """Every particle draws token t (all or nothing: False if the store lacks room)."""
    n_particles = st.leaf.shape[0]
    need = np.zeros(2, dtype=np.int64)
    for p in range(n_particles):
        lin.node_space(st, st.leaf[p], 3, 1, need)
    if not lin.has_space(st, need[0], need[1], 3 * n_particles):
        return False
    for p in range(n_particles):
        lin.reserve_node(st, st.leaf[p], 3, 1)
    for p in range(n_particles):
        lik[p] = _propose(st, p, t, term, doc_key, ip, fp, q)
    return True


@numba.njit(nogil=True, cache=True)
def _reweight(weights, lik, acc):
    """w_p <- w_p L_p / sum_q w_q L_q; add log sum_q w_q L_q to acc[0]; return the ESS."""
    evidence = 0.0
    for p in range(weights.shape[0]):
        evidence += weights[p] * lik[p]
    acc[0] += math.log(evidence)
    for p in range(weights.shape[0]):
        weights[p] = weights[p] * lik[p] / evidence
    ess = effective_sample_size_njit(weights)
    acc[1] = min(acc[1], ess)
    return ess


@numba.njit(nogil=True, cache=True)
def _weigh_phase(st, t, term, doc, ip, fp, weights, lik, cursor, resampled_at,
                 source_positions, source_terms, source_docs, acc):
    """Reweight, resample if the ESS is low, enter token t into the source, decide on rejuvenation."""
    n_particles = weights.shape[0]
    ess = _reweight(weights, lik, acc)
    resampled = False
    if n_particles > 1 and ess < fp[F_ESS] * n_particles:
        ancestors = np.empty(n_particles, dtype=np.int64)
        resample_into(weights, ip[I_SCHEME], counter_key(ip[I_SEED], STREAM_RESAMPLE, 0, t), ancestors)
        lin.rewire(st, ancestors)
        weights[:] = 1.0 / n_particles
        resampled_at[cursor[C_RESAMPLED]] = t
        cursor[C_RESAMPLED] += 1
        resampled = True
    slot = _source_slot(ip[I_SOURCE], t, ip[I_SOURCE_SIZE], ip[I_SEED])
    if slot >= 0:
        source_positions[slot] = t
        source_terms[slot] = term
        source_docs[slot] = doc
    cursor[C_REJUVENATE] = ip[I_STEPS] > 0 and (ip[I_EVERY_TOKEN] != 0 or resampled)


@numba.njit(nogil=True, cache=True)
def _rejuvenate_one(st, p, t, step, n_filled, ip, fp, source_positions, source_terms,
                    source_docs, q):
    """Redraw the topic of the ``step``-th token of particle p's rejuvenation sequence R(t).

    The token is source slot floor(u_{2 step} n_filled); its topic is drawn with u_{2 step + 1} from
    the full conditional (its own assignment removed). Returns False, with nothing changed, if the
    store lacks room for the write.
    """
    key = counter_key(ip[I_SEED], STREAM_REJUVENATE, p, t)
    slot = draw_uniform(uniform_from_key(key, 2 * step), n_filled)
    position, term = source_positions[slot], np.int64(source_terms[slot])
    doc_key = ip[I_TERMS] + 1 + source_docs[slot]
    leaf = st.leaf[p]
    own = lin.find_topic(st, leaf, position)
    rw, hw = lin.find_row_holder(st, leaf, term)
    rt, ht = lin.find_row_holder(st, leaf, ip[I_TERMS])
    rd, hd = lin.find_row_holder(st, leaf, doc_key)
    if own < 0 or rw < 0 or rt < 0 or rd < 0:
        raise RuntimeError("particle filter: a source token's topic or counts are missing")
    beta = fp[F_BETA]
    collapsed_conditional(st.rows[rd], st.rows[rw], st.rows[rt], own, fp[F_ALPHA], beta, ip[I_TERMS] * beta, q)
    k, _ = draw_dense(q, uniform_from_key(key, 2 * step + 1))
    if k == own:
        return True
    if not lin.reserve_leaf(st, p, 3, 1, 3):
        return False
    # The rows just found: no second walk up the lineage for the copy-on-write.
    for row_key, row, holder in ((term, rw, hw), (ip[I_TERMS], rt, ht), (doc_key, rd, hd)):
        r = lin.own_row(st, leaf, row_key, row, holder)
        st.rows[r, own] -= 1
        st.rows[r, k] += 1
    lin.write_topic(st, leaf, position, k)
    return True


@numba.njit(nogil=True, cache=True)
def _rejuvenation_phase(st, t, ip, fp, cursor, source_positions, source_terms, source_docs, q):
    """Every particle redraws r source tokens; resumable at (particle, step) through the cursor."""
    n_filled = t + 1 if ip[I_SOURCE] == HISTORY else min(t + 1, ip[I_SOURCE_SIZE])
    while cursor[C_PARTICLE] < st.leaf.shape[0]:
        while cursor[C_STEP] < ip[I_STEPS]:
            if not _rejuvenate_one(st, cursor[C_PARTICLE], t, cursor[C_STEP], n_filled, ip, fp,
                                   source_positions, source_terms, source_docs, q):
                return False
            cursor[C_STEP] += 1
            cursor[C_REJUVENATED] += 1
        cursor[C_STEP] = 0
        cursor[C_PARTICLE] += 1
    return True


@numba.njit(nogil=True, cache=True)
def _record_doc_topic(st, weights, doc_key, out, d):
    """out[d] = argmax_k n_dk in the particle of largest weight (first maximum on ties)."""
    best = 0
    for p in range(weights.shape[0]):
        if weights[p] > weights[best]:
            best = p
    r = lin.find_row(st, st.leaf[best], doc_key)
    top = 0
    for k in range(st.rows.shape[1]):
        if st.rows[r, k] > st.rows[r, top]:
            top = k
    out[d] = top


@numba.njit(nogil=True, cache=True)
def _run_tokens(st, cursor, tok_term, tok_doc, tok_end, ip, fp, weights, lik, q,
                source_positions, source_terms, source_docs, acc, resampled_at, doc_topics):
    """Process the block's tokens from ``cursor`` on; False when the store needs room (then resume).

    Each phase of a token is all-or-nothing, so after :func:`lineage.make_room` a new call continues
    exactly where this one stopped.
    """
    while cursor[C_TOKEN] < tok_term.shape[0]:
        i = cursor[C_TOKEN]
        t = ip[I_FIRST_POS] + i
        term, doc = np.int64(tok_term[i]), tok_doc[i]
        if cursor[C_PHASE] == PROPOSE:
            if not _proposal_phase(st, t, term, ip[I_TERMS] + 1 + doc, ip, fp, lik, q):
                return False
            cursor[C_PHASE] = WEIGH
        if cursor[C_PHASE] == WEIGH:
            _weigh_phase(st, t, term, doc, ip, fp, weights, lik, cursor, resampled_at, source_positions,
                         source_terms, source_docs, acc)
            cursor[C_PHASE] = MERGE
        if cursor[C_PHASE] == MERGE:
            if not lin.merge_pending(st):
                return False
            cursor[C_PHASE] = REJUVENATE
        if cursor[C_REJUVENATE] and not _rejuvenation_phase(st, t, ip, fp, cursor, source_positions,
                                                            source_terms, source_docs, q):
            return False
        if tok_end[i] >= 0:
            _record_doc_topic(st, weights, ip[I_TERMS] + 1 + doc, doc_topics, tok_end[i])
        cursor[C_TOKEN] += 1
        cursor[C_PHASE] = PROPOSE
        cursor[C_PARTICLE] = 0
        cursor[C_STEP] = 0
        cursor[C_REJUVENATE] = 0
    return True


@numba.njit(nogil=True, cache=True)
def _expand_block(indptr, term_ids, counts, first_doc, seed, tok_term, tok_doc, tok_end):
    """Tokens of every document in order: its CSR terms repeated by count, then shuffled.

    The shuffle is a Fisher-Yates permutation keyed by (seed, global document position), so term
    order does not bias the early tokens and the order never depends on the block. ``tok_end[i]`` is
    the local document index when token i is its document's last, else -1.
    """
    n = 0
    for d in range(indptr.shape[0] - 1):
        start = n
        n = expand_entries_into(term_ids, counts, indptr[d], indptr[d + 1], tok_term, start)
        tok_doc[start:n] = first_doc + d
        tok_end[start:n] = -1
        key = counter_key(seed, STREAM_PARTICLE, TOKEN_ORDER_EPOCH, first_doc + d)
        for i in range(n - start - 1, 0, -1):
            j = int(uniform_from_key(key, i) * (i + 1))
            tok_term[start + i], tok_term[start + j] = tok_term[start + j], tok_term[start + i]
        if n > start:
            tok_end[n - 1] = d


@numba.njit(nogil=True, cache=True)
def _offer_prefix(source, size, seed, terms, docs, positions_out, terms_out, docs_out):
    """Enter the initialization tokens (stream positions 0, 1, ...) into the source, in order."""
    for t in range(terms.shape[0]):
        slot = _source_slot(source, t, size, seed)
        if slot >= 0:
            positions_out[slot] = t
            terms_out[slot] = terms[t]
            docs_out[slot] = docs[t]


# ----------------------------------------------------------------------------------------- public


def token_conditional(term_counts: Int32Array, topic_counts: Int32Array, doc_counts: Int32Array,
                      params: PFParams, *, exclude: int = -1) -> FloatArray:
    """Unnormalized topic weights of one token given the counts (the kernels' computation).

    Parameters
    ----------
    term_counts, topic_counts, doc_counts : ndarray of shape (n_topics,), int
        The counts n_wk, n_k and n_dk, including the token itself when ``exclude >= 0``.
    params : PFParams
    exclude : int, default -1
        The token's current topic, removed from the three counts (rejuvenation's full conditional);
        -1 for a new token (the proposal).

    Returns
    -------
    ndarray of shape (n_topics,), float64
        ``(n_wk + beta) / (n_k + V beta) * (n_dk + alpha)`` with the token excluded. Their sum
        divided by ``n_d + K alpha`` is the predictive probability P(w | counts).

    Notes
    -----
    Canini et al. (2009), equation (3); Griffiths and Steyvers (2004), equation (5): the one
    :func:`topicflow.models.lda.gibbs.conditional.collapsed_conditional` the kernels call.

    Examples
    --------
    >>> p = PFParams(n_topics=2, n_terms=4, doc_topic_prior=1.0, topic_word_prior=1.0)
    >>> token_conditional(np.array([0, 0]), np.array([0, 0]), np.array([0, 0]), p).tolist()
    [0.25, 0.25]
    """
    rows = [np.ascontiguousarray(a, dtype=np.int64) for a in (term_counts, topic_counts, doc_counts)]
    if any(r.shape != (params.n_topics,) for r in rows):
        raise InvalidParameterError(f"counts must have shape ({params.n_topics},)")
    return gibbs_token_conditional(rows[2], rows[0], rows[1], params.doc_topic_prior, params.topic_word_prior,
                                   params.n_terms, exclude=int(exclude))


def initial_cloud(params: PFParams, token_terms: Int32Array, token_docs: IntArray, token_topics: Int32Array,
                  *, next_doc: int | None = None) -> ParticleCloud:
    """A cloud whose particles all equal the initializer's assignments of a stream prefix.

    Parameters
    ----------
    params : PFParams
    token_terms : ndarray of shape (n_prefix_tokens,), int32
        Terms of the prefix's tokens in stream order (they get stream positions 0, 1, ...).
    token_docs : ndarray of shape (n_prefix_tokens,), int64
        Global document position of each token.
    token_topics : ndarray of shape (n_prefix_tokens,), int32
        The initializer's topic of each token (e.g. the last batch Gibbs sweep).
    next_doc : int, optional
        Global position of the first document after the prefix; default ``max(token_docs) + 1``.

    Returns
    -------
    ParticleCloud
        Weights 1/P; every particle shares one root holding n_wk, n_k, the n_dk of the documents of
        the source's tokens and the source tokens' topics. The prefix tokens enter the source in order.

    Raises
    ------
    InvalidParameterError
        Shapes differ or a term, topic or document is out of range.

    Examples
    --------
    >>> params = PFParams.particle_filter(2, 3, n_particles=4)
    >>> cloud = initial_cloud(params, np.array([0, 2]), np.array([0, 0]), np.array([1, 1]))
    >>> particle_topic_word_counts(cloud, 3).tolist()
    [[0, 0, 0], [1, 0, 1]]
    """
    terms = np.ascontiguousarray(token_terms, dtype=np.int32)
    docs = np.ascontiguousarray(token_docs, dtype=np.int64)
    topics = np.ascontiguousarray(token_topics, dtype=np.int32)
    if terms.ndim != 1 or docs.shape != terms.shape or topics.shape != terms.shape:
        raise InvalidParameterError(
            f"token_terms, token_docs and token_topics must be 1-d of one length, got shapes "
            f"{terms.shape!r}, {docs.shape!r} and {topics.shape!r}"
        )
    for name, values, high in (("token_terms", terms, params.n_terms), ("token_topics", topics, params.n_topics),
                               ("token_docs", docs, 2**62)):
        if values.size and (values.min() < 0 or values.max() >= high):
            raise InvalidParameterError(
                f"{name} must lie in [0, {high}), got values in [{values.min()}, {values.max()}]"
            )
    first_free = int(docs.max()) + 1 if docs.size else 0
    next_doc = first_free if next_doc is None else int(next_doc)
    if next_doc < first_free:
        raise InvalidParameterError(f"next_doc {next_doc!r} is not after the prefix's last document {first_free - 1}")
    capacity = max(terms.shape[0], 16) if params.rejuvenation_source == "history" else params.source_size
    positions = np.full(capacity, -1, dtype=np.int64)
    source_terms = np.zeros(capacity, dtype=np.int32)
    source_docs = np.full(capacity, -1, dtype=np.int64)
    _offer_prefix(SOURCE_CODES[params.rejuvenation_source], params.source_size, params.seed, terms, docs,
                  positions, source_terms, source_docs)
    n_filled = _n_filled(params, terms.shape[0])
    store = _root_store(params, terms, docs, topics, positions[:n_filled], source_docs[:n_filled])
    return ParticleCloud(params=params, weights=np.full(params.n_particles, 1.0 / params.n_particles),
                         store=store, source_positions=positions, source_terms=source_terms,
                         source_docs=source_docs, n_tokens=int(terms.shape[0]), next_doc=next_doc)


def _root_store(params: PFParams, terms: Int32Array, docs: IntArray, topics: Int32Array,
                live_positions: IntArray, live_docs: IntArray) -> lin.LineageStore:
    """Store whose root holds the prefix's term, total and (live) document rows and source topics."""
    n_topics, n_terms = params.n_topics, params.n_terms
    term_topic = np.zeros((n_terms, n_topics), dtype=np.int64)
    np.add.at(term_topic, (terms, topics), 1)
    used_terms = np.flatnonzero(term_topic.any(axis=1))
    kept_docs = np.unique(live_docs)
    doc_rows = np.zeros((kept_docs.shape[0], n_topics), dtype=np.int64)
    keep = np.isin(docs, kept_docs)
    np.add.at(doc_rows, (np.searchsorted(kept_docs, docs[keep]), topics[keep]), 1)
    row_keys = np.concatenate([used_terms, [n_terms], n_terms + 1 + kept_docs]).astype(np.int64)
    rows = np.vstack([term_topic[used_terms], term_topic.sum(axis=0, keepdims=True), doc_rows])
    return lin.store_from_root(params.n_particles, row_keys, rows.astype(np.int32), live_positions,
                               topics[live_positions])


def _check_observe(cloud: ParticleCloud, block: DocBlock, params: PFParams) -> None:
    if params != cloud.params:
        raise InvalidParameterError(
            f"observe was given params {params!r} but the cloud was built with {cloud.params!r}; "
            "a cloud continues with the settings it was created with"
        )
    if block.first_doc < cloud.next_doc:
        raise InvalidParameterError(
            f"block starts at document {block.first_doc} but the cloud has seen documents up to "
            f"{cloud.next_doc - 1}; blocks must be observed in stream order"
        )
    if block.term_ids.size and (block.term_ids.min() < 0 or block.term_ids.max() >= params.n_terms):
        raise InvalidParameterError(
            f"block starting at document {block.first_doc} has term ids in [{block.term_ids.min()}, "
            f"{block.term_ids.max()}] but params.n_terms is {params.n_terms}"
        )
    if cloud.n_tokens + block.n_tokens > MAX_TOKENS:
        raise InvalidParameterError(f"streams longer than {MAX_TOKENS} tokens are not supported (int32 counts)")


def _live_filters(cloud: ParticleCloud, n_in_source: int, position: int,
                  doc: int) -> tuple[lin.KeyFilter, lin.KeyFilter]:
    """Keys a compaction must keep: every term and the total row, the documents of the source's first
    ``n_in_source`` slots and the current one, and the topics of those slots' tokens and the current one."""
    params = cloud.params
    if params.rejuvenation_source == "history":
        return lin.KeyFilter.keep_all(), lin.KeyFilter.keep_all()
    docs = np.append(cloud.source_docs[:n_in_source], doc)
    rows = lin.KeyFilter(keep_below=params.n_terms + 1, live_keys=params.n_terms + 1 + np.unique(docs))
    topics = lin.KeyFilter(keep_below=0, live_keys=np.append(cloud.source_positions[:n_in_source], position))
    return rows, topics


def _kernel_params(params: PFParams, first_position: int) -> tuple[IntArray, FloatArray]:
    ip = np.zeros(9, dtype=np.int64)
    ip[[I_TOPICS, I_TERMS, I_SEED, I_SOURCE, I_SOURCE_SIZE, I_STEPS, I_EVERY_TOKEN, I_SCHEME, I_FIRST_POS]] = [
        params.n_topics, params.n_terms, params.seed, SOURCE_CODES[params.rejuvenation_source],
        params.source_size, params.rejuvenation_steps, int(params.rejuvenate_after == "token"),
        SCHEME_CODES[params.resampling], first_position,
    ]
    fp = np.array([params.doc_topic_prior, params.topic_word_prior, params.ess_threshold], dtype=np.float64)
    return ip, fp


def _with_history_room(cloud: ParticleCloud, n_new: int) -> ParticleCloud:
    """The cloud with history arrays long enough for ``n_new`` more tokens (capacity doubles)."""
    needed = cloud.n_tokens + n_new
    capacity = cloud.source_positions.shape[0]
    if cloud.params.rejuvenation_source != "history" or needed <= capacity:
        return cloud
    while capacity < needed:
        capacity *= 2
    grown = []
    for array, fill in ((cloud.source_positions, -1), (cloud.source_terms, 0), (cloud.source_docs, -1)):
        out = np.full(capacity, fill, dtype=array.dtype)
        out[: array.shape[0]] = array
        grown.append(out)
    return replace(cloud, source_positions=grown[0], source_terms=grown[1], source_docs=grown[2])


def observe(cloud: ParticleCloud, block: DocBlock, params: PFParams) -> tuple[ParticleCloud, PFDiagnostics]:
    """Feed every token of ``block`` to the cloud, in stream order.

    Parameters
    ----------
    cloud : ParticleCloud
        Its arrays may be updated in place: use only the returned cloud afterwards.
    block : DocBlock
        Documents at global positions >= ``cloud.next_doc``, term ids below ``params.n_terms``.
    params : PFParams
        Must equal ``cloud.params``.

    Returns
    -------
    cloud : ParticleCloud
    diagnostics : PFDiagnostics

    Raises
    ------
    InvalidParameterError
        Params differ from the cloud's, the block goes back in the stream, or a term id is too large.

    Notes
    -----
    Canini et al. (2009), Algorithm 4, one token at a time (see the module docstring); documents in
    order, each document's tokens its CSR terms repeated by count and then shuffled by a permutation
    keyed by (seed, global document position). Token t of the stream (the prefix included) draws
    its proposal with ``counter_key(seed, STREAM_PARTICLE, p, t)``, resampling after it with
    ``counter_key(seed, STREAM_RESAMPLE, 0, t)``, its rejuvenation choices and draws with
    ``counter_key(seed, STREAM_REJUVENATE, p, t)`` and its reservoir slot with
    ``counter_key(seed, STREAM_RESERVOIR, 0, t)``. So observing a stream in one block or many, or
    through a :func:`cloud_to_arrays` round trip, gives identical clouds.

    Sums over topics and particles are accumulated in index order; the proposal draw is the first k
    whose running sum of q exceeds u * sum(q). NumPy equivalent of one token (all counts are the
    particle's, without the token)::

        q = (n_w + beta) / (n_tot + V * beta) * (n_d + alpha)
        lik[p] = np.cumsum(q)[-1] / (n_d.sum() + K * alpha)
        z = min(np.searchsorted(np.cumsum(q), u * np.cumsum(q)[-1], "right"), K - 1)

    The full slow reference is ``tests/reference/naive_particles.py``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> params = PFParams.olda(2, 3)
    >>> cloud = initial_cloud(params, np.array([0, 1]), np.array([0, 0]), np.array([0, 1]))
    >>> block = block_from_csr(sp.csr_matrix(np.array([[2, 0, 1]])), first_doc=1)
    >>> cloud, diag = observe(cloud, block, params)
    >>> cloud.n_tokens, diag.n_tokens, int(particle_topic_word_counts(cloud, 0).sum())
    (5, 3, 5)
    """
    _check_observe(cloud, block, params)
    n_new = block.n_tokens
    cloud = _with_history_room(cloud, n_new)
    tok_term = np.empty(n_new, dtype=np.int32)
    tok_doc = np.empty(n_new, dtype=np.int64)
    tok_end = np.empty(n_new, dtype=np.int64)
    _expand_block(block.indptr.astype(np.int64), block.term_ids.astype(np.int32), block.counts.astype(np.int32),
                  block.first_doc, params.seed, tok_term, tok_doc, tok_end)
    ip, fp = _kernel_params(params, cloud.n_tokens)
    cursor = np.zeros(7, dtype=np.int64)
    acc = np.array([0.0, math.inf])
    resampled_at = np.empty(n_new, dtype=np.int64)
    doc_topics = np.full(block.n_docs, -1, dtype=np.int64)
    lik, q = np.empty(params.n_particles), np.empty(params.n_topics)
    store = cloud.store
    while not _run_tokens(store, cursor, tok_term, tok_doc, tok_end, ip, fp, cloud.weights, lik, q,
                          cloud.source_positions, cloud.source_terms, cloud.source_docs, acc, resampled_at,
                          doc_topics):
        i = int(cursor[C_TOKEN])
        seen = cloud.n_tokens + i + int(cursor[C_PHASE] > WEIGH)  # token i is in the source once weighed
        store = lin.make_room(store, *_live_filters(cloud, _n_filled(params, seen), cloud.n_tokens + i,
                                                    int(tok_doc[i])))
    cloud = replace(cloud, store=store, n_tokens=cloud.n_tokens + n_new,
                    next_doc=max(cloud.next_doc, block.first_doc + block.n_docs))
    stats = lin.lineage_stats(store)
    diagnostics = PFDiagnostics(
        n_docs=block.n_docs, n_tokens=n_new,
        doc_positions=block.first_doc + np.arange(block.n_docs, dtype=np.int64), doc_topics=doc_topics,
        log_evidence=float(acc[0]), ess_min=float(acc[1]) if n_new else math.nan,
        resample_positions=resampled_at[: cursor[C_RESAMPLED]].copy(),
        rejuvenation_steps_done=int(cursor[C_REJUVENATED]),
        depth_max=int(stats["depth_max"]), depth_mean=stats["depth_mean"], n_nodes=int(stats["n_nodes"]),
        n_entries=int(stats["n_entries"]), nbytes=int(memory_stats(cloud)["nbytes"]),
    )
    return cloud, diagnostics


# ------------------------------------------------------------------------------------ read-outs


@numba.njit(nogil=True, cache=True)
def _gather_rows(st, node, keys, out):
    """out[:, i] = the row of keys[i] seen from ``node`` (zeros if absent)."""
    for i in range(keys.shape[0]):
        r = lin.find_row(st, node, keys[i])
        if r >= 0:
            out[:, i] = st.rows[r, :]


def _check_particle(cloud: ParticleCloud, particle: int) -> int:
    if not 0 <= int(particle) < cloud.n_particles:
        raise InvalidParameterError(f"particle {particle!r} is not in [0, {cloud.n_particles})")
    return int(particle)


def particle_topic_word_counts(cloud: ParticleCloud, particle: int) -> Int32Array:
    """Return the counts n_kw of one particle, shape (n_topics, n_terms), int32."""
    out = np.zeros((cloud.params.n_topics, cloud.params.n_terms), dtype=np.int32)
    node = cloud.store.leaf[_check_particle(cloud, particle)]
    _gather_rows(cloud.store, node, np.arange(cloud.params.n_terms, dtype=np.int64), out)
    return out


def topic_word_counts(cloud: ParticleCloud) -> FloatArray:
    """Weight-averaged n_kw over the particles, shape (n_topics, n_terms), float64.

    Examples
    --------
    >>> params = PFParams.particle_filter(2, 3, n_particles=2)
    >>> cloud = initial_cloud(params, np.array([0, 2]), np.array([0, 0]), np.array([0, 1]))
    >>> topic_word_counts(cloud).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    total = np.zeros((cloud.params.n_topics, cloud.params.n_terms), dtype=np.float64)
    for p in range(cloud.n_particles):
        total += cloud.weights[p] * particle_topic_word_counts(cloud, p)
    return total


def topic_word_distribution(cloud: ParticleCloud) -> FloatArray:
    """Compute phi of the cloud, ``(n_kw + beta) / (n_k + V beta)`` with weight-averaged counts.

    Rows sum to 1 (:func:`topicflow.models.common.dirichlet.posterior_mean` of the counts).
    """
    return posterior_mean(topic_word_counts(cloud), cloud.params.topic_word_prior)


def doc_topic_counts(cloud: ParticleCloud, particle: int, doc_position: int) -> Int32Array | None:
    """Return n_dk of a document in one particle, shape (n_topics,), or None if it is not stored.

    A document stays stored while one of its tokens is in the rejuvenation source (always, with
    "history"), and until the next compaction after that.
    """
    key = cloud.params.n_terms + 1 + int(doc_position)
    node = cloud.store.leaf[_check_particle(cloud, particle)]
    r = lin.find_row(cloud.store, node, key)
    return None if r < 0 else cloud.store.rows[r].copy()


@numba.njit(nogil=True, cache=True)
def _gather_topics(st, node, keys, out):
    """out[i] = the topic of keys[i] seen from ``node`` (-1 if absent)."""
    for i in range(keys.shape[0]):
        out[i] = lin.find_topic(st, node, keys[i])


def particle_topics(cloud: ParticleCloud, particle: int) -> tuple[IntArray, Int32Array]:
    """(stream positions, topics) of the source's tokens in one particle, positions ascending.

    Examples
    --------
    >>> params = PFParams.incremental_gibbs(2, 3, rejuvenation_source="history")
    >>> cloud = initial_cloud(params, np.array([0, 2]), np.array([0, 0]), np.array([1, 0]))
    >>> [a.tolist() for a in particle_topics(cloud, 0)]
    [[0, 1], [1, 0]]
    """
    node = cloud.store.leaf[_check_particle(cloud, particle)]
    positions = np.sort(cloud.source_positions[: cloud.n_source])
    topics = np.empty(positions.shape[0], dtype=np.int32)
    _gather_topics(cloud.store, node, positions, topics)
    return positions, topics


def memory_stats(cloud: ParticleCloud) -> dict[str, float]:
    """Size of the cloud: the lineage store's depths, nodes and entries, and the bytes of all arrays.

    Returns
    -------
    dict
        :func:`lineage.lineage_stats` (``depth_max``, ``depth_mean``, ``n_nodes``, ``n_entries``,
        ``n_rows_used``, ``slots_used``, ``nbytes`` of the store) plus ``source_nbytes``,
        ``n_source`` and ``nbytes`` (everything, at capacity).
    """
    stats = lin.lineage_stats(cloud.store)
    source_nbytes = float(cloud.source_positions.nbytes + cloud.source_terms.nbytes + cloud.source_docs.nbytes)
    stats["store_nbytes"] = stats["nbytes"]
    stats["source_nbytes"] = source_nbytes
    stats["n_source"] = float(cloud.n_source)
    stats["nbytes"] = stats["store_nbytes"] + source_nbytes + float(cloud.weights.nbytes)
    return stats


# ------------------------------------------------------------------------------- serialization

_USED = {"row_keys": lin.ROW_SLOTS_USED, "row_values": lin.ROW_SLOTS_USED, "z_keys": lin.Z_SLOTS_USED,
         "z_values": lin.Z_SLOTS_USED, "rows": lin.ROWS_USED}
_FILL = {"row_keys": lin.EMPTY_KEY, "z_keys": lin.EMPTY_KEY, "source_positions": -1, "source_docs": -1}


def cloud_to_arrays(cloud: ParticleCloud) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The cloud as named arrays plus JSON-able metadata (for npz/zarr and JSON; never pickle).

    Arena arrays are cut at their used length and source arrays at their filled length; the
    metadata keeps every capacity, so :func:`cloud_from_arrays` rebuilds an identical cloud that
    continues exactly as this one would.

    Examples
    --------
    >>> cloud = initial_cloud(PFParams.olda(2, 3), np.array([0]), np.array([0]), np.array([1]))
    >>> arrays, meta = cloud_to_arrays(cloud)
    >>> cloud_to_arrays(cloud_from_arrays(arrays, meta))[1] == meta
    True
    """
    store = cloud.store
    arrays: dict[str, np.ndarray] = {"weights": cloud.weights.copy()}
    capacities: dict[str, int] = {}
    for name in lin.PERSISTED_FIELDS:
        array = getattr(store, name)
        capacities[name] = int(array.shape[0])
        cut = int(store.counters[_USED[name]]) if name in _USED else array.shape[0]
        arrays[name] = array[:cut].copy()
    n_filled = cloud.n_source
    for name in ("source_positions", "source_terms", "source_docs"):
        if cloud.params.rejuvenation_source != "history":  # a history's spare capacity is not state
            capacities[name] = int(getattr(cloud, name).shape[0])
        arrays[name] = getattr(cloud, name)[:n_filled].copy()
    meta = {"format": CLOUD_FORMAT, "format_version": CLOUD_FORMAT_VERSION, "params": cloud.params.to_dict(),
            "n_tokens": cloud.n_tokens, "next_doc": cloud.next_doc, "capacities": capacities}
    return arrays, meta


def cloud_from_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> ParticleCloud:
    """Inverse of :func:`cloud_to_arrays`.

    Raises
    ------
    InvalidParameterError
        The metadata is of another format or version, or an array is missing or of the wrong size.
    """
    if meta.get("format") != CLOUD_FORMAT or meta.get("format_version") != CLOUD_FORMAT_VERSION:
        raise InvalidParameterError(
            f"not a particle cloud of format {CLOUD_FORMAT!r} version {CLOUD_FORMAT_VERSION}: "
            f"got {meta.get('format')!r} version {meta.get('format_version')!r}"
        )
    params = PFParams.from_dict(meta["params"])
    capacities = dict(meta["capacities"])
    for name in ("source_positions", "source_terms", "source_docs"):
        if name not in capacities and name in arrays:
            capacities[name] = max(int(np.asarray(arrays[name]).shape[0]), 16)
    restored: dict[str, np.ndarray] = {}
    for name, capacity in capacities.items():
        if name not in arrays or arrays[name].shape[0] > capacity:
            raise InvalidParameterError(f"array {name!r} is missing or longer than its capacity {capacity}")
        array = np.asarray(arrays[name])
        out = np.full((capacity,) + array.shape[1:], _FILL.get(name, 0), dtype=array.dtype)
        out[: array.shape[0]] = array
        restored[name] = out
    missing = [name for name in lin.PERSISTED_FIELDS if name not in restored]
    if missing:
        raise InvalidParameterError(f"arrays {missing!r} of the particle cloud are missing")
    store = lin.with_filters(restored)
    weights = np.array(arrays["weights"], dtype=np.float64)
    if weights.shape != (params.n_particles,) or store.leaf.shape != (params.n_particles,):
        raise InvalidParameterError(f"weights and leaves must have shape ({params.n_particles},)")
    return ParticleCloud(params=params, weights=weights, store=store,
                         source_positions=restored["source_positions"], source_terms=restored["source_terms"],
                         source_docs=restored["source_docs"], n_tokens=int(meta["n_tokens"]),
                         next_doc=int(meta["next_doc"]))
