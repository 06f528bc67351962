"""Tests of topicflow.models.tree_lda.view's path read-out against a brute-force walk over the tree, and of
the LDA view it must agree with."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from topicflow.models.tree_lda.build import (
    HierarchyLeaf,
    HierarchyNode,
    build_tree_from_hierarchy,
    build_tree_from_pairs,
)
from topicflow.models.tree_lda.tree import PriorTree, flat_tree
from topicflow.models.tree_lda.vb import tree_vb_layout
from topicflow.models.tree_lda.view import (
    lda_view,
    path_node_incidence,
    tree_topic_paths,
)

VOCAB = {"en": ["house", "home", "cat", "dog", "tree"], "de": ["haus", "heim", "katze", "hund", "baum", "garten"]}


def _pairs_tree() -> PriorTree:
    pairs = [(("en", "house"), ("de", "haus")), (("en", "home"), ("de", "haus")), (("en", "home"), ("de", "heim")),
             (("en", "cat"), ("de", "katze"))]
    return build_tree_from_pairs(pairs, ["en", "de"], VOCAB)[0]


def _deep_tree() -> PriorTree:
    """Three levels: animal -> pet -> (cat, katze, dog), animal -> hund; a word (haus) on two paths."""
    root = HierarchyNode("root", [
        HierarchyNode("animal", [
            HierarchyNode("pet", [HierarchyLeaf("en", "cat"), HierarchyLeaf("de", "katze"),
                                  HierarchyLeaf("en", "dog")]),
            HierarchyLeaf("de", "hund")]),
        HierarchyNode("dwelling", [HierarchyLeaf("en", "house"), HierarchyLeaf("de", "haus")]),
        HierarchyNode("home", [HierarchyLeaf("en", "home"), HierarchyLeaf("de", "haus"), HierarchyLeaf("de", "heim")]),
    ])
    tree = build_tree_from_hierarchy(root, ["en", "de"], VOCAB)[0]
    assert tree.node_names == ("ROOT", "animal", "pet", "dwelling", "home") and max(np.diff(tree.path_indptr)) == 3
    return tree


def _path_edges(tree: PriorTree, path: int) -> list[int]:
    return [int(e) for e in tree.path_edges[tree.path_indptr[path]:tree.path_indptr[path + 1]]]


def _languages_below(tree: PriorTree) -> list[set[int]]:
    """Per edge, the languages of the leaves below it (by walking every path)."""
    below: list[set[int]] = [set() for _ in range(tree.n_edges)]
    for path in range(tree.n_paths):
        for e in _path_edges(tree, path):
            below[e].add(int(tree.path_language[path]))
    return below


def _brute_force(tree: PriorTree, lam: np.ndarray, normalization: str):
    """Edge means, path and word probabilities and node masses by loops over the tree."""
    below = _languages_below(tree)
    n_topics = lam.shape[0]
    langs = range(len(tree.languages))
    mean = np.full((len(tree.languages), n_topics, tree.n_edges), np.nan)
    for li in langs:
        for e in range(tree.n_edges):
            if li not in below[e]:
                continue
            siblings = [f for f in range(tree.n_edges) if tree.edge_parent[f] == tree.edge_parent[e]
                        and (normalization == "node" or li in below[f])]
            mean[li, :, e] = lam[:, e] / lam[:, siblings].sum(axis=1)
    raw = np.ones((n_topics, tree.n_paths))
    for path in range(tree.n_paths):
        for e in _path_edges(tree, path):
            raw[:, path] *= mean[tree.path_language[path], :, e]
    total = np.stack([raw[:, tree.path_language == li].sum(axis=1) for li in langs], axis=1)
    cond = raw / total[:, tree.path_language]
    words = {lang: np.zeros((n_topics, tree.n_terms[li])) for li, lang in enumerate(tree.languages)}
    mass = {lang: np.zeros((n_topics, tree.n_nodes)) for lang in tree.languages}
    for path in range(tree.n_paths):
        lang = tree.languages[tree.path_language[path]]
        words[lang][:, tree.path_term[path]] += cond[:, path]
        for e in _path_edges(tree, path):
            mass[lang][:, tree.edge_parent[e]] += cond[:, path]
    return mean, cond, words, mass, total


@pytest.mark.parametrize("normalization", ["node_language", "node"])
@pytest.mark.parametrize("make_tree", [_pairs_tree, _deep_tree])
def test_path_read_out_matches_a_walk_over_the_tree(make_tree, normalization: str) -> None:
    tree = make_tree()
    layout = tree_vb_layout(tree, normalization)  # type: ignore[arg-type]
    lam = np.random.default_rng(7).gamma(2.0, 1.0, size=(3, tree.n_edges)) + 0.05
    got = tree_topic_paths(lam, layout)
    mean, cond, words, mass, total = _brute_force(tree, lam, normalization)
    assert_allclose(got.path_prob, cond, rtol=1e-12)
    assert_allclose(got.language_mass, total, rtol=1e-12)
    for li, lang in enumerate(tree.languages):
        assert_allclose(got.word_prob[lang], words[lang], rtol=1e-12, atol=1e-15)
        assert_allclose(got.word_prob[lang].sum(axis=1), 1.0, rtol=1e-12)
        assert_allclose(got.node_mass[lang], mass[lang], rtol=1e-12, atol=1e-15)
        assert_allclose(got.node_mass[lang][:, 0], 1.0, rtol=1e-12)  # every path passes the root
        assert_allclose(got.edge_mean[lang], mean[li], rtol=1e-12)   # NaN where the language is absent
    # The view every other read-out uses shows the same word distributions.
    view, _ = lda_view(lam, layout)
    for lang in tree.languages:
        assert_allclose(view[lang] / view[lang].sum(axis=1, keepdims=True), got.word_prob[lang], rtol=1e-10)


def test_a_word_on_two_paths_splits_its_probability() -> None:
    tree = _pairs_tree()
    paths = tree_topic_paths(np.random.default_rng(1).gamma(1.0, 1.0, size=(2, tree.n_edges)) + 0.1,
                             tree_vb_layout(tree, "node_language"))
    haus = tree.word_paths("de", VOCAB["de"].index("haus"))
    assert haus.size == 2  # house|haus and home|haus
    assert_allclose(paths.path_prob[:, haus].sum(axis=1), paths.word_prob["de"][:, VOCAB["de"].index("haus")])
    assert np.all(paths.path_prob[:, haus] > 0)


def test_flat_tree_read_out_is_lambda_normalized_per_language() -> None:
    tree = flat_tree(["en", "de"], [3, 2], beta=0.5)
    lam = np.array([[1.0, 2.0, 5.0, 3.0, 1.0], [4.0, 4.0, 2.0, 1.0, 1.0]])
    got = tree_topic_paths(lam, tree_vb_layout(tree, "node_language"))
    assert_allclose(got.word_prob["en"], lam[:, :3] / lam[:, :3].sum(axis=1, keepdims=True))
    assert_allclose(got.word_prob["de"], lam[:, 3:] / lam[:, 3:].sum(axis=1, keepdims=True))
    assert_allclose(got.node_mass["en"], np.ones((2, 1)))
    assert np.isnan(got.edge_mean["en"][:, 3:]).all() and np.isnan(got.edge_mean["de"][:, :3]).all()
    assert path_node_incidence(tree).shape == (5, 1)
