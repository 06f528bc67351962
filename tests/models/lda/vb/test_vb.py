"""Tests of topicflow.models.lda.vb.estep against the plain NumPy reference in tests/reference/vb_lda_numpy.py."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy.special import gammaln, psi

from tests.reference import vb_lda_numpy as ref
from tests.reference.corpora import lda_block, random_block, random_counts
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.common.dirichlet import exp_dirichlet_expectation_rows, newton_alpha
from topicflow.models.lda.priors import SeedTopic, informed_prior
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.objective import (
    alpha_elbo_terms,
    full_elbo,
    initial_topic_word_var,
    local_elbo_terms,
    mstep_batch,
    topic_elbo_terms,
)
from topicflow.models.lda.vb.online import minibatch_bound
from topicflow.models.lda.vb.estep import estep_block, fold_in_block
from topicflow.models.lda.vb.layout import (
    prepare_topics,
    prepare_topics_for_blocks,
    prepare_topics_from_var,
    topic_word_var_source,
)
from topicflow.testing.strategies import count_matrices, topic_term_stats

RTOL = 1e-8


def _case(case: str):
    """(block, n_topics) for each edge case of the reference comparison."""
    if case == "typical":
        return random_block(25, 40, seed=1), 4
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
    raise ValueError(case)


def _exp_elog(n_topics, n_terms, seed):
    return exp_dirichlet_expectation_rows(initial_topic_word_var(n_topics, n_terms, seed=seed) * 0.5)


def _assert_matches(stats, gamma, expected, languages, n_terms):
    for lang in languages:
        assert_allclose(stats.topic_terms[lang].to_dense(n_terms[lang]), expected["stats"][lang], rtol=RTOL, atol=1e-12)
    assert_allclose(stats.alpha_suff, expected["alpha_suff"], rtol=RTOL)
    assert_allclose(stats.doc_elbo, expected["doc_elbo"], rtol=RTOL)
    assert_allclose(gamma, expected["gamma"], rtol=RTOL)
    assert stats.n_capped == expected["n_capped"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ["typical", "empty_doc", "single_term", "one_topic", "one_doc"])
def test_estep_block_matches_numpy_reference(case: str, dtype: type) -> None:
    block, n_topics = _case(case)
    exp_elog = _exp_elog(n_topics, block.n_terms, seed=7)
    alpha = np.linspace(0.05, 0.5, n_topics)
    params = VBParams(n_topics=n_topics, max_doc_iter=200, doc_tol=1e-6)
    prepared = prepare_topics({"default": exp_elog}, dtype=dtype)
    stats, gamma = estep_block({"default": block}, prepared, alpha, params, return_gamma=True)
    # The float32 path rounds only the gathered exp(E[log beta]); all arithmetic stays float64.
    rounded = exp_elog.astype(dtype).astype(np.float64)
    expected = ref.estep_reference({"default": ref.docs_from_block(block)}, {"default": rounded}, alpha,
                                   params.max_doc_iter, params.doc_tol)
    _assert_matches(stats, gamma, expected, ["default"], {"default": block.n_terms})
    assert stats.n_docs == block.n_docs
    assert stats.n_tokens == block.n_tokens


def test_estep_block_capped_documents_and_warm_start_match_reference() -> None:
    block = random_block(12, 30, seed=5, empty_rows=(4,))
    exp_elog = _exp_elog(3, 30, seed=8)
    alpha = np.full(3, 0.2)
    gamma_init = np.random.default_rng(0).uniform(0.5, 3.0, size=(12, 3))
    params = VBParams(n_topics=3, max_doc_iter=2, doc_tol=1e-12)
    stats, gamma = estep_block(block, {"default": exp_elog}, alpha, params, return_gamma=True,
                               gamma_init=gamma_init)
    expected = ref.estep_reference({"default": ref.docs_from_block(block)}, {"default": exp_elog}, alpha, 2, 1e-12,
                                   gamma_init=gamma_init)
    _assert_matches(stats, gamma, expected, ["default"], {"default": 30})
    assert stats.n_capped == 12 - 1  # the empty document reaches gamma = alpha and stays there


def test_doc_elbo_equals_explicit_expectations() -> None:
    block = random_block(4, 12, seed=6)
    exp_elog = _exp_elog(3, 12, seed=9)
    alpha = np.array([0.1, 0.3, 0.2])
    stats, gamma = estep_block(block, {"default": exp_elog}, alpha, VBParams(3, 500, 1e-12), return_gamma=True)
    total = 0.0
    for d in range(block.n_docs):
        elog_theta = psi(gamma[d]) - psi(gamma[d].sum())
        for w, n in block.doc_bag(d).items():
            phi = np.exp(elog_theta) * exp_elog[:, w]
            phi /= phi.sum()
            # E[log p(z|theta)] + E[log p(w|z,beta)] - E[log q(z)] for the n tokens of term w
            total += n * np.sum(phi * (elog_theta + np.log(exp_elog[:, w]) - np.log(phi)))
        total -= gammaln(gamma[d].sum()) - gammaln(gamma[d]).sum() + np.sum((gamma[d] - 1) * elog_theta)
    assert_allclose(stats.doc_elbo, total, rtol=1e-10)


def _poly_blocks():
    en = random_counts(9, 15, seed=10, empty_rows=(2,))
    fr = random_counts(9, 25, seed=11, empty_rows=(4, 2))
    return {
        "en": block_from_csr(sp.csr_matrix(en), language="en", first_doc=100),
        "fr": block_from_csr(sp.csr_matrix(fr), language="fr", first_doc=100),
    }


def test_polylingual_estep_matches_per_language_reference() -> None:
    blocks = _poly_blocks()
    exp_elog = {"en": _exp_elog(4, 15, seed=12), "fr": _exp_elog(4, 25, seed=13)}
    alpha = np.array([0.1, 0.2, 0.3, 0.4])
    params = VBParams(n_topics=4, max_doc_iter=300, doc_tol=1e-7)
    stats, gamma = estep_block(blocks, prepare_topics(exp_elog), alpha, params, return_gamma=True)
    docs = {lang: ref.docs_from_block(b) for lang, b in blocks.items()}
    expected = ref.estep_reference(docs, exp_elog, alpha, params.max_doc_iter, params.doc_tol)
    _assert_matches(stats, gamma, expected, ["en", "fr"], {"en": 15, "fr": 25})
    assert stats.n_tokens == blocks["en"].n_tokens + blocks["fr"].n_tokens
    assert stats.n_docs == 9


def test_polylingual_language_absent_from_block_gives_zero_stats() -> None:
    blocks = _poly_blocks()
    exp_elog = {"en": _exp_elog(4, 15, seed=12), "fr": _exp_elog(4, 25, seed=13)}
    params = VBParams(n_topics=4)
    only_fr, gamma_fr = estep_block({"fr": blocks["fr"]}, exp_elog, 0.3, params, return_gamma=True)
    mono_fr, gamma_mono = estep_block({"fr": blocks["fr"]}, {"fr": exp_elog["fr"]}, 0.3, params, return_gamma=True)
    assert only_fr.topic_terms["en"].term_ids.shape == (0,)
    assert_allclose(only_fr.topic_terms["fr"].values, mono_fr.topic_terms["fr"].values, rtol=1e-14)
    assert_allclose(gamma_fr, gamma_mono, rtol=1e-14)


def test_informed_prior_batch_iterations_match_reference() -> None:
    block = random_block(15, 12, seed=14)
    vocab = {f"w{i}": i for i in range(12)}
    seeds = [SeedTopic("a", ("w0", "w1"), (2.0, 1.0)), SeedTopic("b", ("w5",), (3.0,))]
    eta, _, _ = informed_prior(vocab, 12, 3, seeds, base=0.05)
    alpha = np.array([0.3, 0.2, 0.1])
    lam = initial_topic_word_var(3, 12, seed=3)
    params = VBParams(n_topics=3, max_doc_iter=200, doc_tol=1e-8)
    lams, elbos = [], []
    for _ in range(3):
        stats, _ = estep_block(block, prepare_topics_from_var({"default": lam}), alpha, params)
        elbos.append(full_elbo(stats, {"default": lam}, alpha, {"default": eta}))
        lam = mstep_batch(stats.topic_terms["default"].to_dense(12), eta)
        lams.append(lam)
    ref_lams, ref_elbos = ref.batch_vb_reference(
        {"default": ref.docs_from_block(block)}, {"default": initial_topic_word_var(3, 12, seed=3)},
        {"default": eta}, alpha, 3, 200, 1e-8,
    )
    for got, want in zip(lams, ref_lams):
        assert_allclose(got, want["default"], rtol=RTOL)
    assert_allclose(elbos, ref_elbos, rtol=RTOL)


def test_elbo_terms_match_reference() -> None:
    rng = np.random.default_rng(0)
    lam = rng.gamma(2.0, 1.0, size=(3, 7))
    eta = rng.gamma(1.0, 0.1, size=(3, 7))
    assert_allclose(topic_elbo_terms(lam, eta), ref.topic_terms_reference(lam, eta), rtol=1e-12)
    assert_allclose(topic_elbo_terms(lam, 0.07), ref.topic_terms_reference(lam, 0.07), rtol=1e-12)
    alpha, suff = rng.gamma(1.0, 1.0, size=3), -rng.gamma(3.0, 1.0, size=3)
    assert_allclose(alpha_elbo_terms(alpha, suff, 11), ref.alpha_terms_reference(alpha, suff, 11), rtol=1e-12)


def test_full_elbo_and_minibatch_bound_share_the_document_terms() -> None:
    block = random_block(15, 12, seed=9)
    lam = initial_topic_word_var(3, 12, seed=2)
    alpha = np.array([0.2, 0.5, 0.9])
    stats, _ = estep_block(block, {"default": exp_dirichlet_expectation_rows(lam)}, alpha, VBParams(n_topics=3))
    local = local_elbo_terms(stats, alpha)
    assert local == stats.doc_elbo + alpha_elbo_terms(alpha, stats.alpha_suff, stats.n_docs)
    assert_allclose(local, stats.doc_elbo + ref.alpha_terms_reference(alpha, stats.alpha_suff, 15), rtol=1e-12)
    topic = topic_elbo_terms(lam, 0.05)
    assert full_elbo(stats, {"default": lam}, alpha, 0.05) == local + topic
    assert minibatch_bound(stats, {"default": lam}, alpha, {"default": 0.05}, 4.0) == 4.0 * local + topic


@pytest.mark.parametrize("warm_start", [False, True])
def test_batch_elbo_never_decreases(warm_start: bool) -> None:
    rng = np.random.default_rng(21)
    topic_word = rng.dirichlet(np.full(30, 0.1), size=4)
    block = lda_block(60, topic_word, 0.3, seed=22, doc_len=30)
    params = VBParams(n_topics=4, max_doc_iter=1000, doc_tol=1e-10)
    eta, alpha = 0.05, np.full(4, 0.5)
    lam = initial_topic_word_var(4, 30, seed=0)
    gamma, trace = None, []
    for _ in range(12):
        stats, new_gamma = estep_block(block, prepare_topics_from_var({"default": lam}), alpha, params,
                                       return_gamma=True, gamma_init=gamma)
        trace.append(full_elbo(stats, {"default": lam}, alpha, eta))
        gamma = new_gamma if warm_start else None
        lam = mstep_batch(stats.topic_terms["default"].to_dense(30), eta)
        alpha, _ = newton_alpha(alpha, stats.alpha_suff, stats.n_docs)
    diffs = np.diff(trace)
    # Coordinate ascent: each step can only raise the ELBO; allow float rounding of the sums.
    assert np.all(diffs >= -1e-9 * np.abs(trace[:-1])), diffs
    assert trace[-1] > trace[0]


def test_fold_in_rows_sum_to_one_and_initial_var_is_deterministic() -> None:
    block = random_block(7, 20, seed=30, empty_rows=(1,))
    theta = fold_in_block(block, {"default": _exp_elog(3, 20, seed=1)}, 0.1, VBParams(3))
    assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    assert_allclose(theta[1], 1 / 3, rtol=1e-12)  # empty document: gamma = alpha
    a = initial_topic_word_var(5, 20, seed=4)
    assert np.array_equal(a[:2], initial_topic_word_var(2, 20, seed=4))
    assert not np.array_equal(a, initial_topic_word_var(5, 20, seed=4, language_index=1))
    assert abs(a.mean() - 1.0) < 0.05


def test_params_and_inputs_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="n_topics must be an integer >= 1"):
        VBParams(n_topics=0)
    with pytest.raises(InvalidParameterError, match="doc_tol"):
        VBParams(n_topics=2, doc_tol=-1.0)
    with pytest.raises(InvalidParameterError, match="max_doc_iter"):
        VBParams(n_topics=2, max_doc_iter=1.5)  # type: ignore[arg-type]
    assert VBParams.from_dict(VBParams(3, 7, 0.5).to_dict()) == VBParams(3, 7, 0.5)
    block = random_block(3, 10, seed=1)
    with pytest.raises(InvalidParameterError, match="no topics"):
        estep_block({"xx": block}, {"default": np.ones((2, 10))}, 0.1, VBParams(2))
    with pytest.raises(InvalidParameterError, match="term id"):
        estep_block(block, {"default": np.ones((2, 5))}, 0.1, VBParams(2))
    with pytest.raises(InvalidParameterError, match="params.n_topics"):
        estep_block(block, {"default": np.ones((3, 10))}, 0.1, VBParams(2))
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        estep_block(block, {"default": np.ones((2, 10))}, -0.1, VBParams(2))


def _stats_of(block, seed=0):
    exp_elog = _exp_elog(3, 12, seed=seed)
    return estep_block(block, {"default": exp_elog}, np.array([0.1, 0.2, 0.3]), VBParams(3, doc_tol=1e-8))[0]


def _assert_stats_close(a: EStepStats, b: EStepStats) -> None:
    assert a.n_docs == b.n_docs and a.n_tokens == b.n_tokens and a.n_capped == b.n_capped
    assert set(a.topic_terms) == set(b.topic_terms)
    for lang in a.topic_terms:
        assert_allclose(a.topic_terms[lang].to_dense(12), b.topic_terms[lang].to_dense(12), rtol=1e-12, atol=1e-12)
    assert_allclose(a.alpha_suff, b.alpha_suff, rtol=1e-12)
    assert_allclose(a.doc_elbo, b.doc_elbo, rtol=1e-12)


counts_matrices = count_matrices(st.integers(min_value=0, max_value=25), 12, max_count=3)


@settings(deadline=None, max_examples=30)
@given(dense=counts_matrices, cut=st.integers(min_value=0, max_value=25))
def test_stats_do_not_depend_on_how_documents_are_split(dense: np.ndarray, cut: int) -> None:
    block = block_from_csr(sp.csr_matrix(dense, shape=(dense.shape[0], 12)))
    cut = min(cut, block.n_docs)
    whole = _stats_of(block)
    parts = _stats_of(block.slice(0, cut)).merge(_stats_of(block.slice(cut, block.n_docs)))
    _assert_stats_close(whole, parts)


@settings(deadline=None, max_examples=25)
@given(a=counts_matrices, b=counts_matrices, c=counts_matrices)
def test_merge_is_associative_commutative_with_zeros_identity(a, b, c) -> None:
    sa, sb, sc = (_stats_of(block_from_csr(sp.csr_matrix(m, shape=(m.shape[0], 12)))) for m in (a, b, c))
    _assert_stats_close(sa.merge(sb).merge(sc), sa.merge(sb.merge(sc)))
    ab, ba = sa.merge(sb), sb.merge(sa)
    assert np.array_equal(ab.topic_terms["default"].to_dense(12), ba.topic_terms["default"].to_dense(12))
    assert ab.doc_elbo == ba.doc_elbo
    for left in (sa.merge(EStepStats.zeros(3, ["default"])), EStepStats.zeros(3, ["default"]).merge(sa)):
        assert np.array_equal(left.topic_terms["default"].term_ids, sa.topic_terms["default"].term_ids)
        assert np.array_equal(left.topic_terms["default"].values, sa.topic_terms["default"].values)
        assert np.array_equal(left.alpha_suff, sa.alpha_suff) and left.doc_elbo == sa.doc_elbo


topic_term_parts = st.lists(topic_term_stats(3, n_terms=30, max_present=11), min_size=1, max_size=9)


@settings(deadline=None, max_examples=60)
@given(parts=topic_term_parts, languages=st.lists(st.sampled_from(["en", "de"]), min_size=1, max_size=9))
def test_merge_all_has_the_bits_of_the_left_fold(parts: list[TopicTermStats], languages: list[str]) -> None:
    """The k-way merge a tree node uses must equal pairwise merges exactly, not just closely: the
    executors' bit-identical models rest on it."""
    rng = np.random.default_rng(len(parts))
    stats = [
        EStepStats({lang: part}, rng.normal(size=3), float(rng.normal()), 2, 9, 1, 4)
        for part, lang in zip(parts, languages * len(parts))
    ]
    folded, merged = stats[0], EStepStats.merge_all(stats)
    for item in stats[1:]:
        folded = folded.merge(item)
    assert sorted(merged.topic_terms) == sorted(folded.topic_terms)
    for lang, terms in folded.topic_terms.items():
        assert np.array_equal(merged.topic_terms[lang].term_ids, terms.term_ids)
        assert merged.topic_terms[lang].values.tobytes() == terms.values.tobytes()
    assert merged.alpha_suff.tobytes() == folded.alpha_suff.tobytes() and merged.doc_elbo == folded.doc_elbo
    assert (merged.n_docs, merged.n_tokens, merged.n_capped, merged.n_doc_iter) == (
        folded.n_docs, folded.n_tokens, folded.n_capped, folded.n_doc_iter)


def test_initial_topics_have_gamma_shape_spread() -> None:
    from topicflow.models.lda.vb.objective import initial_topic_word_var

    for shape in (100.0, 10.0, 1.0):
        draws = initial_topic_word_var(4, 5000, seed=2, shape=shape)
        # Gamma(s, 1/s): mean 1, variance 1/s.
        assert abs(draws.mean() - 1.0) < 0.03 and abs(draws.var() * shape - 1.0) < 0.1
    np.testing.assert_array_equal(initial_topic_word_var(2, 7, seed=2), initial_topic_word_var(2, 7, seed=2, shape=100.0))


def test_topic_term_stats_union_and_dense() -> None:
    a = TopicTermStats(np.array([1, 4]), np.array([[1.0, 2.0]]))
    b = TopicTermStats(np.array([0, 4]), np.array([[5.0, 7.0]]))
    merged = a.merge(b)
    assert merged.term_ids.tolist() == [0, 1, 4]
    assert merged.to_dense(6).tolist() == [[5.0, 1.0, 0.0, 0.0, 9.0, 0.0]]
    with pytest.raises(InvalidParameterError, match="topics"):
        a.merge(TopicTermStats.zeros(2))
    with pytest.raises(InvalidParameterError, match="does not fit"):
        a.to_dense(3)


def test_random_gamma_start_is_gamma_100_and_depends_only_on_the_document() -> None:
    from topicflow.models.lda.vb.estep import random_initial_gamma

    draws = random_initial_gamma(4000, 5, seed=3, first_doc=10)
    # Gamma(100, 1/100): mean 1, variance 1/100.
    assert abs(draws.mean() - 1.0) < 0.005 and abs(draws.var() - 0.01) < 0.001
    np.testing.assert_array_equal(random_initial_gamma(3, 5, seed=3, first_doc=15), draws[5:8])
    assert not np.array_equal(random_initial_gamma(3, 5, seed=4, first_doc=15), draws[5:8])
    block = random_block(12, 20, seed=6)
    params = VBParams(n_topics=3, random_init=True, seed=3)
    whole, gamma = estep_block(block, {"default": np.full((3, 20), 0.2) + np.eye(3, 20)}, 0.1, params, return_gamma=True)
    _, head = estep_block(block.slice(0, 5), {"default": np.full((3, 20), 0.2) + np.eye(3, 20)}, 0.1, params,
                          return_gamma=True)
    np.testing.assert_array_equal(head, gamma[:5])


def test_topics_prepared_for_some_blocks_have_the_bits_of_the_full_preparation() -> None:
    rng = np.random.default_rng(3)
    lam = {"en": rng.gamma(0.5, 2.0, size=(5, 40)) + 0.01, "de": rng.gamma(0.5, 2.0, size=(5, 30)) + 0.01}
    full = prepare_topics_from_var(lam)
    en = block_from_csr(sp.csr_matrix(np.array([[0, 2] + [0] * 36 + [1, 0], [1] + [0] * 39])), language="en")
    de = block_from_csr(sp.csr_matrix(np.array([[0] * 29 + [3]])), language="de")
    prepared = prepare_topics_for_blocks(topic_word_var_source(lam), [{"en": en}, {"de": de}])
    present = np.array([0, 1, 38, 40 + 29])
    np.testing.assert_array_equal(prepared.term_topic[present], full.term_topic[present])
    np.testing.assert_array_equal(np.delete(prepared.term_topic, present, axis=0), 0.0)
    assert prepared.languages == full.languages
    np.testing.assert_array_equal(prepared.offsets, full.offsets)
