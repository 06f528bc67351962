"""Slow, obvious NumPy/scipy reference for collapsed Gibbs sampling in LDA (Griffiths and Steyvers 2004).

Written for clarity, not speed: Python loops over sweeps and tokens, and every draw computes the full
O(K) conditional and inverts its cumulative sum in topic order. The sparse kernel of
:mod:`topicflow.models.lda.gibbs.sparse` walks the same mass in another order (word bucket, document
bucket, smoothing bucket), so for a given uniform the two pick different topics; they agree in
distribution, which the tests check (see tests/models/test_gibbs_lda.py). The random start, the
counts, the log-likelihood, phi, the hyperparameter fixed points and the fold-in draw are computed
the same way by both and are compared exactly.

Corpus format: ``token_indptr`` (n_docs + 1,) and ``token_terms`` (n_tokens,), as in GibbsState.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln, psi

from topicflow.models.common.blocks import token_docs
from topicflow.models.common.rng import STREAM_FOLD_IN, STREAM_GIBBS, uniform_from_key
from topicflow.models.common.rng import counter_key as _counter_key


def counter_key(seed, stream, epoch, index):
    """The kernels' key as a NumPy uint64 (numba hands uint64 results back as Python ints)."""
    return np.uint64(_counter_key(seed, stream, epoch, index))


def counts_from_topics(token_indptr, token_terms, topics, n_terms, n_topics):
    """(n_dk, n_wk, n_k) recounted from the assignments."""
    n_docs = len(token_indptr) - 1
    doc_topic = np.zeros((n_docs, n_topics), dtype=np.int64)
    term_topic = np.zeros((n_terms, n_topics), dtype=np.int64)
    for d in range(n_docs):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            doc_topic[d, topics[t]] += 1
            term_topic[token_terms[t], topics[t]] += 1
    return doc_topic, term_topic, term_topic.sum(axis=0)


def conditional(doc_row, term_row, topic_counts, alpha, beta, n_terms):
    """p(z_i = k | z_-i, w), all counts already excluding token i (Griffiths and Steyvers 2004, eq. 5)."""
    weights = (doc_row + alpha) * (term_row + beta) / (topic_counts + n_terms * beta)
    return weights / weights.sum()


def prior_conditional(doc_row, term_row, prior_row, topic_counts, prior_totals, alpha, beta, vocab_size):
    """p(z_i = k | rest) with prior counts N: (n_dk + alpha_k)(n_wk + N_wk + beta) / (n_k + N_k + V beta)."""
    weights = (doc_row + alpha) * (term_row + prior_row + beta) / (topic_counts + prior_totals + vocab_size * beta)
    return weights / weights.sum()


def random_topics(token_indptr, n_topics, seed, first_doc):
    """z = floor(u K), u the t-th uniform of counter_key(seed, STREAM_GIBBS, 0, first_doc + d)."""
    topics = np.zeros(token_indptr[-1], dtype=np.int64)
    for d in range(len(token_indptr) - 1):
        key = counter_key(seed, STREAM_GIBBS, 0, first_doc + d)
        for i, t in enumerate(range(token_indptr[d], token_indptr[d + 1])):
            topics[t] = min(int(uniform_from_key(key, i) * n_topics), n_topics - 1)
    return topics


def gibbs_sweeps(token_indptr, token_terms, topics, n_terms, alpha, beta, *, seed, first_doc, sweeps_done,
                 n_sweeps, prior=None, prior_totals=None, vocab_size=None):
    """Dense collapsed Gibbs sweeps; sweep s of doc d uses counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, .).

    With ``prior`` (n_terms x K counts N), ``prior_totals`` (N_k) and ``vocab_size`` (V), each draw
    uses :func:`prior_conditional` (streaming Gibbs); otherwise :func:`conditional`.
    """
    topics = np.array(topics, dtype=np.int64)
    n_topics = len(alpha)
    doc_topic, term_topic, topic_counts = counts_from_topics(token_indptr, token_terms, topics, n_terms, n_topics)
    for sweep in range(sweeps_done + 1, sweeps_done + n_sweeps + 1):
        for d in range(len(token_indptr) - 1):
            key = counter_key(seed, STREAM_GIBBS, sweep, first_doc + d)
            for i, t in enumerate(range(token_indptr[d], token_indptr[d + 1])):
                w, k = token_terms[t], topics[t]
                doc_topic[d, k] -= 1
                term_topic[w, k] -= 1
                topic_counts[k] -= 1
                if prior is None:
                    p = conditional(doc_topic[d], term_topic[w], topic_counts, alpha, beta, n_terms)
                else:
                    p = prior_conditional(doc_topic[d], term_topic[w], prior[w], topic_counts, prior_totals, alpha,
                                          beta, vocab_size)
                cdf = np.cumsum(p)
                k = min(int(np.searchsorted(cdf, uniform_from_key(key, i) * cdf[-1], side="right")), n_topics - 1)
                topics[t] = k
                doc_topic[d, k] += 1
                term_topic[w, k] += 1
                topic_counts[k] += 1
    return topics


def sweep_transition(token_indptr, token_terms, topics, n_terms, alpha, beta):
    """Exact distribution of the assignments after one systematic-scan sweep from ``topics``.

    Enumerates every sequence of draws (K ** n_tokens of them) and multiplies the conditionals along
    the sweep. Returns a dict from the tuple of new topics to its probability.
    """
    n_topics = len(alpha)
    n_tokens = len(token_terms)
    doc_of = token_docs(token_indptr)
    out = {}
    for new in itertools.product(range(n_topics), repeat=n_tokens):
        current = np.array(topics, dtype=np.int64)
        prob = 1.0
        for t in range(n_tokens):
            current[t] = -1
            kept = current >= 0
            doc_row = np.bincount(current[kept & (doc_of == doc_of[t])], minlength=n_topics)
            term_row = np.bincount(current[kept & (token_terms == token_terms[t])], minlength=n_topics)
            totals = np.bincount(current[kept], minlength=n_topics)
            prob *= conditional(doc_row, term_row, totals, alpha, beta, n_terms)[new[t]]
            current[t] = new[t]
        out[new] = prob
    return out


def joint_log_likelihood(doc_topic, term_topic, alpha, beta):
    """log p(w, z) = log p(w | z) + log p(z) (Griffiths and Steyvers 2004, eqs. 2-3), all entries dense."""
    n_terms, n_topics = term_topic.shape
    topic_counts = term_topic.sum(axis=0)
    log_w = (n_topics * (gammaln(n_terms * beta) - n_terms * gammaln(beta))
             + gammaln(term_topic + beta).sum() - gammaln(topic_counts + n_terms * beta).sum())
    doc_lengths = doc_topic.sum(axis=1)
    log_z = (len(doc_lengths) * (gammaln(alpha.sum()) - gammaln(alpha).sum())
             + gammaln(doc_topic + alpha).sum() - gammaln(doc_lengths + alpha.sum()).sum())
    return float(log_w + log_z)


def exact_posterior(token_indptr, token_terms, n_terms, alpha, beta):
    """p(z | w) for every assignment tuple, by enumeration of p(w, z)."""
    n_topics = len(alpha)
    log_p = {}
    for z in itertools.product(range(n_topics), repeat=len(token_terms)):
        doc_topic, term_topic, _ = counts_from_topics(token_indptr, token_terms, np.array(z), n_terms, n_topics)
        log_p[z] = joint_log_likelihood(doc_topic, term_topic, alpha, beta)
    top = max(log_p.values())
    total = sum(np.exp(v - top) for v in log_p.values())
    return {z: float(np.exp(v - top) / total) for z, v in log_p.items()}


def topic_word(term_topic, beta):
    """phi[k, w] = (n_wk + beta) / (n_k + V beta)."""
    n_terms = term_topic.shape[0]
    return ((term_topic + beta) / (term_topic.sum(axis=0) + n_terms * beta)).T


def alpha_fixed_point(doc_topic, alpha, *, n_iter=100, tol=1e-7):
    """Minka's fixed point with digammas over every document (no histograms)."""
    alpha = np.array(alpha, dtype=np.float64)
    lengths = doc_topic.sum(axis=1)
    for _ in range(n_iter):
        denom = np.sum(psi(lengths + alpha.sum()) - psi(alpha.sum()))
        num = np.sum(psi(doc_topic + alpha) - psi(alpha), axis=0)
        new = np.maximum(alpha * num / denom, 1e-10)
        done = np.max(np.abs(new - alpha) / alpha) < tol
        alpha = new
        if done:
            break
    return alpha


def beta_fixed_point(term_topic, beta, *, n_iter=100, tol=1e-7):
    """Minka's symmetric fixed point over all (term, topic) entries."""
    n_terms = term_topic.shape[0]
    topic_counts = term_topic.sum(axis=0)
    for _ in range(n_iter):
        num = np.sum(psi(term_topic + beta) - psi(beta))
        denom = n_terms * np.sum(psi(topic_counts + n_terms * beta) - psi(n_terms * beta))
        new = max(beta * num / denom, 1e-10)
        done = abs(new - beta) < tol * beta
        beta = new
        if done:
            break
    return beta


def fold_in(token_indptr, token_terms, phi, alpha, *, seed, first_doc, n_sweeps):
    """Gibbs fold-in with phi fixed; the draw walks the document bucket (n_dk phi_kw, topics in
    increasing order) and then the smoothing bucket (alpha_k phi_kw), as the kernel does."""
    n_topics = phi.shape[0]
    out = np.zeros((len(token_indptr) - 1, n_topics), dtype=np.int64)
    for d in range(len(token_indptr) - 1):
        terms = token_terms[token_indptr[d]:token_indptr[d + 1]]
        key = counter_key(seed, STREAM_FOLD_IN, 0, first_doc + d)
        z = [min(int(uniform_from_key(key, i) * n_topics), n_topics - 1) for i in range(len(terms))]
        counts = np.bincount(z, minlength=n_topics).astype(np.float64)
        for sweep in range(1, n_sweeps + 1):
            key = counter_key(seed, STREAM_FOLD_IN, sweep, first_doc + d)
            for i, w in enumerate(terms):
                counts[z[i]] -= 1
                r_cum = np.cumsum(counts * phi[:, w])
                s_cum = np.cumsum(alpha * phi[:, w])
                x = uniform_from_key(key, i) * (s_cum[-1] + r_cum[-1])
                if x < r_cum[-1]:
                    k = int(np.searchsorted(r_cum, x, side="right"))
                else:
                    k = int(np.searchsorted(s_cum, x - r_cum[-1], side="right"))
                    if k == n_topics:
                        k = int(np.searchsorted(s_cum, s_cum[-1], side="left"))
                z[i] = k
                counts[k] += 1
        out[d] = counts
    return out
