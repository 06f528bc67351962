"""Tests of topicflow.models.tree_lda.hybrid: the flat tree against the LDA hybrid E-step, the z-then-y
draw against the joint (z, y) chain by exact enumeration, and the path draws of eq. 5.6."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import gammaln

from tests.reference import tree_vb as ref
from tests.reference.corpora import random_counts
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.layout import prepare_topics_from_var
from topicflow.models.lda.vb.objective import initial_topic_word_var
from topicflow.models.lda.vb.stats import TopicTermStats
from topicflow.models.tree_lda.hybrid import (
    CHAPTER_HYBRID_SETTINGS,
    mstep_tree_hybrid,
    mstep_tree_hybrid_online,
    sample_path_counts,
    tree_hybrid_estep_block,
)
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.models.tree_lda.vb import (
    mstep_tree,
    path_log_weights,
    tree_vb_layout,
    word_weights,
)


def _blocks(sizes, seed, n_docs=10):
    return {lang: block_from_csr(sp.csr_matrix(random_counts(n_docs, n, seed=seed + i, mean_len=5)),
                                 language=lang, first_doc=7)
            for i, (lang, n) in enumerate(sizes.items())}


@pytest.mark.parametrize("init", ["progressive", "random"])
def test_flat_tree_hybrid_statistics_equal_lda_hybrid_bit_for_bit(init) -> None:
    sizes = {"en": 12, "fr": 9}
    blocks = _blocks(sizes, seed=1)
    layout = tree_vb_layout(flat_tree(list(sizes), list(sizes.values()), beta=0.1), "node_language")
    lam = {lang: initial_topic_word_var(4, n, seed=2, language_index=i) for i, (lang, n) in enumerate(sizes.items())}
    params = HybridParams(n_topics=4, init=init, seed=3)
    expected, gamma = hybrid_estep_block(blocks, prepare_topics_from_var(lam), 0.3, params, epoch=2,
                                         return_gamma=True)
    edge_var = np.concatenate([lam["en"], lam["fr"]], axis=1)
    stats, tree_gamma = tree_hybrid_estep_block(blocks, edge_var, layout, 0.3, params, epoch=2, return_gamma=True)
    for lang in sizes:
        assert_array_equal(stats.topic_terms[lang].term_ids, expected.topic_terms[lang].term_ids)
        assert_array_equal(stats.topic_terms[lang].values, expected.topic_terms[lang].values)
    assert_array_equal(tree_gamma, gamma)
    # One path per word: the sampled y is that path, so eq. 5.6 is LDA's lambda = eta + Nbar.
    new = mstep_tree_hybrid(stats, edge_var, layout, samples=params.samples, seed=3, epoch=2)
    dense = np.concatenate([expected.topic_terms[lang].to_dense(n) for lang, n in sizes.items()], axis=1)
    assert_array_equal(new, 0.1 + dense)


def _joint_and_factored(lam, layout, tree, alpha, words):
    """Stationary distributions over (z, y) of a one-document chain, by exact enumeration.

    joint: the chapter's chain over (z_n, y_n), target prod_k Gamma(alpha_k + N_k) prod_n w_{z_n, y_n};
    factored: the LDA chain's target over z (with E_kw), times prod_n w_{z_n y_n} / E_{z_n w_n}.
    """
    log_w = path_log_weights(lam, layout)
    weights = word_weights(lam, layout)
    n_topics = lam.shape[0]
    options = [[(k, int(s)) for k in range(n_topics) for s in tree.word_paths(lang, w)] for lang, w in words]
    joint, factored = {}, {}
    for config in itertools.product(*options):
        counts = np.bincount([k for k, _ in config], minlength=n_topics)
        prior = np.exp(np.sum(gammaln(alpha + counts)))
        joint[config] = prior * np.prod([np.exp(log_w[k, s]) for k, s in config])
        z_target = prior * np.prod([weights[lang][k, w] for (k, _), (lang, w) in zip(config, words)])
        y_given_z = np.prod([np.exp(log_w[k, s]) / weights[lang][k, w] for (k, s), (lang, w) in zip(config, words)])
        factored[config] = z_target * y_given_z
    total_j, total_f = sum(joint.values()), sum(factored.values())
    keys = sorted(joint)
    return np.array([joint[c] / total_j for c in keys]), np.array([factored[c] / total_f for c in keys])


def test_z_from_the_path_marginal_then_y_given_z_is_the_joint_chain() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(2, tree.n_edges, seed=5) * 3.0
    words = [("en", 0), ("en", 0), ("de", 1)]  # en0 has two paths
    joint, factored = _joint_and_factored(lam, layout, tree, np.array([0.3, 0.6]), words)
    assert joint.size == (2 * 2) ** 2 * 2
    assert_allclose(factored, joint, rtol=1e-12)


def test_sampled_paths_sum_to_the_trials_and_follow_the_path_weights() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(2, tree.n_edges, seed=6)
    samples = 5
    nbar = np.array([[4000.2, 1.0], [3.4, 0.0]])  # kept counts / M for en terms 0 and 1
    stats = {"en": TopicTermStats(np.array([0, 1]), nbar)}
    paths, counts = sample_path_counts(stats, lam, layout, samples=samples, seed=0, epoch=0)
    assert_array_equal(paths, [0, 1, 2])
    assert_array_equal(counts, np.rint(counts))
    assert_array_equal(counts[:, 0] + counts[:, 1], np.rint(nbar[:, 0] * samples))
    assert_array_equal(counts[:, 2], np.rint(nbar[:, 1] * samples))
    log_w = path_log_weights(lam, layout)
    p = np.exp(log_w[0, 0]) / np.exp(log_w[0, :2]).sum()
    trials = 20001
    assert abs(counts[0, 0] - trials * p) < 5 * np.sqrt(trials * p * (1 - p))
    again = sample_path_counts(stats, lam, layout, samples=samples, seed=0, epoch=0)[1]
    assert_array_equal(again, counts)
    assert not np.array_equal(sample_path_counts(stats, lam, layout, samples=samples, seed=0, epoch=1)[1], counts)


def test_hybrid_mstep_modes() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(3, tree.n_edges, seed=7)
    blocks = {"en": block_from_csr(sp.csr_matrix(random_counts(8, 3, seed=1, mean_len=3)), language="en"),
              "de": block_from_csr(sp.csr_matrix(random_counts(8, 3, seed=2, mean_len=3)), language="de")}
    params = HybridParams(n_topics=3, **CHAPTER_HYBRID_SETTINGS)
    stats, _ = tree_hybrid_estep_block(blocks, lam, layout, 0.5, params, epoch=1)
    assert stats.n_doc_iter == 8 * (1 + 5 + 5)
    expectation = mstep_tree_hybrid(stats, lam, layout, samples=5, seed=0, epoch=1, path_mode="expectation")
    assert_array_equal(expectation, mstep_tree(stats, lam, layout))
    sampled = mstep_tree_hybrid(stats, lam, layout, samples=5, seed=0, epoch=1)
    # Only the split of en0's tokens over its two senses (edges 0 -> 4 and 1 -> 6) differs.
    assert_allclose(sampled[:, 4] + sampled[:, 6], expectation[:, 4] + expectation[:, 6], rtol=1e-12)
    assert not np.allclose(sampled[:, 4], expectation[:, 4])
    assert_allclose(sampled.sum(), expectation.sum(), rtol=1e-12)
    assert_allclose(sampled[:, [2, 3, 5, 7, 8]], expectation[:, [2, 3, 5, 7, 8]], rtol=1e-15)  # one-path words
    with pytest.raises(InvalidParameterError, match="path_mode"):
        mstep_tree_hybrid(stats, lam, layout, samples=5, seed=0, epoch=1, path_mode="best")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="whole counts"):
        mstep_tree_hybrid(stats, lam, layout, samples=3, seed=0, epoch=1)


def test_sampled_mstep_does_not_depend_on_how_documents_are_split() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(2, tree.n_edges, seed=8)
    blocks = {"en": block_from_csr(sp.csr_matrix(random_counts(9, 3, seed=3, mean_len=3)), language="en"),
              "de": block_from_csr(sp.csr_matrix(random_counts(9, 3, seed=4, mean_len=3)), language="de")}
    params = HybridParams(n_topics=2, seed=4)
    whole, _ = tree_hybrid_estep_block(blocks, lam, layout, 0.4, params, epoch=3)
    parts = [tree_hybrid_estep_block({lang: b.slice(lo, hi) for lang, b in blocks.items()}, lam, layout, 0.4,
                                     params, epoch=3)[0] for lo, hi in [(0, 4), (4, 9)]]
    merged = parts[0].merge(parts[1])
    assert_array_equal(mstep_tree_hybrid(merged, lam, layout, samples=5, seed=4, epoch=3),
                       mstep_tree_hybrid(whole, lam, layout, samples=5, seed=4, epoch=3))


def test_kernel_then_path_draw_matches_the_joint_chain_expectations() -> None:
    # One document of three tokens (en0 twice: two senses; de1 once). Under the chapter's joint chain
    # the expected number of tokens with (topic k, path s) is exact by enumeration; the LDA sampler on
    # the tree's word weights plus the y | z draw must estimate it (many kept sweeps, fixed seed).
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(2, tree.n_edges, seed=5) * 3.0
    alpha = np.array([0.3, 0.6])
    words = [("en", 0), ("en", 0), ("de", 1)]
    log_w = path_log_weights(lam, layout)
    options = [[(k, int(s)) for k in range(2) for s in tree.word_paths(lang, w)] for lang, w in words]
    expected = np.zeros((2, tree.n_paths))
    total = 0.0
    for config in itertools.product(*options):
        counts = np.bincount([k for k, _ in config], minlength=2)
        weight = np.exp(np.sum(gammaln(alpha + counts)) + sum(log_w[k, s] for k, s in config))
        total += weight
        for k, s in config:
            expected[k, s] += weight
    expected /= total
    blocks = {"en": block_from_csr(sp.csr_matrix(np.array([[2, 0, 0]])), language="en"),
              "de": block_from_csr(sp.csr_matrix(np.array([[0, 1, 0]])), language="de")}
    samples = 20000
    params = HybridParams(n_topics=2, burn_in=20, samples=samples, seed=11)
    stats, _ = tree_hybrid_estep_block(blocks, lam, layout, alpha, params)
    paths, counts = sample_path_counts(stats.topic_terms, lam, layout, samples=samples, seed=11, epoch=0)
    estimated = np.zeros_like(expected)
    estimated[:, paths] = counts / samples
    assert_allclose(estimated, expected, atol=0.01)
    assert_allclose(estimated.sum(), 3.0, rtol=1e-12)


def test_online_hybrid_step_is_the_batch_step_at_rho_one_and_blends_otherwise() -> None:
    tree, _, _ = ref.toy_tree()
    layout = tree_vb_layout(tree)
    lam = initial_topic_word_var(2, tree.n_edges, seed=9)
    blocks = {"en": block_from_csr(sp.csr_matrix(random_counts(5, 3, seed=5, mean_len=3)), language="en")}
    stats, _ = tree_hybrid_estep_block(blocks, lam, layout, 0.4, HybridParams(n_topics=2), epoch=0)
    batch = mstep_tree_hybrid(stats, lam, layout, samples=5, seed=1, epoch=0)
    assert_array_equal(mstep_tree_hybrid_online(stats, lam, layout, samples=5, seed=1, epoch=0, rho=1.0,
                                                total_docs=5), batch)
    target = tree.edge_prior + 4.0 * (batch - tree.edge_prior)
    assert_allclose(mstep_tree_hybrid_online(stats, lam, layout, samples=5, seed=1, epoch=0, rho=0.25,
                                             total_docs=20), 0.75 * lam + 0.25 * target, rtol=1e-13)
