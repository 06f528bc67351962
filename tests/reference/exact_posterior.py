"""Exact posterior of collapsed LDA on tiny problems, by enumerating all K^N topic assignments.

With theta and phi integrated out (Griffiths and Steyvers 2004)::

    p(w, z) = prod_d [Gamma(K alpha) / Gamma(n_d + K alpha) prod_k Gamma(n_dk + alpha) / Gamma(alpha)]
            * prod_k [Gamma(V beta) / Gamma(n_k + V beta) prod_w Gamma(n_wk + beta) / Gamma(beta)]

p(z | w) = p(w, z) / p(w) and p(w) = sum_z p(w, z). Only for N of about a dozen tokens or fewer.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln, logsumexp


def log_joint(z, terms, docs, n_topics, n_terms, alpha, beta):
    """log p(w, z) of one assignment ``z`` (shape (n_tokens,)) of tokens ``terms`` in documents ``docs``."""
    z = np.asarray(z)
    total = 0.0
    for d in np.unique(docs):
        n_dk = np.bincount(z[docs == d], minlength=n_topics)
        total += gammaln(n_topics * alpha) - gammaln(n_dk.sum() + n_topics * alpha)
        total += np.sum(gammaln(n_dk + alpha) - gammaln(alpha))
    n_wk = np.zeros((n_terms, n_topics))
    np.add.at(n_wk, (terms, z), 1)
    n_k = n_wk.sum(axis=0)
    total += np.sum(gammaln(n_terms * beta) - gammaln(n_k + n_terms * beta))
    total += np.sum(gammaln(n_wk + beta) - gammaln(beta))
    return float(total)


def exact_posterior(terms, docs, n_topics, n_terms, alpha, beta):
    """(assignments (K^N, N) int, posterior probabilities (K^N,), log p(w)) over all assignments.

    Row i of ``assignments`` is the base-K expansion of i (token 0 most significant), so an assignment
    ``z`` has index ``sum_j z_j K^(N-1-j)``.
    """
    terms, docs = np.asarray(terms), np.asarray(docs)
    assignments = np.array(list(itertools.product(range(n_topics), repeat=len(terms))), dtype=np.int64)
    log_p = np.array([log_joint(z, terms, docs, n_topics, n_terms, alpha, beta) for z in assignments])
    log_evidence = float(logsumexp(log_p))
    return assignments, np.exp(log_p - log_evidence), log_evidence


def assignment_index(z, n_topics):
    """Row of ``exact_posterior``'s assignments equal to ``z``."""
    index = 0
    for k in z:
        index = index * n_topics + int(k)
    return index
