"""Stores written from document-term matrices: validated counts, fixed-size shards, atomic writes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import sparse

from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.corpus.from_arrays import count_matrix, hstack_counts, parse_terms, write_count_store
from topicflow.io.corpus.reader import Corpus


def _matrix(n_docs: int = 23, n_terms: int = 7) -> sp.csr_matrix:
    rng = np.random.default_rng(3)
    dense = rng.poisson(0.8, size=(n_docs, n_terms))
    dense[4] = 0  # an empty document
    return sp.csr_matrix(dense)


def test_count_matrix_normalizes_every_form() -> None:
    X = _matrix()
    for form in (X.tocoo(), X.tocsc(), X.toarray().astype(np.float32), sparse.COO.from_scipy_sparse(X), X.astype(bool)):
        out = count_matrix(form)
        assert out.dtype == np.int32 and out.has_sorted_indices and out.nnz == (out.data != 0).sum()
        expected = X.astype(bool).astype(int) if form.dtype == bool else X
        np.testing.assert_array_equal(out.toarray(), expected.toarray())


def test_count_matrix_sums_repeated_coo_entries_before_checking() -> None:
    coo = sp.coo_matrix((np.array([2, 3]), (np.array([0, 0]), np.array([1, 1]))), shape=(1, 2))
    assert count_matrix(coo).toarray().tolist() == [[0, 5]]


def test_count_matrix_does_not_modify_its_input() -> None:
    X = sp.csr_matrix((np.array([1, 2]), np.array([1, 0]), np.array([0, 2])), shape=(1, 2))  # unsorted
    count_matrix(X)
    assert X.indices.tolist() == [1, 0]


def test_count_matrix_names_the_row_of_the_whole_input() -> None:
    with pytest.raises(InputError, match=r"chunk row 102, column 1: count 1.5"):
        count_matrix(np.array([[0, 0], [0, 1.5]]), what="chunk", first_row=101)


def test_shards_do_not_depend_on_the_incoming_blocks(tmp_path: Path) -> None:
    X = _matrix()
    whole = write_count_store(tmp_path / "a.zarr", [X], n_terms=7, shard_size=5)
    pieces = [X[:2], X[2:11], X[11:12], X[12:]]
    cut = write_count_store(tmp_path / "b.zarr", iter(pieces), n_terms=7, shard_size=5)
    a, b = Corpus.open(whole), Corpus.open(cut)
    assert [s.n_docs for s in a.shards] == [5, 5, 5, 5, 3]
    assert [s.checksum for s in a.shards] == [s.checksum for s in b.shards]
    assert a.verify() == [] and list(a.doc_ids())[:2] == ["row-0", "row-1"]
    np.testing.assert_array_equal(a.vocabulary().corpus_freq, np.asarray(X.sum(axis=0)).ravel())
    np.testing.assert_array_equal(a.vocabulary().doc_freq, np.asarray((X > 0).sum(axis=0)).ravel())
    np.testing.assert_array_equal(sp.vstack([a.read_block(i).to_csr() for i in range(5)]).toarray(), X.toarray())


def test_a_bad_block_leaves_nothing_behind(tmp_path: Path) -> None:
    bad = sp.csr_matrix(np.array([[1, -1, 0, 0, 0, 0, 0]]))
    with pytest.raises(InputError, match=r"row 23, column 1: count -1"):
        write_count_store(tmp_path / "c.zarr", [_matrix(), bad], n_terms=7, shard_size=5)
    with pytest.raises(InputError, match=r"rows from 23 have 3 columns, expected 7"):
        write_count_store(tmp_path / "c.zarr", [_matrix(), np.ones((2, 3), dtype=int)], n_terms=7, shard_size=5)
    assert list(tmp_path.iterdir()) == []


def test_parse_terms_and_hstack() -> None:
    assert parse_terms(None, 3) == ["t0", "t1", "t2"]
    assert parse_terms(("a", "b"), 2) == ["a", "b"]
    with pytest.raises(InvalidParameterError, match="term 1 is 2 \\(int\\)"):
        parse_terms(["a", 2], 2)
    with pytest.raises(InvalidParameterError, match="shard_size must be a positive integer"):
        write_count_store("unused.zarr", [], n_terms=1, shard_size=0)
    X = _matrix()
    joined = hstack_counts([X[:, :3], X[:, 3:].toarray(), ])
    np.testing.assert_array_equal(count_matrix(joined).toarray(), X.toarray())
    assert hstack_counts([X]) is X


def test_a_store_opened_by_a_relative_path_is_sent_to_workers_as_absolute(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks open shards by ``Corpus.path`` on workers whose working directory differs from the driver's."""
    from topicflow.testing.corpora import write_test_store

    write_test_store(tmp_path / "rel.zarr", {"default": sp.csr_matrix(np.eye(3, dtype=np.int64))}, shard_size=2)
    monkeypatch.chdir(tmp_path)
    corpus = Corpus.open("rel.zarr")
    assert corpus.path == tmp_path / "rel.zarr" and corpus.path.is_absolute()
    monkeypatch.chdir("/")
    assert corpus.read_block(1).counts.sum() == 1  # still readable from another directory
