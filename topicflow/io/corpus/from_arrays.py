"""Corpus stores written from document-term matrices held in memory or produced block by block.

This module owns two things: turning a user's matrix of counts (scipy.sparse in any format, a
NumPy array, a pydata/sparse array) into validated CSR counts, and writing consecutive row blocks of
such counts as a corpus store with fixed-size shards. It never tokenizes and never computes Dask
graphs: a caller that holds a Dask array computes its chunks one at a time and hands them over as an
iterator, so at most one incoming block and one shard are in memory.

Shards hold ``shard_size`` documents whatever the sizes of the incoming blocks, so the same matrix
gives the same store (and the same model) however it was chunked. Documents are named ``row-<i>``
after their row in the matrix; every row is kept, empty ones included, so row ``i`` of the matrix is
document ``i`` of the store.

Glossary: ``n_docs`` rows (documents), ``n_terms`` columns (terms of the vocabulary).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from topicflow.errors import EmptyInputError, InputError, InvalidParameterError
from topicflow.io._atomic import check_output_path, commit_directory, temporary_sibling
from topicflow.io.corpus.layout import DEFAULT_LANGUAGE, Manifest, ShardInfo
from topicflow.io.corpus.writer import (
    init_store,
    with_shards,
    write_manifest,
    write_shard,
    write_vocabulary,
)
from topicflow.models.common.vocabulary import Vocabulary

#: Largest count a store holds (counts are int32 on disk).
MAX_COUNT = int(np.iinfo(np.int32).max)
_COUNT_HINT = (
    "counts must be non-negative integers (a document-term matrix of term counts, such as "
    "scikit-learn's CountVectorizer gives; tf-idf weights or normalized rows cannot be used)"
)


def default_terms(n_terms: int) -> list[str]:
    """Return the names given to the columns of a matrix passed without a vocabulary.

    Parameters
    ----------
    n_terms : int
        Number of columns.

    Returns
    -------
    list of str
        ``["t0", "t1", ..., f"t{n_terms - 1}"]``.
    """
    return [f"t{j}" for j in range(n_terms)]


def parse_terms(vocabulary: Sequence[str] | None, n_terms: int, *, what: str = "X") -> list[str]:
    """Check a vocabulary given for the columns of a matrix and return it as a list of str.

    Parameters
    ----------
    vocabulary : sequence of str or None
        One term per column, in column order; None names the columns ``t0, t1, ...``.
    n_terms : int
        Number of columns of the matrix.
    what : str, default "X"
        How messages name the matrix.

    Returns
    -------
    list of str
        The terms, one per column.

    Raises
    ------
    InvalidParameterError
        ``vocabulary`` is a single string, has another length than the matrix has columns, holds a
        term that is not a string, or holds a term twice.
    """
    if vocabulary is None:
        return default_terms(n_terms)
    if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__len__"):
        raise InvalidParameterError(
            f"vocabulary must be a sequence of terms (one str per column of {what}), got "
            f"{type(vocabulary).__name__}."
        )
    terms = list(vocabulary)
    if len(terms) != n_terms:
        raise InvalidParameterError(
            f"vocabulary has {len(terms)} terms but {what} has {n_terms} columns; give one term per "
            "column, in column order (CountVectorizer.get_feature_names_out() does)."
        )
    for position, term in enumerate(terms):
        if not isinstance(term, str):
            raise InvalidParameterError(
                f"vocabulary term {position} is {term!r} ({type(term).__name__}); terms must be str."
            )
    if len(set(terms)) != len(terms):
        seen: set[str] = set()
        repeated = next(t for t in terms if t in seen or seen.add(t))  # type: ignore[func-returns-value]
        raise InvalidParameterError(
            f"vocabulary holds the term {repeated!r} more than once; every column needs its own term."
        )
    return terms


def count_matrix(matrix: Any, *, what: str = "X", first_row: int = 0) -> sp.csr_matrix:
    """Validate a document-term matrix of counts and return it as CSR int32 counts.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, ndarray, pydata sparse array or array-like
        Shape (n_docs, n_terms): documents in rows, terms in columns. Any format of scipy.sparse
        (CSR, CSC, COO, ...), any integer or boolean dtype, or a floating dtype holding whole numbers.
    what : str, default "X"
        How messages name the matrix.
    first_row : int, default 0
        Row of the whole input that row 0 of ``matrix`` is (messages name rows of the whole input).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_docs, n_terms), int32
        Indices sorted within rows, duplicate entries summed, explicit zeros removed.

    Raises
    ------
    InputError
        The matrix is not two-dimensional, not numeric, or holds a NaN, an infinity, a negative or
        fractional count, or a count above 2**31 - 1; the message names the row and column.

    Examples
    --------
    >>> import numpy as np
    >>> count_matrix(np.array([[0, 2], [1, 0]])).toarray().tolist()
    [[0, 2], [1, 0]]
    """
    csr = _as_csr(matrix, what=what)
    data = csr.data
    if data.dtype.kind == "c":
        raise InputError(
            f"Complex data not supported: {what} is {data.dtype}; {_COUNT_HINT}."
        )
    if data.dtype.kind not in "biuf":
        raise InputError(f"{what} has dtype {data.dtype}, not a number; {_COUNT_HINT}.")
    bad = _first_bad_entry(data)
    if bad is not None:
        row = first_row + int(np.searchsorted(csr.indptr, bad, side="right") - 1)
        raise InputError(_bad_count_message(what, row, int(csr.indices[bad]), data[bad].item()))
    if csr.shape[1] == 0:
        raise InputError(
            f"{what} has 0 feature(s) (shape=({csr.shape[0]}, 0)) while a minimum of 1 is required: a "
            "document-term matrix needs at least one term (column)."
        )
    out = sp.csr_matrix((data.astype(np.int32), csr.indices, csr.indptr), shape=csr.shape)
    out.sort_indices()
    out.eliminate_zeros()
    return out


def hstack_counts(parts: Sequence[Any]) -> Any:
    """Join the chunks of one row of a chunked matrix side by side (a single chunk is returned as it is).

    Parameters
    ----------
    parts : sequence of matrices
        Chunks with the same rows, in column order: scipy.sparse, NumPy or pydata/sparse arrays.

    Returns
    -------
    matrix
        ``parts[0]``, or a scipy CSR matrix of them all.
    """
    if len(parts) == 1:
        return parts[0]
    return sp.hstack([_as_csr(part, what="a chunk") for part in parts], format="csr")


def _as_csr(matrix: Any, *, what: str) -> sp.csr_matrix:
    """Any accepted matrix as a scipy CSR matrix of its own dtype (no validation of values)."""
    if hasattr(matrix, "to_scipy_sparse") and not sp.issparse(matrix):  # pydata/sparse COO or GCXS
        if getattr(matrix, "ndim", 2) != 2:
            raise InputError(f"{what} must be 2-D (documents x terms); got shape {matrix.shape!r}.")
        matrix = matrix.to_scipy_sparse()
    if sp.issparse(matrix):
        if len(matrix.shape) != 2:
            raise InputError(f"{what} must be 2-D (documents x terms); got shape {matrix.shape!r}.")
        csr = sp.csr_matrix(matrix, copy=True)
        csr.sum_duplicates()  # COO entries given twice add up before they are checked
        return csr
    try:
        dense = np.asarray(matrix)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} cannot be read as a matrix of counts ({exc}); {_COUNT_HINT}.") from exc
    if dense.dtype.kind == "O":
        try:
            dense = dense.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{what} holds objects that are not numbers ({exc}): argument must be a string or a "
                f"number; {_COUNT_HINT}."
            ) from exc
    if dense.ndim != 2:
        raise InputError(
            f"{what} must be a 2-D document-term matrix (documents x terms); got an array of shape "
            f"{dense.shape!r}. Reshape your data: X.reshape(1, -1) for a single document."
        )
    if dense.dtype.kind not in "biufc":
        raise InputError(f"{what} has dtype {dense.dtype}, not a number; {_COUNT_HINT}.")
    return sp.csr_matrix(dense)


def _bad_count_message(what: str, row: int, col: int, value: Any) -> str:
    where = f"{what} row {row}, column {col}"
    if np.isfinite(value) and value > MAX_COUNT:
        return (f"{where}: count {value!r} exceeds {MAX_COUNT}, the largest count a corpus store holds; "
                "split the document.")
    if np.isfinite(value) and value < 0:  # scikit-learn's wording, which its estimator checks look for
        return f"Negative values in data passed to topicflow: {where}: count {value!r}; {_COUNT_HINT}. Fix the matrix."
    if not np.isfinite(value):  # NaN and inf spelled as scikit-learn's checks look for them
        shown = "NaN" if np.isnan(value) else repr(value)
        return f"{where}: {shown} (not a count); {_COUNT_HINT}. Fix the matrix."
    return f"{where}: count {value!r}; {_COUNT_HINT}. Fix the matrix."


def _first_bad_entry(data: np.ndarray) -> int | None:
    """Position of the first stored value that is not a count a store can hold, or None."""
    if data.dtype.kind == "b":
        return None
    if data.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(data) | (data < 0) | (data != np.floor(data)) | (data > MAX_COUNT)
    else:
        bad = (data < 0) | (data > MAX_COUNT)
    positions = np.flatnonzero(bad)
    return int(positions[0]) if len(positions) else None


# ----------------------------------------------------------------------------- writing


class _ShardBuffer:
    """Rows waiting to fill a shard; writes every full shard as it completes."""

    def __init__(self, store: Path, shard_size: int, n_terms: int) -> None:
        self.store = store
        self.shard_size = shard_size
        self.n_terms = n_terms
        self.pending: list[sp.csr_matrix] = []
        self.n_pending = 0
        self.n_docs = 0
        self.shards: list[ShardInfo] = []
        self.doc_freq = np.zeros(n_terms, dtype=np.int64)
        self.corpus_freq = np.zeros(n_terms, dtype=np.int64)

    def add(self, block: sp.csr_matrix) -> None:
        offset = 0
        while offset < block.shape[0]:
            take = min(self.shard_size - self.n_pending, block.shape[0] - offset)
            self.pending.append(block[offset : offset + take])
            self.n_pending += take
            offset += take
            if self.n_pending == self.shard_size:
                self.flush()

    def flush(self) -> None:
        if not self.n_pending:
            return
        part = sp.vstack(self.pending, format="csr", dtype=np.int32)
        part.sort_indices()
        self.doc_freq += np.bincount(part.indices, minlength=self.n_terms)
        self.corpus_freq += np.bincount(part.indices, weights=part.data, minlength=self.n_terms).astype(np.int64)
        shard_id = f"{len(self.shards):06d}"
        bag = (part.indptr.astype(np.int64), part.indices.astype(np.int32), part.data.astype(np.int32))
        doc_ids = np.array([f"row-{i}" for i in range(self.n_docs, self.n_docs + part.shape[0])], dtype=object)
        checksum, n_tokens = write_shard(self.store / "shards" / shard_id, {DEFAULT_LANGUAGE: bag}, doc_ids)
        self.shards.append(ShardInfo(shard_id, 0, part.shape[0], n_tokens, checksum))
        self.n_docs += part.shape[0]
        self.pending, self.n_pending = [], 0


def write_count_store(
    path: str | Path, blocks: Iterable[Any], *, n_terms: int, terms: Sequence[str] | None = None,
    shard_size: int, source: str = "matrix", overwrite: bool = False,
) -> Path:
    """Write consecutive row blocks of a document-term matrix as a monolingual corpus store.

    The store is built in a temporary sibling of ``path`` and moved into place once complete.

    Parameters
    ----------
    path : str or Path
        Store to create.
    blocks : iterable of matrices
        Row blocks in order, each of shape (rows, n_terms) and accepted by :func:`count_matrix`;
        consumed one at a time.
    n_terms : int
        Number of columns.
    terms : sequence of str, optional
        One term per column (see :func:`parse_terms`); default ``t0, t1, ...``.
    shard_size : int
        Documents per shard (the last shard may be shorter).
    source : str, default "matrix"
        What the counts came from, recorded in the manifest's history.
    overwrite : bool, default False
        Replace an existing store at ``path``.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InputError
        A block is not a valid matrix of counts, or has another number of columns.
    InvalidParameterError
        ``terms`` does not fit the columns, or ``shard_size`` is not positive.
    StoreExistsError
        ``path`` exists and ``overwrite`` is False.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.random(100, 20, density=0.2, format="csr", random_state=0) * 10
    >>> write_count_store("counts.zarr", [X.astype(int)], n_terms=20, shard_size=50)  # doctest: +SKIP
    """
    if isinstance(shard_size, bool) or not isinstance(shard_size, (int, np.integer)) or shard_size < 1:
        raise InvalidParameterError(f"shard_size must be a positive integer, got {shard_size!r}.")
    names = parse_terms(terms, n_terms)
    path = Path(path).absolute()
    check_output_path(path, overwrite=overwrite)
    tmp = temporary_sibling(path)
    try:
        init_store(tmp)
        buffer = _ShardBuffer(tmp, int(shard_size), n_terms)
        for block in blocks:
            counts = count_matrix(block, what=source, first_row=buffer.n_docs + buffer.n_pending)
            if counts.shape[1] != n_terms:
                raise InputError(
                    f"{source}: rows from {buffer.n_docs + buffer.n_pending} have {counts.shape[1]} columns, "
                    f"expected {n_terms} like the rows before them."
                )
            buffer.add(counts)
        buffer.flush()
        if buffer.n_docs == 0:
            raise EmptyInputError(f"{source} has no rows (documents); a corpus needs at least one.")
        vocab = Vocabulary(terms=np.array(names, dtype=object), doc_freq=buffer.doc_freq,
                           corpus_freq=buffer.corpus_freq)
        write_vocabulary(tmp / "vocab" / DEFAULT_LANGUAGE, vocab)
        manifest = Manifest(languages=(DEFAULT_LANGUAGE,), tokenizer={"kind": "none", "source": source},
                            shard_size=int(shard_size))
        event = {"action": "from-arrays", "source": source, "n_docs": buffer.n_docs, "n_terms": n_terms}
        write_manifest(tmp, with_shards(manifest, buffer.shards, event))
        commit_directory(tmp, path, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
