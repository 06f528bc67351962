"""Slow, obvious reference for topicflow.models.common.lineage and topicflow.models.lda.streaming.particle_filter.

``NaiveStore`` keeps every particle's state as its own dicts (rows: key -> int64 vector, topics:
key -> int) and copies them all on resampling: O(P x history), no sharing, no hash tables, nothing
to get wrong. ``naive_initial`` and ``naive_observe`` are the particle filter written token by
token in NumPy on top of it. They consume the same counter-based uniforms in the same order as the
numba kernels and accumulate every sum in the same (index) order, so they make exactly the same
draws and give bit-identical weights.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from topicflow.models.lda.streaming.particle_filter import TOKEN_ORDER_EPOCH, PFParams
from topicflow.models.common.resampling import effective_sample_size, resample
from topicflow.models.common.reservoir import reservoir_key, reservoir_slot
from topicflow.models.common.rng import STREAM_PARTICLE, STREAM_REJUVENATE, STREAM_RESAMPLE, uniform_from_key
from topicflow.models.common.rng import counter_key as _counter_key


def counter_key(seed, stream, epoch, index):
    """The kernels' key as a NumPy uint64 (numba hands uint64 results back as Python ints)."""
    return np.uint64(_counter_key(seed, stream, epoch, index))


class NaiveStore:
    """Per-particle dicts of rows and topics, copied in full on resampling."""

    def __init__(self, n_particles, row_width, rows=None, topics=None):
        self.row_width = row_width
        base_rows = {int(k): np.asarray(v, dtype=np.int64).copy() for k, v in (rows or {}).items()}
        base_topics = {int(k): int(v) for k, v in (topics or {}).items()}
        self.rows = [copy.deepcopy(base_rows) for _ in range(n_particles)]
        self.topics = [dict(base_topics) for _ in range(n_particles)]

    def row(self, p, key):
        return self.rows[p].get(key, np.zeros(self.row_width, dtype=np.int64)).copy()

    def has_row(self, p, key):
        return key in self.rows[p]

    def topic(self, p, key):
        return self.topics[p].get(key, -1)

    def add_to_row(self, p, key, delta):
        self.rows[p][key] = self.row(p, key) + np.asarray(delta, dtype=np.int64)

    def set_topic(self, p, key, topic):
        self.topics[p][key] = int(topic)

    def resample(self, ancestors):
        self.rows = [copy.deepcopy(self.rows[a]) for a in ancestors]
        self.topics = [dict(self.topics[a]) for a in ancestors]

    def forget(self, row_keys=(), topic_keys=()):
        for p in range(len(self.rows)):
            for key in row_keys:
                self.rows[p].pop(key, None)
            for key in topic_keys:
                self.topics[p].pop(key, None)


@dataclass
class NaiveCloud:
    weights: np.ndarray
    store: NaiveStore
    source: list  # slot -> (position, term, doc)
    n_tokens: int


def source_slot(params, t):
    if params.rejuvenation_source == "history":
        return t
    if params.rejuvenation_source == "window":
        return t % params.source_size
    return reservoir_slot(t, params.source_size, np.uint64(reservoir_key(params.seed, t)))


def enter_source(params, source, t, term, doc):
    slot = source_slot(params, t)
    if slot < 0:
        return False
    if slot == len(source):
        source.append((t, term, doc))
    else:
        source[slot] = (t, term, doc)
    return True


def naive_initial(params: PFParams, terms, docs, topics) -> NaiveCloud:
    """Every particle holds the prefix's counts and the topics of the prefix tokens in the source."""
    source = []
    for t, (w, d) in enumerate(zip(terms, docs)):
        enter_source(params, source, t, int(w), int(d))
    live = {pos for pos, _, _ in source}
    rows, topics_kept = {}, {}
    for t, (w, d, k) in enumerate(zip(terms, docs, topics)):
        for key in (int(w), params.n_terms, params.n_terms + 1 + int(d)):
            rows.setdefault(key, np.zeros(params.n_topics, dtype=np.int64))[int(k)] += 1
        if t in live:
            topics_kept[t] = int(k)
    store = NaiveStore(params.n_particles, params.n_topics, rows, topics_kept)
    return NaiveCloud(np.full(params.n_particles, 1.0 / params.n_particles), store, source, len(terms))


def doc_tokens(block, d, seed):
    """Terms of document d of the block: CSR terms repeated by count, then the keyed Fisher-Yates shuffle."""
    lo, hi = block.indptr[d], block.indptr[d + 1]
    terms = np.repeat(block.term_ids[lo:hi], block.counts[lo:hi]).astype(np.int64)
    key = counter_key(seed, STREAM_PARTICLE, TOKEN_ORDER_EPOCH, block.first_doc + d)
    for i in range(len(terms) - 1, 0, -1):
        j = int(uniform_from_key(key, i) * (i + 1))
        terms[i], terms[j] = terms[j], terms[i]
    return terms


def conditional(n_w, n_tot, n_d, own, params):
    e = (np.arange(params.n_topics) == own).astype(np.int64)
    beta = params.topic_word_prior
    return ((n_w - e) + beta) / ((n_tot - e) + params.n_terms * beta) * ((n_d - e) + params.doc_topic_prior)


def draw(q, u):
    cum = np.cumsum(q)
    return min(int(np.searchsorted(cum, u * cum[-1], side="right")), len(q) - 1), cum[-1]


def seq_sum(values):
    total = 0.0
    for v in values:
        total += v
    return total


def propose(cloud, params, p, t, w, g):
    st, V = cloud.store, params.n_terms
    keys = (w, V, V + 1 + g)
    n_w, n_tot, n_d = (st.row(p, key) for key in keys)
    u = uniform_from_key(counter_key(params.seed, STREAM_PARTICLE, p, t), 0)
    k, total = draw(conditional(n_w, n_tot, n_d, -1, params), u)
    for key in keys:
        st.add_to_row(p, key, np.eye(params.n_topics, dtype=np.int64)[k])
    if source_slot(params, t) >= 0:
        st.set_topic(p, t, k)
    return total / (n_d.sum() + params.n_topics * params.doc_topic_prior)


def rejuvenate(cloud, params, p, t):
    st, V = cloud.store, params.n_terms
    key = counter_key(params.seed, STREAM_REJUVENATE, p, t)
    n_filled = len(cloud.source)
    for step in range(params.rejuvenation_steps):
        slot = min(int(uniform_from_key(key, 2 * step) * n_filled), n_filled - 1)
        pos, w, g = cloud.source[slot]
        own = st.topic(p, pos)
        keys = (w, V, V + 1 + g)
        q = conditional(*(st.row(p, k) for k in keys), own, params)
        k, _ = draw(q, uniform_from_key(key, 2 * step + 1))
        if k != own:
            delta = np.eye(params.n_topics, dtype=np.int64)[k] - np.eye(params.n_topics, dtype=np.int64)[own]
            for row_key in keys:
                st.add_to_row(p, row_key, delta)
            st.set_topic(p, pos, k)


def naive_observe(cloud: NaiveCloud, block, params: PFParams):
    """Algorithm 4 of Canini et al. (2009), one token at a time; returns a dict of diagnostics."""
    P = params.n_particles
    log_evidence, ess_min, resampled, doc_topics, rejuvenated = 0.0, math.inf, [], [], 0
    for d in range(block.n_docs):
        g = block.first_doc + d
        terms = doc_tokens(block, d, params.seed)
        for w in terms:
            t = cloud.n_tokens
            lik = np.array([propose(cloud, params, p, t, int(w), g) for p in range(P)])
            evidence = seq_sum(cloud.weights * lik)
            log_evidence += math.log(evidence)
            cloud.weights = cloud.weights * lik / evidence
            ess = effective_sample_size(cloud.weights)
            ess_min = min(ess_min, ess)
            did_resample = P > 1 and ess < params.ess_threshold * P
            if did_resample:
                key = int(counter_key(params.seed, STREAM_RESAMPLE, 0, t))
                ancestors = resample(cloud.weights, params.resampling, key)
                cloud.store.resample(ancestors)
                cloud.weights = np.full(P, 1.0 / P)
                resampled.append(t)
            enter_source(params, cloud.source, t, int(w), g)
            if params.rejuvenation_steps > 0 and (params.rejuvenate_after == "token" or did_resample):
                for p in range(P):
                    rejuvenate(cloud, params, p, t)
                    rejuvenated += params.rejuvenation_steps
            cloud.n_tokens += 1
        if len(terms) == 0:
            doc_topics.append(-1)
        else:
            best = int(np.argmax(cloud.weights))
            doc_topics.append(int(np.argmax(cloud.store.row(best, params.n_terms + 1 + g))))
    return {"log_evidence": log_evidence, "ess_min": ess_min, "resample_positions": resampled,
            "doc_topics": doc_topics, "rejuvenation_steps_done": rejuvenated}


def naive_topic_word(cloud: NaiveCloud, params: PFParams, p):
    """n_kw of particle p, shape (n_topics, n_terms)."""
    return np.stack([cloud.store.row(p, w) for w in range(params.n_terms)], axis=1)
