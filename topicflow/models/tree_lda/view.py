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
"""
from __future__ import annotations

import numpy as np

from topicflow._typing import FloatArray
from topicflow.models.tree_lda.vb import TreeVBLayout, check_edge_var, topic_word


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
