"""Slow, obvious NumPy reference for the collapsed Gibbs sampler of tLDA / ptLDA (Zhai 2014, eq. 5.2).

Plain Python loops over sweeps, tokens, topics and paths; the same counter-based uniforms as the
kernels of :mod:`topicflow.models.tree_lda.gibbs`, the same k-major layout of the K x S_w weights and
the same order of multiplications, so every draw and count is equal, not just equal in distribution.
Also: the exact joint p(w, z, y) as a product of Dirichlet-multinomials (written independently of the
kernel's log-likelihood: gamma-function ratios per node), and brute-force enumeration of the posterior
of a tiny corpus.

Tree format: the :class:`~topicflow.models.tree_lda.tree.PriorTree` arrays; corpus: ``token_indptr``
and ``token_words`` (words numbered over the tree's languages).
"""
from __future__ import annotations

import itertools

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


def counts(token_indptr, topics, paths, tree, n_topics):
    """(N_dk, N_ke, N_ki) recounted from the assignments."""
    n_docs = len(token_indptr) - 1
    doc_topic = np.zeros((n_docs, n_topics), dtype=np.int64)
    edge_topic = np.zeros((n_topics, tree.n_edges), dtype=np.int64)
    node_topic = np.zeros((n_topics, tree.n_nodes), dtype=np.int64)
    for d in range(n_docs):
        for t in range(token_indptr[d], token_indptr[d + 1]):
            k = topics[t]
            doc_topic[d, k] += 1
            for e in path_edge_list(tree, paths[t]):
                edge_topic[k, e] += 1
                node_topic[k, tree.edge_parent[e]] += 1
    return doc_topic, edge_topic, node_topic


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


def topic_priors(tree, n_topics, pseudo_counts=None):
    """beta_e + M_ke per (topic, edge) and its sums per (topic, node), in the kernel's order of additions."""
    prior_sum = np.zeros(tree.n_nodes)
    for e in range(tree.n_edges):
        prior_sum[tree.edge_parent[e]] += tree.edge_prior[e]
    edge_prior = np.array([list(tree.edge_prior)] * n_topics, dtype=float)
    node_prior = np.array([list(prior_sum)] * n_topics, dtype=float)
    if pseudo_counts is not None:
        extra = np.zeros((n_topics, tree.n_nodes))
        for k in range(n_topics):
            for e in range(tree.n_edges):
                extra[k, tree.edge_parent[e]] += pseudo_counts[k, e]
        edge_prior, node_prior = edge_prior + pseudo_counts, node_prior + extra
    return edge_prior, node_prior


def weights(d, w, doc_topic, edge_topic, node_topic, alpha, tree, wp, pseudo_counts=None):
    """Unnormalized eq. 5.2 weights, k-major over (k, j-th path of w); counts exclude the token.

    With ``pseudo_counts`` M ((n_topics, n_edges)): N_ke + (beta_e + M_ke) over N_ki + (B_i + M_ki).
    """
    edge_prior, node_prior = topic_priors(tree, doc_topic.shape[1], pseudo_counts)
    out = []
    for k in range(doc_topic.shape[1]):
        a = doc_topic[d, k] + alpha[k]
        for p in wp[w]:
            value = float(a)
            for e in path_edge_list(tree, p):
                parent = tree.edge_parent[e]
                value *= (edge_topic[k, e] + edge_prior[k, e]) / (node_topic[k, parent] + node_prior[k, parent])
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
               sweeps_done=0, pseudo_counts=None):
    """Sweeps of eq. 5.2 in document then token order; returns new (topics, paths)."""
    wp = word_paths(tree)
    topics, paths = np.array(topics, dtype=np.int64), np.array(paths, dtype=np.int64)
    n_topics = len(alpha)
    doc_topic, edge_topic, node_topic = counts(token_indptr, topics, paths, tree, n_topics)
    for s in range(n_sweeps):
        for d in range(len(token_indptr) - 1):
            key = counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, first_doc + d)
            lo = token_indptr[d]
            for t in range(lo, token_indptr[d + 1]):
                for sign, (k, p) in ((-1, (topics[t], paths[t])),):
                    doc_topic[d, k] += sign
                    for e in path_edge_list(tree, p):
                        edge_topic[k, e] += sign
                        node_topic[k, tree.edge_parent[e]] += sign
                w = token_words[t]
                index = draw(weights(d, w, doc_topic, edge_topic, node_topic, alpha, tree, wp, pseudo_counts),
                             uniform_from_key(key, t - lo))
                k, p = index // len(wp[w]), wp[w][index % len(wp[w])]
                topics[t], paths[t] = k, p
                doc_topic[d, k] += 1
                for e in path_edge_list(tree, p):
                    edge_topic[k, e] += 1
                    node_topic[k, tree.edge_parent[e]] += 1
    return topics, paths


def fold_in(token_indptr, token_words, tree, pi, alpha, seed, n_sweeps, first_doc=0):
    """N_dk of held-out documents with pi fixed (the kernel's start and draws)."""
    wp = word_paths(tree)
    n_topics = pi.shape[0]
    topics, _paths = random_start(token_indptr, token_words, tree, n_topics, seed, first_doc, STREAM_FOLD_IN)
    path_prob = np.ones((n_topics, tree.n_paths))
    for p in range(tree.n_paths):
        for e in path_edge_list(tree, p):
            path_prob[:, p] *= pi[:, e]
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


def log_joint(token_indptr, topics, paths, tree, alpha):
    """log p(w, z, y): one Polya term per document and per (topic, internal node)."""
    n_topics = len(alpha)
    doc_topic, edge_topic, _ = counts(token_indptr, topics, paths, tree, n_topics)
    total = sum(log_dirichlet_multinomial(doc_topic[d], alpha) for d in range(doc_topic.shape[0]))
    for k in range(n_topics):
        for node in range(tree.n_nodes):
            edges = np.flatnonzero(tree.edge_parent == node)
            total += log_dirichlet_multinomial(edge_topic[k, edges], tree.edge_prior[edges])
    return total


def exact_token_posterior(token_indptr, token_words, tree, alpha, token):
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
        logs.append(log_joint(token_indptr, topics, paths, tree, alpha))
        keys.append((topics[token], own.index(paths[token])))
    logs = np.array(logs)
    probs = np.exp(logs - logs.max())
    for (k, j), p in zip(keys, probs):
        table[k, j] += p
    return table / table.sum()
