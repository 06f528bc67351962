"""Slow, obvious NumPy reference of streaming variational Bayes for LDA (Broderick et al. 2013), fixed alpha.

Written from the paper, not from topicflow's kernels: SDA-Bayes with batch VB for LDA (their
Algorithm 2, Blei et al.'s E-step) as the primitive A, the prior of minibatch b being the posterior
after minibatch b - 1:

    prior = eta (broadcast to lambda's shape)
    for each minibatch:
        repeat n_iter times (or until the minibatch ELBO's relative change <= tol):
            E-step of the minibatch's documents under lambda (tests.reference.vb_lda_numpy)
            ELBO = documents + alpha terms + sum_k E[log p(beta_k | prior_k)] - E[log q(beta_k | lambda_k)]
            lambda = prior + stats
        prior = lambda

The first minibatch's iterations start from ``lam0`` (the fit's random starting lambda); every later
one starts from its prior.
"""
from __future__ import annotations

import numpy as np

from tests.reference.vb_lda_numpy import (
    alpha_terms_reference,
    estep_reference,
    expected_log_dirichlet,
    topic_terms_reference,
)


def svb_reference(docs, minibatches, lam0, eta, alpha, n_iter, tol, doc_max_iter, doc_tol):
    """``docs[lang][d] = {w: n}``; ``minibatches`` lists the document indices of each minibatch.

    ``eta[lang]`` is a number or a (K, V) matrix. Returns the lambda (per language) after every
    minibatch and, per minibatch, the list of its ELBO values (one per local iteration).
    """
    lam = {lang: np.array(v, dtype=float) for lang, v in lam0.items()}
    prior = {lang: np.broadcast_to(np.asarray(eta[lang], dtype=float), lam[lang].shape).copy() for lang in lam}
    history, elbo_traces = [], []
    for members in minibatches:
        batch_docs = {lang: [docs[lang][d] for d in members] for lang in docs}
        elbos = []
        for _ in range(n_iter):
            exp_elog = {lang: np.exp(expected_log_dirichlet(v)) for lang, v in lam.items()}
            out = estep_reference(batch_docs, exp_elog, alpha, doc_max_iter, doc_tol)
            elbo = out["doc_elbo"] + alpha_terms_reference(alpha, out["alpha_suff"], len(members))
            elbo += sum(topic_terms_reference(lam[lang], prior[lang]) for lang in lam)
            elbos.append(elbo)
            lam = {lang: prior[lang] + out["stats"][lang] for lang in lam}
            if len(elbos) >= 2 and abs(elbos[-1] - elbos[-2]) <= tol * abs(elbos[-2]):
                break
        prior = {lang: v.copy() for lang, v in lam.items()}
        history.append(lam)
        elbo_traces.append(elbos)
    return history, elbo_traces
