"""Tests of topicflow.models.lda.vb.hybrid against the NumPy reference in tests/reference/hybrid_numpy.py.

The kernel and the reference consume the same counter-based uniforms in the same way, so they make the
same assignments: statistics and gamma are compared exactly (up to 1e-12 for sums in another order).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from tests.reference import hybrid_numpy as ref
from tests.reference.corpora import random_block, random_counts
from tests.reference.vb_lda_numpy import docs_from_block
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.common.dirichlet import exp_dirichlet_expectation_rows
from topicflow.models.lda.synth import block_topic_word, draw_mixture_counts
from topicflow.models.lda.vb.hybrid import HybridParams, hybrid_estep_block
from topicflow.models.lda.vb.stats import EStepStats
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.estep import estep_block
from topicflow.models.lda.vb.objective import initial_topic_word_var, local_elbo_terms
from topicflow.models.lda.vb.layout import prepare_topics


def _case(case: str):
    """(block, n_topics) for each edge case of the reference comparison."""
    if case == "typical":
        return random_block(25, 40, seed=1, first_doc=13), 6
    if case == "empty_doc":
        return random_block(8, 20, seed=2, empty_rows=(0, 3, 7)), 3
    if case == "single_term":
        dense = np.zeros((6, 10), dtype=np.int64)
        dense[np.arange(6), [0, 3, 3, 9, 5, 1]] = [1, 5, 2, 1, 7, 3]
        return block_from_csr(sp.csr_matrix(dense)), 3
    if case == "one_topic":
        return random_block(10, 15, seed=3), 1
    if case == "one_doc":
        return random_block(1, 30, seed=4, mean_len=20), 5
    if case == "many_topics":  # more topics than the smoothing table's chunk, so the chunk search is exercised
        return random_block(6, 50, seed=5, mean_len=25), 70
    raise ValueError(case)


def _exp_elog(n_topics, n_terms, seed):
    return exp_dirichlet_expectation_rows(initial_topic_word_var(n_topics, n_terms, seed=seed) * 0.5)


def _assert_matches(stats, gamma, expected, n_terms):
    for lang, n in n_terms.items():
        assert_allclose(stats.topic_terms[lang].to_dense(n), expected["stats"][lang], rtol=0, atol=1e-12)
    assert np.array_equal(gamma, expected["gamma"])
    assert_allclose(stats.alpha_suff, expected["alpha_suff"], rtol=1e-12, atol=1e-10)
    assert_allclose(stats.doc_elbo, expected["doc_elbo"], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ["typical", "empty_doc", "single_term", "one_topic", "one_doc", "many_topics"])
def test_hybrid_estep_matches_numpy_reference(case: str, dtype: type) -> None:
    block, n_topics = _case(case)
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=7)
    alpha = np.linspace(0.05, 0.5, n_topics)
    params = HybridParams(n_topics=n_topics, burn_in=3, samples=4, seed=11)
    prepared = prepare_topics({"default": exp_elog}, dtype=dtype)
    stats, gamma = hybrid_estep_block(block, prepared, alpha, params, epoch=2, return_gamma=True)
    # The float32 path only rounds exp(E[log beta]); all arithmetic is float64, so the reference on
    # the rounded values makes exactly the same draws.
    rounded = exp_elog.astype(dtype).astype(np.float64)
    expected = ref.hybrid_estep_reference({"default": docs_from_block(block)}, {"default": rounded}, alpha,
                                          3, 4, seed=11, epoch=2, first_doc=block.first_doc)
    _assert_matches(stats, gamma, expected, {"default": block.n_terms})
    assert (stats.n_docs, stats.n_tokens, stats.n_capped) == (block.n_docs, block.n_tokens, 0)
    assert stats.n_doc_iter == block.n_docs * (1 + 3 + 4)
    assert_allclose(gamma.sum(axis=1), alpha.sum() + block.doc_lengths(), rtol=1e-12)


@pytest.mark.parametrize("init", ["progressive", "random"])
@pytest.mark.parametrize("alpha_stats", ["mean", "samples"])
@pytest.mark.parametrize("case", ["typical", "empty_doc", "one_topic", "many_topics"])
def test_init_and_alpha_stats_match_numpy_reference(case: str, init: str, alpha_stats: str) -> None:
    block, n_topics = _case(case)
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=9)
    alpha = np.linspace(0.02, 0.7, n_topics)
    params = HybridParams(n_topics=n_topics, burn_in=2, samples=3, seed=5, init=init,  # type: ignore[arg-type]
                          alpha_stats=alpha_stats)  # type: ignore[arg-type]
    stats, gamma = hybrid_estep_block(block, {"default": exp_elog}, alpha, params, epoch=1, return_gamma=True)
    expected = ref.hybrid_estep_reference({"default": docs_from_block(block)}, {"default": exp_elog}, alpha, 2, 3,
                                          seed=5, epoch=1, first_doc=block.first_doc, init=init,
                                          alpha_stats=alpha_stats)
    _assert_matches(stats, gamma, expected, {"default": block.n_terms})
    assert stats.n_doc_iter == block.n_docs * (1 + 2 + 3)


def test_sampled_alpha_stats_leave_the_bound_unchanged() -> None:
    """The same draws in both modes: only alpha_suff differs, and local_elbo_terms gives the same bound."""
    block, n_topics = _case("typical")
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=3)
    alpha = np.full(n_topics, 0.05)
    mean, g_mean = hybrid_estep_block(block, {"default": exp_elog}, alpha, HybridParams(n_topics, seed=2),
                                      return_gamma=True)
    sampled, g_sampled = hybrid_estep_block(block, {"default": exp_elog}, alpha,
                                            HybridParams(n_topics, seed=2, alpha_stats="samples"), return_gamma=True)
    assert np.array_equal(g_mean, g_sampled)
    assert np.array_equal(mean.topic_terms["default"].values, sampled.topic_terms["default"].values)
    assert_allclose(local_elbo_terms(sampled, alpha), local_elbo_terms(mean, alpha), rtol=1e-12)
    # Jensen: psi of the mean counts is at least the mean of psi, so the sampled statistics are lower.
    assert np.all(sampled.alpha_suff <= mean.alpha_suff + 1e-9) and np.any(sampled.alpha_suff < mean.alpha_suff - 1)


def test_term_without_weight_goes_to_the_first_topic_like_the_reference() -> None:
    block, n_topics = _case("typical")
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=8)
    dead = int(block.term_ids[0])
    exp_elog[:, dead] = 0.0  # exp(E[log beta]) underflowed in every topic
    alpha = np.full(n_topics, 0.2)
    stats, gamma = hybrid_estep_block(block, {"default": exp_elog}, alpha, HybridParams(n_topics, 2, 2, seed=4),
                                      return_gamma=True)
    expected = ref.hybrid_estep_reference({"default": docs_from_block(block)}, {"default": exp_elog}, alpha,
                                          2, 2, seed=4, first_doc=block.first_doc)
    _assert_matches(stats, gamma, expected, {"default": block.n_terms})
    dense = stats.topic_terms["default"].to_dense(block.n_terms)
    assert dense[0, dead] == block.to_csr()[:, dead].sum() and dense[1:, dead].sum() == 0


def test_float32_topics_agree_with_float64() -> None:
    block, n_topics = _case("typical")
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=7)
    params = HybridParams(n_topics=n_topics, seed=3)
    s64, g64 = hybrid_estep_block(block, prepare_topics({"default": exp_elog}), 0.2, params, return_gamma=True)
    s32, g32 = hybrid_estep_block(block, prepare_topics({"default": exp_elog}, dtype=np.float32), 0.2, params,
                                  return_gamma=True)
    # No uniform of this small corpus falls within float32 rounding of a bucket boundary: same draws.
    assert np.array_equal(g32, g64)
    assert_allclose(s32.topic_terms["default"].values, s64.topic_terms["default"].values, rtol=0, atol=1e-12)
    assert_allclose(s32.doc_elbo, s64.doc_elbo, rtol=1e-5)


def _poly_blocks(first_doc=100):
    en = random_counts(9, 15, seed=10, empty_rows=(2,))
    fr = random_counts(9, 25, seed=11, empty_rows=(4, 2))
    return {
        "en": block_from_csr(sp.csr_matrix(en), language="en", first_doc=first_doc),
        "fr": block_from_csr(sp.csr_matrix(fr), language="fr", first_doc=first_doc),
    }


def _poly_topics():
    return {"en": _exp_elog(4, 15, seed=12), "fr": _exp_elog(4, 25, seed=13)}


def test_polylingual_matches_per_language_reference() -> None:
    blocks, exp_elog = _poly_blocks(), _poly_topics()
    alpha = np.array([0.1, 0.2, 0.3, 0.4])
    params = HybridParams(n_topics=4, burn_in=2, samples=3, seed=5)
    stats, gamma = hybrid_estep_block(blocks, prepare_topics(exp_elog), alpha, params, epoch=1, return_gamma=True)
    docs = {lang: docs_from_block(b) for lang, b in blocks.items()}
    expected = ref.hybrid_estep_reference(docs, exp_elog, alpha, 2, 3, seed=5, epoch=1, first_doc=100)
    _assert_matches(stats, gamma, expected, {"en": 15, "fr": 25})
    assert stats.n_tokens == blocks["en"].n_tokens + blocks["fr"].n_tokens


def test_polylingual_language_absent_from_block_equals_monolingual() -> None:
    blocks, exp_elog = _poly_blocks(), _poly_topics()
    params = HybridParams(n_topics=4, seed=2)
    only_fr, gamma_fr = hybrid_estep_block({"fr": blocks["fr"]}, exp_elog, 0.3, params, return_gamma=True)
    mono_fr, gamma_mono = hybrid_estep_block(blocks["fr"], {"fr": exp_elog["fr"]}, 0.3, params, return_gamma=True)
    assert only_fr.topic_terms["en"].term_ids.shape == (0,)
    assert np.array_equal(only_fr.topic_terms["fr"].values, mono_fr.topic_terms["fr"].values)
    assert np.array_equal(gamma_fr, gamma_mono)


def _assert_stats_close(a: EStepStats, b: EStepStats, n_terms) -> None:
    assert (a.n_docs, a.n_tokens, a.n_capped, a.n_doc_iter) == (b.n_docs, b.n_tokens, b.n_capped, b.n_doc_iter)
    for lang, n in n_terms.items():
        assert_allclose(a.topic_terms[lang].to_dense(n), b.topic_terms[lang].to_dense(n), rtol=1e-12, atol=1e-12)
    assert_allclose(a.alpha_suff, b.alpha_suff, rtol=1e-12)
    assert_allclose(a.doc_elbo, b.doc_elbo, rtol=1e-12)


@pytest.mark.parametrize("cut", [0, 1, 11, 29, 30])
def test_stats_do_not_depend_on_how_documents_are_split(cut: int) -> None:
    block = random_block(30, 40, seed=20, first_doc=500, empty_rows=(11,))
    topics = prepare_topics({"default": _exp_elog(5, 40, seed=21)})
    params = HybridParams(n_topics=5, seed=9)
    whole, gamma = hybrid_estep_block(block, topics, 0.2, params, epoch=4, return_gamma=True)
    first, gamma_a = hybrid_estep_block(block.slice(0, cut), topics, 0.2, params, epoch=4, return_gamma=True)
    second, gamma_b = hybrid_estep_block(block.slice(cut, 30), topics, 0.2, params, epoch=4, return_gamma=True)
    _assert_stats_close(whole, first.merge(second), {"default": 40})
    assert np.array_equal(gamma, np.concatenate([gamma_a, gamma_b]))


def test_polylingual_split_invariance() -> None:
    blocks, topics = _poly_blocks(), prepare_topics(_poly_topics())
    params = HybridParams(n_topics=4, seed=1)
    whole, gamma = hybrid_estep_block(blocks, topics, 0.3, params, return_gamma=True)
    parts = [{lang: b.slice(lo, hi) for lang, b in blocks.items()} for lo, hi in ((0, 4), (4, 9))]
    (a, gamma_a), (b, gamma_b) = (hybrid_estep_block(p, topics, 0.3, params, return_gamma=True) for p in parts)
    _assert_stats_close(whole, a.merge(b), {"en": 15, "fr": 25})
    assert np.array_equal(gamma, np.concatenate([gamma_a, gamma_b]))


def test_same_seed_and_epoch_same_result_otherwise_fresh_draws() -> None:
    block = random_block(20, 30, seed=30)
    topics = prepare_topics({"default": _exp_elog(4, 30, seed=31)})

    def run(seed: int, epoch: int):
        stats, gamma = hybrid_estep_block(block, topics, 0.3, HybridParams(4, seed=seed), epoch=epoch,
                                          return_gamma=True)
        return stats.topic_terms["default"].values, gamma, stats.doc_elbo

    base = run(0, 0)
    again = run(0, 0)
    assert all(np.array_equal(x, y) for x, y in zip(base, again))
    for other in (run(0, 1), run(1, 0)):
        assert not np.array_equal(base[0], other[0])
        assert not np.array_equal(base[1], other[1])
    without_bound, _ = hybrid_estep_block(block, topics, 0.3, HybridParams(4), compute_bound=False)
    assert math.isnan(without_bound.doc_elbo)
    assert np.array_equal(without_bound.topic_terms["default"].values, base[0])


def test_separated_topics_are_recovered_and_match_the_vb_proportions() -> None:
    n_topics, width = 4, 10
    topic_word = block_topic_word(n_topics, n_topics * width)
    rng = np.random.default_rng(40)
    theta = rng.dirichlet(np.full(n_topics, 0.5), size=120)
    dense = draw_mixture_counts(rng, theta, topic_word, np.full(120, 60))
    block = block_from_csr(sp.csr_matrix(dense))
    alpha = np.full(n_topics, 0.1)
    stats, gamma = hybrid_estep_block(block, {"default": topic_word}, alpha, HybridParams(n_topics, 10, 10),
                                      return_gamma=True)
    counts = stats.topic_terms["default"].to_dense(n_topics * width)
    owner_share = counts[np.arange(n_topics * width) // width, np.arange(n_topics * width)] / counts.sum(axis=0)
    assert owner_share[counts.sum(axis=0) > 0].min() >= 0.95
    _, gamma_vb = estep_block(block, {"default": topic_word}, alpha, VBParams(n_topics, 500, 1e-8),
                              return_gamma=True)
    doc_len = dense.sum(axis=1)[:, None]
    sampled, variational = (gamma - alpha) / doc_len, (gamma_vb - alpha) / doc_len
    assert np.abs(sampled - variational).max() < 0.05
    assert np.abs(sampled - theta).mean() < 0.06  # multinomial noise of 60-token documents


def test_kept_assignments_follow_the_collapsed_posterior() -> None:
    """Chains over many documents (independent streams) against brute-force enumeration of p(z | E, alpha)."""
    exp_elog = np.array([[0.6, 0.3], [0.2, 0.5]])  # (n_topics, n_terms); tokens: term 0 once, term 1 twice
    alpha = np.array([0.4, 0.9])
    n_chains = 40_000
    block = block_from_csr(sp.csr_matrix(np.tile([[1, 2]], (n_chains, 1))))
    totals, doc_topic = np.zeros((2, 2)), np.zeros(2)
    seeds = (0, 1, 2)
    for seed in seeds:
        stats, gamma = hybrid_estep_block(block, {"default": exp_elog}, alpha, HybridParams(2, 8, 2, seed),
                                          return_gamma=True)
        totals += stats.topic_terms["default"].to_dense(2)
        doc_topic += (gamma - alpha).sum(axis=0)
    n_runs = n_chains * len(seeds)
    marginals = ref.stationary_marginals([0, 1, 1], exp_elog, alpha)  # (n_tokens, n_topics)
    # Standard error of a frequency over 120,000 chains is at most 0.0015; 0.007 is over 4.5 of them.
    assert_allclose(totals[:, 0] / n_runs, marginals[0], atol=0.007)
    assert_allclose(totals[:, 1] / n_runs, marginals[1] + marginals[2], atol=0.014)
    assert_allclose(doc_topic / n_runs, marginals.sum(axis=0), atol=0.014)
    # Sampling token 0 from its smoothing term alpha_k E_k0 alone (ignoring the other tokens) would be
    # off by more than the tolerance: the test needs the document counts N^{-i} to be used.
    smoothing_only = alpha * exp_elog[:, 0] / np.sum(alpha * exp_elog[:, 0])
    assert np.abs(smoothing_only - marginals[0]).max() > 0.05


@pytest.mark.parametrize("init", ["progressive", "random"])
def test_sampled_alpha_stats_estimate_the_collapsed_expectation(init: str) -> None:
    """alpha_stats="samples" estimates E[E[log theta | z]] under p(z | E, alpha), enumerated exactly; "mean" does not.

    From either start (random z or progressive), the kept sweeps follow the collapsed posterior, so the
    sampled statistics per document converge to the exact expectation; the "mean" statistics
    psi(alpha + Nbar) - psi(sum alpha + N) are biased upward for a rarely used topic (Jensen).
    """
    exp_elog = np.array([[0.6, 0.3], [0.2, 0.5]])
    alpha = np.array([0.05, 0.9])
    n_chains = 20_000
    block = block_from_csr(sp.csr_matrix(np.tile([[1, 2]], (n_chains, 1))))
    sampled, mean = np.zeros(2), np.zeros(2)
    for seed in (0, 1):
        for kind, acc in (("samples", sampled), ("mean", mean)):
            stats, _ = hybrid_estep_block(block, {"default": exp_elog}, alpha,
                                          HybridParams(2, 10, 4, seed, init=init, alpha_stats=kind))  # type: ignore[arg-type]
            acc += stats.alpha_suff / (2 * n_chains)
    exact = ref.stationary_elog_theta([0, 1, 1], exp_elog, alpha)
    # psi(0.05 + n) - psi(0.05) is about 20 for n >= 1, so a frequency error of 0.005 moves topic 0 by 0.1.
    assert_allclose(sampled, exact, atol=0.15)
    assert mean[0] - exact[0] > 1.0


def test_random_init_chains_follow_the_collapsed_posterior() -> None:
    exp_elog = np.array([[0.6, 0.3], [0.2, 0.5]])
    alpha = np.array([0.4, 0.9])
    n_chains = 40_000
    block = block_from_csr(sp.csr_matrix(np.tile([[1, 2]], (n_chains, 1))))
    stats = hybrid_estep_block(block, {"default": exp_elog}, alpha, HybridParams(2, 5, 2, 3, init="random"))[0]
    totals = stats.topic_terms["default"].to_dense(2) / n_chains
    marginals = ref.stationary_marginals([0, 1, 1], exp_elog, alpha)
    assert_allclose(totals[:, 0], marginals[0], atol=0.01)  # 40,000 chains: standard error < 0.0025
    assert_allclose(totals[:, 1], marginals[1] + marginals[2], atol=0.02)
    # Burn-in 0 from a uniform start is visibly off: the start matters, the sweeps remove it.
    first = hybrid_estep_block(block, {"default": np.array([[0.98, 0.02], [0.02, 0.98]])}, alpha,
                               HybridParams(2, 0, 1, 3, init="random"))[0]
    assert first.topic_terms["default"].to_dense(2)[1, 0] / n_chains > 0.01


def test_params_are_validated_and_round_trip() -> None:
    for kwargs, field in (({"n_topics": 0}, "n_topics"), ({"n_topics": 2, "burn_in": -1}, "burn_in"),
                          ({"n_topics": 2, "samples": 0}, "samples"), ({"n_topics": 2, "seed": -1}, "seed"),
                          ({"n_topics": 2, "seed": 2**63}, "seed"), ({"n_topics": True}, "n_topics"),
                          ({"n_topics": 2, "samples": 1.5}, "samples"), ({"n_topics": 2, "init": "uniform"}, "init"),
                          ({"n_topics": 2, "alpha_stats": "last"}, "alpha_stats")):
        with pytest.raises(InvalidParameterError, match=f"HybridParams.{field}"):
            HybridParams(**kwargs)
    params = HybridParams(n_topics=np.int64(3), burn_in=0, samples=2, seed=7, init="random", alpha_stats="samples")
    assert type(params.n_topics) is int
    assert HybridParams.from_dict(params.to_dict()) == params
    old = {"n_topics": 3, "burn_in": 1, "samples": 2, "seed": 0}  # written before init and alpha_stats existed
    assert HybridParams.from_dict(old) == HybridParams(3, 1, 2, 0)


def test_inputs_are_validated() -> None:
    block = random_block(3, 10, seed=1)
    ones = {"default": np.ones((2, 10))}
    with pytest.raises(InvalidParameterError, match="no topics"):
        hybrid_estep_block({"xx": block}, ones, 0.1, HybridParams(2))
    with pytest.raises(InvalidParameterError, match="term id"):
        hybrid_estep_block(block, {"default": np.ones((2, 5))}, 0.1, HybridParams(2))
    with pytest.raises(InvalidParameterError, match="params.n_topics"):
        hybrid_estep_block(block, ones, 0.1, HybridParams(3))
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        hybrid_estep_block(block, ones, np.array([0.1, -0.1]), HybridParams(2))
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        hybrid_estep_block(block, ones, math.nan, HybridParams(2))
    for epoch in (-1, 1.5, True):
        with pytest.raises(InvalidParameterError, match="epoch"):
            hybrid_estep_block(block, ones, 0.1, HybridParams(2), epoch=epoch)  # type: ignore[arg-type]
    used_term = int(block.term_ids[0])
    for bad in (math.inf, math.nan, -1.0):
        topics = np.ones((2, 10))
        topics[1, used_term] = bad
        with pytest.raises(NumericalError, match="exp_elog_topic_word"):
            hybrid_estep_block(block, {"default": topics}, 0.1, HybridParams(2))
    dense = random_counts(4, 6, seed=2)
    half = block_from_csr(sp.csr_matrix(np.hstack([dense, np.zeros((4, 4), dtype=np.int64)])))
    unused = np.ones((2, 10))
    unused[:, 6:] = math.inf  # terms absent from the block are never read
    stats, _ = hybrid_estep_block(half, {"default": unused}, 0.1, HybridParams(2))
    assert math.isfinite(stats.doc_elbo)
