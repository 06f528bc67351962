"""Slow, obvious NumPy/scipy reference for variational (polylingual) LDA.

Written for clarity, not speed: Python loops over documents, languages and words, scipy's digamma and
gammaln, one phi vector per word. Polylingual documents are handled with a separate loop per language
(not the stacked-vocabulary trick of :mod:`topicflow.models.lda.vb.estep`). The tests compare the numba
kernels against these functions.

A corpus here is ``docs[lang][d] = {term_id: count}``; every language has the same number of documents.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, psi

PHI_NORM_EPS = 1e-100  # the same guard the kernel adds to each phi normalizer


def docs_from_block(block) -> list[dict[int, int]]:
    """The documents of a DocBlock as a list of {term_id: count}."""
    return [block.doc_bag(row) for row in range(block.n_docs)]


def estep_reference(docs, exp_elog, alpha, max_iter, tol, gamma_init=None):
    """Blei et al. (2003) figure 6 with exp(E[log beta]) inputs, one document at a time.

    Parameters: docs[lang][d] = {w: n}; exp_elog[lang] of shape (K, V_lang); alpha of shape (K,).
    Returns a dict with dense per-language ``stats`` (K, V_lang), ``alpha_suff``, ``doc_elbo``,
    ``gamma`` (n_docs, K) and ``n_capped``.
    """
    langs = list(docs)
    n_topics = len(alpha)
    n_docs = len(docs[langs[0]])
    stats = {lang: np.zeros_like(exp_elog[lang], dtype=np.float64) for lang in exp_elog}
    alpha_suff = np.zeros(n_topics)
    gammas = np.zeros((n_docs, n_topics))
    doc_elbo = 0.0
    n_capped = 0
    for d in range(n_docs):
        n_words = sum(sum(docs[lang][d].values()) for lang in langs)
        gamma = alpha + n_words / n_topics if gamma_init is None else np.array(gamma_init[d], dtype=float)
        converged = False
        for _ in range(max_iter):
            exp_elog_theta = np.exp(psi(gamma) - psi(gamma.sum()))
            new_gamma = alpha.copy()
            for lang in langs:
                for w, n in docs[lang][d].items():
                    unnormalized = exp_elog_theta * exp_elog[lang][:, w]
                    phi = unnormalized / (unnormalized.sum() + PHI_NORM_EPS)
                    new_gamma = new_gamma + n * phi
            change = np.mean(np.abs(new_gamma - gamma))
            gamma = new_gamma
            if change < tol:
                converged = True
                break
        n_capped += not converged
        elog_theta = psi(gamma) - psi(gamma.sum())
        exp_elog_theta = np.exp(elog_theta)
        log_norm_sum = 0.0
        for lang in langs:
            for w, n in docs[lang][d].items():
                unnormalized = exp_elog_theta * exp_elog[lang][:, w]
                norm = unnormalized.sum() + PHI_NORM_EPS
                stats[lang][:, w] += n * unnormalized / norm
                log_norm_sum += n * np.log(norm)
        alpha_suff += elog_theta
        elog_q_theta = gammaln(gamma.sum()) - gammaln(gamma).sum() + np.sum((gamma - 1) * elog_theta)
        doc_elbo += log_norm_sum - elog_q_theta
        gammas[d] = gamma
    return {"stats": stats, "alpha_suff": alpha_suff, "doc_elbo": doc_elbo, "gamma": gammas,
            "n_capped": n_capped}


def expected_log_dirichlet(params):
    """E[log X] for rows X ~ Dir(params)."""
    return psi(params) - psi(params.sum(axis=-1, keepdims=True))


def topic_terms_reference(lam, eta):
    """E_q[log p(beta | eta)] - E_q[log q(beta | lambda)], one topic at a time."""
    eta = np.broadcast_to(np.asarray(eta, dtype=float), lam.shape)
    total = 0.0
    for k in range(lam.shape[0]):
        elog_beta = psi(lam[k]) - psi(lam[k].sum())
        total += gammaln(eta[k].sum()) - gammaln(eta[k]).sum() + np.sum((eta[k] - 1) * elog_beta)
        total -= gammaln(lam[k].sum()) - gammaln(lam[k]).sum() + np.sum((lam[k] - 1) * elog_beta)
    return total


def alpha_terms_reference(alpha, alpha_suff, n_docs):
    """sum_d E_q[log p(theta_d | alpha)]."""
    return n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum()) + np.sum((alpha - 1) * alpha_suff)


def batch_vb_reference(docs, lam0, eta, alpha, n_iter, max_iter, tol, warm_start=False):
    """Batch VB with fixed alpha: E-step, ELBO at the E-step's parameters, M-step lambda = eta + stats.

    With ``warm_start`` each iteration's E-step starts from the previous iteration's gamma.
    Returns the list of lambdas (after each M-step) and the ELBO of each iteration.
    """
    lam = {lang: np.array(v, dtype=float) for lang, v in lam0.items()}
    lams, elbos, gamma = [], [], None
    for _ in range(n_iter):
        exp_elog = {lang: np.exp(expected_log_dirichlet(v)) for lang, v in lam.items()}
        out = estep_reference(docs, exp_elog, alpha, max_iter, tol, gamma_init=gamma if warm_start else None)
        gamma = out["gamma"]
        n_docs = len(next(iter(docs.values())))
        elbo = out["doc_elbo"] + alpha_terms_reference(alpha, out["alpha_suff"], n_docs)
        elbo += sum(topic_terms_reference(lam[lang], eta[lang]) for lang in lam)
        elbos.append(elbo)
        lam = {lang: eta[lang] + out["stats"][lang] for lang in lam}
        lams.append(lam)
    return lams, elbos
