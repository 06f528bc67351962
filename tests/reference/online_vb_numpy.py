"""Slow, obvious NumPy reference of online variational LDA (Hoffman et al. 2010), fixed alpha and eta.

For each minibatch in order: the batch E-step of :mod:`tests.reference.vb_lda_numpy` on its documents
with the current lambda, then ``lambda = (1 - rho) lambda + rho (eta + D / S * stats)`` with
``rho = (tau0 + t) ** -kappa``.
"""
from __future__ import annotations

import numpy as np

from tests.reference.vb_lda_numpy import estep_reference, expected_log_dirichlet


def online_vb_reference(docs, minibatches, lam0, eta, alpha, tau0, kappa, total_docs, max_iter, tol, gamma_init=None):
    """``docs[lang][d] = {w: n}``; ``minibatches`` lists the document indices of each minibatch.

    ``gamma_init(members)`` gives the E-step's starting gamma of a minibatch (default: alpha + N_d / K).

    Returns the lambda (per language) after every minibatch.
    """
    lam = {lang: np.array(v, dtype=float) for lang, v in lam0.items()}
    history = []
    for t, members in enumerate(minibatches):
        batch_docs = {lang: [docs[lang][d] for d in members] for lang in docs}
        exp_elog = {lang: np.exp(expected_log_dirichlet(v)) for lang, v in lam.items()}
        start = None if gamma_init is None else gamma_init(members)
        out = estep_reference(batch_docs, exp_elog, alpha, max_iter, tol, gamma_init=start)
        rho = (tau0 + t) ** -kappa if tau0 + t > 0 else 1.0
        scale = total_docs / len(members)
        lam = {lang: (1 - rho) * lam[lang] + rho * (eta + scale * out["stats"][lang]) for lang in lam}
        history.append(lam)
    return history
