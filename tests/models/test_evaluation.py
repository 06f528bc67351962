"""Held-out splits, document completion and NMI."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from tests.reference.corpora import lda_block, random_block
from topicflow.errors import InvalidParameterError
from topicflow.models.blocks import block_from_csr, concat_blocks
from topicflow.models.evaluation import completion_log_likelihood, nmi, split_doc_tokens
from topicflow.models.vb_lda import VBParams, fold_in_block


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
