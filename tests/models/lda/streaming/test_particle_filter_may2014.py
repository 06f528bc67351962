"""May, Clemmer & Van Durme (2014)'s arms at the kernel level: no rejuvenation, no initialization.

Each is compared exactly with the slow NumPy filter of tests/reference/naive_particles.py (same keyed
uniforms, same summation order), and the rejuvenation draws are counted: P x |R| per resampling when
the filter rejuvenates, none at all with ``rejuvenation_steps=0``.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from tests.reference import naive_particles as ref
from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.streaming import particle_filter as pf

K, V = 3, 15


def _empty_prefix() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32)


def _stream(seed: int = 0, first_doc: int = 0) -> DocBlock:
    counts = np.random.default_rng(seed).poisson(0.5, size=(30, V))
    counts[3] = 0
    return block_from_csr(sp.csr_matrix(counts), first_doc=first_doc)


def _may_params(rejuvenation_steps: int, source: str = "reservoir", **changes: object) -> pf.PFParams:
    settings: dict[str, object] = dict(n_particles=6, ess_threshold=0.8, resampling="multinomial",
                                       rejuvenation_steps=rejuvenation_steps, rejuvenation_source=source,
                                       source_size=10, doc_topic_prior=0.1, topic_word_prior=0.1, seed=5)
    settings.update(changes)
    return pf.PFParams.particle_filter(K, V, **settings)  # type: ignore[arg-type]


def _assert_matches_reference(cloud: pf.ParticleCloud, diag: pf.PFDiagnostics, naive: ref.NaiveCloud,
                              expected: dict, params: pf.PFParams) -> None:
    assert np.array_equal(cloud.weights, naive.weights)
    assert diag.log_evidence == expected["log_evidence"]
    assert diag.resample_positions.tolist() == expected["resample_positions"]
    assert diag.doc_topics.tolist() == expected["doc_topics"]
    assert diag.rejuvenation_steps_done == expected["rejuvenation_steps_done"]
    for p in range(params.n_particles):
        assert np.array_equal(pf.particle_topic_word_counts(cloud, p), ref.naive_topic_word(naive, params, p))


@pytest.mark.parametrize("source", ["reservoir", "history"])
def test_no_rejuvenation_is_the_particle_filter_with_zero_rejuvenation_steps(source: str) -> None:
    params = _may_params(0, source)
    assert params.algorithm == "pf"
    prefix = (np.arange(12, dtype=np.int32) % V, np.repeat(np.arange(3), 4), np.arange(12, dtype=np.int32) % K)
    block = _stream(first_doc=3)
    cloud, diag = pf.observe(pf.initial_cloud(params, *prefix), block, params)
    naive = ref.naive_initial(params, *prefix)
    expected = ref.naive_observe(naive, block, params)
    _assert_matches_reference(cloud, diag, naive, expected, params)
    # It is still a particle filter: the cloud is reweighted and resampled, but nothing is redrawn.
    assert diag.resample_positions.size > 5
    assert diag.rejuvenation_steps_done == 0
    # Without rejuvenation the source tokens keep the topic drawn when they arrived: the topics of a
    # particle are a prefix-consistent history, identical to the reference's.
    for p in range(params.n_particles):
        positions, topics = pf.particle_topics(cloud, p)
        assert [naive.store.topic(p, int(t)) for t in positions] == topics.tolist()


def test_rejuvenation_steps_are_counted_per_particle_and_resampling() -> None:
    params = _may_params(4)
    block = _stream(seed=1)
    cloud, diag = pf.observe(pf.initial_cloud(params, *_empty_prefix()), block, params)
    naive = ref.naive_initial(params, *_empty_prefix())
    expected = ref.naive_observe(naive, block, params)
    _assert_matches_reference(cloud, diag, naive, expected, params)
    assert diag.resample_positions.size > 0
    assert diag.rejuvenation_steps_done == params.n_particles * 4 * diag.resample_positions.size
    # The count is additive over blocks.
    again = pf.initial_cloud(params, *_empty_prefix())
    total = 0
    for lo, hi in ((0, 11), (11, 30)):
        again, part = pf.observe(again, block.slice(lo, hi), params)
        total += part.rejuvenation_steps_done
    assert total == diag.rejuvenation_steps_done


@pytest.mark.parametrize("rejuvenation_steps", [0, 3])
def test_zero_document_initialization_starts_from_empty_particles(rejuvenation_steps: int) -> None:
    """No batch Gibbs prefix: the first token's proposal is uniform and the counts are the stream's only."""
    params = _may_params(rejuvenation_steps)
    cloud = pf.initial_cloud(params, *_empty_prefix(), next_doc=0)
    assert cloud.n_tokens == 0 and cloud.n_source == 0
    assert pf.topic_word_counts(cloud).sum() == 0
    block = _stream(seed=2)
    cloud, diag = pf.observe(cloud, block, params)
    naive = ref.naive_initial(params, *_empty_prefix())
    expected = ref.naive_observe(naive, block, params)
    _assert_matches_reference(cloud, diag, naive, expected, params)
    assert cloud.n_tokens == block.n_tokens
    for p in range(params.n_particles):
        assert pf.particle_topic_word_counts(cloud, p).sum() == block.n_tokens
    # The first token's predictive probability is 1/V in every particle (uniform proposal, empty counts).
    one = block_from_csr(sp.csr_matrix(np.eye(1, V, 4, dtype=np.int64)))
    _, one_diag = pf.observe(pf.initial_cloud(params, *_empty_prefix()), one, params)
    assert one_diag.log_evidence == pytest.approx(-np.log(V))
