"""Scores of a collapsed Gibbs state: joint and training likelihood, topic-word estimate."""
from __future__ import annotations

import math

import numba
import numpy as np

from topicflow._typing import FloatArray, Int32Array, IntArray
from topicflow.models.common.dirichlet import posterior_mean
from topicflow.models.lda.gibbs.sparse import (
    _prior_lists,
    _PriorLists,
    _word_lists,
    _WordLists,
)
from topicflow.models.lda.gibbs.state import GibbsState, TopicWordPrior, _check_prior

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


def log_joint_of_counts(doc_topic_counts: IntArray | Int32Array, term_topic_counts: IntArray | Int32Array,
                        doc_topic_prior: float, topic_word_prior: float) -> float:
    """Compute log p(w, z | alpha, beta) from the count tables of one sample (symmetric priors).

    Parameters
    ----------
    doc_topic_counts : ndarray of shape (n_docs, n_topics), int
        The counts n_dk of every document the sample has assigned.
    term_topic_counts : ndarray of shape (n_terms, n_topics), int
        The counts n_wk; its column sums are n_k.
    doc_topic_prior, topic_word_prior : float
        Symmetric alpha and beta.

    Returns
    -------
    float
        The formula of :func:`joint_log_likelihood`; the score by which Canini et al. (2009, sec. 5.2)
        pick "the sample having highest posterior probability" among independent samples (p(z | w)
        is p(w, z) over a constant).

    Examples
    --------
    >>> round(log_joint_of_counts(np.array([[1]]), np.array([[1], [0]]), 1.0, 1.0), 12)
    -0.69314718056
    """
    doc_topic = np.ascontiguousarray(doc_topic_counts, dtype=np.int64)
    term_topic = np.ascontiguousarray(term_topic_counts, dtype=np.int64)
    n_topics = term_topic.shape[1]
    alpha = np.full(n_topics, float(doc_topic_prior))
    return float(_log_lik_terms(doc_topic.reshape(-1, n_topics), term_topic, term_topic.sum(axis=0), alpha,
                                float(topic_word_prior)))


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
    Griffiths and Steyvers (2004), eq. (6), the posterior mean of phi given z
    (:func:`topicflow.models.common.dirichlet.posterior_mean` with the state's n_k).

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 1]), np.array([0], np.int32), np.array([0], np.int32), 2,
    ...                           GibbsParams(n_topics=1, topic_word_prior=1.0))
    >>> topic_word_distribution(state).tolist()
    [[0.6666666666666666, 0.3333333333333333]]
    """
    return posterior_mean(state.term_topic_counts.T, float(state.topic_word_prior), totals=state.topic_counts)
