"""Slow, obvious reference for topicflow.models.lda.streaming.samples (Canini et al. 2009, sec. 5.2).

Works on the :class:`~tests.reference.naive_particles.NaiveCloud` (every particle's rows as plain
dicts): the collapsed joint log p(w, z) written out with ``scipy.special.gammaln`` term by term, the
best sample by that score, each document's most frequent topic in it, and the held-out pass "as the
next documents" on a deep copy.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
from scipy.special import gammaln

from tests.reference.naive_particles import NaiveCloud, naive_observe


def naive_log_joint(cloud: NaiveCloud, params, p: int, n_docs: int) -> float:
    """log p(w, z) of particle p: Griffiths and Steyvers (2004), eqs. (2)-(3), symmetric priors."""
    K, V = params.n_topics, params.n_terms
    alpha, beta = params.doc_topic_prior, params.topic_word_prior
    n_wk = np.array([cloud.store.row(p, w) for w in range(V)], dtype=np.float64)  # (V, K)
    n_k = n_wk.sum(axis=0)
    total = K * (gammaln(V * beta) - V * gammaln(beta)) + np.sum(gammaln(n_wk + beta)) - np.sum(gammaln(n_k + V * beta))
    for d in range(n_docs):
        n_dk = np.asarray(cloud.store.row(p, V + 1 + d), dtype=np.float64)
        total += gammaln(K * alpha) - K * gammaln(alpha) + np.sum(gammaln(n_dk + alpha)) - gammaln(n_dk.sum() + K * alpha)
    return float(total)


def naive_clusters(cloud: NaiveCloud, params, p: int, positions) -> np.ndarray:
    """Most frequent topic of each document in particle p (first on ties; -1 for a document without a row)."""
    out = []
    for d in positions:
        key = params.n_terms + 1 + int(d)
        out.append(int(np.argmax(cloud.store.row(p, key))) if cloud.store.has_row(p, key) else -1)
    return np.array(out, dtype=np.int64)


def naive_training_clusters(cloud: NaiveCloud, params, n_docs: int) -> tuple[np.ndarray, int]:
    scores = [naive_log_joint(cloud, params, p, n_docs) for p in range(params.n_particles)]
    best = int(np.argmax(scores))
    return naive_clusters(cloud, params, best, range(n_docs)), best


def naive_as_next(cloud: NaiveCloud, block, params, n_docs: int) -> tuple[np.ndarray, int]:
    """Observe the test block at positions n_docs, ... on a deep copy; cluster it under the best sample."""
    twin = copy.deepcopy(cloud)
    naive_observe(twin, replace(block, first_doc=n_docs), params)
    total = n_docs + block.n_docs
    scores = [naive_log_joint(twin, params, p, total) for p in range(params.n_particles)]
    best = int(np.argmax(scores))
    return naive_clusters(twin, params, best, range(n_docs, total)), best
