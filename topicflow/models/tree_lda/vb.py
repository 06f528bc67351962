"""Variational Bayes for tree-prior LDA (tLDA / ptLDA; Zhai 2014, sec. 5.2.2, eqs. 5.3-5.5).

This module owns the tree-specific half of variational EM: the per-word topic weights the unchanged
LDA E-step (:func:`topicflow.models.lda.vb.estep.estep_block`) reads, the M-step that turns the
merged E-step statistics into edge parameters lambda, the tree's topic term of the ELBO (eq. 5.4),
the read-outs, and the online blend. It must not import dask, zarr or logging, and does no I/O.

Why the E-step needs no change: q(z, y) is a joint multinomial over K x S_w (topics x paths of the
word; eq. 5.3, pitfall P4). With ``w_ks = exp(sum_{e in s} E_q[log pi_{k,e}])``,
``phi_ks ∝ exp(E[log theta_k]) w_ks``, so the topic marginal is ``phi_k ∝ exp(E[log theta_k]) E_kw``
with ``E_kw = sum_{s in paths(w)} w_ks``, and the per-token bound
``sum_ks phi_ks (E log theta_k + log w_ks - log phi_ks) = log sum_k exp(E log theta_k) E_kw`` is the
LDA kernel's with ``E_kw`` in place of exp(E[log beta_kw]). The path part is recovered at the M-step:
``E_q[n_{k,s}] = n_kw w_ks / E_kw`` (the joint q, never a single best path).

Normalization groups. In the chapter's model every internal node i has one Dirichlet over its
children (``normalization="node"``): E[log pi_{k,e}] = psi(lambda_ke) - psi(sum over the edges
leaving parent(e)). A tree whose root holds the words of several languages then generates the
language too, so the flat multilingual tree is LDA over the stacked vocabulary, not polylingual LDA
(whose topics are normalized per language). ``normalization="node_language"`` normalizes the
children of each node separately per language of the path's leaf (an edge whose subtree has leaves
of several languages, such as root -> concept, is in one group per language and its lambda pools
both languages' counts): the flat multilingual tree is then polylingual LDA exactly, and a
monolingual tree is the same under both. With shared edges the "node_language" topic term sums a
Dirichlet term per group, a surrogate objective rather than the ELBO of a generative model.

Glossary (Zhai 2014, ch. 5):
    edge_var (lambda, (n_topics, n_edges)): Dirichlet parameters of q(pi) per topic and edge
    edge_prior (beta, (n_edges,)): the tree's prior per edge
    elog_edge (E_q[log pi_{k,e}], (n_topics, n_edges)), path_log_weight (log w_ks, (n_topics, n_paths))
    word_weight (E_kw, (n_topics, n_terms_lang)): sum over the word's paths of w_ks, per language
    group: a normalization group (an internal node, or a (node, language) pair)

References
----------
Zhai (2014). Online Inference for Bayesian Nonparametric Models and Topic Models (PhD thesis), ch. 5.
Boyd-Graber, Blei and Zhu (2007). A topic model for word sense disambiguation. EMNLP.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topicflow._typing import FloatArray, IntArray, TreeNormalization
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.special import digamma_array, gammaln_array
from topicflow.models.lda.vb.layout import PreparedTopics, prepare_topics
from topicflow.models.lda.vb.objective import initial_topic_word_var, local_elbo_terms
from topicflow.models.lda.vb.online import blend
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.models.tree_lda.tree import PriorTree

TREE_NORMALIZATIONS: tuple[TreeNormalization, ...] = ("node", "node_language")


@dataclass(frozen=True)
class TreeVBLayout:
    """Sparse incidence matrices of a prior tree for the VB computations; build once per fit.

    Attributes
    ----------
    tree : PriorTree
    normalization : {"node", "node_language"}
        The normalization groups (module docstring).
    path_edge : scipy.sparse.csr_matrix of shape (n_paths, n_edges), float64
        1 where the path uses the edge.
    path_group : scipy.sparse.csr_matrix of shape (n_paths, n_groups), float64
        How many of the path's edges are normalized in each group.
    member_edge, member_group : ndarray of shape (n_members,), int64
        The (edge, group) memberships: group g's Dirichlet is over ``member_edge[member_group == g]``.
    edge_group : scipy.sparse.csr_matrix of shape (n_edges, n_groups), float64
        1 for each membership (group sums are ``lambda @ edge_group``).
    path_offsets : ndarray of shape (n_langs + 1,), int64
        Paths of language l are ``path_offsets[l]:path_offsets[l + 1]``.
    word_path_indptr : tuple of ndarray of shape (n_terms_lang + 1,), int64
        Per language, relative CSR pointer of each term's paths (:meth:`PriorTree.word_path_indptr`).
    pair_group : ndarray of shape (len(tree.path_edges),), int64
        The group of each entry of ``tree.path_edges`` (the edge as it is used on that path).
    """

    tree: PriorTree
    normalization: TreeNormalization
    path_edge: sp.csr_matrix
    path_group: sp.csr_matrix
    member_edge: IntArray
    member_group: IntArray
    edge_group: sp.csr_matrix
    path_offsets: IntArray
    word_path_indptr: tuple[IntArray, ...]
    pair_group: IntArray

    @property
    def n_groups(self) -> int:
        return int(self.edge_group.shape[1])


def tree_vb_layout(tree: PriorTree, normalization: TreeNormalization = "node") -> TreeVBLayout:
    """Build the incidence matrices of ``tree`` for :func:`word_weights` and :func:`mstep_tree`.

    Parameters
    ----------
    tree : PriorTree
    normalization : {"node", "node_language"}, default "node"
        "node": one Dirichlet per internal node (Zhai 2014, eq. 5.1). "node_language": per internal
        node and language of the leaf (a flat multilingual tree is then polylingual LDA).

    Returns
    -------
    TreeVBLayout

    Raises
    ------
    InvalidParameterError
        Unknown ``normalization``.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree_vb_layout(flat_tree(["en", "de"], [2, 3]), "node_language").n_groups
    2
    """
    if normalization not in TREE_NORMALIZATIONS:
        raise InvalidParameterError(f"normalization must be one of {TREE_NORMALIZATIONS!r}, got {normalization!r}")
    rows, cols = tree.path_edge_incidence()
    n_langs = len(tree.languages)
    shape = (tree.n_paths, tree.n_edges)
    path_edge = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=shape)
    parent = tree.edge_parent[cols]
    raw = parent * n_langs + tree.path_language[rows] if normalization == "node_language" else parent
    used, group_of_pair = np.unique(raw, return_inverse=True)
    n_groups = used.size
    path_group = sp.csr_matrix((np.ones(rows.size), (rows, group_of_pair)), shape=(tree.n_paths, n_groups))
    members = np.unique(cols * n_groups + group_of_pair)
    member_edge, member_group = members // n_groups, members % n_groups
    edge_group = sp.csr_matrix((np.ones(members.size), (member_edge, member_group)), shape=(tree.n_edges, n_groups))
    offsets = np.array([tree.language_offset(lang) for lang in tree.languages] + [tree.n_paths], dtype=np.int64)
    return TreeVBLayout(tree, normalization, path_edge, path_group, member_edge.astype(np.int64),
                        member_group.astype(np.int64), edge_group, offsets,
                        tuple(tree.word_path_indptr(lang) for lang in tree.languages),
                        group_of_pair.astype(np.int64))


def check_edge_var(edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Return ``edge_var`` as a C-contiguous float64 (n_topics, n_edges) array; raise if it does not fit."""
    lam = np.ascontiguousarray(edge_var, dtype=np.float64)
    if lam.ndim != 2 or lam.shape[1] != layout.tree.n_edges:
        raise InvalidParameterError(
            f"edge_var must have shape (n_topics, {layout.tree.n_edges}) for this tree, got {lam.shape!r}")
    if not (np.all(np.isfinite(lam)) and np.all(lam > 0)):
        raise InvalidParameterError("edge_var must be finite and positive")
    return lam


def group_sums(edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Sum lambda over each normalization group, giving (n_topics, n_groups)."""
    return np.asarray((layout.edge_group.T @ np.asarray(edge_var).T).T)


def path_log_weights(edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Path log-weights log w_ks = sum over the path's edges of E_q[log pi_{k,e}], (n_topics, n_paths).

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
        Lambda.
    layout : TreeVBLayout

    Returns
    -------
    ndarray of shape (n_topics, n_paths), float64

    Notes
    -----
    NumPy equivalent: ``sum_{e in s} psi(lam[:, e]) - psi(lam[:, group(e, s)].sum(1))`` per path s
    (Zhai 2014, eq. 5.5, the exponent of phi without the document term).

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> layout = tree_vb_layout(flat_tree(["en"], [2]))
    >>> path_log_weights(np.ones((1, 2)), layout).round(6).tolist()
    [[-1.0, -1.0]]
    """
    lam = check_edge_var(edge_var, layout)
    psi_lam = digamma_array(lam)
    psi_group = digamma_array(group_sums(lam, layout))
    return np.asarray((layout.path_edge @ psi_lam.T).T - (layout.path_group @ psi_group.T).T)


def word_weights(edge_var: FloatArray, layout: TreeVBLayout) -> dict[str, FloatArray]:
    """Per-language word weights E_kw = sum_{s in paths(w)} exp(log w_ks): the E-step's topic input.

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms_lang), float64
        In the place of exp(E[log beta]) per language: pass to :func:`prepare_topics` (or use
        :func:`prepare_tree_topics`).

    Notes
    -----
    Pitfall P4: the sum over all of the word's paths (the topic marginal of the joint q(z, y)).
    A word with one path gets exactly exp(log w_ks).

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> layout = tree_vb_layout(flat_tree(["en"], [2]))
    >>> word_weights(np.ones((1, 2)), layout)["en"].round(6).tolist()
    [[0.367879, 0.367879]]
    """
    return layout.tree.word_sums(np.exp(path_log_weights(edge_var, layout)))


def prepare_tree_topics(edge_var: FloatArray, layout: TreeVBLayout, *, dtype: type = np.float64) -> PreparedTopics:
    """:func:`word_weights` in the layout of the LDA E-step kernels (``estep_block``, ``hybrid_estep_block``).

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout
    dtype : {numpy.float64, numpy.float32}, default float64

    Returns
    -------
    PreparedTopics

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> prepare_tree_topics(np.ones((2, 3)), tree_vb_layout(flat_tree(["en"], [3]))).term_topic.shape
    (3, 2)
    """
    return prepare_topics(word_weights(edge_var, layout), dtype=dtype)


def split_path_counts(topic_terms: Mapping[str, TopicTermStats], edge_var: FloatArray,
                      layout: TreeVBLayout) -> tuple[IntArray, FloatArray]:
    """Split each (k, w) count over the word's paths in proportion to w_ks / E_kw.

    Parameters
    ----------
    topic_terms : mapping of str to TopicTermStats
        Merged E-step statistics n_kw per language (``EStepStats.topic_terms``).
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used.
    layout : TreeVBLayout

    Returns
    -------
    paths : ndarray of shape (n_present_paths,), int64
        The paths of the present terms, increasing.
    path_counts : ndarray of shape (n_topics, n_present_paths), float64
        E_q[n_{k,s}] = n_kw w_ks / E_kw (Zhai 2014, eq. 5.5, the phi sum before the edge indicator).

    Notes
    -----
    A word with one path gets exactly n_kw; over a word's paths the counts sum to n_kw up to rounding.
    """
    lam = check_edge_var(edge_var, layout)
    path_parts, count_parts = [], []
    log_w = path_log_weights(lam, layout)
    for li, lang in enumerate(layout.tree.languages):
        if lang not in topic_terms or topic_terms[lang].term_ids.size == 0:
            continue
        stats = topic_terms[lang]
        indptr = layout.word_path_indptr[li]
        starts, stops = indptr[stats.term_ids], indptr[stats.term_ids + 1]
        n_paths = stops - starts
        local = np.repeat(stops - np.cumsum(n_paths), n_paths) + np.arange(int(n_paths.sum()))
        paths = int(layout.path_offsets[li]) + local
        weight = np.exp(log_w[:, paths])
        column_starts = np.concatenate(([0], np.cumsum(n_paths)[:-1]))
        total = np.add.reduceat(weight, column_starts, axis=1)
        term_of_path = np.repeat(np.arange(stats.term_ids.size), n_paths)
        denom = total[:, term_of_path]
        # One path: exactly 1 (so a flat tree is LDA's M-step to the bit); an underflowed word
        # (E_kw = 0, so n_kw = 0) splits equally instead of 0/0.
        ratio = np.divide(weight, denom, out=np.full_like(weight, 0.0), where=denom > 0)
        ratio[:, n_paths[term_of_path] == 1] = 1.0
        path_parts.append(paths)
        count_parts.append(stats.values[:, term_of_path] * ratio)
    if not path_parts:
        return np.zeros(0, np.int64), np.zeros((lam.shape[0], 0))
    return np.concatenate(path_parts).astype(np.int64), np.concatenate(count_parts, axis=1)


def edge_counts(paths: IntArray, path_counts: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Scatter path counts onto edges: sum over the paths through each edge, (n_topics, n_edges).

    Parameters
    ----------
    paths : ndarray of shape (n_present_paths,), int64
    path_counts : ndarray of shape (n_topics, n_present_paths), float64
    layout : TreeVBLayout

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
        ``path_counts @ path_edge[paths]`` (the sparse path x edge incidence).
    """
    incidence = layout.path_edge[paths]
    return np.asarray((incidence.T @ np.asarray(path_counts).T).T)


def expected_edge_counts(topic_terms: Mapping[str, TopicTermStats], edge_var: FloatArray,
                         layout: TreeVBLayout) -> FloatArray:
    """Expected edge counts sum_d sum_n sum_s phi_dnks 1[e in s] per (k, e): the statistic of eq. 5.5.

    Parameters
    ----------
    topic_terms : mapping of str to TopicTermStats
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used.
    layout : TreeVBLayout

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
    """
    paths, counts = split_path_counts(topic_terms, edge_var, layout)
    return edge_counts(paths, counts, layout)


def mstep_tree(stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Batch M-step of eq. 5.5: lambda_{k,e} = beta_e + expected edge counts.

    Parameters
    ----------
    stats : EStepStats
        Merged E-step statistics of the corpus, computed with :func:`word_weights` of ``edge_var``.
    edge_var : ndarray of shape (n_topics, n_edges), float64
        The lambda the E-step used (it fixes how each n_kw splits over the word's paths).
    layout : TreeVBLayout

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> layout = tree_vb_layout(flat_tree(["en"], [2], beta=0.5))
    >>> mstep_tree(EStepStats.zeros(1, ["en"]), np.ones((1, 2)), layout).tolist()
    [[0.5, 0.5]]
    """
    return layout.tree.edge_prior[None, :] + expected_edge_counts(stats.topic_terms, edge_var, layout)


def blend_edge_var(edge_var: FloatArray, layout: TreeVBLayout, counts: FloatArray, *, rho: float,
                   scale: float) -> FloatArray:
    """Online step lambda <- (1 - rho) lambda + rho (beta + scale * counts) (Hoffman et al. 2010).

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
        Lambda before the step.
    layout : TreeVBLayout
    counts : ndarray of shape (n_topics, n_edges), float64
        The minibatch's edge counts (:func:`expected_edge_counts`, or the hybrid's sampled ones).
    rho : float
        Step size in (0, 1] (``StepSchedule.rho``).
    scale : float
        D/|S|: the corpus size over the minibatch's.

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
        Exactly ``beta + counts`` when rho = 1 and scale = 1.
    """
    target = layout.tree.edge_prior[None, :] + (scale * counts if scale != 1.0 else counts)
    return blend(edge_var, target, rho)


def mstep_tree_online(stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout, *, rho: float,
                      total_docs: int) -> FloatArray:
    """Online VB step: lambda <- (1 - rho) lambda + rho (beta + D/|S| edge counts) (Hoffman et al. 2010).

    Parameters
    ----------
    stats : EStepStats
        The minibatch's merged statistics (computed with ``edge_var``).
    edge_var : ndarray of shape (n_topics, n_edges), float64
        Lambda before the step.
    layout : TreeVBLayout
    rho : float
        Step size in (0, 1] (``StepSchedule.rho``).
    total_docs : int
        D, the corpus size.

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64
        Exactly :func:`mstep_tree` when rho = 1 and the minibatch is the corpus.
    """
    scale = total_docs / max(stats.n_docs, 1)
    counts = expected_edge_counts(stats.topic_terms, edge_var, layout)
    return blend_edge_var(edge_var, layout, counts, rho=rho, scale=scale)


def tree_topic_elbo_terms(edge_var: FloatArray, layout: TreeVBLayout) -> float:
    """E_q[log p(pi | beta)] - E_q[log q(pi | lambda)] summed over topics and normalization groups.

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout

    Returns
    -------
    float

    Notes
    -----
    Per topic k and group g with edges e: ``lnG(sum beta) - sum lnG(beta) - lnG(sum lambda)
    + sum lnG(lambda) + sum (beta - lambda)(psi(lambda) - psi(sum lambda))``, the sign convention of
    :func:`topicflow.models.lda.vb.objective.topic_elbo_terms` (a flat tree gives its value).

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> tree_topic_elbo_terms(np.ones((1, 2)), tree_vb_layout(flat_tree(["en"], [2], beta=1.0)))
    0.0
    """
    lam = check_edge_var(edge_var, layout)
    n_topics = lam.shape[0]
    beta = layout.tree.edge_prior
    e, g = layout.member_edge, layout.member_group
    beta_sum = np.bincount(g, weights=beta[e], minlength=layout.n_groups)
    lam_sum = group_sums(lam, layout)
    prior_norm = n_topics * float(gammaln_array(beta_sum).sum() - gammaln_array(beta[e]).sum())
    lam_m = lam[:, e]
    var_norm = float(gammaln_array(lam_m).sum() - gammaln_array(lam_sum).sum())
    elog = digamma_array(lam_m) - digamma_array(lam_sum)[:, g]
    return prior_norm + float(np.sum((beta[e][None, :] - lam_m) * elog)) + var_norm


def full_elbo_tree(stats: EStepStats, edge_var: FloatArray, layout: TreeVBLayout,
                   doc_topic_prior: FloatArray | float) -> float:
    """The ELBO of eq. 5.4 for a batch iteration: document and alpha terms plus the tree's topic term.

    Parameters
    ----------
    stats : EStepStats
        Merged statistics of the corpus from the E-step run with :func:`word_weights` of ``edge_var``.
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout
    doc_topic_prior : float or ndarray of shape (n_topics,)

    Returns
    -------
    float

    Raises
    ------
    NumericalError
        The ELBO is not finite.

    Notes
    -----
    The document part (``stats.doc_elbo``, i.e. ``sum n log sum_k exp(E log theta_k) E_kw`` plus the
    entropy of q(theta)) is the exact joint-q(z, y) bound (module docstring); see
    :func:`topicflow.models.lda.vb.objective.local_elbo_terms` and :func:`tree_topic_elbo_terms`.
    """
    value = local_elbo_terms(stats, doc_topic_prior) + tree_topic_elbo_terms(edge_var, layout)
    if not math.isfinite(value):
        raise NumericalError(f"tree ELBO is not finite ({value!r}); doc part {stats.doc_elbo!r}")
    return float(value)


def edge_probabilities(edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Posterior mean of pi per edge, lambda / (group sum), (n_topics, n_edges).

    With ``normalization="node_language"`` an edge in several groups gets the mean under its first
    group (lowest (node, language) id); use :func:`topic_word` for per-language word probabilities.
    """
    lam = check_edge_var(edge_var, layout)
    first = np.full(layout.tree.n_edges, -1, dtype=np.int64)
    order = np.argsort(layout.member_edge, kind="stable")
    edges, idx = np.unique(layout.member_edge[order], return_index=True)
    first[edges] = layout.member_group[order][idx]
    return lam / group_sums(lam, layout)[:, first]


def path_probabilities(edge_var: FloatArray, layout: TreeVBLayout) -> FloatArray:
    """Posterior-mean path probabilities prod_{e in s} lambda_e / (group sum), (n_topics, n_paths)."""
    lam = check_edge_var(edge_var, layout)
    ratio = lam[:, layout.tree.path_edges] / group_sums(lam, layout)[:, layout.pair_group]
    return layout.tree.path_products(ratio)


def topic_word(edge_var: FloatArray, layout: TreeVBLayout) -> dict[str, FloatArray]:
    """Per-language topic-word probabilities: the posterior-mean path probabilities summed per word.

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout

    Returns
    -------
    dict of str to ndarray of shape (n_topics, n_terms_lang), float64
        Rows sum to 1 per language under "node_language"; under "node" the rows of all languages
        together sum to 1 (the tree also generates the language).

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> topic_word(np.array([[1.0, 3.0]]), tree_vb_layout(flat_tree(["en"], [2])))["en"].tolist()
    [[0.25, 0.75]]
    """
    return layout.tree.word_sums(path_probabilities(edge_var, layout))


def initial_edge_var(n_topics: int, layout: TreeVBLayout, *, seed: int, shape: float = 100.0) -> FloatArray:
    """Random starting lambda, Gamma(shape, 1/shape) per (topic, edge), as LDA's start.

    Parameters
    ----------
    n_topics : int
    layout : TreeVBLayout
    seed : int
    shape : float, default 100

    Returns
    -------
    ndarray of shape (n_topics, n_edges), float64

    Notes
    -----
    Row k is drawn from ``doc_generator(seed, STREAM_TOPIC_INIT, 0, k)`` (the stream of
    :func:`topicflow.models.lda.vb.objective.initial_topic_word_var`), so a monolingual flat tree
    starts where monolingual LDA starts.
    """
    return initial_topic_word_var(n_topics, layout.tree.n_edges, seed=seed, shape=shape)
