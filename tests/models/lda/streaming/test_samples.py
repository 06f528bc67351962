"""Best-sample read-outs of Canini et al. (2009, sec. 5.2) against the naive dict-of-particles reference."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import normalized_mutual_info_score

from tests.reference.naive_best_sample import (
    naive_as_next,
    naive_log_joint,
    naive_training_clusters,
)
from tests.reference.naive_particles import naive_initial, naive_observe
from topicflow.errors import InvalidParameterError
from topicflow.metrics.clustering import nmi
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.gibbs.scores import log_joint_of_counts
from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.models.lda.streaming import samples

N_TERMS, N_TOPICS, N_PREFIX_DOCS = 12, 3, 3


def _prefix(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    docs = np.repeat(np.arange(N_PREFIX_DOCS), 6).astype(np.int64)
    return rng.integers(0, N_TERMS, docs.size).astype(np.int32), docs, rng.integers(0, N_TOPICS, docs.size).astype(np.int32)


def _block(rng: np.random.Generator, n_docs: int, first_doc: int):
    counts = rng.poisson(0.6, (n_docs, N_TERMS))
    counts[:, 0] += 1  # no empty documents
    return block_from_csr(sp.csr_matrix(counts), first_doc=first_doc)


ARMS = {
    "olda, best of 4": {"n_particles": 4, "ess_threshold": 0.0},
    "incgibbs, best of 4": {"n_particles": 4, "ess_threshold": 0.0, "rejuvenation_steps": 3,
                            "rejuvenate_after": "token"},
    "particle filter": {"n_particles": 5, "ess_threshold": 0.8, "rejuvenation_steps": 4, "resampling": "residual"},
}


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_training_clusters_and_next_docs_match_the_naive_reference(arm: str) -> None:
    rng = np.random.default_rng(7)
    params = pf.PFParams(N_TOPICS, N_TERMS, doc_topic_prior=0.3, topic_word_prior=0.2, rejuvenation_source="history",
                         seed=5, **ARMS[arm])
    terms, docs, topics = _prefix(rng)
    block, test = _block(rng, 8, N_PREFIX_DOCS), _block(rng, 4, 0)
    cloud, _ = pf.observe(pf.initial_cloud(params, terms, docs, topics), block, params)
    naive = naive_initial(params, terms, docs, topics)
    naive_observe(naive, block, params)
    n_docs = N_PREFIX_DOCS + block.n_docs

    scores = samples.sample_log_joints(cloud)
    expected = [naive_log_joint(naive, params, p, n_docs) for p in range(params.n_particles)]
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    clusters, best = samples.training_clusters(cloud)
    want_clusters, want_best = naive_training_clusters(naive, params, n_docs)
    assert best == want_best
    np.testing.assert_array_equal(clusters, want_clusters)

    test_clusters, test_best = samples.observe_as_next(cloud, test, params)
    want_test, want_test_best = naive_as_next(naive, test, params, n_docs)
    assert test_best == want_test_best
    np.testing.assert_array_equal(test_clusters, want_test)


def test_training_nmi_is_scikit_learns_on_the_best_sample() -> None:
    rng = np.random.default_rng(3)
    params = pf.PFParams(N_TOPICS, N_TERMS, rejuvenation_source="history", n_particles=3, ess_threshold=0.0,
                         rejuvenation_steps=2, rejuvenate_after="token", seed=1)
    terms, docs, topics = _prefix(rng)
    cloud, _ = pf.observe(pf.initial_cloud(params, terms, docs, topics), _block(rng, 20, N_PREFIX_DOCS), params)
    labels = rng.integers(0, 3, cloud.next_doc)
    clusters, _ = samples.training_clusters(cloud)
    assert nmi(labels, clusters) == pytest.approx(normalized_mutual_info_score(labels, clusters), abs=1e-12)


def test_next_docs_leave_the_cloud_bit_identical_and_the_stream_unchanged() -> None:
    rng = np.random.default_rng(11)
    params = pf.PFParams(N_TOPICS, N_TERMS, rejuvenation_source="history", n_particles=6, ess_threshold=0.5,
                         rejuvenation_steps=3, seed=9)
    terms, docs, topics = _prefix(rng)
    first, second, test = _block(rng, 10, N_PREFIX_DOCS), _block(rng, 6, N_PREFIX_DOCS + 10), _block(rng, 5, 0)
    plain, _ = pf.observe(pf.initial_cloud(params, terms, docs, topics), first, params)
    probed, _ = pf.observe(pf.initial_cloud(params, terms, docs, topics), first, params)
    before = pf.cloud_to_arrays(probed)
    samples.observe_as_next(probed, test, params)
    after = pf.cloud_to_arrays(probed)
    assert before[1] == after[1]
    assert before[0].keys() == after[0].keys()
    for name in before[0]:
        np.testing.assert_array_equal(before[0][name], after[0][name], err_msg=name)
    plain, diag_plain = pf.observe(plain, second, params)
    probed, diag_probed = pf.observe(probed, second, params)
    assert diag_plain.log_evidence == diag_probed.log_evidence
    for name, array in pf.cloud_to_arrays(plain)[0].items():
        np.testing.assert_array_equal(array, pf.cloud_to_arrays(probed)[0][name], err_msg=name)


def test_log_joint_of_counts_matches_a_direct_formula() -> None:
    from scipy.special import gammaln

    rng = np.random.default_rng(0)
    doc_topic = rng.integers(0, 4, (5, 3))
    term_topic = rng.integers(0, 3, (7, 3))
    alpha, beta = 0.4, 0.07
    n_k = term_topic.sum(axis=0)
    want = (3 * (gammaln(7 * beta) - 7 * gammaln(beta)) + gammaln(term_topic + beta).sum() - gammaln(n_k + 7 * beta).sum()
            + 5 * (gammaln(3 * alpha) - 3 * gammaln(alpha)) + gammaln(doc_topic + alpha).sum()
            - gammaln(doc_topic.sum(axis=1) + 3 * alpha).sum())
    assert log_joint_of_counts(doc_topic, term_topic, alpha, beta) == pytest.approx(want, rel=1e-12)


def test_best_sample_takes_the_first_maximum_and_refuses_an_empty_vector() -> None:
    assert samples.best_sample(np.array([-2.0, -1.0, -1.0])) == 1
    with pytest.raises(InvalidParameterError):
        samples.best_sample(np.array([]))


def test_documents_are_only_readable_with_the_history_source() -> None:
    params = pf.PFParams(2, 3, rejuvenation_source="reservoir", source_size=4)
    cloud = pf.initial_cloud(params, np.array([0, 1], np.int32), np.array([0, 0]), np.array([0, 1], np.int32))
    with pytest.raises(InvalidParameterError, match="history"):
        samples.training_clusters(cloud)
