"""Tests of topicflow.models.tree_lda.vb: flat trees against (polylingual) LDA, a tree with a two-path
word against the NumPy reference of eq. 5.3-5.5 (tests/reference/tree_vb.py), ELBO monotonicity,
online steps and recovery of a planted tree prior."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import tree_vb as ref
from tests.reference.corpora import random_counts
from tests.reference.vb_lda_numpy import docs_from_block
from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import match_topics, worst_matched_distance
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.common.dirichlet import exp_dirichlet_expectation_rows
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.layout import prepare_topics_from_var
from topicflow.models.lda.vb.objective import (
    full_elbo,
    initial_topic_word_var,
    mstep_batch,
)
from topicflow.models.lda.vb.online import blend
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.models.tree_lda.vb import (
    edge_probabilities,
    full_elbo_tree,
    mstep_tree,
    mstep_tree_online,
    path_log_weights,
    prepare_tree_topics,
    split_path_counts,
    topic_word,
    tree_topic_elbo_terms,
    tree_vb_layout,
    word_weights,
)


def _blocks(sizes, seed, n_docs=12):
    return {lang: block_from_csr(sp.csr_matrix(random_counts(n_docs, n, seed=seed + i, mean_len=6)),
                                 language=lang, first_doc=40)
            for i, (lang, n) in enumerate(sizes.items())}


@pytest.mark.parametrize("languages", [("en",), ("en", "fr")])
def test_flat_tree_batch_vb_equals_polylingual_lda(languages) -> None:
    sizes = {"en": 15, "fr": 25}
    sizes = {lang: sizes[lang] for lang in languages}
    blocks = _blocks(sizes, seed=3)
    n_topics, eta, alpha = 4, 0.1, np.array([0.1, 0.2, 0.3, 0.4])
    params = VBParams(n_topics=n_topics, max_doc_iter=200, doc_tol=1e-6)
    layout = tree_vb_layout(flat_tree(languages, list(sizes.values()), beta=eta), "node_language")
    lam = {lang: initial_topic_word_var(n_topics, n, seed=5, language_index=i)
           for i, (lang, n) in enumerate(sizes.items())}
    edge_var = np.concatenate([lam[lang] for lang in languages], axis=1)
    for _ in range(3):
        stats, gamma = estep_block(blocks, prepare_topics_from_var(lam), alpha, params, return_gamma=True)
        tree_stats, tree_gamma = estep_block(blocks, prepare_tree_topics(edge_var, layout), alpha, params,
                                             return_gamma=True)
        assert_allclose(tree_gamma, gamma, rtol=1e-12)
        assert_allclose(full_elbo_tree(tree_stats, edge_var, layout, alpha),
                        full_elbo(stats, lam, alpha, eta), rtol=1e-12)
        lam = {lang: mstep_batch(stats.topic_terms[lang].to_dense(n), eta) for lang, n in sizes.items()}
        edge_var = mstep_tree(tree_stats, edge_var, layout)
        assert_allclose(edge_var, np.concatenate([lam[lang] for lang in languages], axis=1), rtol=1e-12)


def test_monolingual_flat_tree_is_the_same_under_both_normalizations() -> None:
    tree = flat_tree(["en"], [7], beta=0.3)
    lam = initial_topic_word_var(3, 7, seed=1)
    a, b = tree_vb_layout(tree, "node"), tree_vb_layout(tree, "node_language")
    assert_array_equal(word_weights(lam, a)["en"], word_weights(lam, b)["en"])
    assert tree_topic_elbo_terms(lam, a) == tree_topic_elbo_terms(lam, b)


def test_node_normalization_makes_a_flat_bilingual_tree_stacked_vocabulary_lda() -> None:
    # The chapter's one-Dirichlet-per-node model generates the language too: a flat tree over en + fr
    # is LDA over the stacked vocabulary, documents concatenated.
    layout = tree_vb_layout(flat_tree(["en", "fr"], [4, 6], beta=0.2), "node")
    lam = initial_topic_word_var(3, 10, seed=2)
    weights = word_weights(lam, layout)
    stacked = exp_dirichlet_expectation_rows(lam)
    assert_allclose(np.concatenate([weights["en"], weights["fr"]], axis=1), stacked, rtol=1e-13)
    probs = topic_word(lam, layout)
    assert_allclose(probs["en"].sum(1) + probs["fr"].sum(1), 1.0, rtol=1e-13)


def test_word_with_one_path_has_lda_weight_of_its_leaf_edge() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(3, tree.n_edges, seed=4)
    root_edges = tree.children(0)
    expected = exp_dirichlet_expectation_rows(lam[:, root_edges])
    en2_edge = 2  # en term 2 hangs from the root on edge 2
    assert_allclose(word_weights(lam, layout)["en"][:, 2], expected[:, list(root_edges).index(en2_edge)],
                    rtol=1e-13)


def test_word_weight_sums_its_paths_and_the_split_sums_back() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(3, tree.n_edges, seed=6) * 2.0
    log_w = path_log_weights(lam, layout)
    en0 = tree.word_paths("en", 0)
    assert en0.size == 2
    assert_allclose(word_weights(lam, layout)["en"][:, 0], np.exp(log_w[:, en0]).sum(1), rtol=1e-15)
    n_kw = np.array([[3.25, 0.0], [1.5, 2.0], [7.0, 1.0]])
    stats = {"en": TopicTermStats(np.array([0, 2]), n_kw)}
    paths, counts = split_path_counts(stats, lam, layout)
    assert_array_equal(paths, [0, 1, 3])
    assert_allclose(counts[:, 0] + counts[:, 1], n_kw[:, 0], rtol=1e-15, atol=0)
    assert_array_equal(counts[:, 2], n_kw[:, 1])  # one path: the count itself
    assert_allclose(counts[:, 0] / n_kw[:, 0], np.exp(log_w[:, 0]) / np.exp(log_w[:, en0]).sum(1), rtol=1e-13)


def _toy_blocks(seed):
    return {"en": block_from_csr(sp.csr_matrix(random_counts(6, 3, seed=seed, mean_len=3)), language="en"),
            "de": block_from_csr(sp.csr_matrix(random_counts(6, 3, seed=seed + 1, mean_len=3)), language="de")}


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_estep_statistics_and_mstep_match_the_joint_q_reference(normalization) -> None:
    tree, edges, paths = ref.toy_tree()
    layout = tree_vb_layout(tree, normalization)
    blocks = _toy_blocks(seed=21)
    alpha = np.array([0.3, 0.5, 0.2])
    params = VBParams(n_topics=3, max_doc_iter=500, doc_tol=1e-9)
    lam = initial_topic_word_var(3, tree.n_edges, seed=8) * 1.5
    stats, gamma = estep_block(blocks, prepare_tree_topics(lam, layout), alpha, params, return_gamma=True)
    docs = {lang: docs_from_block(b) for lang, b in blocks.items()}
    per_language = normalization == "node_language"
    expected = ref.estep_reference(docs, lam, edges, paths, alpha, params.max_doc_iter, params.doc_tol,
                                   per_language=per_language)
    assert_allclose(gamma, expected["gamma"], rtol=1e-10)
    for lang in ("en", "de"):
        assert_allclose(stats.topic_terms[lang].to_dense(3), expected["word_stats"][lang], rtol=1e-10, atol=1e-14)
    beta = np.array([b for _, _, b in edges])
    assert_allclose(mstep_tree(stats, lam, layout), beta + expected["edge_counts"], rtol=1e-10)
    assert_allclose(tree_topic_elbo_terms(lam, layout),
                    ref.topic_terms_reference(lam, edges, paths, per_language), rtol=1e-10)
    assert_allclose(stats.doc_elbo, expected["doc_elbo"], rtol=1e-10)


def test_batch_elbo_never_decreases_on_a_toy() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    blocks = _toy_blocks(seed=31)
    alpha = 0.4
    params = VBParams(n_topics=3, max_doc_iter=1000, doc_tol=1e-10)
    lam = initial_topic_word_var(3, tree.n_edges, seed=9)
    elbos = []
    gamma = None
    for _ in range(25):
        stats, gamma = estep_block(blocks, prepare_tree_topics(lam, layout), alpha, params, return_gamma=True,
                                   gamma_init=gamma)
        elbos.append(full_elbo_tree(stats, lam, layout, alpha))
        lam = mstep_tree(stats, lam, layout)
    steps = np.diff(elbos)
    assert np.all(steps > -1e-8 * np.abs(elbos[1:])), steps
    assert elbos[-1] > elbos[0]


def test_online_step_blends_towards_the_scaled_batch_target() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    blocks = _toy_blocks(seed=41)
    lam = initial_topic_word_var(3, tree.n_edges, seed=10)
    stats, _ = estep_block(blocks, prepare_tree_topics(lam, layout), 0.2, VBParams(n_topics=3))
    batch = mstep_tree(stats, lam, layout)
    assert_array_equal(mstep_tree_online(stats, lam, layout, rho=1.0, total_docs=stats.n_docs), batch)
    scaled = tree.edge_prior + 5.0 * (batch - tree.edge_prior)
    assert_allclose(mstep_tree_online(stats, lam, layout, rho=0.3, total_docs=5 * stats.n_docs),
                    blend(lam, scaled, 0.3), rtol=1e-13)


def test_read_outs_are_posterior_means() -> None:
    tree, _, _ = ref.toy_tree()
    lam = initial_topic_word_var(2, tree.n_edges, seed=11)
    layout = tree_vb_layout(tree, "node")
    probs = edge_probabilities(lam, layout)
    for node in range(tree.n_nodes):
        assert_allclose(probs[:, tree.children(node)].sum(1), 1.0, rtol=1e-14)
    words = topic_word(lam, layout)
    # en term 0: C1 -> en0 and C2 -> en0, each through its concept edge from the root.
    expected = probs[:, 0] * probs[:, 4] + probs[:, 1] * probs[:, 6]
    assert_allclose(words["en"][:, 0], expected, rtol=1e-13)
    assert_allclose(words["en"].sum(1) + words["de"].sum(1), 1.0, rtol=1e-13)
    per_lang = topic_word(lam, tree_vb_layout(tree, "node_language"))
    assert_allclose(per_lang["en"].sum(1), 1.0, rtol=1e-13)
    assert_allclose(per_lang["de"].sum(1), 1.0, rtol=1e-13)


def test_bad_edge_var_and_normalization_raise() -> None:
    tree, _, _ = ref.toy_tree()
    with pytest.raises(InvalidParameterError, match="normalization"):
        tree_vb_layout(tree, "language")  # type: ignore[arg-type]
    layout = tree_vb_layout(tree)
    with pytest.raises(InvalidParameterError, match="shape"):
        word_weights(np.ones((2, 3)), layout)
    with pytest.raises(InvalidParameterError, match="positive"):
        mstep_tree(EStepStats.zeros(2, ["en", "de"]), -np.ones((2, tree.n_edges)), layout)


def _planted_tree():
    """Monolingual two-level tree: 4 concepts of 3 words each and 6 root words; word 0 also in concept 3."""
    from topicflow.models.tree_lda.tree import PriorTree

    concept_words = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 0]]
    edges = [(0, c + 1) for c in range(4)] + [(0, -1)] * 6
    word_edges = {}
    for c, words in enumerate(concept_words):
        for w in words:
            word_edges.setdefault(w, []).append([c, len(edges)])
            edges.append((c + 1, -1))
    for i, w in enumerate(range(11, 17)):
        word_edges[w] = [[4 + i]]
    flat = [(w, p) for w in range(17) for p in word_edges[w]]
    return PriorTree(
        languages=("en",), n_terms=(17,), node_names=("ROOT", "C1", "C2", "C3", "C4"),
        edge_parent=np.array([e[0] for e in edges]), edge_child=np.array([e[1] for e in edges]),
        edge_prior=np.full(len(edges), 0.5),
        path_indptr=np.concatenate(([0], np.cumsum([len(p) for _, p in flat]))).astype(np.int64),
        path_edges=np.array([e for _, p in flat for e in p]), path_language=np.zeros(len(flat), dtype=np.int64),
        path_term=np.array([w for w, _ in flat]))


def test_vb_recovers_a_planted_tree_prior_up_to_label_switching() -> None:
    tree = _planted_tree()
    layout = tree_vb_layout(tree)
    rng = np.random.default_rng(0)
    n_topics = 3
    truth = np.full((n_topics, tree.n_edges), 0.05)
    for k, concepts in enumerate([[0, 1], [2], [3]]):
        truth[k, concepts] = 5.0  # each topic prefers its concepts at the root
    true_pi = np.empty_like(truth)
    for node in range(tree.n_nodes):
        edges = tree.children(node)
        true_pi[:, edges] = np.array([rng.dirichlet(truth[k, edges] + (node > 0)) for k in range(n_topics)])
    true_words = topic_word(true_pi * 1e6, layout)["en"]  # lambda huge = its posterior mean pi
    n_docs, doc_len = 300, 60
    dense = np.zeros((n_docs, 17), dtype=np.int64)
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, 0.2))
        dense[d] = rng.multinomial(doc_len, theta @ true_words)
    block = block_from_csr(sp.csr_matrix(dense), language="en")
    lam = initial_topic_word_var(n_topics, tree.n_edges, seed=3, shape=5.0)
    params = VBParams(n_topics=n_topics, max_doc_iter=200, doc_tol=1e-4)
    for _ in range(60):
        stats, _ = estep_block(block, prepare_tree_topics(lam, layout), 0.2, params)
        lam = mstep_tree(stats, lam, layout)
    estimated = topic_word(lam, layout)["en"]
    assert worst_matched_distance(estimated, true_words) < 0.1
    match = match_topics(estimated, true_words)
    probs = edge_probabilities(lam, layout)[match.estimated]
    # pi itself: the children of each topic's concept without the two-sense word 0 are identifiable.
    for k, node in [(0, 2), (1, 3)]:
        edges = tree.children(node)
        assert_allclose(probs[k, edges], true_pi[k, edges], atol=0.03)
    # At the root, word 0 (in C1 and C4) lets the data move mass between those two concept edges.
    assert np.abs(probs[:, tree.children(0)] - true_pi[:, tree.children(0)]).max() < 0.2


def test_mstep_from_merged_block_statistics_does_not_depend_on_the_split() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    blocks = _toy_blocks(seed=51)
    lam = initial_topic_word_var(3, tree.n_edges, seed=12)
    topics = prepare_tree_topics(lam, layout)
    params = VBParams(n_topics=3)
    whole, _ = estep_block(blocks, topics, 0.3, params)
    halves = [estep_block({lang: b.slice(lo, hi) for lang, b in blocks.items()}, topics, 0.3, params)[0]
              for lo, hi in [(0, 2), (2, 6)]]
    merged = halves[0].merge(halves[1])
    assert_allclose(mstep_tree(merged, lam, layout), mstep_tree(whole, lam, layout), rtol=1e-14)
    assert_allclose(full_elbo_tree(merged, lam, layout, 0.3), full_elbo_tree(whole, lam, layout, 0.3), rtol=1e-13)
