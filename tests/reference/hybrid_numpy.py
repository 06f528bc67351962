"""Slow, obvious NumPy/scipy reference for the hybrid (Gibbs within VB) E-step of Mimno et al. (2012).

Written for clarity, not speed: Python loops over documents, sweeps and tokens, and every draw computes
the full O(K) topic weights (no sparse buckets). It consumes the same counter-based uniforms as
:mod:`topicflow.models.lda.vb.hybrid` in the same way, so it makes exactly the same assignments.
Polylingual documents are handled per language (no stacked vocabulary).

A corpus here is ``docs[lang][d] = {term_id: count}``; ``exp_elog[lang]`` has shape (K, V_lang) and its
key order is the language order of the topics (the order of the tokens within a document).
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, psi

from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key

PHI_NORM_EPS = 1e-100  # the same guard vb_lda adds to each phi normalizer


def draw_topic(u, doc_counts, alpha, e_w):
    """The topic drawn with uniform ``u`` from p(k) ∝ (doc_counts_k + alpha_k) e_w[k], in two buckets.

    Document bucket first (running sum over topics in increasing order), then the smoothing bucket.
    """
    r_cum = np.cumsum(doc_counts * e_w)
    s_cum = np.cumsum(alpha * e_w)
    r, s = r_cum[-1], s_cum[-1]
    x = u * (s + r)
    if x < r:
        return int(np.searchsorted(r_cum, x, side="right"))
    k = int(np.searchsorted(s_cum, x - r, side="right"))
    if k == len(s_cum):  # x - r rounded up to s: take the last topic of positive weight
        k = int(np.searchsorted(s_cum, s, side="left"))
    return k


def doc_tokens(docs, d):
    """The tokens of document d as (language, term) pairs: each language in turn, terms ascending, by count."""
    return [(lang, w) for lang in docs for w in sorted(docs[lang][d]) for _ in range(docs[lang][d][w])]


def sample_doc(tokens, exp_elog, alpha, burn_in, samples, key, init="progressive"):
    """An initialization sweep, B burn-in and M kept Gibbs sweeps over one document's tokens.

    ``init="progressive"``: sweep 0 draws each token given the tokens before it; ``"random"``: sweep 0
    gives each token a uniformly random topic, ``min(floor(u K), K - 1)`` (Zhai 2014, section 4.2:
    "we randomly initialize a topic configuration z_d"). Returns the assignments of every kept sweep,
    shape (M, n_tokens).
    """
    n_topics = len(alpha)
    doc_counts = np.zeros(n_topics)
    z = np.full(len(tokens), -1)
    kept = []
    draw = 0
    for sweep in range(1 + burn_in + samples):
        for t, (lang, w) in enumerate(tokens):
            if sweep > 0:
                doc_counts[z[t]] -= 1  # N_dk^{-i}: this token's own assignment left out
            e_w = exp_elog[lang][:, w].astype(np.float64)
            u = uniform_from_key(key, draw)
            if sweep == 0 and init == "random":
                z[t] = min(int(u * n_topics), n_topics - 1)
            else:
                z[t] = draw_topic(u, doc_counts, alpha, e_w)
            doc_counts[z[t]] += 1
            draw += 1
        if sweep > burn_in:
            kept.append(z.copy())
    return np.array(kept, dtype=np.int64).reshape(samples, len(tokens))


def doc_bound(docs, d, exp_elog, gamma):
    """sum_w n_w log(eps + sum_k exp(E[log theta_k]) E_kw) - E_q[log q(theta)] at gamma (VB's phi* ELBO)."""
    elog_theta = psi(gamma) - psi(gamma.sum())
    log_norm_sum = 0.0
    for lang in docs:
        for w, n in docs[lang][d].items():
            log_norm_sum += n * np.log(np.sum(np.exp(elog_theta) * exp_elog[lang][:, w]) + PHI_NORM_EPS)
    elog_q_theta = gammaln(gamma.sum()) - gammaln(gamma).sum() + np.sum((gamma - 1) * elog_theta)
    return log_norm_sum - elog_q_theta


def hybrid_estep_reference(docs, exp_elog, alpha, burn_in, samples, *, seed, epoch=0, first_doc=0,
                           init="progressive", alpha_stats="mean"):
    """Mimno et al. (2012) sampled E-step, one document at a time.

    Returns a dict with dense per-language ``stats`` (K, V_lang) (kept indicator counts / M),
    ``alpha_suff``, ``doc_elbo``, ``gamma`` (n_docs, K) and ``kept_z`` (per document, (M, n_tokens)).
    ``alpha_stats="mean"``: alpha_suff = sum_d E[log theta_d] under Dirichlet(gamma_d), gamma_d = alpha
    + the mean counts of the kept sweeps. ``"samples"``: sum_d of the mean over the kept sweeps of
    E[log theta_d] under Dirichlet(alpha + N_d(z)), theta's conditional given each sample; doc_elbo
    then also adds sum_k (alpha_k - 1) (mean-mode alpha_suff - sampled alpha_suff).
    """
    exp_elog = {lang: np.asarray(exp_elog[lang], dtype=np.float64) for lang in exp_elog}
    docs = {lang: docs[lang] for lang in exp_elog if lang in docs}  # token order = topics' language order
    alpha = np.asarray(alpha, dtype=np.float64)
    n_docs = len(next(iter(docs.values())))
    counts = {lang: np.zeros_like(exp_elog[lang]) for lang in exp_elog}
    gammas, kept_z = np.zeros((n_docs, len(alpha))), []
    alpha_suff, doc_elbo = np.zeros(len(alpha)), 0.0
    for d in range(n_docs):
        tokens = doc_tokens(docs, d)
        key = np.uint64(counter_key(seed, STREAM_GIBBS, epoch, first_doc + d))  # a Python int from numba
        kept = sample_doc(tokens, exp_elog, alpha, burn_in, samples, key, init)
        kept_z.append(kept)
        doc_topic_sum = np.zeros(len(alpha))
        sampled_elog_theta = np.zeros(len(alpha))
        for z in kept:
            n_k = np.zeros(len(alpha))
            for (lang, w), k in zip(tokens, z):
                counts[lang][k, w] += 1
                n_k[k] += 1
            doc_topic_sum += n_k
            sampled_elog_theta += psi(alpha + n_k) - psi(alpha.sum() + len(tokens))
        gammas[d] = alpha + doc_topic_sum / samples
        mean_elog_theta = psi(gammas[d]) - psi(gammas[d].sum())
        doc_elbo += doc_bound(docs, d, exp_elog, gammas[d])
        if alpha_stats == "samples":
            alpha_suff += sampled_elog_theta / samples
            doc_elbo += np.sum((alpha - 1) * (mean_elog_theta - sampled_elog_theta / samples))
        else:
            alpha_suff += mean_elog_theta
    return {"stats": {lang: c / samples for lang, c in counts.items()}, "alpha_suff": alpha_suff,
            "doc_elbo": doc_elbo, "gamma": gammas, "kept_z": kept_z}


def stationary_marginals(tokens_terms, exp_elog, alpha):
    """p(z_i = k) of each token under p(z) ∝ prod_i E[z_i, w_i] prod_k Gamma(alpha_k + n_k) / Gamma(alpha_k).

    Brute-force enumeration of all K^n assignments (theta integrated out): the stationary
    distribution of the collapsed Gibbs chain. Returns shape (n_tokens, K).
    """
    n_topics, n_tok = len(alpha), len(tokens_terms)
    marginals = np.zeros((n_tok, n_topics))
    for z in np.ndindex(*(n_topics,) * n_tok):
        n_k = np.bincount(np.array(z, dtype=np.int64), minlength=n_topics)
        log_p = sum(np.log(exp_elog[k, w]) for k, w in zip(z, tokens_terms))
        log_p += np.sum(gammaln(alpha + n_k) - gammaln(alpha))
        for i, k in enumerate(z):
            marginals[i, k] += np.exp(log_p)
    return marginals / marginals.sum(axis=1, keepdims=True)


def stationary_elog_theta(tokens_terms, exp_elog, alpha):
    """E[psi(alpha_k + n_k) - psi(sum alpha + N)] under p(z) ∝ prod_i E[z_i, w_i] prod_k Gamma(alpha_k + n_k).

    Brute-force enumeration of all K^n assignments: the expectation of E[log theta_k | z] (theta's
    conditional Dirichlet(alpha + n(z))) under the collapsed Gibbs chain's stationary distribution, the
    value the ``alpha_stats="samples"`` statistics estimate. Returns shape (K,).
    """
    n_topics, n_tok = len(alpha), len(tokens_terms)
    total, weight = np.zeros(n_topics), 0.0
    for z in np.ndindex(*(n_topics,) * n_tok):
        n_k = np.bincount(np.array(z, dtype=np.int64), minlength=n_topics)
        log_p = sum(np.log(exp_elog[k, w]) for k, w in zip(z, tokens_terms))
        log_p += np.sum(gammaln(alpha + n_k) - gammaln(alpha))
        p = np.exp(log_p)
        total += p * (psi(alpha + n_k) - psi(alpha.sum() + n_tok))
        weight += p
    return total / weight
