"""Slow, obvious NumPy reference for the collapsed Gibbs sampler of tLDA / ptLDA (Zhai 2014, eq. 5.2).

Plain Python loops over sweeps, tokens, topics and paths; the same counter-based uniforms as the
kernels of :mod:`topicflow.models.tree_lda.gibbs`, the same k-major layout of the K x S_w weights and
the same order of multiplications, so every draw and count is equal, not just equal in distribution.
Also: the exact joint p(w, z, y) as a product of Dirichlet-multinomials (written independently of the
kernel's log-likelihood: gamma-function ratios per group), and brute-force enumeration of the posterior
of a tiny corpus.

Normalization groups, written here from their definition (not from the package's layout): the edge e
on path p is normalized in group ``(parent(e),)`` ("node") or ``(parent(e), language of p's leaf)``
("node_language"); groups are numbered in the sorted order of these keys; an edge's groups are the
groups it is used in on some path (several under "node_language" when leaves of several languages
lie below it); G_kg sums N_ke over the group's edges and B_g their beta, in edge order.

Tree format: the :class:`~topicflow.models.tree_lda.tree.PriorTree` arrays; corpus: ``token_indptr``
and ``token_words`` (words numbered over the tree's languages).
"""
from __future__ import annotations

import itertools

import numba
import numpy as np
from scipy.special import gammaln

from topicflow.models.common.rng import STREAM_FOLD_IN, STREAM_GIBBS, uniform_from_key
from topicflow.models.common.rng import counter_key as _counter_key


def counter_key(seed, stream, epoch, index):
    return np.uint64(_counter_key(seed, stream, epoch, index))


def word_paths(tree):
    """List of path lists per word (words numbered over languages)."""
    offset = np.concatenate(([0], np.cumsum(tree.n_terms)))
    out = [[] for _ in range(int(offset[-1]))]
    for p in range(tree.n_paths):
        out[int(offset[tree.path_language[p]] + tree.path_term[p])].append(p)
    return out


def path_edge_list(tree, p):
    return [int(e) for e in tree.path_edges[tree.path_indptr[p]:tree.path_indptr[p + 1]]]


def groups(tree, normalization="node"):
    """(path_groups, edge_groups, keys): per path the group of each of its edges, per edge its groups."""
    def key(e, p):
        parent = int(tree.edge_parent[e])
        return (parent,) if normalization == "node" else (parent, int(tree.path_language[p]))
    keys = sorted({key(e, p) for p in range(tree.n_paths) for e in path_edge_list(tree, p)})
    number = {k: g for g, k in enumerate(keys)}
    path_groups = [[number[key(e, p)] for e in path_edge_list(tree, p)] for p in range(tree.n_paths)]
    edge_groups = [set() for _ in range(tree.n_edges)]
    for p in range(tree.n_paths):
        for e, g in zip(path_edge_list(tree, p), path_groups[p]):
            edge_groups[e].add(g)
    return path_groups, [sorted(gs) for gs in edge_groups], keys


def counts(token_indptr, topics, paths, tree, n_topics, normalization="node"):
    """(N_dk, N_ke, G_kg) recounted from the assignments (G = N_ki under "node")."""
    _, edge_groups, keys = groups(tree, normalization)
    n_docs = len(token_indptr) - 1
    doc_topic = np.zeros((n_docs, n_topics), dtype=np.int64)
    edge_topic = np.zeros((n_topics, tree.n_edges), dtype=np.int64)
    group_topic = np.zeros((n_topics, len(keys)), dtype=np.int64)
    for d in range(n_docs):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            k = topics[t]
            doc_topic[d, k] += 1
            for e in path_edge_list(tree, paths[t]):
                edge_topic[k, e] += 1
                for g in edge_groups[e]:
                    group_topic[k, g] += 1
    return doc_topic, edge_topic, group_topic


def random_start(token_indptr, token_words, tree, n_topics, seed, first_doc=0, stream=STREAM_GIBBS):
    """z = floor(u_2t K), y = paths(w)[floor(u_2t+1 S_w)]."""
    wp = word_paths(tree)
    topics = np.zeros(len(token_words), dtype=np.int64)
    paths = np.zeros(len(token_words), dtype=np.int64)
    for d in range(len(token_indptr) - 1):
        key = counter_key(seed, stream, 0, first_doc + d)
        lo = token_indptr[d]
        for t in range(lo, token_indptr[d + 1]):
            topics[t] = min(int(uniform_from_key(key, 2 * (t - lo)) * n_topics), n_topics - 1)
            options = wp[token_words[t]]
            paths[t] = options[min(int(uniform_from_key(key, 2 * (t - lo) + 1) * len(options)), len(options) - 1)]
    return topics, paths


def topic_priors(tree, n_topics, pseudo_counts=None, normalization="node"):
    """beta_e + M_ke per (topic, edge) and its sums per (topic, group), in the kernel's order of additions."""
    _, edge_groups, keys = groups(tree, normalization)
    prior_sum = np.zeros(len(keys))
    for e in range(tree.n_edges):
        for g in edge_groups[e]:
            prior_sum[g] += tree.edge_prior[e]
    edge_prior = np.array([list(tree.edge_prior)] * n_topics, dtype=float)
    group_prior = np.array([list(prior_sum)] * n_topics, dtype=float)
    if pseudo_counts is not None:
        extra = np.zeros((n_topics, len(keys)))
        for k in range(n_topics):
            for e in range(tree.n_edges):
                for g in edge_groups[e]:
                    extra[k, g] += pseudo_counts[k, e]
        edge_prior, group_prior = edge_prior + pseudo_counts, group_prior + extra
    return edge_prior, group_prior


def weights(d, w, doc_topic, edge_topic, group_topic, alpha, tree, wp, pseudo_counts=None, normalization="node"):
    """Unnormalized conditional weights, k-major over (k, j-th path of w); counts exclude the token.

    Each edge e of path p contributes (N_ke + beta_e) / (G_kg + B_g), g its group on p. With
    ``pseudo_counts`` M ((n_topics, n_edges)): N_ke + (beta_e + M_ke) over G_kg + (B_g + M_kg).
    """
    path_groups, _, _ = groups(tree, normalization)
    edge_prior, group_prior = topic_priors(tree, doc_topic.shape[1], pseudo_counts, normalization)
    out = []
    for k in range(doc_topic.shape[1]):
        a = doc_topic[d, k] + alpha[k]
        for p in wp[w]:
            value = float(a)
            for e, g in zip(path_edge_list(tree, p), path_groups[p]):
                value *= (edge_topic[k, e] + edge_prior[k, e]) / (group_topic[k, g] + group_prior[k, g])
            out.append(value)
    return out


def draw(values, u):
    total = 0.0
    for v in values:
        total += v
    x, running = u * total, 0.0
    for i, v in enumerate(values):
        running += v
        if running > x:
            return i
    return len(values) - 1


def run_sweeps(token_indptr, token_words, topics, paths, tree, alpha, seed, n_sweeps, *, first_doc=0,
               sweeps_done=0, pseudo_counts=None, normalization="node"):
    """Sweeps of eq. 5.2 (with the normalization's groups) in document then token order; returns new (topics, paths)."""
    wp = word_paths(tree)
    _, edge_groups, _ = groups(tree, normalization)
    topics, paths = np.array(topics, dtype=np.int64), np.array(paths, dtype=np.int64)
    n_topics = len(alpha)
    doc_topic, edge_topic, group_topic = counts(token_indptr, topics, paths, tree, n_topics, normalization)
    for s in range(n_sweeps):
        for d in range(len(token_indptr) - 1):
            key = counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, first_doc + d)
            lo = token_indptr[d]
            for t in range(lo, token_indptr[d + 1]):
                for sign, (k, p) in ((-1, (topics[t], paths[t])),):
                    doc_topic[d, k] += sign
                    for e in path_edge_list(tree, p):
                        edge_topic[k, e] += sign
                        for g in edge_groups[e]:
                            group_topic[k, g] += sign
                w = token_words[t]
                index = draw(weights(d, w, doc_topic, edge_topic, group_topic, alpha, tree, wp, pseudo_counts,
                                     normalization), uniform_from_key(key, t - lo))
                k, p = index // len(wp[w]), wp[w][index % len(wp[w])]
                topics[t], paths[t] = k, p
                doc_topic[d, k] += 1
                for e in path_edge_list(tree, p):
                    edge_topic[k, e] += 1
                    for g in edge_groups[e]:
                        group_topic[k, g] += 1
    return topics, paths


def members(tree, normalization="node"):
    """The (edge, group) memberships in (edge, group) order: the columns of a per-member pi."""
    _, edge_groups, _ = groups(tree, normalization)
    return [(e, g) for e in range(tree.n_edges) for g in edge_groups[e]]


def fold_in(token_indptr, token_words, tree, pi, alpha, seed, n_sweeps, first_doc=0, normalization="node"):
    """N_dk of held-out documents with pi fixed (the kernel's start and draws); pi per member (:func:`members`)."""
    wp = word_paths(tree)
    path_groups, _, _ = groups(tree, normalization)
    column = {m: i for i, m in enumerate(members(tree, normalization))}
    n_topics = pi.shape[0]
    topics, _paths = random_start(token_indptr, token_words, tree, n_topics, seed, first_doc, STREAM_FOLD_IN)
    path_prob = np.ones((n_topics, tree.n_paths))
    for p in range(tree.n_paths):
        for e, g in zip(path_edge_list(tree, p), path_groups[p]):
            path_prob[:, p] *= pi[:, column[(e, g)]]
    doc_topic = np.zeros((len(token_indptr) - 1, n_topics), dtype=np.int64)
    for d in range(len(token_indptr) - 1):
        lo, hi = token_indptr[d], token_indptr[d + 1]
        for t in range(lo, hi):
            doc_topic[d, topics[t]] += 1
        for s in range(1, n_sweeps + 1):
            key = counter_key(seed, STREAM_FOLD_IN, s, first_doc + d)
            for t in range(lo, hi):
                doc_topic[d, topics[t]] -= 1
                options = wp[token_words[t]]
                values = [(doc_topic[d, k] + alpha[k]) * path_prob[k, p] for k in range(n_topics) for p in options]
                index = draw(values, uniform_from_key(key, t - lo))
                topics[t] = index // len(options)
                doc_topic[d, topics[t]] += 1
    return doc_topic


def log_dirichlet_multinomial(n, prior):
    """log of the Polya probability of one sequence with counts n under Dir(prior)."""
    n, prior = np.asarray(n, dtype=float), np.asarray(prior, dtype=float)
    return float(gammaln(prior.sum()) - gammaln(prior.sum() + n.sum()) + np.sum(gammaln(prior + n) - gammaln(prior)))


def log_joint(token_indptr, topics, paths, tree, alpha, normalization="node"):
    """log p(w, z, y): one Polya term per document and per (topic, group) over the group's edges.

    Exact for "node", and for "node_language" when no edge is in two groups; otherwise the surrogate
    (an edge in two groups enters both terms with its pooled count).
    """
    n_topics = len(alpha)
    doc_topic, edge_topic, _ = counts(token_indptr, topics, paths, tree, n_topics)
    _, edge_groups, keys = groups(tree, normalization)
    total = sum(log_dirichlet_multinomial(doc_topic[d], alpha) for d in range(doc_topic.shape[0]))
    for k in range(n_topics):
        for g in range(len(keys)):
            edges = [e for e in range(tree.n_edges) if g in edge_groups[e]]
            total += log_dirichlet_multinomial(edge_topic[k, edges], tree.edge_prior[edges])
    return total


def exact_token_posterior(token_indptr, token_words, tree, alpha, token, normalization="node"):
    """p(z_token, y_token | w) by enumerating every (z, y) of every token: array (K, S_w)."""
    wp = word_paths(tree)
    n_topics = len(alpha)
    options = [[(k, p) for k in range(n_topics) for p in wp[w]] for w in token_words]
    own = wp[token_words[token]]
    table = np.zeros((n_topics, len(own)))
    logs, keys = [], []
    for combo in itertools.product(*options):
        topics = [c[0] for c in combo]
        paths = [c[1] for c in combo]
        logs.append(log_joint(token_indptr, topics, paths, tree, alpha, normalization))
        keys.append((topics[token], own.index(paths[token])))
    logs = np.array(logs)
    probs = np.exp(logs - logs.max())
    for (k, j), p in zip(keys, probs):
        table[k, j] += p
    return table / table.sum()


@numba.njit(cache=False)
def _polylingual_sweeps(doc_of, word_of, lang_of, topics, doc_topic, word_topic, lang_topic, alpha, beta,
                        beta_sum, uniforms, phi_sum, word_lang):
    n_topics = doc_topic.shape[1]
    weights = np.empty(n_topics)
    for sweep in range(uniforms.shape[0]):
        for t in range(topics.shape[0]):
            d, w, lang, k = doc_of[t], word_of[t], lang_of[t], topics[t]
            doc_topic[d, k] -= 1
            word_topic[k, w] -= 1
            lang_topic[k, lang] -= 1
            total = 0.0
            for j in range(n_topics):
                weights[j] = (doc_topic[d, j] + alpha) * (word_topic[j, w] + beta) / (lang_topic[j, lang] + beta_sum[lang])
                total += weights[j]
            x, running, k = uniforms[sweep, t] * total, 0.0, n_topics - 1
            for j in range(n_topics):
                running += weights[j]
                if running > x:
                    k = j
                    break
            topics[t] = k
            doc_topic[d, k] += 1
            word_topic[k, w] += 1
            lang_topic[k, lang] += 1
        if phi_sum.shape[0] > 0:
            for j in range(n_topics):
                for w in range(word_topic.shape[1]):
                    lang = word_lang[w]
                    phi_sum[j, w] += (word_topic[j, w] + beta) / (lang_topic[j, lang] + beta_sum[lang])


def polylingual_lda_gibbs(docs, n_terms, n_topics, alpha, beta, burn_in, n_samples, seed):
    """Posterior-mean topics of polylingual LDA (Mimno et al. 2009) by textbook collapsed Gibbs sampling.

    Written independently of topicflow: NumPy's generator for the start and the uniforms, one topic per
    token, the conditional (N_dk + alpha)(N_kw + beta) / (N_k,lang + V_lang beta) with theta shared by a
    document's languages. ``docs`` is a list of documents, each a list of (language index, term) tokens.
    Returns the per-language topic-word means over ``n_samples`` sweeps after ``burn_in``, a list of
    (n_topics, n_terms[lang]) arrays.
    """
    rng = np.random.default_rng(seed)
    offset = np.concatenate(([0], np.cumsum(n_terms))).astype(np.int64)
    doc_of = np.array([d for d, doc in enumerate(docs) for _ in doc], dtype=np.int64)
    lang_of = np.array([lang for doc in docs for lang, _ in doc], dtype=np.int64)
    word_of = np.array([offset[lang] + term for doc in docs for lang, term in doc], dtype=np.int64)
    word_lang = np.repeat(np.arange(len(n_terms)), n_terms).astype(np.int64)
    topics = rng.integers(0, n_topics, size=word_of.size).astype(np.int64)
    doc_topic = np.zeros((len(docs), n_topics), dtype=np.int64)
    word_topic = np.zeros((n_topics, int(offset[-1])), dtype=np.int64)
    lang_topic = np.zeros((n_topics, len(n_terms)), dtype=np.int64)
    np.add.at(doc_topic, (doc_of, topics), 1)
    np.add.at(word_topic, (topics, word_of), 1)
    np.add.at(lang_topic, (topics, lang_of), 1)
    beta_sum = beta * np.asarray(n_terms, dtype=float)
    state = (doc_of, word_of, lang_of, topics, doc_topic, word_topic, lang_topic, float(alpha), float(beta), beta_sum)
    _polylingual_sweeps(*state, rng.random((burn_in, word_of.size)), np.zeros((0, 0)), word_lang)
    phi_sum = np.zeros((n_topics, int(offset[-1])))
    _polylingual_sweeps(*state, rng.random((n_samples, word_of.size)), phi_sum, word_lang)
    return [phi_sum[:, offset[li]:offset[li + 1]] / n_samples for li in range(len(n_terms))]
