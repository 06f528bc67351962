"""Slow, obvious NumPy reference for streaming Gibbs sampling with decay (Gao, Chen and Zhu 2016).

Within a minibatch, SGS is collapsed Gibbs whose topic-word prior is ``beta + N_wk`` (N: the decayed
counts of earlier minibatches) instead of ``beta``. Everything here computes that with dense O(K)
arrays and Python loops:

* the conditional of one token, and the exact laws of the "posterior" (progressive) start, of one
  systematic sweep, and of the minibatch posterior p(z | w, N), by enumeration;
* a dense sampler (inverse CDF in topic order with the kernels' uniforms) that, like the sparse
  kernel, must reach that posterior (the two walk the mass in different orders, so for one uniform
  they pick different topics; see tests/reference/gibbs_numpy.py);
* the training perplexity, and the decayed update ``N <- decay * (N + n)`` one entry at a time.

Corpus format: ``token_indptr`` (n_docs + 1,) and ``token_terms`` (n_tokens,), as in GibbsState.
``prior`` is (n_terms, n_topics) N_wk for the block's terms; ``prior_totals`` (n_topics,) N_k over a
vocabulary of ``vocab_size`` terms (terms outside the block add to N_k only).
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln

from tests.reference import gibbs_numpy
from tests.reference.gibbs_numpy import counts_from_topics, random_topics
from tests.reference.gibbs_numpy import prior_conditional as conditional
from topicflow.models.common.blocks import token_docs


def _conditional_given(current, t, doc_of, token_terms, prior, prior_totals, alpha, beta, vocab_size):
    """Conditional of token t given the assigned tokens of ``current`` (-1: unassigned), t excluded."""
    n_topics = len(alpha)
    kept = current >= 0
    kept[t] = False
    doc_row = np.bincount(current[kept & (doc_of == doc_of[t])], minlength=n_topics)
    term_row = np.bincount(current[kept & (token_terms == token_terms[t])], minlength=n_topics)
    totals = np.bincount(current[kept], minlength=n_topics)
    return conditional(doc_row, term_row, prior[token_terms[t]], totals, prior_totals, alpha, beta, vocab_size)


def progressive_law(token_indptr, token_terms, prior, prior_totals, alpha, beta, vocab_size):
    """Exact law of the "posterior" start: token t drawn given the prior and tokens 0..t-1 only."""
    n_topics, n_tokens = len(alpha), len(token_terms)
    doc_of = token_docs(token_indptr)
    out = {}
    for z in itertools.product(range(n_topics), repeat=n_tokens):
        current = np.full(n_tokens, -1)
        prob = 1.0
        for t in range(n_tokens):
            prob *= _conditional_given(current, t, doc_of, token_terms, prior, prior_totals, alpha, beta,
                                       vocab_size)[z[t]]
            current[t] = z[t]
        out[z] = prob
    return out


def sweep_transition(token_indptr, token_terms, topics, prior, prior_totals, alpha, beta, vocab_size):
    """Exact law of the assignments after one systematic-scan sweep from ``topics``, with the prior."""
    n_topics, n_tokens = len(alpha), len(token_terms)
    doc_of = token_docs(token_indptr)
    out = {}
    for new in itertools.product(range(n_topics), repeat=n_tokens):
        current = np.array(topics, dtype=np.int64)
        prob = 1.0
        for t in range(n_tokens):
            prob *= _conditional_given(current, t, doc_of, token_terms, prior, prior_totals, alpha, beta,
                                       vocab_size)[new[t]]
            current[t] = new[t]
        out[new] = prob
    return out


def joint_log_likelihood(doc_topic, term_topic, prior, prior_totals, alpha, beta, vocab_size):
    """log p(w, z | alpha, beta + N) of one minibatch: Dirichlet(beta + N_k) topics over V terms."""
    a = prior + beta  # (n_terms, K): the block's terms
    a_total = prior_totals + vocab_size * beta  # (K,): all V terms
    topic_counts = term_topic.sum(axis=0)
    log_w = (gammaln(a_total) - gammaln(a_total + topic_counts)).sum() + (gammaln(a + term_topic) - gammaln(a)).sum()
    lengths = doc_topic.sum(axis=1)
    log_z = (len(lengths) * (gammaln(alpha.sum()) - gammaln(alpha).sum())
             + gammaln(doc_topic + alpha).sum() - gammaln(lengths + alpha.sum()).sum())
    return float(log_w + log_z)


def exact_posterior(token_indptr, token_terms, prior, prior_totals, alpha, beta, vocab_size):
    """p(z | w, N) of every assignment tuple, by enumeration."""
    n_topics, n_terms = len(alpha), prior.shape[0]
    log_p = {}
    for z in itertools.product(range(n_topics), repeat=len(token_terms)):
        doc_topic, term_topic, _ = counts_from_topics(token_indptr, token_terms, np.array(z), n_terms, n_topics)
        log_p[z] = joint_log_likelihood(doc_topic, term_topic, prior, prior_totals, alpha, beta, vocab_size)
    top = max(log_p.values())
    total = sum(np.exp(v - top) for v in log_p.values())
    return {z: float(np.exp(v - top) / total) for z, v in log_p.items()}


def gibbs_sweeps(token_indptr, token_terms, topics, prior, prior_totals, alpha, beta, vocab_size, *, seed,
                 first_doc, sweeps_done, n_sweeps):
    """Dense sweeps with the prior N (:func:`tests.reference.gibbs_numpy.gibbs_sweeps` with a prior)."""
    return gibbs_numpy.gibbs_sweeps(token_indptr, token_terms, topics, prior.shape[0], alpha, beta, seed=seed,
                                    first_doc=first_doc, sweeps_done=sweeps_done, n_sweeps=n_sweeps, prior=prior,
                                    prior_totals=prior_totals, vocab_size=vocab_size)


def training_perplexity(token_indptr, token_terms, topics, prior, prior_totals, alpha, beta, vocab_size):
    """exp(-mean over tokens of log sum_k theta_dk phi_kw), theta and phi the point estimates with the prior."""
    n_topics, n_terms = len(alpha), prior.shape[0]
    doc_topic, term_topic, topic_counts = counts_from_topics(token_indptr, token_terms, np.asarray(topics),
                                                             n_terms, n_topics)
    theta = (doc_topic + alpha) / (doc_topic.sum(axis=1, keepdims=True) + alpha.sum())
    phi = (term_topic + prior + beta) / (topic_counts + prior_totals + vocab_size * beta)  # (n_terms, K)
    doc_of = token_docs(token_indptr)
    log_lik = sum(np.log(theta[doc_of[t]] @ phi[token_terms[t]]) for t in range(len(token_terms)))
    return float(np.exp(-log_lik / len(token_terms)))


def decayed_update(counts, totals, rows, values, decay):
    """N <- decay * (N + delta) and N_k <- decay * (N_k + sum_w delta_wk), one entry at a time (integer deltas)."""
    counts = np.array(counts, dtype=np.float64)
    totals = np.array(totals, dtype=np.float64)
    added = np.zeros(counts.shape)
    for i, w in enumerate(rows):
        added[w] = values[i]
    for w in range(counts.shape[0]):
        for k in range(counts.shape[1]):
            counts[w, k] = decay * (counts[w, k] + added[w, k])
    for k in range(counts.shape[1]):
        totals[k] = decay * (totals[k] + sum(int(values[i][k]) for i in range(len(rows))))
    return counts, totals


def document_posterior_law(token_indptr, token_terms, prior, prior_totals, alpha, beta, vocab_size):
    """Exact law of the "posterior-document" start (in the limit of many sweeps per document).

    Document d's assignments are drawn from p(z_d | w_d, prior + counts of documents 0..d-1), by
    enumeration (:func:`exact_posterior` on d alone), then d's counts join the prior of the next one.
    """
    n_topics = len(alpha)
    prior = np.array(prior, dtype=np.float64)
    law = {(): 1.0}
    for d in range(len(token_indptr) - 1):
        terms = np.asarray(token_terms[token_indptr[d]:token_indptr[d + 1]])
        new_law = {}
        for z_before, p_before in law.items():
            rows, totals = prior.copy(), np.array(prior_totals, dtype=np.float64)
            for t, k in enumerate(z_before):
                rows[token_terms[t], k] += 1
                totals[k] += 1
            doc_law = exact_posterior(np.array([0, len(terms)]), terms, rows, totals, alpha, beta, vocab_size)
            for z_doc, p_doc in doc_law.items():
                new_law[z_before + z_doc] = p_before * p_doc
        law = new_law
    assert all(len(z) == len(token_terms) for z in law) and n_topics >= 1
    return law


def decayed_prior_stream(deltas, n_terms, n_topics, beta, decay):
    """The recurrence of Gao et al.'s section 2.2 taken literally: B_0 = beta, B_t = decay (B_{t-1} + n_t).

    ``deltas`` is a list of dense (n_terms, n_topics) count matrices n_1, n_2, ...; returns every B_t
    (B_0 first), each (n_terms, n_topics): the prior of minibatch t + 1, beta included.
    """
    out = [np.full((n_terms, n_topics), float(beta))]
    for delta in deltas:
        out.append(decay * (out[-1] + np.asarray(delta, dtype=np.float64)))
    return out


__all__ = ["conditional", "decayed_prior_stream", "decayed_update", "document_posterior_law", "exact_posterior", "gibbs_sweeps", "joint_log_likelihood",
           "progressive_law", "random_topics", "sweep_transition", "training_perplexity"]
