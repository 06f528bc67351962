"""Left-to-right held-out likelihood (Wallach et al. 2009, Algorithm 3) in plain NumPy, and exact values.

Written from the paper, loop for loop: positions outside, particles inside, each particle a vector of
assignments resampled over the earlier positions before position n is scored and drawn. The random
numbers are topicflow's counter-based ones (``uniform_from_key(counter_key(seed, STREAM_LEFT_TO_RIGHT,
r, doc), i)`` for the i-th draw of particle r), so the kernel must give the same bits. A draw takes
the first topic whose cumulative weight exceeds u times the total weight.

Two exact quantities for tiny documents (all K^n assignments enumerated):

- :func:`exact_log_likelihood`: log p(w | Phi, alpha) = log sum_z p(z | alpha) prod_n Phi[z_n, w_n],
  with p(z | alpha) the Dirichlet-multinomial ``Gamma(A) / Gamma(A + n) prod_t Gamma(alpha_t + N_t) /
  Gamma(alpha_t)``, A = sum(alpha).
- :func:`algorithm_limit`: what Algorithm 3 tends to as R grows. The particles are independent, so
  p_n (their average at position n) tends to mu_n, the mean of one particle's
  ``sum_t Phi[t, w_n] (N_t + alpha_t) / (n + A)`` under the law q_n of its assignments after the
  resampling sweep; q_n follows from q_{n-1} by the exact transition probabilities. Returns the
  mu_n and the variances of that quantity under q_n, from which E[log p_n] = log mu_n -
  var_n / (2 R mu_n^2) + O(R^-2) (delta method).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import gammaln

from topicflow.models.common.rng import (
    STREAM_LEFT_TO_RIGHT,
    counter_key,
    uniform_from_key,
)


def _draw(weights: np.ndarray, u: float) -> tuple[int, float]:
    cumulative = np.cumsum(weights)
    total = float(cumulative[-1])
    return min(int(np.searchsorted(cumulative, u * total, side="right")), weights.shape[0] - 1), total


def left_to_right_doc(tokens, topic_word, alpha, n_particles, seed, doc) -> float:
    """Algorithm 3 for one document (``tokens`` term ids, ``topic_word`` (K, V), ``alpha`` (K,))."""
    alpha = np.asarray(alpha, dtype=np.float64)
    n_topics = alpha.shape[0]
    alpha_sum = 0.0
    for a in alpha.tolist():
        alpha_sum += a
    keys = [np.uint64(counter_key(seed, STREAM_LEFT_TO_RIGHT, r, doc)) for r in range(n_particles)]
    draws = [0] * n_particles
    z = [np.zeros(len(tokens), dtype=np.int64) for _ in range(n_particles)]

    def next_uniform(r: int) -> float:
        u = uniform_from_key(keys[r], draws[r])
        draws[r] += 1
        return u

    log_lik = 0.0
    for n, w_n in enumerate(tokens):
        p_n = 0.0
        for r in range(n_particles):
            for j in range(n):  # resample z_<n, in order
                counts = np.bincount(np.delete(z[r][:n], j), minlength=n_topics)
                z[r][j], _ = _draw(topic_word[:, tokens[j]] * (counts + alpha), next_uniform(r))
            counts = np.bincount(z[r][:n], minlength=n_topics)
            weights = topic_word[:, w_n] * (counts + alpha)
            z[r][n], total = _draw(weights, next_uniform(r))
            p_n += total / (n + alpha_sum)
        log_lik += math.log(p_n / n_particles)
    return log_lik


def left_to_right(token_indptr, token_terms, topic_word, alpha, *, n_particles, seed, first_doc=0) -> np.ndarray:
    """:func:`left_to_right_doc` for every document of a token CSR."""
    return np.array([
        left_to_right_doc(token_terms[token_indptr[d]:token_indptr[d + 1]].tolist(), topic_word, alpha,
                          n_particles, seed, first_doc + d)
        for d in range(len(token_indptr) - 1)
    ])


def exact_log_likelihood(tokens, topic_word, alpha) -> float:
    """log p(w | Phi, alpha) by summing over all K^n assignments."""
    alpha = np.asarray(alpha, dtype=np.float64)
    n_topics, n = alpha.shape[0], len(tokens)
    total = 0.0
    for z in itertools.product(range(n_topics), repeat=n):
        counts = np.bincount(np.array(z, dtype=np.int64), minlength=n_topics)
        log_prior = (gammaln(alpha.sum()) - gammaln(alpha.sum() + n)
                     + np.sum(gammaln(alpha + counts) - gammaln(alpha)))
        total += math.exp(log_prior) * float(np.prod(topic_word[list(z), tokens]))
    return math.log(total)


def _conditional(topic_word, w, others, alpha) -> np.ndarray:
    weights = topic_word[:, w] * (np.bincount(np.array(others, dtype=np.int64), minlength=alpha.shape[0]) + alpha)
    return weights / weights.sum()


def algorithm_limit(tokens, topic_word, alpha) -> tuple[np.ndarray, np.ndarray]:
    """(mu_n, var_n) per position: mean and variance of one particle's predictive under its exact law."""
    alpha = np.asarray(alpha, dtype=np.float64)
    law: dict[tuple[int, ...], float] = {(): 1.0}
    means, variances = [], []
    for n, w_n in enumerate(tokens):
        for j in range(n):
            swept: dict[tuple[int, ...], float] = {}
            for z, p in law.items():
                for t, q in enumerate(_conditional(topic_word, tokens[j], z[:j] + z[j + 1:], alpha)):
                    key = z[:j] + (t,) + z[j + 1:]
                    swept[key] = swept.get(key, 0.0) + p * q
            law = swept
        predictive = {z: float(np.sum(topic_word[:, w_n] * (np.bincount(np.array(z, dtype=np.int64),
                                                                            minlength=alpha.shape[0]) + alpha)))
                      / (n + alpha.sum()) for z in law}
        mean = sum(p * predictive[z] for z, p in law.items())
        means.append(mean)
        variances.append(sum(p * (predictive[z] - mean) ** 2 for z, p in law.items()))
        extended: dict[tuple[int, ...], float] = {}
        for z, p in law.items():
            for t, q in enumerate(_conditional(topic_word, w_n, z, alpha)):
                extended[z + (t,)] = p * q
        law = extended
    return np.array(means), np.array(variances)
