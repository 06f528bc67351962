"""Tests of topicflow.models.lda.streaming.particle_filter.

The kernels are compared exactly with the slow NumPy filter of tests/reference/naive_particles.py
(same keyed uniforms, same summation order, so identical draws and bit-identical weights); the
filter's weighted particles with the exact posterior of tests/reference/exact_posterior.py; and the
samplers' topics with planted ones.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from tests.reference import naive_particles as ref
from tests.reference.exact_posterior import assignment_index, exact_posterior
from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import match_topics
from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.models.common.blocks import DocBlock, block_from_csr, expand_tokens, token_docs
from topicflow.models.lda.gibbs.conditional import token_conditional
from topicflow.testing.corpora import draw_planted_corpus

K, V = 3, 15


def _empty_prefix() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32)


def _small_stream(seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], DocBlock]:
    """A 20-token prefix in 4 documents and a block of 30 documents (one empty) after it."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.4, size=(30, V))
    counts[4] = 0
    block = block_from_csr(sp.csr_matrix(counts), first_doc=4)
    prefix = (rng.integers(0, V, 20).astype(np.int32), np.repeat(np.arange(4), 5),
              rng.integers(0, K, 20).astype(np.int32))
    return prefix, block


PRESETS = {
    "olda": lambda source: pf.PFParams.olda(K, V, rejuvenation_source=source, source_size=10),
    "incgibbs": lambda source: pf.PFParams.incremental_gibbs(K, V, rejuvenation_steps=3, rejuvenation_source=source,
                                                             source_size=10),
    "pf": lambda source: pf.PFParams.particle_filter(K, V, n_particles=6, rejuvenation_steps=3, ess_threshold=0.8,
                                                     rejuvenation_source=source, source_size=8),
    "pf-multinomial-token": lambda source: pf.PFParams(
        K, V, n_particles=5, rejuvenation_steps=2, ess_threshold=0.6, resampling="multinomial",
        rejuvenation_source=source, source_size=8, rejuvenate_after="token", seed=3),
}


@pytest.mark.parametrize("source", ["history", "window", "reservoir"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_observe_matches_naive_reference_exactly(preset: str, source: str) -> None:
    params = PRESETS[preset](source)
    prefix, block = _small_stream()
    cloud, diag = pf.observe(pf.initial_cloud(params, *prefix), block, params)
    naive = ref.naive_initial(params, *prefix)
    expected = ref.naive_observe(naive, block, params)
    assert np.array_equal(cloud.weights, naive.weights)
    assert diag.log_evidence == expected["log_evidence"]
    assert diag.ess_min == expected["ess_min"]
    assert diag.resample_positions.tolist() == expected["resample_positions"]
    assert diag.doc_topics.tolist() == expected["doc_topics"]
    if params.n_particles > 1:
        assert diag.resample_positions.size > 0
    for p in range(params.n_particles):
        assert np.array_equal(pf.particle_topic_word_counts(cloud, p), ref.naive_topic_word(naive, params, p))
        positions, topics = pf.particle_topics(cloud, p)
        assert sorted(pos for pos, _, _ in naive.source) == positions.tolist()
        assert [naive.store.topic(p, int(t)) for t in positions] == topics.tolist()
        for doc in np.unique(cloud.source_docs[: cloud.n_source]):
            assert np.array_equal(pf.doc_topic_counts(cloud, p, int(doc)), naive.store.row(p, V + 1 + int(doc)))


def test_token_conditional_matches_the_formula() -> None:
    rng = np.random.default_rng(5)
    params = pf.PFParams(n_topics=6, n_terms=40, doc_topic_prior=0.3, topic_word_prior=0.05)
    for _ in range(20):
        n_dk = rng.integers(0, 5, 6)
        n_wk = rng.integers(0, 8, 6)
        n_k = n_wk + rng.integers(0, 50, 6)
        expected = (n_wk + 0.05) / (n_k + 40 * 0.05) * (n_dk + 0.3)
        assert_allclose(pf.token_conditional(n_wk, n_k, n_dk, params), expected, rtol=1e-15)
        own = int(rng.integers(6))
        n_wk[own] += 1
        n_k[own] += 1
        n_dk[own] += 1
        # rejuvenation: the token's own assignment is removed before the formula applies
        assert_allclose(pf.token_conditional(n_wk, n_k, n_dk, params, exclude=own), expected, rtol=1e-15)


def test_predictive_probability_of_the_first_token_is_uniform() -> None:
    params = pf.PFParams.particle_filter(2, 7, n_particles=3)
    block = block_from_csr(sp.csr_matrix(np.array([[0, 0, 1, 0, 0, 0, 0]])))
    _, diag = pf.observe(pf.initial_cloud(params, *_empty_prefix()), block, params)
    assert_allclose(diag.log_evidence, math.log(1 / 7), rtol=1e-14)


def _weighted_assignments(cloud: pf.ParticleCloud, n_topics: int, n_states: int) -> np.ndarray:
    est = np.zeros(n_states)
    for p in range(cloud.n_particles):
        _, topics = pf.particle_topics(cloud, p)
        est[assignment_index(topics, n_topics)] += cloud.weights[p]
    return est


@pytest.mark.parametrize("rejuvenation_steps", [0, 2])
def test_weighted_particles_converge_to_the_exact_posterior(rejuvenation_steps: int) -> None:
    """Six tokens in two documents, K = 2, V = 3: all 64 assignments enumerated.

    Total-variation distance (averaged over 3 seeds) decreases with P and is below 0.06 at P = 10^4;
    the log-evidence estimate is within 0.01 of log p(w) there. With rejuvenation the filter
    resamples at every token and rejuvenates 2 history tokens per particle.
    """
    block = block_from_csr(sp.csr_matrix(np.array([[2, 1, 0], [0, 1, 2]])))
    tvs, errors = [], []
    for n_particles in (10, 100, 1_000, 10_000):
        tv, error = [], []
        for seed in range(3):
            params = pf.PFParams(2, 3, doc_topic_prior=0.5, topic_word_prior=0.5, n_particles=n_particles,
                                 rejuvenation_steps=rejuvenation_steps, rejuvenation_source="history",
                                 ess_threshold=1.0 if rejuvenation_steps else 0.5, seed=seed)
            cloud, diag = pf.observe(pf.initial_cloud(params, *_empty_prefix()), block, params)
            if rejuvenation_steps:
                assert diag.resample_positions.size >= 4
            _, probs, log_evidence = exact_posterior(cloud.source_terms[:6], cloud.source_docs[:6], 2, 3, 0.5, 0.5)
            tv.append(0.5 * np.abs(_weighted_assignments(cloud, 2, probs.size) - probs).sum())
            error.append(abs(diag.log_evidence - log_evidence))
        tvs.append(np.mean(tv))
        errors.append(np.mean(error))
    assert all(a > b for a, b in zip(tvs, tvs[1:])), tvs
    assert tvs[-1] < 0.06, tvs
    assert errors[-1] < 0.01, errors


def _blocks(block: DocBlock, cuts: list[int]) -> list[DocBlock]:
    edges = [0] + cuts + [block.n_docs]
    return [block.slice(a, b) for a, b in zip(edges, edges[1:])]


def _assert_same_cloud(a: pf.ParticleCloud, b: pf.ParticleCloud) -> None:
    arrays_a, meta_a = pf.cloud_to_arrays(a)
    arrays_b, meta_b = pf.cloud_to_arrays(b)
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for name in arrays_a:
        assert np.array_equal(arrays_a[name], arrays_b[name]), name


@pytest.mark.parametrize("preset", ["olda", "incgibbs", "pf"])
@pytest.mark.parametrize("source", ["history", "reservoir"])
def test_one_block_or_many_blocks_give_the_same_cloud(preset: str, source: str) -> None:
    params = PRESETS[preset](source)
    prefix, block = _small_stream(seed=2)
    whole, diag = pf.observe(pf.initial_cloud(params, *prefix), block, params)
    pieces = pf.initial_cloud(params, *prefix)
    log_evidence, resampled, doc_topics = 0.0, [], []
    for piece in _blocks(block, [1, 2, 9, 17, 18, 29]):
        pieces, part = pf.observe(pieces, piece, params)
        log_evidence += part.log_evidence
        resampled += part.resample_positions.tolist()
        doc_topics += part.doc_topics.tolist()
    _assert_same_cloud(whole, pieces)
    assert resampled == diag.resample_positions.tolist()
    assert doc_topics == diag.doc_topics.tolist()
    assert_allclose(log_evidence, diag.log_evidence, rtol=1e-12)  # sums grouped by block differ in rounding only


@pytest.mark.parametrize("source", ["history", "window", "reservoir"])
def test_saved_and_restored_cloud_continues_identically(source: str) -> None:
    params = PRESETS["pf"](source)
    prefix, block = _small_stream(seed=4)
    first, second = block.slice(0, 13), block.slice(13, 30)
    cloud, _ = pf.observe(pf.initial_cloud(params, *prefix), first, params)
    arrays, meta = pf.cloud_to_arrays(cloud)
    restored = pf.cloud_from_arrays({name: a.copy() for name, a in arrays.items()}, dict(meta))
    _assert_same_cloud(cloud, restored)
    went_on, diag = pf.observe(cloud, second, params)
    came_back, diag_restored = pf.observe(restored, second, params)
    _assert_same_cloud(went_on, came_back)
    assert diag.log_evidence == diag_restored.log_evidence
    assert diag.resample_positions.tolist() == diag_restored.resample_positions.tolist()


def _memory_trace(source: str) -> list[tuple[int, int]]:
    corpus = draw_planted_corpus(n_docs=2000, n_topics=5, n_terms=100, doc_length=20, alpha=0.2, seed=1)
    counts = corpus.counts["default"]
    params = pf.PFParams.particle_filter(5, 100, n_particles=4, rejuvenation_steps=3, rejuvenation_source=source,
                                         source_size=300)
    cloud = pf.initial_cloud(params, *_empty_prefix())
    trace = []
    for start in range(0, 2000, 100):
        cloud, diag = pf.observe(cloud, block_from_csr(counts[start : start + 100], first_doc=start), params)
        trace.append((diag.n_entries, diag.nbytes))
    return trace


def test_reservoir_keeps_memory_bounded_while_history_grows() -> None:
    """40,000 tokens: with a reservoir of 300 tokens the entries and bytes stop growing; with the history
    they grow with the stream."""
    reservoir, history = _memory_trace("reservoir"), _memory_trace("history")
    entries = [e for e, _ in reservoir]
    nbytes = [b for _, b in reservoir]
    assert max(entries[10:]) < 2 * max(entries[:10])
    assert max(nbytes[5:]) == max(nbytes[:5])
    assert history[-1][0] > 8 * history[1][0]
    assert history[-1][1] > 4 * history[1][1]
    assert history[-1][0] > 20 * reservoir[-1][0]


def _gibbs_prefix(counts: sp.csr_matrix, n_topics: int, alpha: float, beta: float, sweeps: int, seed: int):
    """Plain collapsed Gibbs on the prefix documents (the batch initializer's role), in NumPy."""
    rng = np.random.default_rng(seed)
    csr = sp.csr_matrix(counts)
    token_indptr, terms = expand_tokens(block_from_csr(csr))
    docs = token_docs(token_indptr)
    z = rng.integers(0, n_topics, terms.size)
    n_wk = np.zeros((csr.shape[1], n_topics))
    n_dk = np.zeros((csr.shape[0], n_topics))
    np.add.at(n_wk, (terms, z), 1)
    np.add.at(n_dk, (docs, z), 1)
    n_k = n_wk.sum(axis=0)
    for _ in range(sweeps):
        for i in range(terms.size):
            w, d, k = terms[i], docs[i], z[i]
            n_wk[w, k] -= 1
            n_dk[d, k] -= 1
            n_k[k] -= 1
            q = token_conditional(n_dk[d], n_wk[w], n_k, alpha, beta, csr.shape[1])
            k = rng.choice(n_topics, p=q / q.sum())
            z[i] = k
            n_wk[w, k] += 1
            n_dk[d, k] += 1
            n_k[k] += 1
    return terms, docs, z.astype(np.int32)


@pytest.fixture(scope="module")
def planted() -> tuple[object, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    corpus = draw_planted_corpus(n_docs=400, n_topics=4, n_terms=40, doc_length=40, alpha=0.2, seed=7)
    prefix = _gibbs_prefix(corpus.counts["default"][:25], 4, 0.2, 0.01, sweeps=30, seed=1)
    return corpus, prefix


@pytest.mark.parametrize("preset", ["olda", "incgibbs", "pf"])
def test_streaming_samplers_recover_planted_topics(preset: str, planted) -> None:  # type: ignore[no-untyped-def]
    corpus, prefix = planted
    params = {
        "olda": pf.PFParams.olda(4, 40, doc_topic_prior=0.2),
        "incgibbs": pf.PFParams.incremental_gibbs(4, 40, rejuvenation_steps=5, doc_topic_prior=0.2, source_size=500),
        "pf": pf.PFParams.particle_filter(4, 40, n_particles=16, rejuvenation_steps=10, doc_topic_prior=0.2,
                                          source_size=500),
    }[preset]
    cloud = pf.initial_cloud(params, *prefix, next_doc=25)
    cloud, diag = pf.observe(cloud, block_from_csr(corpus.counts["default"][25:], first_doc=25), params)
    assert params.topic_word_prior == 0.01
    match = match_topics(pf.topic_word_distribution(cloud), corpus.topic_word["default"])
    assert match.distances.max() < 0.1
    # the documents' dominant topics agree with the planted ones, up to the matching
    matched = dict(zip(match.estimated.tolist(), match.true.tolist()))
    predicted = np.array([matched.get(int(k), -1) for k in diag.doc_topics])
    agreement = np.mean(predicted == corpus.doc_topic[25:].argmax(axis=1))
    assert agreement > 0.8


def test_diagnostics_describe_the_block() -> None:
    params = PRESETS["pf"]("reservoir")
    prefix, block = _small_stream()
    cloud, diag = pf.observe(pf.initial_cloud(params, *prefix), block, params)
    assert diag.n_docs == 30 and diag.n_tokens == block.n_tokens
    assert diag.doc_positions.tolist() == list(range(4, 34))
    assert diag.doc_topics[4] == -1 and np.all(diag.doc_topics[block.doc_lengths() > 0] >= 0)
    assert 1.0 <= diag.ess_min <= params.n_particles
    assert np.all(np.diff(diag.resample_positions) > 0) and diag.resample_positions.min() >= 20
    stats = pf.memory_stats(cloud)
    assert diag.nbytes == stats["nbytes"] and diag.n_nodes <= 2 * params.n_particles - 1
    assert 1 <= diag.depth_mean <= diag.depth_max
    assert cloud.n_tokens == 20 + block.n_tokens and cloud.next_doc == 34
    assert_allclose(pf.topic_word_counts(cloud).sum(), cloud.n_tokens)
    assert pf.doc_topic_counts(cloud, 0, 10_000) is None


def test_invalid_parameters_and_inputs_raise() -> None:
    for bad in ({"n_topics": 0}, {"doc_topic_prior": 0.0}, {"topic_word_prior": math.inf}, {"ess_threshold": 1.5},
                {"resampling": "best"}, {"rejuvenation_source": "all"}, {"source_size": 0},
                {"rejuvenate_after": "doc"}, {"seed": -1}, {"n_particles": 2.0}):
        with pytest.raises(InvalidParameterError):
            pf.PFParams(**{"n_topics": 2, "n_terms": 5, **bad})
    params = pf.PFParams.particle_filter(2, 5, n_particles=3)
    assert pf.PFParams.from_dict(params.to_dict()) == params
    cloud = pf.initial_cloud(params, np.array([1, 2]), np.array([0, 0]), np.array([0, 1]))
    block = block_from_csr(sp.csr_matrix(np.array([[1, 0, 0, 0, 1]])), first_doc=1)
    with pytest.raises(InvalidParameterError):
        pf.observe(cloud, block, pf.PFParams.particle_filter(2, 5, n_particles=4))
    with pytest.raises(InvalidParameterError):
        pf.observe(cloud, block_from_csr(sp.csr_matrix(np.array([[1, 0, 0, 0, 1]])), first_doc=0), params)
    with pytest.raises(InvalidParameterError):
        pf.observe(cloud, block_from_csr(sp.csr_matrix(np.ones((1, 6), dtype=np.int64)), first_doc=1), params)
    with pytest.raises(InvalidParameterError):
        pf.initial_cloud(params, np.array([5]), np.array([0]), np.array([0]))
    with pytest.raises(InvalidParameterError):
        pf.initial_cloud(params, np.array([1, 2]), np.array([0]), np.array([0, 1]))
    with pytest.raises(InvalidParameterError):
        pf.cloud_from_arrays(*pf.cloud_to_arrays(cloud)[:1], {"format": "other"})
