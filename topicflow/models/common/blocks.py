"""Document blocks: the unit of data every kernel and task works on.

A :class:`DocBlock` is one shard of one language as CSR arrays, with the global identity of its
documents. It is pure data: readers in :mod:`topicflow.io` build it, kernels consume it.

Glossary: ``n_docs`` documents in the block, ``n_terms`` size of the language's vocabulary,
``first_doc`` the global position (over the whole corpus, in store order) of the block's first document.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import scipy.sparse as sp

from topicflow._typing import Int32Array, IntArray


@dataclass(frozen=True, slots=True)
class DocBlock:
    """Bag-of-words counts of consecutive documents in CSR form.

    Attributes
    ----------
    indptr : ndarray of shape (n_docs + 1,), int64
    term_ids : ndarray of shape (n_nonzero,), int32
        Sorted ascending within each document, no duplicates.
    counts : ndarray of shape (n_nonzero,), int32
        Positive.
    doc_ids : ndarray of shape (n_docs,), object (str)
    first_doc : int
        Global position of the first document; seeds and output alignment use it.
    n_terms : int
        Vocabulary size of ``language``.
    language : str
    labels : ndarray of shape (n_docs,), object (str) or None
    timestamps : ndarray of shape (n_docs,), int64 or None
        Seconds since the epoch (UTC).
    """

    indptr: IntArray
    term_ids: Int32Array
    counts: Int32Array
    doc_ids: np.ndarray
    first_doc: int
    n_terms: int
    language: str = "default"
    labels: np.ndarray | None = field(default=None)
    timestamps: IntArray | None = field(default=None)

    @property
    def n_docs(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    def doc_lengths(self) -> IntArray:
        """Tokens per document, shape (n_docs,)."""
        out = np.zeros(self.n_docs, dtype=np.int64)
        np.add.at(out, np.repeat(np.arange(self.n_docs), np.diff(self.indptr)), self.counts)
        return out

    def to_csr(self) -> sp.csr_matrix:
        """The counts as a ``(n_docs, n_terms)`` scipy CSR matrix (arrays are shared, not copied)."""
        return sp.csr_matrix(
            (self.counts, self.term_ids, self.indptr), shape=(self.n_docs, self.n_terms)
        )

    def doc_bag(self, row: int) -> dict[int, int]:
        """Term-id to count mapping of the ``row``-th document of the block."""
        lo, hi = int(self.indptr[row]), int(self.indptr[row + 1])
        return dict(zip(self.term_ids[lo:hi].tolist(), self.counts[lo:hi].tolist()))

    def slice(self, start: int, stop: int) -> DocBlock:
        """Documents ``start`` to ``stop`` (exclusive) of the block, as a new block."""
        start, stop = max(0, start), min(self.n_docs, stop)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return DocBlock(
            indptr=self.indptr[start : stop + 1] - lo,
            term_ids=self.term_ids[lo:hi],
            counts=self.counts[lo:hi],
            doc_ids=self.doc_ids[start:stop],
            first_doc=self.first_doc + start,
            n_terms=self.n_terms,
            language=self.language,
            labels=None if self.labels is None else self.labels[start:stop],
            timestamps=None if self.timestamps is None else self.timestamps[start:stop],
        )


def concat_blocks(blocks: list[DocBlock]) -> DocBlock:
    """Join blocks of consecutive documents (same language and vocabulary) into one block."""
    if not blocks:
        raise ValueError("concat_blocks needs at least one block")
    first = blocks[0]
    for prev, nxt in zip(blocks, blocks[1:]):
        if nxt.first_doc != prev.first_doc + prev.n_docs or nxt.language != prev.language:
            raise ValueError("concat_blocks joins consecutive blocks of one language only")
    offsets = np.cumsum([0] + [int(b.indptr[-1]) for b in blocks[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + off for b, off in zip(blocks, offsets)])

    def join(name: str) -> np.ndarray | None:
        parts = [getattr(b, name) for b in blocks]
        return None if any(p is None for p in parts) else np.concatenate(parts)

    return DocBlock(
        indptr=indptr.astype(np.int64),
        term_ids=np.concatenate([b.term_ids for b in blocks]),
        counts=np.concatenate([b.counts for b in blocks]),
        doc_ids=np.concatenate([b.doc_ids for b in blocks]),
        first_doc=first.first_doc,
        n_terms=max(b.n_terms for b in blocks),
        language=first.language,
        labels=join("labels"),
        timestamps=join("timestamps"),
    )


def block_from_csr(
    matrix: sp.csr_matrix,
    *,
    doc_ids: np.ndarray | None = None,
    first_doc: int = 0,
    language: str = "default",
    labels: np.ndarray | None = None,
) -> DocBlock:
    """Build a :class:`DocBlock` from any scipy sparse matrix of nonnegative integer counts."""
    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.sort_indices()
    n_docs = csr.shape[0]
    if doc_ids is None:
        doc_ids = np.array([str(first_doc + i) for i in range(n_docs)], dtype=object)
    return DocBlock(
        indptr=csr.indptr.astype(np.int64),
        term_ids=csr.indices.astype(np.int32),
        counts=csr.data.astype(np.int32),
        doc_ids=np.asarray(doc_ids, dtype=object),
        first_doc=first_doc,
        n_terms=int(csr.shape[1]),
        language=language,
        labels=labels,
    )


#: A multilingual block: one DocBlock per language, all with the same doc_ids and first_doc.
MultiBlock = Mapping[str, DocBlock]


def remap_terms(block: DocBlock, term_map: IntArray, n_terms: int) -> DocBlock:
    """Translate the block's term ids through ``term_map``; ids mapped to -1 are dropped.

    Used to read a store with a model whose vocabulary differs (another store, or a grown one).
    NumPy equivalent: ``csr[:, term_map >= 0]`` with the columns permuted to ``term_map``.
    """
    mapped = term_map[block.term_ids]
    keep = mapped >= 0
    rows = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))[keep]
    csr = sp.csr_matrix(
        (block.counts[keep], (rows, mapped[keep])), shape=(block.n_docs, n_terms), dtype=np.int64
    )
    csr.sort_indices()
    return DocBlock(
        indptr=csr.indptr.astype(np.int64),
        term_ids=csr.indices.astype(np.int32),
        counts=csr.data.astype(np.int32),
        doc_ids=block.doc_ids,
        first_doc=block.first_doc,
        n_terms=n_terms,
        language=block.language,
        labels=block.labels,
        timestamps=block.timestamps,
    )
