"""The LDA view of a tree-LDA model: per-language topic-word Dirichlet parameters with the tree's word means.

Readers of saved models (``topicflow topics``, ``infer``, ``evaluate``, ``export``) understand LDA's
lambda per language. The view keeps each topic's posterior-mean word distribution of the tree
(:func:`~topicflow.models.tree_lda.vb.topic_word`: the sum over a word's paths of the product of edge
means) and gives it, per topic and language, the concentration ``n_k + V_lang * eta_lang``: n_k, the
expected tokens of the language in the topic, is the sum over the language's leaf edges of
``lambda - beta`` (every token passes exactly one leaf edge), and eta_lang, the view's symmetric
prior, is the mean over the language's paths of the prior of the path's first edge divided by the
number of paths through that edge (``root_beta`` under the builder's per-leaf convention). For a flat tree under ``node_language`` (polylingual LDA) the view
is lambda itself; for a monolingual flat tree under either normalization too. Word means are exact;
exp(E[log beta]) of the view (what LDA inference reads) approximates the tree's E_kw.

The read-outs of a tree model (:func:`tree_topic_paths`) show where each word's probability comes
from: per topic, the probability of every path (conditional on the language of its leaf, as the view's
per-language word distributions are), the mass of each internal node (concept) per language, and the
posterior mean of every edge as each language uses it.

Glossary: edge_var (lambda, (n_topics, n_edges)); path_prob (P(path s | topic k, language of s),
(n_topics, n_paths)); node_mass (per language, P(the path passes through node i | topic k, language),
(n_topics, n_nodes)); edge_mean (per language, E_q[pi_{k,e}] in the normalization group the language's
paths use, (n_topics, n_edges)).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topicflow._typing import FloatArray
from topicflow.models.tree_lda.tree import PriorTree
from topicflow.models.tree_lda.vb import (
    TreeVBLayout,
    check_edge_var,
    group_sums,
    path_probabilities,
    topic_word,
)


def leaf_edges(layout: TreeVBLayout) -> np.ndarray:
    """The last edge of every path (the edge into its leaf), shape (n_paths,).

    Parameters
    ----------
    layout : TreeVBLayout

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> from topicflow.models.tree_lda.vb import tree_vb_layout
    >>> leaf_edges(tree_vb_layout(flat_tree(["en"], [3]))).tolist()
    [0, 1, 2]
    """
    tree = layout.tree
    return np.asarray(tree.path_edges[tree.path_indptr[1:] - 1], dtype=np.int64)


def lda_view(edge_var: FloatArray, layout: TreeVBLayout) -> tuple[dict[str, FloatArray], dict[str, float]]:
    """Per-language LDA lambda and symmetric prior that read like the tree model.

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
    layout : TreeVBLayout

    Returns
    -------
    topic_word_var : dict of str to ndarray of shape (n_topics, n_terms_lang)
        The tree's word means times a concentration per topic (module docstring).
    topic_word_prior : dict of str to float
        The symmetric prior eta_lang of the module docstring (eta for a flat tree).

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> from topicflow.models.tree_lda.vb import tree_vb_layout
    >>> lam = np.array([[1.0, 3.0, 2.0]])
    >>> view, prior = lda_view(lam, tree_vb_layout(flat_tree(["en", "de"], [2, 1], beta=0.5), "node_language"))
    >>> view["en"].tolist(), view["de"].tolist(), prior
    ([[1.0, 3.0]], [[2.0]], {'en': 0.5, 'de': 0.5})
    """
    edge_var = check_edge_var(edge_var, layout)
    tree = layout.tree
    leaves = leaf_edges(layout)
    first = np.asarray(tree.path_edges[tree.path_indptr[:-1]], dtype=np.int64)
    per_path_prior = tree.edge_prior[first] / np.bincount(first, minlength=tree.n_edges)[first]
    means = topic_word(edge_var, layout)
    view: dict[str, FloatArray] = {}
    priors: dict[str, float] = {}
    for index, lang in enumerate(tree.languages):
        mine = tree.path_language == index
        eta = float(np.mean(per_path_prior[mine]))
        counts = np.maximum(edge_var[:, leaves[mine]] - tree.edge_prior[leaves[mine]][None, :], 0.0).sum(axis=1)
        view[lang] = means[lang] * (counts + tree.n_terms[index] * eta)[:, None]
        priors[lang] = eta
    return view, priors


@dataclass(frozen=True)
class TreeTopicPaths:
    """Where each topic's word probabilities come from in the tree (see :func:`tree_topic_paths`).

    Attributes
    ----------
    path_prob : ndarray of shape (n_topics, n_paths), float64
        P(path | topic, language of the path's leaf): the product of the edge means along the path,
        divided by the topic's total over the paths of that language (1 under "node_language").
    word_prob : dict of str to ndarray of shape (n_topics, n_terms_lang), float64
        Per language, the sum of ``path_prob`` over each word's paths; rows sum to 1.
    node_mass : dict of str to ndarray of shape (n_topics, n_nodes), float64
        Per language, the sum of ``path_prob`` over the language's paths through each internal node
        (the root gets 1).
    edge_mean : dict of str to ndarray of shape (n_topics, n_edges), float64
        Per language, the posterior mean of each edge's probability, lambda over the sum of lambda in
        the normalization group the language's paths use it in; NaN for an edge no path of the
        language uses.
    language_mass : ndarray of shape (n_topics, n_langs), float64
        Per topic, the total of the unnormalized path probabilities of each language (1 under
        "node_language"; P(language | topic) under "node").
    """

    path_prob: FloatArray
    word_prob: dict[str, FloatArray]
    node_mass: dict[str, FloatArray]
    edge_mean: dict[str, FloatArray]
    language_mass: FloatArray


def path_node_incidence(tree: PriorTree) -> sp.csr_matrix:
    """1 where a path passes through an internal node (the root included), shape (n_paths, n_nodes).

    Parameters
    ----------
    tree : PriorTree

    Returns
    -------
    scipy.sparse.csr_matrix of float64

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> path_node_incidence(flat_tree(["en"], [2])).toarray().tolist()
    [[1.0], [1.0]]
    """
    rows, cols = tree.path_edge_incidence()
    return sp.csr_matrix((np.ones(rows.size), (rows, tree.edge_parent[cols])), shape=(tree.n_paths, tree.n_nodes))


def tree_topic_paths(edge_var: FloatArray, layout: TreeVBLayout) -> TreeTopicPaths:
    """Path probabilities, concept masses and edge means of every topic, per language.

    Parameters
    ----------
    edge_var : ndarray of shape (n_topics, n_edges), float64
        Lambda.
    layout : TreeVBLayout

    Returns
    -------
    TreeTopicPaths

    Notes
    -----
    NumPy equivalent: ``p[k, s] = prod_{e in s} lam[k, e] / sum(lam[k, group(e, s)])``
    (:func:`~topicflow.models.tree_lda.vb.path_probabilities`), then ``p[k, s] /= sum of p[k, s']``
    over the paths s' of the language of s; a word's probability is the sum over its paths
    (:meth:`PriorTree.word_sums`), a node's mass the sum over the paths through it. The word
    probabilities equal :func:`~topicflow.models.tree_lda.vb.topic_word` normalized per language,
    which is what the LDA view (:func:`lda_view`) shows.

    Examples
    --------
    >>> from topicflow.models.tree_lda.tree import flat_tree
    >>> from topicflow.models.tree_lda.vb import tree_vb_layout
    >>> paths = tree_topic_paths(np.array([[1.0, 3.0]]), tree_vb_layout(flat_tree(["en"], [2])))
    >>> paths.path_prob.tolist(), paths.node_mass["en"].tolist()
    ([[0.25, 0.75]], [[1.0]])
    """
    lam = check_edge_var(edge_var, layout)
    tree = layout.tree
    raw = path_probabilities(lam, layout)
    language_mass = np.stack([raw[:, tree.path_language == li].sum(axis=1) for li in range(len(tree.languages))],
                             axis=1)
    path_prob = raw / language_mass[:, tree.path_language]
    word_prob = tree.word_sums(path_prob)
    incidence = path_node_incidence(tree)
    pair_means = lam[:, tree.path_edges] / group_sums(lam, layout)[:, layout.pair_group]
    pair_language = np.repeat(tree.path_language, np.diff(tree.path_indptr))
    node_mass: dict[str, FloatArray] = {}
    edge_mean: dict[str, FloatArray] = {}
    for li, lang in enumerate(tree.languages):
        mine = tree.path_language == li
        node_mass[lang] = np.asarray((incidence[mine].T @ path_prob[:, mine].T).T)
        means = np.full(lam.shape, np.nan)
        pairs = pair_language == li
        # (edge, language) fixes the group, so every pair of the same edge and language has one mean.
        means[:, tree.path_edges[pairs]] = pair_means[:, pairs]
        edge_mean[lang] = means
    return TreeTopicPaths(path_prob, word_prob, node_mass, edge_mean, language_mass)
