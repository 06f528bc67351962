"""Token expansion of topicflow.models.common.blocks: the NumPy form, the kernels' numba form, token documents."""
from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from tests.reference.corpora import random_block
from topicflow.models.common.blocks import block_from_csr, expand_entries_into, expand_tokens, token_docs


@numba.njit(cache=False)
def _expand_block(indptr, values, counts, out):
    """Every document through the kernels' helper, one after another (as the particle filter does)."""
    n = 0
    for d in range(indptr.shape[0] - 1):
        n = expand_entries_into(values, counts, indptr[d], indptr[d + 1], out, n)
    return n


@pytest.mark.parametrize("case", ["typical", "empty_docs", "single_term", "one_doc"])
def test_expand_tokens_repeats_each_term_by_its_count(case: str) -> None:
    block = {
        "typical": random_block(20, 30, seed=1),
        "empty_docs": random_block(9, 12, seed=2, empty_rows=(0, 4, 8)),
        "single_term": block_from_csr(sp.csr_matrix(np.array([[5], [2], [0]]))),
        "one_doc": random_block(1, 40, seed=3),
    }[case]
    token_indptr, token_terms = expand_tokens(block)
    dense = block.to_csr().toarray()
    assert token_indptr.dtype == np.int64 and token_terms.dtype == np.int32
    assert token_indptr[0] == 0 and token_indptr[-1] == token_terms.shape[0] == dense.sum()
    for d in range(block.n_docs):
        tokens = token_terms[token_indptr[d]:token_indptr[d + 1]]
        expected = [w for w in range(dense.shape[1]) for _ in range(dense[d, w])]  # ascending terms, by count
        assert tokens.tolist() == expected


def test_kernel_expansion_writes_the_same_tokens() -> None:
    block = random_block(25, 40, seed=4, empty_rows=(3,))
    token_indptr, token_terms = expand_tokens(block)
    out = np.full(token_terms.shape[0] + 3, -1, dtype=np.int64)
    end = _expand_block(block.indptr, block.term_ids, block.counts, out)
    assert end == token_terms.shape[0]
    assert_array_equal(out[:end], token_terms)
    assert (out[end:] == -1).all()  # nothing written past the tokens
    entries = np.zeros(token_terms.shape[0], dtype=np.int64)
    _expand_block(block.indptr, np.arange(block.counts.shape[0]), block.counts, entries)
    assert_array_equal(block.term_ids[entries], token_terms)  # the entry of every token


def test_token_docs_numbers_every_token_by_its_document() -> None:
    block = random_block(10, 20, seed=5, empty_rows=(0, 6), first_doc=40)
    token_indptr, _ = expand_tokens(block)
    docs = token_docs(token_indptr, first_doc=block.first_doc)
    lengths = block.doc_lengths()
    assert docs.dtype == np.int64
    assert_array_equal(np.bincount(docs - 40, minlength=10), lengths)
    assert (np.diff(docs) >= 0).all()
    assert token_docs(np.array([0]), first_doc=3).shape == (0,)


def test_present_terms_renumber_as_unique_does() -> None:
    from topicflow.models.common.blocks import present_terms

    rng = np.random.default_rng(6)
    for n_terms, n_tokens in ((1, 0), (5, 1), (40, 30), (1000, 200)):
        tokens = rng.integers(0, n_terms, n_tokens).astype(np.int32)
        terms, local = present_terms(tokens, n_terms)
        want_terms, want_local = np.unique(tokens, return_inverse=True)
        assert_array_equal(terms, want_terms)
        assert_array_equal(local, want_local.reshape(-1))
        assert terms.dtype == np.int64 and local.dtype == np.int64
