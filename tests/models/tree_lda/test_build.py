"""Prior trees from dictionary pairs and hierarchies: shape, senses, merging, both prior conventions.

The exact prior values are computed by hand from the conventions' definitions (Zhai 2014 sec. 5.1;
spec 2.7 P1); the per-leaf convention is checked independently against LDA through the Dirichlet's
first and second moments, computed in plain NumPy from the tree's arrays.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.io.tokenizer import TokenizerConfig, make_tokenizer
from topicflow.models.tree_lda.build import (
    HierarchyLeaf,
    HierarchyNode,
    build_tree_from_hierarchy,
    build_tree_from_pairs,
)
from topicflow.models.tree_lda.tree import PriorTree, flat_tree, tree_problems

LANGS = ["de", "en"]
VOCABS = {"de": ["haus", "heim", "katze", "system"], "en": ["house", "home", "cat", "system", "dog"]}
ARRAYS = ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language", "path_term")


def pairs_of(*rows: tuple[str, str]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    return [(("de", de), ("en", en)) for de, en in rows]


def path_of(tree: PriorTree, p: int) -> list[tuple[str, float]]:
    """Path p as (node entered, prior) per edge; the leaf as 'lang:term id'."""
    out = []
    for e in tree.path_edges[tree.path_indptr[p]:tree.path_indptr[p + 1]]:
        child = int(tree.edge_child[e])
        name = tree.node_names[child] if child >= 0 else f"{tree.languages[tree.path_language[p]]}:{tree.path_term[p]}"
        out.append((name, float(tree.edge_prior[e])))
    return out


def word_path_names(tree: PriorTree, lang: str, term: int) -> list[list[str]]:
    return [[n for n, _ in path_of(tree, int(p))] for p in tree.word_paths(lang, term)]


def assert_same_tree(a: PriorTree, b: PriorTree) -> None:
    assert a.languages == b.languages and a.n_terms == b.n_terms and a.node_names == b.node_names
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_one_concept_per_pair_with_senses_and_uncorrelated_words_under_the_root() -> None:
    pairs = pairs_of(("haus", "house"), ("haus", "home"), ("heim", "home"), ("system", "system"))
    tree, cov = build_tree_from_pairs(pairs, LANGS, VOCABS)
    assert tree_problems(tree) == []
    assert tree.node_names == ("ROOT", "de:haus|en:house", "de:haus|en:home", "de:heim|en:home",
                               "de:system|en:system")
    # haus (de 0) and home (en 1) have one path per sense, root -> concept -> leaf.
    assert word_path_names(tree, "de", 0) == [["de:haus|en:house", "de:0"], ["de:haus|en:home", "de:0"]]
    assert word_path_names(tree, "en", 1) == [["de:haus|en:home", "en:1"], ["de:heim|en:home", "en:1"]]
    # Uncorrelated words hang from the root.
    assert word_path_names(tree, "de", 2) == [["de:2"]] and word_path_names(tree, "en", 4) == [["en:4"]]
    # P3: the same spelling in two languages is two leaves under one concept.
    assert word_path_names(tree, "de", 3) == [["de:system|en:system", "de:3"]]
    assert word_path_names(tree, "en", 3) == [["de:system|en:system", "en:3"]]
    assert tree.n_paths == 4 + 5 + 2  # every word once, plus the second senses of haus and home
    assert cov.pairs_read == 4 and cov.pairs_in_vocabulary == 4 and cov.pairs_used == 4
    assert cov.concepts == 4 and cov.words_in_concepts == 6 and cov.words_multi_path == 2
    assert cov.largest_concept == 2 and cov.words_per_language == {"de": 3, "en": 3}


def test_transitive_merge_joins_connected_pairs_into_one_concept() -> None:
    pairs = pairs_of(("haus", "house"), ("haus", "home"), ("heim", "home"), ("katze", "cat"))
    tree, cov = build_tree_from_pairs(pairs, LANGS, VOCABS, merge="transitive")
    assert tree.node_names == ("ROOT", "de:haus|de:heim|en:house|en:home", "de:katze|en:cat")
    assert cov.concepts == 2 and cov.largest_concept == 4 and cov.words_multi_path == 0
    assert cov.largest_concept_words == ("de:haus", "de:heim", "en:house", "en:home")
    for lang, term in [("de", 0), ("de", 1), ("en", 0), ("en", 1)]:
        assert word_path_names(tree, lang, term) == [["de:haus|de:heim|en:house|en:home", f"{lang}:{term}"]]


def test_per_leaf_priors_exact() -> None:
    pairs = pairs_of(("haus", "house"), ("haus", "home"), ("heim", "home"))
    tree, _ = build_tree_from_pairs(pairs, LANGS, VOCABS, root_beta=0.01, concept_beta=100.0)
    # Root -> concept: 0.01 x 2 leaves; concept -> word: 100 / 2; root -> uncorrelated word: 0.01.
    assert path_of(tree, int(tree.word_paths("de", 0)[0])) == [("de:haus|en:house", 0.02), ("de:0", 50.0)]
    assert path_of(tree, int(tree.word_paths("de", 2)[0])) == [("de:2", 0.01)]
    root_edges = tree.children(0)
    assert np.sum(tree.edge_prior[root_edges]) == pytest.approx(0.01 * tree.n_paths, rel=1e-15)


def test_tree_tm_priors_exact_with_hyponym_counts() -> None:
    # Words: haus in 2 concepts (1/2 each), home in 2 (1/2 each); 9 distinct words in all.
    pairs = pairs_of(("haus", "house"), ("haus", "home"), ("heim", "home"))
    tree, _ = build_tree_from_pairs(pairs, LANGS, VOCABS, convention="tree-tm", root_beta=0.01, concept_beta=100.0)
    hyponyms = {"de:haus|en:house": 1.5, "de:haus|en:home": 1.0, "de:heim|en:home": 1.5}
    total = 1.5 + 1.0 + 1.5 + 5  # plus five uncorrelated words (katze, system; cat, system, dog)
    assert total == 9.0 - 0  # each word counts 1 overall
    for node, h in hyponyms.items():
        edge = int(np.flatnonzero(tree.edge_child == tree.node_names.index(node))[0])
        assert tree.edge_prior[edge] == pytest.approx(0.01 * h / total, rel=1e-15)
    haus_house, haus_home = (path_of(tree, int(p)) for p in tree.word_paths("de", 0))
    assert haus_house[1][1] == pytest.approx(100 * 0.5 / 1.5, rel=1e-15)
    assert haus_home[1][1] == pytest.approx(50.0, rel=1e-15)
    assert path_of(tree, int(tree.word_paths("en", 0)[0]))[1][1] == pytest.approx(100 * 1 / 1.5, rel=1e-15)
    assert path_of(tree, int(tree.word_paths("en", 4)[0])) == [("en:4", pytest.approx(0.01 / total, rel=1e-15))]
    # Every internal node's children sum to its scalar (the root's to NL = 0.01).
    for node, scalar in [(0, 0.01), (1, 100.0), (2, 100.0), (3, 100.0)]:
        assert np.sum(tree.edge_prior[tree.children(node)]) == pytest.approx(scalar, rel=1e-14)


@pytest.mark.parametrize("pairs", [[], pairs_of(("nichtda", "house"), ("haus", "absent"))])
def test_no_usable_pairs_give_the_flat_tree_exactly(pairs: list) -> None:
    tree, cov = build_tree_from_pairs(pairs, LANGS, VOCABS, root_beta=0.05)
    assert_same_tree(tree, flat_tree(LANGS, [4, 5], 0.05))
    assert cov.concepts == 0 and cov.pairs_out_of_vocabulary == len(pairs) and cov.largest_concept == 0
    # tree-tm: the root's total mass is root_beta, split over the 9 words (not LDA with beta 0.05 per word).
    tm, _ = build_tree_from_pairs(pairs, LANGS, VOCABS, convention="tree-tm", root_beta=0.05)
    np.testing.assert_allclose(tm.edge_prior, np.full(9, 0.05 / 9), rtol=1e-15)


def _leaf_moments(tree: PriorTree) -> tuple[np.ndarray, np.ndarray]:
    """E[p_leaf] and E[p_leaf^2] under the nested Dirichlet prior (one path per leaf), in plain NumPy."""
    totals = np.bincount(tree.edge_parent, weights=tree.edge_prior)
    mean = np.ones(tree.n_paths)
    second = np.ones(tree.n_paths)
    for p in range(tree.n_paths):
        for e in tree.path_edges[tree.path_indptr[p]:tree.path_indptr[p + 1]]:
            b, total = tree.edge_prior[e], totals[tree.edge_parent[e]]
            mean[p] *= b / total
            second[p] *= b * (b + 1) / (total * (total + 1))
    return mean, second


def test_per_leaf_convention_is_lda_when_concept_mass_is_root_beta_per_leaf() -> None:
    """Dirichlet aggregation: root edge beta*n_c with children beta each is Dir(beta, ..., beta) over leaves."""
    vocabs = {"de": ["a", "b", "c"], "en": ["x", "y", "z", "w"]}
    pairs = [(("de", "a"), ("en", "x")), (("de", "b"), ("en", "y"))]
    beta = 0.3
    lda_mean, lda_second = np.full(7, 1 / 7), np.full(7, beta * (beta + 1) / (7 * beta * (7 * beta + 1)))
    tree, _ = build_tree_from_pairs(pairs, ["de", "en"], vocabs, root_beta=beta, concept_beta=2 * beta)
    mean, second = _leaf_moments(tree)
    np.testing.assert_allclose(mean, lda_mean, rtol=1e-14)
    np.testing.assert_allclose(second, lda_second, rtol=1e-14)
    # A larger concept mass keeps LDA's prior mean but ties the concept's words together.
    tied, _ = build_tree_from_pairs(pairs, ["de", "en"], vocabs, root_beta=beta, concept_beta=100.0)
    mean, second = _leaf_moments(tied)
    np.testing.assert_allclose(mean, lda_mean, rtol=1e-14)
    np.testing.assert_allclose(second[[2, 5, 6]], lda_second[[2, 5, 6]], rtol=1e-14)  # uncorrelated words
    # Cross moment of a and x (one concept): E[pi_c^2] E[s_a s_x]; LDA: beta^2 / (B (B + 1)).
    totals = np.bincount(tied.edge_parent, weights=tied.edge_prior)
    (pa,), (px,) = tied.word_paths("de", 0), tied.word_paths("en", 0)
    ea = tied.path_edges[tied.path_indptr[pa]:tied.path_indptr[pa + 1]]
    ex = tied.path_edges[tied.path_indptr[px]:tied.path_indptr[px + 1]]
    assert ea[0] == ex[0]
    b_c, root_total, inner = tied.edge_prior[ea[0]], totals[0], totals[tied.edge_parent[ea[1]]]
    cross = b_c * (b_c + 1) / (root_total * (root_total + 1)) * (
        tied.edge_prior[ea[1]] * tied.edge_prior[ex[1]] / (inner * (inner + 1)))
    lda_cross = beta * beta / (7 * beta * (7 * beta + 1))
    assert cross > 1.4 * lda_cross
    assert np.all(second[[0, 3]] < lda_second[[0, 3]])  # the within-concept split is near 1/2


def test_tree_does_not_depend_on_pair_order_or_duplicates() -> None:
    pairs = pairs_of(("haus", "house"), ("haus", "home"), ("heim", "home"), ("katze", "cat"), ("system", "system"))
    reference, _ = build_tree_from_pairs(pairs, LANGS, VOCABS)
    shuffled = pairs + pairs[:2]
    random.Random(3).shuffle(shuffled)
    tree, cov = build_tree_from_pairs(shuffled, LANGS, VOCABS)
    assert_same_tree(tree, reference)
    assert cov.pairs_read == 7 and cov.pairs_in_vocabulary == 7 and cov.pairs_used == 5


def test_normalization_skips_and_counts_words_that_are_not_one_token() -> None:
    tokenizer = make_tokenizer(TokenizerConfig(stop_words_name="none", stop_words=()))
    pairs = pairs_of(("Haus", "HOUSE"), ("Wohn Haus", "house"), ("katze", "a"), ("heim", "hound"))
    tree, cov = build_tree_from_pairs(pairs, LANGS, VOCABS, normalize=tokenizer)
    assert tree.node_names == ("ROOT", "de:haus|en:house")
    assert cov.pairs_not_single_token == 2 and cov.pairs_out_of_vocabulary == 1 and cov.pairs_in_vocabulary == 1


def test_synonym_pairs_within_one_language() -> None:
    vocab = {"en": ["car", "automobile", "auto", "tree"]}
    pairs = [(("en", "car"), ("en", "automobile")), (("en", "automobile"), ("en", "auto")), (("en", "car"), ("en", "car"))]
    tree, cov = build_tree_from_pairs(pairs, ["en"], vocab, merge="transitive")
    assert tree.node_names == ("ROOT", "en:car|en:automobile|en:auto") and tree.n_paths == 4
    assert cov.pairs_in_vocabulary == 3 and cov.pairs_used == 2  # the self-pair links nothing


def test_hierarchy_of_depth_three_with_given_betas_and_dropped_leaves() -> None:
    root = HierarchyNode("ROOT", [
        HierarchyNode("animal", [
            HierarchyNode("pet", [HierarchyLeaf("en", "cat"), HierarchyLeaf("en", "dog", beta=7.0)]),
            HierarchyLeaf("en", "unicorn"),          # not in the vocabulary: dropped
            HierarchyLeaf("de", "katze"),
        ]),
        HierarchyNode("empty", [HierarchyLeaf("en", "griffin")]),  # no leaf left: dropped
        HierarchyNode("dwelling", [HierarchyLeaf("en", "house"), HierarchyLeaf("de", "haus")], beta=3.0),
    ])
    tree, cov = build_tree_from_hierarchy(root, LANGS, VOCABS, root_beta=0.01, concept_beta=10.0)
    assert tree.node_names == ("ROOT", "animal", "pet", "dwelling")
    assert cov.pairs_read == 7 and cov.pairs_out_of_vocabulary == 2 and cov.concepts == 3
    # per-leaf: root -> animal 0.01 x 3 leaves; animal -> pet 10 x 2/3, animal -> katze 10 x 1/3;
    # pet -> cat 10 / 2, pet -> dog given 7; root -> dwelling given 3, its words 10 / 2.
    assert path_of(tree, int(tree.word_paths("en", 2)[0])) == [("animal", 0.03), ("pet", pytest.approx(20 / 3)),
                                                                ("en:2", 5.0)]
    assert path_of(tree, int(tree.word_paths("en", 4)[0]))[-1] == ("en:4", 7.0)
    assert path_of(tree, int(tree.word_paths("de", 2)[0])) == [("animal", 0.03), ("de:2", pytest.approx(10 / 3))]
    assert path_of(tree, int(tree.word_paths("de", 0)[0])) == [("dwelling", 3.0), ("de:0", 5.0)]
    assert path_of(tree, int(tree.word_paths("de", 1)[0])) == [("de:1", 0.01)]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="unknown merge"):
        build_tree_from_pairs([], LANGS, VOCABS, merge="all")
    with pytest.raises(InvalidParameterError, match="convention"):
        build_tree_from_pairs([], LANGS, VOCABS, convention="uniform")
    with pytest.raises(InvalidParameterError, match="root_beta must be a positive"):
        build_tree_from_pairs([], LANGS, VOCABS, root_beta=0.0)
    with pytest.raises(InvalidParameterError, match="language 'fr'"):
        build_tree_from_pairs([(("fr", "maison"), ("en", "house"))], LANGS, VOCABS)
    with pytest.raises(InvalidParameterError, match="no vocabulary for language"):
        build_tree_from_pairs([], ["de", "fr"], VOCABS)
