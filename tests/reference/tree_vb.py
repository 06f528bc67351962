"""Slow, obvious NumPy reference for variational tree-prior LDA (Zhai 2014, eqs. 5.3-5.5).

Plain loops over documents and tokens; each token's q(z, y) is the joint K x S_w multinomial of
eq. 5.3, computed directly over (topic, path) with scipy's digamma. Trees are given as plain lists:
``edges = [(parent, child_or_None, beta), ...]`` and ``paths[lang][w] = [[edge, ...], ...]`` (a word's
paths, root first). Documents are ``docs[lang][d] = {term: count}``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, psi

PHI_NORM_EPS = 1e-100  # the guard the LDA kernel adds to each phi normalizer


def groups(edges, paths, per_language):
    """{group: [edges]} of the tree."""
    out = {}
    for lang, words in paths.items():
        for word_paths in words:
            for path in word_paths:
                for e in path:
                    key = (edges[e][0], lang) if per_language else (edges[e][0],)
                    members = out.setdefault(key, [])
                    if e not in members:
                        members.append(e)
    return out


def elog_pi(lam, edges, paths, per_language):
    """{(group, edge): psi(lam_e) - psi(group sum)} per topic, as dict of arrays (K,)."""
    out = {}
    for key, members in groups(edges, paths, per_language).items():
        total = sum(lam[:, e] for e in members)
        for e in members:
            out[(key, e)] = psi(lam[:, e]) - psi(total)
    return out


def path_log_weight(lam, edges, path, lang, elog, per_language):
    """sum over the path's edges of E[log pi] for every topic, (K,)."""
    value = np.zeros(lam.shape[0])
    for e in path:
        key = (edges[e][0], lang) if per_language else (edges[e][0],)
        value = value + elog[(key, e)]
    return value


def estep_reference(docs, lam, edges, paths, alpha, max_iter, tol, per_language=False):
    """Coordinate ascent per document with the joint phi_ks; returns gamma, edge counts, doc ELBO terms.

    The stopping rule and start are the LDA kernel's (mean |delta gamma| < tol; gamma = alpha + N/K).
    """
    langs = list(docs)
    n_topics = len(alpha)
    n_docs = len(docs[langs[0]])
    elog = elog_pi(lam, edges, paths, per_language)
    counts = np.zeros_like(lam)
    word_stats = {lang: np.zeros((n_topics, len(paths[lang]))) for lang in paths}
    alpha_suff = np.zeros(n_topics)
    gammas = np.zeros((n_docs, n_topics))
    doc_elbo = 0.0
    for d in range(n_docs):
        tokens = [(lang, w, n) for lang in langs for w, n in docs[lang][d].items()]
        gamma = alpha + sum(n for _, _, n in tokens) / n_topics
        for _ in range(max_iter):
            elog_theta = psi(gamma) - psi(gamma.sum())
            new_gamma = alpha.copy()
            for lang, w, n in tokens:
                phi = np.array([np.exp(elog_theta + path_log_weight(lam, edges, s, lang, elog, per_language))
                                for s in paths[lang][w]])  # (S, K): the joint q(z, y)
                new_gamma = new_gamma + n * phi.sum(axis=0) / (phi.sum() + PHI_NORM_EPS)
            change = np.mean(np.abs(new_gamma - gamma))
            gamma = new_gamma
            if change < tol:
                break
        elog_theta = psi(gamma) - psi(gamma.sum())
        for lang, w, n in tokens:
            phi = np.array([np.exp(elog_theta + path_log_weight(lam, edges, s, lang, elog, per_language))
                            for s in paths[lang][w]])
            norm = phi.sum() + PHI_NORM_EPS
            doc_elbo += n * np.log(norm)
            for s, path in enumerate(paths[lang][w]):
                for e in path:
                    counts[:, e] += n * phi[s] / norm
            word_stats[lang][:, w] += n * phi.sum(axis=0) / norm
        alpha_suff += elog_theta
        doc_elbo -= gammaln(gamma.sum()) - gammaln(gamma).sum() + np.sum((gamma - 1) * elog_theta)
        gammas[d] = gamma
    return {"gamma": gammas, "edge_counts": counts, "word_stats": word_stats, "alpha_suff": alpha_suff,
            "doc_elbo": doc_elbo}


def topic_terms_reference(lam, edges, paths, per_language=False):
    """sum_k sum_groups E[log p(pi | beta)] - E[log q(pi | lambda)], one Dirichlet at a time."""
    total = 0.0
    beta = np.array([b for _, _, b in edges])
    for members in groups(edges, paths, per_language).values():
        for k in range(lam.shape[0]):
            lam_g, beta_g = lam[k, members], beta[members]
            elog = psi(lam_g) - psi(lam_g.sum())
            total += gammaln(beta_g.sum()) - gammaln(beta_g).sum() + np.sum((beta_g - 1) * elog)
            total -= gammaln(lam_g.sum()) - gammaln(lam_g).sum() + np.sum((lam_g - 1) * elog)
    return total


def toy_tree():
    """A bilingual two-level tree where "en" term 0 has two paths (senses).

    Returns (PriorTree, edges, paths) with ``edges``/``paths`` in this module's list format.
    Nodes: ROOT, C1 (en0, de0), C2 (en0, en1, de1); en2 and de2 hang from the root.
    """
    from topicflow.models.tree_lda.tree import PriorTree

    edges = [(0, 1, 0.5), (0, 2, 0.4), (0, None, 0.3), (0, None, 0.2),
             (1, None, 1.0), (1, None, 2.0), (2, None, 1.5), (2, None, 0.7), (2, None, 0.9)]
    paths = {"en": [[[0, 4], [1, 6]], [[1, 7]], [[2]]], "de": [[[0, 5]], [[1, 8]], [[3]]]}
    flat = [(li, w, p) for li, lang in enumerate(paths) for w, ps in enumerate(paths[lang]) for p in ps]
    lengths = [len(p) for _, _, p in flat]
    tree = PriorTree(
        languages=("en", "de"), n_terms=(3, 3), node_names=("ROOT", "C1", "C2"),
        edge_parent=np.array([e[0] for e in edges], dtype=np.int64),
        edge_child=np.array([-1 if e[1] is None else e[1] for e in edges], dtype=np.int64),
        edge_prior=np.array([e[2] for e in edges]),
        path_indptr=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        path_edges=np.array([e for _, _, p in flat for e in p], dtype=np.int64),
        path_language=np.array([li for li, _, _ in flat], dtype=np.int64),
        path_term=np.array([w for _, w, _ in flat], dtype=np.int64),
    )
    return tree, edges, paths
