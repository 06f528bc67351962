"""PCVB0 math (topicflow.models.hdp.pcvb0) against the plain NumPy reference and a brute-force CVB0."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from tests.reference.pcvb0 import ReferencePCVB0, stick_weights
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.pcvb0 import (
    PCVB0Stats,
    PCVB0View,
    block_statistics,
    initial_q,
    initial_state,
    n_units,
    sweep_block,
    unit_layout,
    update_state,
)


def fixture_counts(n_docs: int = 20, n_terms: int = 15, seed: int = 3) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.6, size=(n_docs, n_terms))
    dense[:, 0] += 1  # no empty document
    return sp.csr_matrix(dense)


def ref_docs(block, clumping: bool) -> list[list]:
    out = []
    for d in range(block.n_docs):
        lo, hi = block.indptr[d], block.indptr[d + 1]
        pairs = [(int(w), int(c)) for w, c in zip(block.term_ids[lo:hi], block.counts[lo:hi])]
        out.append(pairs if clumping else [w for w, c in pairs for _ in range(c)])
    return out


def split_q(block, q: np.ndarray, clumping: bool) -> list[np.ndarray]:
    indptr, _, _ = unit_layout(block, clumping)
    return [q[indptr[d]:indptr[d + 1]] for d in range(block.n_docs)]


def run_model(blocks, params: HDPParams, n_terms: int, iterations: int, dtype: str = "float64"):
    """Kernel path: start statistics, then ``iterations`` sweeps; blocks are processed as partitions."""
    qs = [initial_q(b, params.truncation, seed=params.seed, clumping=params.clumping, dtype=dtype) for b in blocks]
    n_tokens = sum(b.n_tokens for b in blocks)
    state = initial_state(params, n_terms=n_terms, n_tokens=n_tokens, n_docs=sum(b.n_docs for b in blocks))
    stats = PCVB0Stats.merge_all([block_statistics(b, q, alpha=state.alpha, clumping=params.clumping)
                                  for b, q in zip(blocks, qs)])
    update_state(state, stats, params, learn=False)
    history = []
    for _ in range(iterations):
        view = PCVB0View.from_state(state)
        stats = PCVB0Stats.merge_all([sweep_block(view, b, q, clumping=params.clumping) for b, q in zip(blocks, qs)])
        update_state(state, stats, params)
        history.append(stats)
    return state, qs, history


@pytest.mark.parametrize("clumping", [False, True])
def test_kernel_matches_numpy_reference_for_three_iterations(clumping: bool) -> None:
    counts = fixture_counts()
    block = block_from_csr(counts)
    params = HDPParams(truncation=5, seed=7, clumping=clumping, alpha_init=1.0, gamma_init=1.5)
    q0 = initial_q(block, 5, seed=7, clumping=clumping)
    ref = ReferencePCVB0(ref_docs(block, clumping), split_q(block, q0, clumping), counts.shape[1], beta=0.01,
                         alpha=1.0, gamma=1.5, clumping=clumping)
    state, qs, history = run_model([block], params, counts.shape[1], 3)
    for _ in range(3):
        ref.iterate()
    np.testing.assert_allclose(np.vstack(ref.q), qs[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(state.topic_word_counts(), ref.n_kw, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(state.tables, ref.tables, rtol=1e-10)
    assert state.alpha == pytest.approx(ref.alpha, rel=1e-10)
    assert state.gamma == pytest.approx(ref.gamma, rel=1e-10)
    np.testing.assert_allclose(state.stick_weights(), stick_weights(ref.tables, ref.gamma), rtol=1e-10)
    assert history[-1].log_likelihood == pytest.approx(ref.log_likelihood, rel=1e-10)
    assert state.alpha != 1.0 and state.gamma != 1.5  # the hyperparameters were learned


def test_float32_storage_matches_reference_with_the_same_rounding() -> None:
    counts = fixture_counts(seed=5)
    block = block_from_csr(counts)
    params = HDPParams(truncation=4, seed=1)
    q0 = initial_q(block, 4, seed=1, clumping=False, dtype="float32")
    ref = ReferencePCVB0(ref_docs(block, False), split_q(block, q0, False), counts.shape[1], beta=0.01, alpha=1.0,
                         gamma=1.0, dtype=np.float32)
    state, qs, _ = run_model([block], params, counts.shape[1], 2, dtype="float32")
    ref.iterate()
    ref.iterate()
    assert qs[0].dtype == np.float32
    np.testing.assert_allclose(np.vstack(ref.q), qs[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(state.tables, ref.tables, rtol=1e-6)
    # float32 against float64 storage: the same fit up to rounding.
    state64, _, _ = run_model([block], params, counts.shape[1], 2)
    np.testing.assert_allclose(state.topic_word_counts(), state64.topic_word_counts(), atol=1e-4)


@pytest.mark.parametrize("clumping", [False, True])
def test_same_model_whatever_the_partitioning(clumping: bool) -> None:
    counts = fixture_counts(n_docs=24)
    whole = block_from_csr(counts)
    params = HDPParams(truncation=6, seed=2, clumping=clumping)
    state1, q1, _ = run_model([whole], params, counts.shape[1], 3)
    for cuts in ([0, 11, 24], [0, 5, 6, 17, 24]):
        parts = [whole.slice(a, b) for a, b in itertools.pairwise(cuts)]
        assert [p.first_doc for p in parts] == cuts[:-1]
        state, qs, _ = run_model(parts, params, counts.shape[1], 3)
        np.testing.assert_allclose(np.vstack(qs), q1[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(state.topic_word_counts(), state1.topic_word_counts(), rtol=1e-12, atol=1e-12)
        assert state.alpha == pytest.approx(state1.alpha, rel=1e-12)
        assert state.gamma == pytest.approx(state1.gamma, rel=1e-12)


def test_start_is_keyed_by_global_document() -> None:
    block = block_from_csr(fixture_counts())
    q = initial_q(block, 3, seed=4, clumping=False)
    tail = block.slice(7, 20)
    indptr, _, _ = unit_layout(block, False)
    np.testing.assert_array_equal(initial_q(tail, 3, seed=4, clumping=False), q[indptr[7]:])
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    assert q.shape == (block.n_tokens, 3) and n_units(block, True) == block.term_ids.shape[0]
    assert not np.array_equal(initial_q(block, 3, seed=5, clumping=False), q)


def test_tables_equal_one_minus_product_of_misses() -> None:
    counts = fixture_counts(seed=9)
    block = block_from_csr(counts)
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.full(4, 0.3), size=block.n_tokens)
    q[0] = [1.0, 0.0, 0.0, 0.0]  # a saturated table (q clipped to 1 - 1e-12 inside the log)
    stats = block_statistics(block, q, alpha=0.5, clumping=False)
    indptr, terms, _ = unit_layout(block, False)
    expected = sum(1.0 - np.prod(1.0 - q[indptr[d]:indptr[d + 1]], axis=0) for d in range(block.n_docs))
    np.testing.assert_allclose(stats.table_sums, expected, rtol=1e-12, atol=1e-12)
    dense = np.zeros((4, counts.shape[1]))
    np.add.at(dense.T, terms, q)
    np.testing.assert_allclose(stats.topic_word.to_dense(counts.shape[1]), dense, rtol=1e-12)
    # The same table sums after a sweep: the kernel's log1p accumulation against the direct product.
    state = initial_state(HDPParams(truncation=4), n_terms=counts.shape[1], n_tokens=block.n_tokens,
                          n_docs=block.n_docs)
    update_state(state, stats, HDPParams(truncation=4), learn=False)
    q2 = np.ascontiguousarray(q)
    swept = sweep_block(PCVB0View.from_state(state), block, q2, clumping=False)
    expected = sum(1.0 - np.prod(1.0 - q2[indptr[d]:indptr[d + 1]], axis=0) for d in range(block.n_docs))
    np.testing.assert_allclose(swept.table_sums, expected, rtol=1e-12, atol=1e-12)
    assert swept.q_change > 0


def test_pi_sums_to_one_and_hyperparameters_can_be_fixed() -> None:
    counts = fixture_counts()
    block = block_from_csr(counts)
    params = HDPParams(truncation=5, learn_alpha=False, learn_gamma=False, alpha_init=0.7, gamma_init=2.0)
    state, _, history = run_model([block], params, counts.shape[1], 2)
    assert state.alpha == 0.7 and state.gamma == 2.0
    assert state.stick_weights().sum() == pytest.approx(1.0)
    assert state.topic_word_counts().sum() == pytest.approx(block.n_tokens)
    assert np.all(np.diff(state.tables[state.stick_order()]) <= 0)
    assert history[0].n_tokens == block.n_tokens and history[0].n_docs == block.n_docs


def test_bad_shapes_are_refused() -> None:
    block = block_from_csr(fixture_counts())
    state = initial_state(HDPParams(truncation=3), n_terms=15, n_tokens=block.n_tokens, n_docs=block.n_docs)
    with pytest.raises(InvalidParameterError, match="shape"):
        sweep_block(PCVB0View.from_state(state), block, np.zeros((3, 3)), clumping=False)
    small = initial_state(HDPParams(truncation=3), n_terms=4, n_tokens=1, n_docs=1)
    with pytest.raises(InvalidParameterError, match="outside"):
        sweep_block(PCVB0View.from_state(small), block, initial_q(block, 3, seed=0, clumping=False), clumping=False)
    with pytest.raises(InvalidParameterError, match="dtype"):
        initial_q(block, 3, seed=0, clumping=False, dtype="float16")


def gauss_seidel_cvb0(docs: list[list[int]], q: list[np.ndarray], n_terms: int, prior: np.ndarray, beta: float,
                      sweeps: int) -> list[np.ndarray]:
    """The classical serial CVB0 (Teh et al. 2007's zero-order form): every count updated at once."""
    q = [x.copy() for x in q]
    T = prior.shape[0]
    n_kw = np.zeros((T, n_terms))
    for d, doc in enumerate(docs):
        for i, w in enumerate(doc):
            n_kw[:, w] += q[d][i]
    for _ in range(sweeps):
        for d, doc in enumerate(docs):
            for i, w in enumerate(doc):
                old = q[d][i].copy()
                n_dk = q[d].sum(axis=0) - old
                n_kw[:, w] -= old
                p = (n_dk + prior) * (n_kw[:, w] + beta) / (n_kw.sum(axis=1) + n_terms * beta)
                q[d][i] = p / p.sum()
                n_kw[:, w] += q[d][i]
    return q


def test_fixed_point_agrees_with_serial_cvb0_on_a_tiny_corpus() -> None:
    """Independent check: with pi and alpha fixed, the Jacobi-across-documents schedule converges to the
    fixed point of eq. 2 that the serial CVB0 (another schedule, written separately) reaches."""
    counts = sp.csr_matrix(np.array([[3, 2, 0, 0], [2, 3, 0, 0], [0, 0, 3, 2], [0, 1, 2, 3], [4, 1, 0, 0]]))
    block = block_from_csr(counts)
    params = HDPParams(truncation=2, learn_alpha=False, learn_gamma=False, alpha_init=0.5, topic_word_prior=0.1,
                       seed=11)
    q0 = initial_q(block, 2, seed=11, clumping=False)
    state = initial_state(params, n_terms=4, n_tokens=block.n_tokens, n_docs=block.n_docs)
    q = q0.copy()
    update_state(state, block_statistics(block, q, alpha=0.5, clumping=False), params, learn=False)
    prior = np.array([0.25, 0.25])  # alpha * pi held fixed for the comparison
    for _ in range(300):
        view = PCVB0View(np.ascontiguousarray(state.topic_word_counts().T), state.topic_sums(), prior, 0.5, 0.1)
        stats = sweep_block(view, block, q, clumping=False)
        update_state(state, stats, params)
    serial = np.vstack(gauss_seidel_cvb0(ref_docs(block, False), split_q(block, q0, False), 4, prior, 0.1, 300))
    if np.abs(serial - q).max() > 1e-3:  # the same fixed point up to the labels of the two topics
        serial = serial[:, ::-1]
    np.testing.assert_allclose(q, serial, atol=1e-6)
    # ... and it is a fixed point of eq. 2, checked by brute force from the final q.
    indptr, terms, _ = unit_layout(block, False)
    n_kw = np.zeros((2, 4))
    np.add.at(n_kw.T, terms, q)
    for d in range(block.n_docs):
        for i in range(indptr[d], indptr[d + 1]):
            n_dk = q[indptr[d]:indptr[d + 1]].sum(axis=0) - q[i]
            p = (n_dk + prior) * (n_kw[:, terms[i]] - q[i] + 0.1) / (n_kw.sum(axis=1) - q[i] + 0.4)
            np.testing.assert_allclose(q[i], p / p.sum(), atol=1e-8)
    assert stats.q_change < 1e-8
    assert q[:10, 0].mean() > 0.9 or q[:10, 1].mean() > 0.9  # documents 0-1 share one topic
