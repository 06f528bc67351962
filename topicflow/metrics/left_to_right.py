"""The left-to-right estimator of held-out likelihood (Wallach, Murray, Salakhutdinov and Mimno 2009).

This module owns Algorithm 3 of Wallach et al. (2009): the probability of a document's tokens given
fixed topics and the document-topic prior, estimated token by token with R particles, each a vector
of topic assignments that is resampled (one Gibbs sweep over the earlier positions) before every new
position. It scores any LDA-family model from its topic-word point estimate and alpha alone. Pure
NumPy and numba: it must not import dask, zarr or logging, and it does no I/O.

Glossary (Wallach et al. 2009):
    tokens (w, (n,)): one document's term ids, in the order they are scored
    topic_word (Phi, (n_topics, n_terms)): row-normalized topic-word probabilities, held fixed
    term_topic ((n_terms, n_topics)): Phi transposed, the layout the kernel reads
    doc_topic_prior (alpha m, (n_topics,)): the Dirichlet prior of theta
    particles (R): independent assignment vectors z^(r); ``n_particles`` in the code
    topic_counts (N_t, (n_topics,)): assignments of the current particle to topic t among z_<n
    p_n: (1/R) sum_r sum_t Phi_{t, w_n} (N_t + alpha_t) / (n + sum_t alpha_t), the estimate of
        p(w_n | w_<n, Phi, alpha m)

References
----------
Wallach, Murray, Salakhutdinov and Mimno (2009). Evaluation methods for topic models. ICML.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.categorical import draw_dense
from topicflow.models.common.rng import (
    STREAM_LEFT_TO_RIGHT,
    counter_key,
    uniform_from_key,
)
from topicflow.models.common.validation import parse_dirichlet_prior
from topicflow.models.lda.vb.layout import PreparedTopics

#: Particles R of Wallach et al. (2009), section 4.
DEFAULT_PARTICLES = 20


@numba.njit(nogil=True, cache=True, inline="always")
def _fill_weights(term_topic, w, topic_counts, alpha, weights):
    """weights_t = Phi_{t, w} (N_t + alpha_t): the unnormalized conditional of one assignment."""
    for k in range(weights.shape[0]):
        weights[k] = term_topic[w, k] * (topic_counts[k] + alpha[k])


@numba.njit(nogil=True, cache=True)
def _left_to_right_doc(tokens, term_topic, alpha, alpha_sum, n_particles, seed, doc,
                       assignments, topic_counts, weights, p_sum):
    """Algorithm 3 for one document; returns sum_n log p_n (``-inf`` if a token has probability 0).

    ``assignments`` (>= n,), ``topic_counts`` (K,), ``weights`` (K,) and ``p_sum`` (>= n,) are scratch.
    Particles run one after the other (they are independent): ``p_sum[n]`` gathers their
    contributions in particle order, which is the order of the paper's inner loop.
    """
    n_tokens = tokens.shape[0]
    for i in range(n_tokens):
        p_sum[i] = 0.0
    for r in range(n_particles):
        key = counter_key(seed, STREAM_LEFT_TO_RIGHT, r, doc)
        draw = 0
        topic_counts[:] = 0
        for i in range(n_tokens):
            for j in range(i):  # line 6: resample z_j given z_<i without j
                topic_counts[assignments[j]] -= 1
                _fill_weights(term_topic, tokens[j], topic_counts, alpha, weights)
                k, _ = draw_dense(weights, uniform_from_key(key, draw))
                draw += 1
                assignments[j] = k
                topic_counts[k] += 1
            _fill_weights(term_topic, tokens[i], topic_counts, alpha, weights)
            k, total = draw_dense(weights, uniform_from_key(key, draw))
            draw += 1
            if not total > 0.0:
                return -math.inf
            p_sum[i] += total / (i + alpha_sum)  # line 8, before z_i is drawn (line 9)
            assignments[i] = k
            topic_counts[k] += 1
    log_lik = 0.0
    for i in range(n_tokens):
        log_lik += math.log(p_sum[i] / n_particles)  # lines 11-12
    return log_lik


@numba.njit(nogil=True, cache=True)
def _left_to_right_block(token_indptr, token_terms, term_topic, alpha, n_particles, seed, first_doc, out):
    """out[d] = the estimate of log p(w_d) for every document d, keyed by its global position."""
    n_topics = alpha.shape[0]
    alpha_sum = 0.0
    for k in range(n_topics):
        alpha_sum += alpha[k]
    max_len = 0
    for d in range(token_indptr.shape[0] - 1):
        max_len = max(max_len, token_indptr[d + 1] - token_indptr[d])
    assignments = np.zeros(max_len, dtype=np.int64)
    p_sum = np.zeros(max_len, dtype=np.float64)
    topic_counts = np.zeros(n_topics, dtype=np.int64)
    weights = np.zeros(n_topics, dtype=np.float64)
    for d in range(token_indptr.shape[0] - 1):
        tokens = token_terms[token_indptr[d]:token_indptr[d + 1]]
        out[d] = _left_to_right_doc(tokens, term_topic, alpha, alpha_sum, n_particles, seed, first_doc + d,
                                    assignments, topic_counts, weights, p_sum)


def parse_particles(n_particles: int) -> int:
    """Return ``n_particles`` as an int if it is a positive integer, else raise InvalidParameterError.

    Parameters
    ----------
    n_particles : int
        Particles R of the left-to-right estimator.

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        Not an integer, or less than 1.

    Examples
    --------
    >>> parse_particles(20)
    20
    """
    if isinstance(n_particles, bool) or not isinstance(n_particles, (int, np.integer)) or n_particles < 1:
        raise InvalidParameterError(f"n_particles (R) must be a positive integer, got {n_particles!r}")
    return int(n_particles)


def left_to_right_log_likelihood(
    token_indptr: IntArray,
    token_terms: IntArray,
    topic_word: FloatArray | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    *,
    n_particles: int = DEFAULT_PARTICLES,
    seed: int = 0,
    first_doc: int = 0,
) -> FloatArray:
    """Estimate log p(w_d | Phi, alpha) of every document by the left-to-right algorithm.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int
        The tokens of document d are ``token_terms[token_indptr[d]:token_indptr[d + 1]]``.
    token_terms : ndarray of shape (n_tokens,), int
        Term ids in the order they are scored (reading order, or a bag's CSR order from
        :func:`topicflow.models.common.blocks.expand_tokens`).
    topic_word : ndarray of shape (n_topics, n_terms), float64, or PreparedTopics
        Phi, rows normalized (a point estimate, e.g. the posterior mean), held fixed; or the same
        stacked over languages by :func:`topicflow.models.lda.vb.layout.prepare_topics`, in which
        case ``token_terms`` are stacked ids (a language's ids plus its offset).
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The prior alpha m, positive.
    n_particles : int, default 20
        R; the paper uses 20.
    seed : int, default 0
        In [0, 2**63).
    first_doc : int, default 0
        Global position of the first document; the draws of particle r for document d are
        ``uniform_from_key(counter_key(seed, STREAM_LEFT_TO_RIGHT, r, first_doc + d), i)``, i = 0, 1, ...,
        so a document gets the same estimate in any block, on any worker.

    Returns
    -------
    ndarray of shape (n_docs,), float64
        The estimate sum_n log p_n per document (0 for an empty document, ``-inf`` if a token has probability 0
        under Phi).

    Raises
    ------
    InvalidParameterError
        Shapes, term ids, priors, ``n_particles`` or ``seed`` out of range, or Phi not finite and
        nonnegative.

    Notes
    -----
    Wallach et al. (2009), Algorithm 3. For each position n, for each particle r: resample
    z_n' for n' < n in turn from ``P(z_n' = t | ...) ∝ Phi[t, w_n'] (N_t + alpha_t)`` (counts of the
    particle's other assignments among z_<n), add ``sum_t Phi[t, w_n] (N_t + alpha_t) / (n + sum(alpha))``
    to p_n, then draw z_n from the same weights with N over z_<n. Finally
    ``log p(w) ≈ sum_n log(p_n / R)``. Cost O(R n^2 K / 2) per document of n tokens.

    With R = 1 the product of the p_n is an unbiased estimate of p(w): weighting a particle by
    p(w_n | z_<n) and then drawing z_n turns the posterior of z_<n given w_<n into that of z_<=n
    given w_<=n times p(w_n | w_<n), and the Gibbs sweep leaves that posterior invariant. With R > 1
    the average over particles is taken at every position before the product, as printed, which is
    no longer unbiased; ``tests/metrics/test_left_to_right.py`` checks both against exact enumeration.

    NumPy equivalent of one particle's step n: ``counts = np.bincount(z[:n], minlength=K)``; for j in
    range(n): ``counts[z[j]] -= 1; p = phi[:, w[j]] * (counts + alpha); z[j] = draw(p); counts[z[j]] += 1``;
    then ``p = phi[:, w[n]] * (counts + alpha); p_n += p.sum() / (n + alpha.sum()); z[n] = draw(p)``,
    where ``draw`` takes the first index whose cumulative weight exceeds u times the total.

    Examples
    --------
    >>> phi = np.full((3, 2), 0.5)                       # every topic gives each term probability 1/2
    >>> ll = left_to_right_log_likelihood(np.array([0, 3]), np.array([0, 1, 1]), phi, 0.1, n_particles=5)
    >>> bool(np.isclose(ll[0], 3 * np.log(0.5), rtol=1e-14))
    True
    """
    term_topic, stacked_terms = _term_topic(topic_word)
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, term_topic.shape[1])
    n_particles = parse_particles(n_particles)
    if not (0 <= int(seed) < 2**63):
        raise InvalidParameterError(f"seed must be in [0, 2**63), got {seed!r}")
    indptr = np.asarray(token_indptr, dtype=np.int64)
    terms = np.asarray(token_terms, dtype=np.int64)
    if indptr.ndim != 1 or indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != terms.shape[0] \
            or np.any(np.diff(indptr) < 0):
        raise InvalidParameterError(
            f"token_indptr must start at 0, not decrease and end at len(token_terms) = {terms.shape[0]}"
        )
    if terms.size and (terms.min() < 0 or terms.max() >= stacked_terms):
        raise InvalidParameterError(
            f"token_terms must be term ids in [0, {stacked_terms}), got values in "
            f"[{int(terms.min())}, {int(terms.max())}]"
        )
    out = np.zeros(indptr.shape[0] - 1, dtype=np.float64)
    _left_to_right_block(indptr, terms, term_topic, alpha, n_particles, int(seed), int(first_doc), out)
    return out


def _term_topic(topic_word: FloatArray | PreparedTopics) -> tuple[FloatArray, int]:
    """Phi in the kernel's (n_terms, n_topics) layout, checked finite and nonnegative, and its row count."""
    if isinstance(topic_word, PreparedTopics):
        term_topic = np.ascontiguousarray(topic_word.term_topic, dtype=np.float64)
    else:
        phi = np.asarray(topic_word, dtype=np.float64)
        if phi.ndim != 2 or phi.shape[0] == 0:
            raise InvalidParameterError(f"topic_word must be of shape (n_topics, n_terms), got {phi.shape!r}")
        term_topic = np.ascontiguousarray(phi.T)
    if not (np.all(np.isfinite(term_topic)) and np.all(term_topic >= 0.0)):
        raise InvalidParameterError("topic_word must be finite and nonnegative")
    return term_topic, int(term_topic.shape[0])
