"""Held-out splits, document completion and NMI."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from tests.reference.corpora import lda_block, random_block
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr, concat_blocks
from topicflow.metrics.heldout import (
    completion_log_likelihood,
    document_split_positions,
    particle_learning_log_likelihood,
    split_doc_tokens,
    split_documents,
)
from topicflow.models.common.assignments import most_frequent_topics
from topicflow.metrics.clustering import nmi, nmi_of_counts
from topicflow.models.lda.vb.params import VBParams
from topicflow.models.lda.vb.estep import fold_in_block


def _dense(block):
    return block.to_csr().toarray()


def test_split_halves_add_up_and_are_deterministic() -> None:
    block = random_block(40, 25, seed=1, empty_rows=(3,), max_count=6)
    observed, heldout = split_doc_tokens(block, seed=9)
    assert np.array_equal(_dense(observed) + _dense(heldout), _dense(block))
    n_tokens = np.asarray(block.to_csr().sum(axis=1)).ravel()
    assert np.array_equal(np.asarray(observed.to_csr().sum(axis=1)).ravel(), np.floor(n_tokens * 0.5 + 0.5))
    assert np.all(observed.counts > 0) and np.all(heldout.counts > 0)
    assert observed.first_doc == block.first_doc and list(heldout.doc_ids) == list(block.doc_ids)
    again, _ = split_doc_tokens(block, seed=9)
    assert np.array_equal(_dense(again), _dense(observed))
    other, _ = split_doc_tokens(block, seed=10)
    assert not np.array_equal(_dense(other), _dense(observed))
    with pytest.raises(InvalidParameterError, match="fraction"):
        split_doc_tokens(block, seed=0, fraction=1.0)


def test_split_does_not_depend_on_partitioning() -> None:
    block = random_block(30, 25, seed=2, max_count=5)
    whole, _ = split_doc_tokens(block, seed=3, fraction=0.3)
    parts = [split_doc_tokens(block.slice(a, b), seed=3, fraction=0.3)[0] for a, b in [(0, 7), (7, 8), (8, 30)]]
    assert np.array_equal(_dense(concat_blocks(parts)), _dense(whole))


def test_completion_log_likelihood_by_hand() -> None:
    block = block_from_csr(sp.csr_matrix(np.array([[3, 1, 0], [0, 0, 2]])))
    observed, heldout = split_doc_tokens(block, seed=0)
    topic_word = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    alpha = np.array([0.5, 0.5])
    params = VBParams(n_topics=2, max_doc_iter=500, doc_tol=1e-10)
    log_lik, n_tokens = completion_log_likelihood(observed, heldout, {"default": topic_word}, alpha, params)
    theta = fold_in_block(observed, {"default": topic_word}, alpha, params)
    want = sum(n * math.log(theta[d] @ topic_word[:, w])
               for d in range(2) for w, n in heldout.doc_bag(d).items())
    assert n_tokens == heldout.n_tokens == 3
    assert_allclose(log_lik, want, rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="held-out blocks hold 1 documents"):
        completion_log_likelihood(observed, heldout.slice(0, 1), {"default": topic_word}, alpha, params)


def test_true_topics_score_better_than_flat_topics() -> None:
    rng = np.random.default_rng(4)
    topic_word = rng.dirichlet(np.full(40, 0.05), size=4)
    block = lda_block(80, topic_word, 0.2, seed=5, doc_len=60)
    observed, heldout = split_doc_tokens(block, seed=1)
    params = VBParams(n_topics=4)
    good, n = completion_log_likelihood(observed, heldout, {"default": topic_word}, 0.2, params)
    flat, _ = completion_log_likelihood(observed, heldout, {"default": np.full((4, 40), 1 / 40)}, 0.2, params)
    assert math.exp(-good / n) < math.exp(-flat / n)
    assert_allclose(math.exp(-flat / n), 40.0, rtol=1e-10)


def test_nmi_known_values() -> None:
    assert_allclose(nmi([0, 0, 1, 1], [5, 5, 7, 7]), 1.0, rtol=1e-14)
    assert nmi(["a", "a", "b", "b"], [0, 1, 0, 1]) == 0.0
    assert nmi([1, 1, 1], [2, 2, 2]) == 1.0
    assert nmi([0, 1, 2], [0, 0, 0]) == 0.0
    # Hand computation: true [0,0,0,1,1,1], pred [0,0,1,1,2,2].
    # n_ij: (0,0)=2, (0,1)=1, (1,1)=1, (1,2)=2; a=[3,3], b=[2,2,2]; N=6.
    mi = (2 / 6) * math.log(6 * 2 / (3 * 2)) * 2 + (1 / 6) * math.log(6 * 1 / (3 * 2)) * 2
    h_true, h_pred = math.log(2), math.log(3)
    assert_allclose(nmi([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]), mi / ((h_true + h_pred) / 2), rtol=1e-14)
    with pytest.raises(InvalidParameterError, match="equal length"):
        nmi([0, 1], [0])


def _particle_learning_reference(block, topic_word, alpha):
    """Token by token in CSR order: score under the expected counts, then add the token's posterior."""
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (topic_word.shape[0],))
    total = 0.0
    for d in range(block.n_docs):
        lo, hi = block.indptr[d], block.indptr[d + 1]
        tokens = np.repeat(block.term_ids[lo:hi], block.counts[lo:hi])
        expected = np.zeros(topic_word.shape[0])
        for i, w in enumerate(tokens):
            p = topic_word[:, w] * (expected + alpha)
            total += math.log(p.sum() / (i + alpha.sum()))
            expected += p / p.sum()
    return total


@pytest.mark.parametrize("case", ["typical", "empty_doc", "one_topic", "one_doc", "single_term"])
def test_particle_learning_matches_numpy_reference(case: str) -> None:
    rng = np.random.default_rng(7)
    n_topics = 1 if case == "one_topic" else 5
    n_terms = 1 if case == "single_term" else 30
    block = random_block(1 if case == "one_doc" else 25, n_terms, seed=3, max_count=4,
                         empty_rows=(2,) if case == "empty_doc" else ())
    topic_word = rng.dirichlet(np.full(n_terms, 0.3), size=n_topics)
    alpha = rng.uniform(0.05, 1.0, size=n_topics)
    log_lik, n_tokens = particle_learning_log_likelihood(block, topic_word, alpha)
    assert n_tokens == block.n_tokens
    assert_allclose(log_lik, _particle_learning_reference(block, topic_word, alpha), rtol=1e-12)
    if case == "one_topic":
        # With one topic the approximation is exact: every token scores phi_w.
        assert_allclose(log_lik, float(np.sum(block.counts * np.log(topic_word[0, block.term_ids]))), rtol=1e-12)


def test_particle_learning_by_hand() -> None:
    block = block_from_csr(sp.csr_matrix(np.array([[1, 1]])))
    topic_word = np.array([[0.8, 0.2], [0.3, 0.7]])
    log_lik, n_tokens = particle_learning_log_likelihood(block, topic_word, np.array([0.5, 0.5]))
    # Token w0: p = (0.4 + 0.15) / 1, posterior (8/11, 3/11).
    # Token w1: p = (0.2 (8/11 + 1/2) + 0.7 (3/11 + 1/2)) / 2 = 17.3 / 44.
    assert n_tokens == 2
    assert_allclose(log_lik, math.log(0.55) + math.log(17.3 / 44), rtol=1e-13)


def test_particle_learning_prefers_true_topics_and_validates() -> None:
    rng = np.random.default_rng(4)
    topic_word = rng.dirichlet(np.full(40, 0.05), size=4)
    block = lda_block(60, topic_word, 0.2, seed=5, doc_len=50)
    good, n = particle_learning_log_likelihood(block, topic_word, 0.2)
    flat, _ = particle_learning_log_likelihood(block, np.full((4, 40), 1 / 40), 0.2)
    assert_allclose(math.exp(-flat / n), 40.0, rtol=1e-12)
    assert math.exp(-good / n) < 0.5 * math.exp(-flat / n)
    zero = np.full((4, 40), 1 / 39)
    zero[:, int(block.term_ids[0])] = 0.0
    assert particle_learning_log_likelihood(block, zero, 0.2)[0] == -math.inf
    with pytest.raises(InvalidParameterError, match="n_terms >= 40"):
        particle_learning_log_likelihood(block, topic_word[:, :30], 0.2)
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        particle_learning_log_likelihood(block, topic_word, np.ones(3))
    with pytest.raises(InvalidParameterError, match="doc_topic_prior"):
        particle_learning_log_likelihood(block, topic_word, 0.0)


def _labeled_block(n_docs, *, seed, first_doc=0):
    block = random_block(n_docs, 20, seed=seed, first_doc=first_doc, empty_rows=(1,))
    labels = np.array([f"label-{(first_doc + d) % 3}" for d in range(n_docs)], dtype=object)
    stamps = np.arange(first_doc, first_doc + n_docs, dtype=np.int64) * 60
    return dataclasses.replace(block, labels=labels, timestamps=stamps)


def test_split_documents_partitions_whole_documents() -> None:
    block = _labeled_block(200, seed=6, first_doc=0)
    train, held = split_documents(block, held_out_fraction=0.25, seed=3)
    train_pos, held_pos = document_split_positions(block, held_out_fraction=0.25, seed=3)
    assert train.n_docs + held.n_docs == 200 and train.n_docs == train_pos.shape[0]
    assert np.array_equal(np.sort(np.concatenate([train_pos, held_pos])), np.arange(200))
    dense = _dense(block)
    for part, positions in ((train, train_pos), (held, held_pos)):
        assert np.array_equal(_dense(part), dense[positions])
        assert list(part.doc_ids) == list(block.doc_ids[positions])
        assert list(part.labels) == list(block.labels[positions])
        assert np.array_equal(part.timestamps, block.timestamps[positions])
    assert train.first_doc == 0 and held.first_doc == 0
    # Binomial(200, 0.25): mean 50, sd 6.1.
    assert 25 <= held.n_docs <= 75
    again, _ = split_documents(block, held_out_fraction=0.25, seed=3)
    assert np.array_equal(_dense(again), _dense(train))
    other, _ = document_split_positions(block, held_out_fraction=0.25, seed=4)
    assert not np.array_equal(other, train_pos)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(InvalidParameterError, match="held_out_fraction"):
            split_documents(block, held_out_fraction=bad)
    with pytest.raises(InvalidParameterError, match="seed"):
        split_documents(block, seed=-1)


def test_split_documents_does_not_depend_on_partitioning() -> None:
    block = _labeled_block(90, seed=8)
    whole_train, whole_held = split_documents(block, held_out_fraction=0.4, seed=2)
    parts = [split_documents(block.slice(a, b), held_out_fraction=0.4, seed=2)
             for a, b in [(0, 13), (13, 14), (14, 90)]]
    train = concat_blocks([p[0] for p in parts if p[0].n_docs])
    held = concat_blocks([p[1] for p in parts if p[1].n_docs])
    for joined, whole in ((train, whole_train), (held, whole_held)):
        assert joined.first_doc == whole.first_doc == 0
        assert np.array_equal(_dense(joined), _dense(whole))
        assert list(joined.labels) == list(whole.labels)
    # Each part of a later slice starts where the earlier slices' part of the same kind stopped.
    assert parts[2][0].first_doc == parts[0][0].n_docs + parts[1][0].n_docs


def test_most_frequent_topics_and_nmi_of_counts() -> None:
    counts = np.array([[1, 3, 3], [0, 0, 0], [5, 0, 1], [0, 2, 1]])
    assert most_frequent_topics(counts).tolist() == [1, 0, 0, 1]
    assert most_frequent_topics(counts.astype(np.float64) / 2).dtype == np.int64
    rng = np.random.default_rng(0)
    random_counts = rng.integers(0, 4, size=(50, 6))
    assert np.array_equal(most_frequent_topics(random_counts), np.argmax(random_counts, axis=1))
    labels = np.array(["a", "b", "a", "b"], dtype=object)
    # Clusters [1, 0, 0, 1] against labels [a, b, a, b]: every cell 1, so MI = 0.
    assert nmi_of_counts(labels, counts) == 0.0
    assert_allclose(nmi_of_counts(["x", "x", "y", "x"], counts), nmi([0, 0, 1, 0], [1, 0, 0, 1]), rtol=1e-14)
    assert_allclose(nmi_of_counts(["b", "a", "a", "b"], counts), 1.0, rtol=1e-14)
    with pytest.raises(InvalidParameterError, match="n_topics >= 1"):
        most_frequent_topics(np.zeros((3, 0)))
    with pytest.raises(InvalidParameterError, match="equal length"):
        nmi_of_counts(["a"], counts)
